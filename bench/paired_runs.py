"""One change to the one command, measured from the same gate seeds as today's defaults.

Stages 6ap/6ar of bench/run_converged_bench.sh run the one command with the gate run at dropout
0 (``gate-dropout.txt``: the one command's "kK-sS" lines and their fine-tunes "ft-kK-sS"), stage
6as tunes every transformer layer instead of out_proj and fc2 from the same starts
(``tune-layers.txt``: "kK-sS: start valid V; tuned valid V test T; kept tuned|untuned" and
"ft-kK-sS"), stage 6au the same at learning rate 2e-4 (``tune-lr2e-4.txt``, paired with
6as's runs), stage 6ay the gate run training every transformer layer beside the gates
(``gate-all-layers.txt``, lines as gate-dropout.txt, paired with 6as's runs). Each run is
paired with today's run of the same K and gate seed (converged_report.today_runs) and the
table gives both, test_2016 (valid), then per K the mean change over the pairs and both
groups' means and ranges, so a "better than" reads against the seed spread. Imports nothing
of fairseq.
"""

from __future__ import annotations

import os
import re
import statistics
from typing import Dict, List, Optional, Sequence, Tuple

Score = Tuple[float, float]  # (test, valid)
Run = Dict[str, Optional[Score]]  # "best" (--recovery best), "one" (the one command), "ft"
STEP_NAMES = {"best": "`--recovery best`", "one": "the one command", "ft": "+ fine-tune"}
GATE_DROPOUT_FILE = "gate-dropout.txt"
GATE_ALL_LAYERS_FILE = "gate-all-layers.txt"  # stage 6ay: lines as gate-dropout.txt
TUNE_LAYERS_FILE = "tune-layers.txt"
TUNE_LR_FILE = "tune-lr2e-4.txt"  # stage 6au: the same tuning at 2e-4, lines as tune-layers.txt
TUNE_RECIPE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "examples", "translation", "tune-refit.sh"
)
_TUNED = re.compile(
    r"k([0-9]+)-s([0-9]+): start valid ([0-9.]+); tuned valid ([0-9.]+) test ([0-9.]+); "
    r"kept (tuned|untuned)"
)


def _recipe_default(name: str, recipe: str) -> str:
    """tune-refit.sh's default of the variable NAME (its ``NAME=value`` assignment)."""
    with open(recipe, encoding="utf-8") as f:
        m = re.search(rf"(?:^|\s){name}=([a-z_0-9,.+-]+)", f.read(), re.M)
    if not m:
        raise ValueError(f"{recipe}: no {name}= line (the tuned refit's default)")
    return m.group(1)


def recipe_tune_layers(recipe: str = TUNE_RECIPE) -> str:
    """tune-refit.sh's default --layers (its ``LAYERS=`` line): the report shows the runs of
    the recipe's default instead of a copy of it."""
    return _recipe_default("LAYERS", recipe)


def recipe_tune_lr(recipe: str = TUNE_RECIPE) -> str:
    """tune-refit.sh's default --lr (its ``LR=`` assignment), as recipe_tune_layers."""
    return _recipe_default("LR", recipe)


def by_seed(runs: Dict[int, List[dict]]) -> Dict[int, Dict[int, dict]]:
    """{K: {S: run}} of {K: [run, ...]} whose runs carry their gate seed ("seed")."""
    return {k: {r["seed"]: r for r in v if "seed" in r} for k, v in runs.items()}


def tuned_layer_runs(path: str, finetunes: dict, today: Dict[int, Dict[int, dict]]) -> dict:
    """{K: [run, ...]} of tune-layers.txt: "one" the tuning where the recipe kept it, else the
    start (today's "best" of the same gate seed: the same model), "ft" the fine-tune's."""
    runs: Dict[int, List[dict]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            matches = [m for m in map(_TUNED.match, f) if m]
    except FileNotFoundError:
        return runs
    for m in matches:
        k, seed = int(m[1]), int(m[2])
        start = today.get(k, {}).get(seed, {}).get("best")
        one = (float(m[5]), float(m[4])) if m[6] == "tuned" else start
        ft = finetunes.get(f"ft-k{k}-s{seed}", {}).get("best")
        runs.setdefault(k, []).append({"seed": seed, "best": start, "one": one, "ft": ft})
    return runs


def _score(s: Optional[Score]) -> str:
    return f"{s[0]:.2f} ({s[1]:.2f})" if s else "-"


def _spread(scores: List[Score]) -> str:
    tests = [t for t, _ in scores]
    return f"{statistics.mean(tests):.2f} ({min(tests):.2f}-{max(tests):.2f})"


def _change(pairs: List[Tuple[Score, Score]]) -> str:
    if not pairs:
        return "-"
    test = [a[0] - b[0] for b, a in pairs]
    valid = statistics.mean(a[1] - b[1] for b, a in pairs)
    text = f"**{statistics.mean(test):+.2f}** (valid {valid:+.2f}; " + ", ".join(
        f"{t:+.2f}" for t in test
    )
    if len(pairs) > 1:
        before, after = ([p[i] for p in pairs] for i in (0, 1))
        text += f"; {_spread(before)} / {_spread(after)}"
    return text + ")"


def paired_lines(
    today: Dict[int, Dict[int, dict]],
    changed: Dict[int, List[dict]],
    steps: Sequence[str],
    names: Tuple[str, str],
    seed: str = "gate seed",
) -> List[str]:
    """The table: per K (H/2, H/4, H/8 order) and SEED (what pairs the runs: the gate seed, or
    head importance's tuning seed), today's run / the changed run at each of STEPS ("best",
    "one", "ft"), test_2016 (valid); then per K the mean change on test (on valid, each pair's
    change on test; both groups' means and min-max on test). NAMES: (today's, the change's) in
    the header."""
    header = " | ".join(f"{STEP_NAMES[s]}: {names[0]} / {names[1]}" for s in steps)
    lines = [f"| K | {seed} | {header} |", "|---|---|" + "---|" * len(steps)]
    for k in sorted(changed, key=lambda k: -k):
        paired = [(r, today.get(k, {}).get(r["seed"])) for r in changed[k]]
        paired = sorted(((r, t) for r, t in paired if t), key=lambda p: p[0]["seed"])
        if not paired:
            continue
        for run, base in paired:
            cells = " | ".join(f"{_score(base[s])} / {_score(run[s])}" for s in steps)
            lines.append(f"| {k} | {run['seed']} | {cells} |")
        means = " | ".join(
            _change([(b[s], r[s]) for r, b in paired if r[s] and b[s]]) for s in steps
        )
        lines.append(f"| {k} | change, mean of {len(paired)} | {means} |")
    return lines
