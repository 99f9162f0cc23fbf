#!/usr/bin/env python3
"""What the distill gate objective costs per update against the labels objective.

prune-pipelined.sh trains DSP gates by default on KL to the unpruned model with the
attention output projections and FFN output layers trainable (``--gate-objective
distill``): each update adds the teacher's forward and the backward into those layers.
This runs the recipe's own gate training for both objectives, one after the other in this
script on the same baseline, K and batches, for ``--updates`` updates each, and reports
seconds per update (from fairseq's JSON log: the wall clock between the first and the last
logged update, so start-up, the teacher's loading and the final validation are excluded)
and their ratio.

    python bench/gate_cost.py --data ../shared/data/multi30k-base72/data \\
        --base ../shared/data/multi30k-base72/checkpoint.pt --out work/gate-cost \\
        [--heads-to-keep 18] [--updates 110] [--log-interval 10] [--rounds 1]

Writes OUT/gate-cost.json and OUT/gate-cost.md (and OUT/OBJECTIVE-rR/, the runs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from statistics import median
from typing import Dict, List

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import ROOT, gate_run_parser, machine, write_report  # noqa: E402

RECIPE = os.path.join(ROOT, "examples", "translation", "prune-pipelined.sh")
OBJECTIVES = ("labels", "distill")


def seconds_per_update(log: str) -> tuple[float, int]:
    """(seconds per update, updates timed) from a fairseq-train --log-format json log."""
    points = []
    with open(log, encoding="utf-8") as f:
        for line in f:
            start = line.find("{")
            if start < 0:
                continue
            try:
                row = json.loads(line[start:])
            except json.JSONDecodeError:
                continue
            if "wall" in row and "num_updates" in row and "train_wall" in row:
                points.append((int(row["num_updates"]), float(row["wall"])))
    points = sorted(set(points))
    if len(points) < 2:
        raise RuntimeError(f"{log}: fewer than two logged updates; raise --updates")
    (u0, w0), (u1, w1) = points[0], points[-1]
    return (w1 - w0) / (u1 - u0), u1 - u0


def run(args, objective: str, rnd: int) -> dict:
    out = os.path.join(args.out, f"{objective}-r{rnd}")
    shutil.rmtree(out, ignore_errors=True)
    cmd = [
        "bash", RECIPE, "--data", args.data, "--base", args.base,
        "--heads-to-keep", str(args.heads_to_keep), "--save-dir", out,
        "--preset", "cpu-small", "--gate-objective", objective, "--recovery", "none",
        "--validate-interval", "0",
        "--train-args", f"--max-update {args.updates} --log-interval {args.log_interval} "
        "--no-save",
    ]  # fmt: skip
    print(f"== gate-cost: {objective}, round {rnd}", file=sys.stderr, flush=True)
    # --no-save: nothing to strip afterwards, so the recipe stops with an error after
    # training; its messages go to OUT/.../recipe.log, the log is all this needs.
    os.makedirs(out)
    with open(os.path.join(out, "recipe.log"), "w") as sink:
        subprocess.run(cmd, stdout=sink, stderr=subprocess.STDOUT)
    log = os.path.join(out, "train.log")
    if not os.path.isfile(log):
        raise RuntimeError(f"{objective}: the recipe failed before training (see {out}/recipe.log)")
    spu, timed = seconds_per_update(log)
    return {"objective": objective, "round": rnd, "seconds_per_update": spu, "updates_timed": timed}


def main() -> int:
    p = gate_run_parser(__doc__)
    p.add_argument("--updates", type=int, default=110)
    p.add_argument("--log-interval", type=int, default=10)
    p.add_argument("--rounds", type=int, default=1, help="alternating rounds of both objectives")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    runs: List[dict] = []
    for rnd in range(1, args.rounds + 1):
        for objective in OBJECTIVES:
            runs.append(run(args, objective, rnd))
            print(f"   {runs[-1]['seconds_per_update']:.3f} s/update", file=sys.stderr)
    spu: Dict[str, float] = {
        o: median(r["seconds_per_update"] for r in runs if r["objective"] == o) for o in OBJECTIVES
    }
    threads = int(os.environ.get("OMP_NUM_THREADS", os.cpu_count() or 1))
    result = {
        "machine": machine(threads),
        "heads_to_keep": args.heads_to_keep,
        "updates": args.updates,
        "runs": runs,
        "seconds_per_update": spu,
        "ratio_distill_over_labels": spu["distill"] / spu["labels"],
    }
    md = [
        f"Gate training, K = {args.heads_to_keep}, 1024-token batches, {result['machine']}; "
        f"median of {args.rounds} round(s), updates timed per run: "
        f"{runs[0]['updates_timed']}.",
        "",
        "| gate objective | s / update | vs labels |",
        "|---|---:|---:|",
    ]
    for o in OBJECTIVES:
        md.append(f"| {o} | {spu[o]:.3f} | {spu[o] / spu['labels']:.2f}x |")
    print(write_report(args.out, "gate-cost", result, md), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
