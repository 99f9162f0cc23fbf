#!/usr/bin/env python3
"""Which reconstruction settings work best: target, ridge, calibration batches, FFN refit.

For every stripped model given (plain rows of the converged sweep: the same kept heads,
no recovery), refit it against the unpruned base with each setting and score valid (and,
with --test, test_2016) with examples/translation/evaluate.sh (sacreBLEU, beam 5). Settings
are chosen on valid; test is reported for the chosen one only.

    python bench/reconstruct_study.py --data ../shared/data/multi30k-base72/data \
        --base ../shared/data/multi30k-base72/checkpoint.pt \
        --pruned dsp-k18=work/converged/sweep/runs/dsp-k18/pruned.pt,... \
        --out work/reconstruct-study [--settings default,output,...] [--test]

Writes OUT/NAME/SETTING/{pruned.pt,eval*/score.json} and OUT/results.json (one row per
model and setting: valid/test sacreBLEU, relative errors, seconds); rows already there are
skipped, so an interrupted study resumes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import evaluate_sacrebleu  # noqa: E402

# name -> reconstruct_checkpoint keyword arguments (variants of the attention-only refit,
# then the FFN refit: N = 20, ridge 1e-3, residual target unless the setting says otherwise)
SETTINGS = {
    "attention-only": {"refit_ffn": False},
    "output": {"target": "output", "refit_ffn": False},
    "ridge1e-2": {"ridge": 1e-2, "refit_ffn": False},
    "ridge1e-4": {"ridge": 1e-4, "refit_ffn": False},
    "n5": {"num_batches": 5, "refit_ffn": False},
    "n50": {"num_batches": 50, "refit_ffn": False},
    "ffn": {"refit_ffn": True},  # the default since this study
    # fc1 refit to the unpruned pre-activations before fc2 (session 8)
    "fc1": {"refit_ffn": True, "refit_fc1": True},
    # each attention's kept q/k/v rows refit to the unpruned rows first (session 8)
    "qkv": {"refit_ffn": True, "refit_qkv": True},
    "qkv-fc1": {"refit_ffn": True, "refit_fc1": True, "refit_qkv": True},
}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", help="prepared corpus folder (bin/, spm/, raw/)")
    p.add_argument("--base", help="the unpruned checkpoint")
    p.add_argument("--pruned", default="", help="NAME=PATH,... stripped models")
    p.add_argument("--out", required=True)
    p.add_argument("--settings", default=",".join(SETTINGS))
    p.add_argument("--test", action="store_true", help="also score test_2016")
    p.add_argument("--report", action="store_true", help="only print OUT/results.json as a table")
    args = p.parse_args()
    if args.report:
        print(study_table(json.load(open(os.path.join(args.out, "results.json")))))
        return 0
    if not (args.data and args.base and args.pruned):
        p.error("--data, --base and --pruned are needed (or --report)")
    import dsp_fairseq  # noqa: F401
    from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
    from dsp_fairseq.pruning.calibrate import reconstruct_checkpoint

    os.makedirs(args.out, exist_ok=True)
    table = os.path.join(args.out, "results.json")
    rows = json.load(open(table)) if os.path.exists(table) else []
    done = {(r["model"], r["setting"]) for r in rows}
    base = load_checkpoint(args.base)
    for item in args.pruned.split(","):
        name, path = item.split("=", 1)
        pruned = load_checkpoint(path)
        for setting in args.settings.split(","):
            if (name, setting) in done:
                continue
            folder = os.path.join(args.out, name, setting)
            os.makedirs(folder, exist_ok=True)
            ckpt = os.path.join(folder, "pruned.pt")
            start = time.time()
            new, report = reconstruct_checkpoint(
                pruned, base, os.path.join(args.data, "bin"), **SETTINGS[setting]
            )
            seconds = time.time() - start
            save_checkpoint_atomic(new, ckpt)
            row = {
                "model": name,
                "setting": setting,
                "kwargs": SETTINGS[setting],
                "seconds": round(seconds, 1),
                "valid_sacrebleu": evaluate_sacrebleu(
                    args.data, ckpt, os.path.join(folder, "eval-valid"), "valid"
                ),
                "mean_error_after": sum(s.error_after for s in report.slots) / len(report.slots),
            }
            if args.test:
                row["test_sacrebleu"] = evaluate_sacrebleu(
                    args.data, ckpt, os.path.join(folder, "eval"), "test"
                )
            print(json.dumps(row), flush=True)
            rows.append(row)
            with open(table + ".tmp", "w") as f:
                json.dump(rows, f, indent=1)
            os.replace(table + ".tmp", table)
    return 0


def study_table(rows) -> str:
    """Valid sacreBLEU per model (rows) and setting (columns), the plain model first."""
    models = list(dict.fromkeys(r["model"] for r in rows))
    settings = [s for s in SETTINGS if any(r["setting"] == s for r in rows)]
    cell = {(r["model"], r["setting"]): r["valid_sacrebleu"] for r in rows}
    lines = ["| model | " + " | ".join(settings) + " |", "|---" * (len(settings) + 1) + "|"]
    for m in models:
        values = [f"{cell[(m, s)]:.2f}" if (m, s) in cell else "" for s in settings]
        lines.append(f"| {m} | " + " | ".join(values) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
