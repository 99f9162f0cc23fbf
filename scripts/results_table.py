#!/usr/bin/env python3
"""The sweep's results table: one row per (method, K), kept as CSV and JSON.

    results_table.py has --table DIR/results --method dsp --k 12     exit 0 if the row exists
    results_table.py add --table DIR/results --method dsp --k 12 --score score.json
                         [--strip-report strip.txt] [--checkpoint PATH] [--seconds S]
    results_table.py show --table DIR/results

``--table PREFIX`` names PREFIX.csv and PREFIX.json (same rows). Both are
rewritten through temporary files on every ``add``, so an interrupted sweep
leaves the rows it finished and the next run skips them.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
from typing import Dict, List, Optional

COLUMNS = [
    "method",
    "heads_to_keep",
    "heads_kept",
    "heads_total",
    "params",
    "params_unpruned",
    "sacrebleu",
    "tok_bleu",
    "valid_sacrebleu",
    "sacrebleu_signature",
    "checkpoint",
    "seconds",
]
HEADS = re.compile(r"heads kept:\s*(\d+)\s+of\s+(\d+)")
PARAMS = re.compile(r"parameters:\s*([\d,]+)\s*->\s*([\d,]+)")


def read_rows(prefix: str) -> List[Dict[str, str]]:
    """Rows of PREFIX.json (or PREFIX.csv if only that exists); [] when neither exists."""
    if os.path.isfile(prefix + ".json"):
        with open(prefix + ".json", encoding="utf-8") as f:
            return json.load(f)
    if os.path.isfile(prefix + ".csv"):
        with open(prefix + ".csv", encoding="utf-8", newline="") as f:
            return list(csv.DictReader(f))
    return []


def has_row(rows: List[dict], method: str, k: int) -> bool:
    return any(r["method"] == method and int(r["heads_to_keep"]) == k for r in rows)


def parse_strip_report(text: str) -> Dict[str, int]:
    """Heads kept/total and parameter counts from dsp-strip's printed table."""
    out: Dict[str, int] = {}
    if m := HEADS.search(text):
        out["heads_kept"], out["heads_total"] = int(m.group(1)), int(m.group(2))
    if m := PARAMS.search(text):
        out["params_unpruned"] = int(m.group(1).replace(",", ""))
        out["params"] = int(m.group(2).replace(",", ""))
    return out


def write_rows(prefix: str, rows: List[dict]) -> None:
    rows = sorted(rows, key=lambda r: (r["method"], int(r["heads_to_keep"])))
    for suffix in (".json", ".csv"):
        tmp = prefix + suffix + ".tmp"
        with open(tmp, "w", encoding="utf-8", newline="") as f:
            if suffix == ".json":
                json.dump(rows, f, indent=1)
            else:
                writer = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
                writer.writeheader()
                writer.writerows(rows)
        os.replace(tmp, prefix + suffix)


def make_row(
    method: str,
    k: int,
    score: dict,
    strip_report: Optional[str] = None,
    checkpoint: Optional[str] = None,
    seconds: Optional[float] = None,
    valid_score: Optional[dict] = None,
) -> dict:
    row = {c: None for c in COLUMNS}
    row.update(method=method, heads_to_keep=k, checkpoint=checkpoint, seconds=seconds)
    for key in ("sacrebleu", "tok_bleu", "sacrebleu_signature"):
        row[key] = score[key]
    if valid_score is not None:
        row["valid_sacrebleu"] = valid_score["sacrebleu"]
    if strip_report:
        row.update(parse_strip_report(strip_report))
    return row


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("cmd", choices=["has", "add", "show"])
    parser.add_argument("--table", required=True, help="path prefix of .csv/.json")
    parser.add_argument("--method")
    parser.add_argument("--k", type=int)
    parser.add_argument("--score", help="score JSON written by bleu_eval.py")
    parser.add_argument("--valid-score", help="the same on the validation set (optional)")
    parser.add_argument("--strip-report", help="dsp-strip's printed table")
    parser.add_argument("--checkpoint")
    parser.add_argument("--seconds", type=float)
    args = parser.parse_args(argv)

    try:
        rows = read_rows(args.table)
    except (OSError, ValueError) as err:
        sys.exit(f"results_table.py: error: cannot read {args.table}.json/.csv: {err}")
    if args.cmd == "show":
        for r in rows:
            print(
                f"{r['method']:>14} K={r['heads_to_keep']:>3}  sacreBLEU {r['sacrebleu']}  "
                f"tokBLEU {r['tok_bleu']}  params {r.get('params')}"
            )
        return 0
    if args.method is None or args.k is None:
        parser.error(f"{args.cmd} needs --method and --k")
    if args.cmd == "has":
        return 0 if has_row(rows, args.method, args.k) else 1
    if not args.score or not os.path.isfile(args.score):
        sys.exit(f"results_table.py: error: score file {args.score} not found")
    with open(args.score, encoding="utf-8") as f:
        score = json.load(f)
    valid_score = None
    if args.valid_score:
        if not os.path.isfile(args.valid_score):
            sys.exit(f"results_table.py: error: score file {args.valid_score} not found")
        with open(args.valid_score, encoding="utf-8") as f:
            valid_score = json.load(f)
    report = None
    if args.strip_report and os.path.isfile(args.strip_report):
        with open(args.strip_report, encoding="utf-8") as f:
            report = f.read()
    rows = [
        r for r in rows if not (r["method"] == args.method and int(r["heads_to_keep"]) == args.k)
    ]
    rows.append(
        make_row(args.method, args.k, score, report, args.checkpoint, args.seconds, valid_score)
    )
    folder = os.path.dirname(os.path.abspath(args.table))
    if not os.path.isdir(folder):
        sys.exit(f"results_table.py: error: folder {folder} does not exist")
    write_rows(args.table, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
