"""How many fine-tune updates the recovery goals need: the table and plot of stage 6ab.

    python bench/finetune_budget.py --dir bench/recovery [--plot bench/recovery/finetune-budget.png]

Stage 6ab of bench/run_converged_bench.sh trains the recipe's 270-update fine-tunes of the one
command's models (fine-tune seed 1; lines "ft-kK-sG" of tuned-default.txt) on to 540, 810 and
1080 updates (lines "ft-kK-sG-uN" of finetune-budget.txt, bench/score_line.py's format: "best"
is the recipe's model, the average of the last 3 checkpoints). The table gives each run's
test (valid) sacreBLEU per budget and, per K, the mean, the range and the distance to the
unpruned model against the fine-tune goal's limit (issue 17: 0.3 at H/2, 1.0 at H/4, 2.5 at
H/8); the plot draws the means and ranges. ``bench/converged_report.py --splice`` puts the
table between ``<!-- finetune-budget -->`` markers.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
from typing import Dict, List, Optional, Tuple

BUDGET_FILE = "finetune-budget.txt"
BASE_UPDATES = 270  # the recipe's default, the goal's budget
ORDER = (36, 18, 9)

# {K: {gate seed: {updates: (test, valid)}}}
Runs = Dict[int, Dict[int, Dict[int, Tuple[float, float]]]]


def budget_runs(tuned_lines: dict, budget_lines: dict) -> Runs:
    """The runs of the study from fine_tune_lines of tuned-default.txt (the 270-update
    fine-tunes "ft-kK-sG", fine-tune seed 1) and of finetune-budget.txt ("ft-kK-sG-uN"): the
    recipe's model ("best") of every start that was trained on past 270 updates."""
    runs: Runs = {}
    for name, run in budget_lines.items():
        m = re.fullmatch(r"ft-k([0-9]+)-s([0-9]+)-u([0-9]+)", name)
        if m and "best" in run:
            k, seed, updates = (int(g) for g in m.groups())
            runs.setdefault(k, {}).setdefault(seed, {})[updates] = run["best"]
    for k, seeds in runs.items():
        for seed, by_budget in seeds.items():
            start = tuned_lines.get(f"ft-k{k}-s{seed}")
            if start and "best" in start:
                by_budget[BASE_UPDATES] = start["best"]
    return runs


def budgets(runs: Runs) -> List[int]:
    return sorted({u for seeds in runs.values() for b in seeds.values() for u in b})


def complete(runs: Runs, k: int) -> List[Dict[int, Tuple[float, float]]]:
    """K's starts measured at every budget of the study: the means compare the same runs."""
    cols = budgets(runs)
    return [b for _, b in sorted(runs.get(k, {}).items()) if all(u in b for u in cols)]


def mean_at(runs: Runs, k: int, updates: int) -> Optional[Tuple[float, float, float, int]]:
    """(mean, min, max, runs) of K's test scores at UPDATES over its complete starts."""
    scores = [b[updates][0] for b in complete(runs, k)]
    if not scores:
        return None
    return statistics.mean(scores), min(scores), max(scores), len(scores)


def budget_lines(runs: Runs, unpruned: float, limits: Dict[int, float]) -> List[str]:
    """The markdown table: one row per start, then per K its mean (range) and the distance to
    the unpruned model; the last column says at which budget the mean is within the goal's
    limit (LIMITS: {K: BLEU below unpruned})."""
    if not runs:
        return []
    cols = budgets(runs)
    out = [
        "| K | gate seed | " + " | ".join(f"{u} updates" for u in cols) + " |",
        "|---|---|" + "---|" * len(cols),
    ]
    for k in ORDER:
        for seed, by_budget in sorted(runs.get(k, {}).items()):
            cells = [
                f"{by_budget[u][0]:.2f} ({by_budget[u][1]:.2f})" if u in by_budget else ""
                for u in cols
            ]
            unfinished = "" if len(by_budget) == len(cols) else " (unfinished: not in the means)"
            out.append(f"| {k} | {seed}{unfinished} | " + " | ".join(cells) + " |")
    out += [
        "",
        "| K | limit below unpruned (goal) | "
        + " | ".join(f"{u} updates: mean (range, runs), to unpruned" for u in cols)
        + " | first budget within the limit |",
        "|---|---|" + "---|" * (len(cols) + 1),
    ]
    for k in ORDER:
        if not complete(runs, k):
            continue
        cells, met = [], "none measured"
        for u in cols:
            stat = mean_at(runs, k, u)
            if stat is None:
                cells.append("")
                continue
            mean, lo, hi, n = stat
            below = unpruned - mean
            gap = f"{below:.2f} below" if below >= 0 else f"{-below:.2f} above"
            cells.append(f"{mean:.2f} ({lo:.2f}-{hi:.2f}, {n}), {gap}")
            if met == "none measured" and below <= limits[k]:
                met = f"{u} updates"
        out.append(f"| {k} | {limits[k]} | " + " | ".join(cells) + f" | {met} |")
    return out


def plot(runs: Runs, unpruned: float, limits: Dict[int, float], output: str) -> List[str]:
    """BLEU against fine-tune updates: each K's mean with its range, the unpruned model and
    each goal's limit; PNG and SVG."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from dsp_fairseq.plots.common import plt, save_figure, series_style

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    ax.axhline(unpruned, color="black", lw=1, label=f"unpruned (72 heads) {unpruned:.2f}")
    for i, k in enumerate(k for k in ORDER if complete(runs, k)):
        style = series_style(i)
        xs = [u for u in budgets(runs) if mean_at(runs, k, u)]
        stats = [mean_at(runs, k, u) for u in xs]
        n = stats[0][3]
        ax.plot(
            xs, [s[0] for s in stats], label=f"K = {k}: mean of {n} runs (range shaded)", **style
        )
        ax.fill_between(
            xs, [s[1] for s in stats], [s[2] for s in stats], color=style["color"], alpha=0.15
        )
        ax.axhline(unpruned - limits[k], color=style["color"], lw=0.8, ls="--",
                   label=f"K = {k}: goal, {limits[k]} below")  # fmt: skip
    ax.axvline(BASE_UPDATES, color="gray", lw=0.8, ls=":")
    ax.set_xlabel("fine-tune updates (4096-token batches; 270 = the recipe's default)")
    ax.set_ylabel("test_2016 sacreBLEU (beam 5)")
    ax.set_title("Recovery by fine-tune length (the one command's models)")
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    ax.grid(alpha=0.3)
    return save_figure(fig, output)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "recovery"))
    parser.add_argument("--plot", help="write the figure here (PNG and SVG)")
    args = parser.parse_args(argv)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from converged_report import FINETUNE_LIMITS, TUNED_DEFAULT_FILE, fine_tune_lines

    base_path = os.path.join(args.dir, "baseline.json")
    if not os.path.isfile(base_path):
        sys.exit(f"finetune_budget.py: error: no baseline.json in {args.dir}; run the benchmark")
    with open(base_path) as f:
        unpruned = float(json.load(f)["sacrebleu"])
    runs = budget_runs(
        fine_tune_lines(os.path.join(args.dir, TUNED_DEFAULT_FILE)),
        fine_tune_lines(os.path.join(args.dir, BUDGET_FILE)),
    )
    if not runs:
        sys.exit(f"finetune_budget.py: error: no lines in {os.path.join(args.dir, BUDGET_FILE)}")
    print("\n".join(budget_lines(runs, unpruned, FINETUNE_LIMITS)))
    if args.plot:
        for path in plot(runs, unpruned, FINETUNE_LIMITS, args.plot):
            print(f"wrote {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
