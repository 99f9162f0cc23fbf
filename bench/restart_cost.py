#!/usr/bin/env python3
"""What `prune-pipelined.sh --restarts N` costs one after the other and side by side.

The same restarts (the recipe's defaults, its gate seeds S..S+N-1, a shortened gate run) are
run twice in this script on the same baseline, K and data: with ``--restart-jobs 1`` (one run
after the other, each on every thread) and with ``--restart-jobs N`` (all at once, the threads
split between them, the recipe's default on a CPU). Reported: the wall time of each whole
call (gate training, strip, refit and the validation decodes of every run, then the choice)
and the gate training's seconds per update (fairseq's JSON log: first to last logged update),
and their ratios. The importance scores the gates start from are computed once beforehand,
outside the timing.

    python bench/restart_cost.py --data ../shared/data/multi30k-base72/data \\
        --base ../shared/data/multi30k-base72/checkpoint.pt --out work/restart-cost \\
        [--heads-to-keep 18] [--restarts 2] [--updates 108] [--train-args "ARGS"]

Writes OUT/restart-cost.json and OUT/restart-cost.md (and OUT/jobs-J/, the runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from statistics import median

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, gate_run_parser, machine, write_report  # noqa: E402
from bench.gate_cost import seconds_per_update  # noqa: E402

RECIPE = os.path.join(ROOT, "examples", "translation", "prune-pipelined.sh")


def run(args, jobs: int, scores: str, threads: int) -> dict:
    out = os.path.join(args.out, f"jobs-{jobs}")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    cmd = [
        "bash", RECIPE, "--data", args.data, "--base", args.base,
        "--heads-to-keep", str(args.heads_to_keep), "--save-dir", out, "--preset", "cpu-small",
        "--recovery", "best",  # what it measured (the default until session 23)
        "--restarts", str(args.restarts), "--restart-jobs", str(jobs),
        "--importance-scores", scores, "--importance-args", "--granularity token",
        "--train-args", f"--max-update {args.updates} --log-interval 6 {args.train_args}",
    ]  # fmt: skip
    print(
        f"== restart-cost: {args.restarts} restarts, {jobs} at a time", file=sys.stderr, flush=True
    )
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    start = time.monotonic()
    with open(os.path.join(out, "recipe.log"), "w") as sink:
        proc = subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT, env=env)
    wall = time.monotonic() - start
    if proc.returncode != 0:
        raise RuntimeError(f"the recipe failed (see {out}/recipe.log)")
    seeds = sorted(d for d in os.listdir(out) if d.startswith("seed-") and "." not in d)
    spu = [seconds_per_update(os.path.join(out, d, "train.log"))[0] for d in seeds]
    with open(os.path.join(out, "restarts.json"), encoding="utf-8") as f:
        choice = json.load(f)
    return {"jobs": jobs, "wall_seconds": wall, "seconds_per_update": spu, "choice": choice}


def main() -> int:
    p = gate_run_parser(__doc__)
    p.add_argument("--restarts", type=int, default=2)
    p.add_argument("--updates", type=int, default=108, help="gate updates per run")
    p.add_argument("--train-args", default="", help="more gate-run arguments (both modes)")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    scores = os.path.join(args.out, "importance.json")
    if not os.path.isfile(scores):  # what the gates start from, once, untimed
        subprocess.run(
            ["dsp-importance", "--path", args.base, "--data", os.path.join(args.data, "bin"),
             "--output", scores], check=True,
        )  # fmt: skip
    runs = [run(args, jobs, scores, threads) for jobs in (1, args.restarts)]
    seq, par = runs
    result = {
        "machine": machine(threads),
        "heads_to_keep": args.heads_to_keep,
        "restarts": args.restarts,
        "updates": args.updates,
        "train_args": args.train_args,
        "runs": runs,
        "wall_ratio_side_by_side": par["wall_seconds"] / seq["wall_seconds"],
        "update_ratio_side_by_side": median(par["seconds_per_update"])
        / median(seq["seconds_per_update"]),
    }
    md = [
        f"`prune-pipelined.sh --restarts {args.restarts}`, K = {args.heads_to_keep}, "
        f'{args.updates} gate updates per run (--train-args "{args.train_args}"), '
        f"{result['machine']}.",
        "",
        "| restart runs | wall time of the call | gate training, s / update (each run) |",
        "|---|---:|---|",
    ]
    for r in runs:
        how = "one after the other" if r["jobs"] == 1 else f"{r['jobs']} side by side"
        per = ", ".join(f"{s:.3f}" for s in r["seconds_per_update"])
        md.append(f"| {how} | {r['wall_seconds']:.0f} s | {per} |")
    md += [
        "",
        f"Side by side / one after the other: wall time {result['wall_ratio_side_by_side']:.2f}x, "
        f"seconds per update {result['update_ratio_side_by_side']:.2f}x (each run's update is "
        f"slower, but {args.restarts} advance at once).",
    ]
    print(write_report(args.out, "restart-cost", result, md), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
