"""The heads shared among the attention types by a per-type budget: the table of stage 6ah.

Stage 6ah of bench/run_converged_bench.sh runs the README's one command with the gate run held
to a per-type budget (``--train-args "--heads-to-keep-per-type enc-self=E,dec-self=D,cross=C"``),
then the recipe's fine-tune, in files ``layout-eE-dD-cC.txt`` (the one command's lines
"kK-sS: ... untuned test T valid V; tuned test T valid V; kept ..." and the fine-tune's
"ft-kK-sS: best test T valid V; ..."). The table sets each layout beside the free layout
(the gates choose among all heads: stage 6ad's runs of the same command, fast-default.txt and
fast-default-rerun.txt) at the same K: test_2016 sacreBLEU, mean (min-max), and the mean on
valid, of ``--recovery best`` (the tuning's start), the one command and its fine-tune.
``bench/converged_report.py --splice`` puts it between ``<!-- layout-split -->`` markers.
"""

from __future__ import annotations

import glob
import os
import re
import statistics
from typing import Dict, List, Optional, Tuple

from dsp_fairseq.models.head_layout import proportional_split, small_k

FILE_PATTERN = "layout-e*-d*-c*.txt"
FREE = "free"  # the gates choose among all heads (--type-split free)
Score = Tuple[float, float]  # (test, valid)
# the converged benchmark's model: 3+3 layers of 8 heads, 24 heads of each attention type
BASE_SIZES = {"enc-self": 24, "dec-self": 24, "cross": 24}


def layout_of(path: str) -> str:
    """``layout-e6-d9-c3.txt`` -> ``"6, 9, 3"``."""
    m = re.fullmatch(r"layout-e([0-9]+)-d([0-9]+)-c([0-9]+)\.txt", os.path.basename(path))
    if not m:
        raise ValueError(f"{path}: not a layout-eE-dD-cC.txt file")
    return ", ".join(m.groups())


RECIPE = os.path.join(
    os.path.dirname(__file__), "..", "examples", "translation", "prune-pipelined.sh"
)


def recipe_type_split(recipe: str = RECIPE) -> str:
    """prune-pipelined.sh's default --type-split for dsp gates (its ``DSP_TYPE_SPLIT=``
    line): the report follows the recipe instead of a copy of its default."""
    with open(recipe, encoding="utf-8") as f:
        m = re.search(r"^DSP_TYPE_SPLIT=([a-z]+)\b", f.read(), re.M)
    if not m:
        raise ValueError(f"{recipe}: no DSP_TYPE_SPLIT= line (the dsp gates' --type-split)")
    return m.group(1)


def proportional_layout(k: int, sizes: Dict[str, int] = BASE_SIZES) -> str:
    """The layout name (as layout_of) that --type-split proportional gives at K."""
    return ", ".join(str(n) for n in proportional_split(k, sizes).values())


def proportional_file(k: int) -> str:
    """The stage 6ah file of that layout (layout-eE-dD-cC.txt)."""
    e, d, c = proportional_split(k, BASE_SIZES).values()
    return f"layout-e{e}-d{d}-c{c}.txt"


def split_at(k: int) -> bool:
    """--type-split auto splits K among the types here (on the benchmark's model)."""
    return small_k(k, sum(BASE_SIZES.values()))


def proportional_runs(layouts: Dict[str, Dict[int, List[dict]]]) -> Dict[int, List[dict]]:
    """{K: runs} of the layouts that are --type-split proportional's at their K."""
    return {
        k: runs
        for name, by_k in layouts.items()
        for k, runs in by_k.items()
        if name == proportional_layout(k)
    }


def layout_files(directory: str) -> List[str]:
    return sorted(glob.glob(os.path.join(directory, FILE_PATTERN)))


def runs_of(one_command: list, finetunes: dict) -> Dict[int, List[dict]]:
    """{K: [{"seed": S, "best": .., "one": .., "ft": .. or None}, ...]} from one_command_lines
    (K, S, untuned, kept) and fine_tune_lines of the same file (the recipe's model, "ft-kK-sS")."""
    runs: Dict[int, List[dict]] = {}
    for k, seed, untuned, kept in one_command:
        ft = finetunes.get(f"ft-k{k}-s{seed}", {}).get("best")
        runs.setdefault(k, []).append({"seed": seed, "best": untuned, "one": kept, "ft": ft})
    return runs


def cell(scores: List[Optional[Score]]) -> str:
    got = [s for s in scores if s is not None]
    if not got:
        return "-"
    tests = [t for t, _ in got]
    valid = statistics.mean(v for _, v in got)
    spread = f" ({min(tests):.2f}-{max(tests):.2f})" if len(got) > 1 else ""
    return f"{statistics.mean(tests):.2f}{spread}; valid {valid:.2f}; {len(got)} run{'s' * (len(got) > 1)}"


def layout_lines(layouts: Dict[str, Dict[int, List[dict]]], default: str = FREE) -> List[str]:
    """The table: per K, the free layout first, then each per-type layout measured there;
    DEFAULT (prune-pipelined.sh's --type-split) names the recipe's default."""
    lines = [
        "| K | heads kept: enc self, dec self, cross | `--recovery best` | the one command "
        "(tuned refit) | + fine-tune |",
        "|---|---|---|---|---|",
    ]
    ks = sorted({k for n, runs in layouts.items() if n != FREE for k in runs}, reverse=True)
    for k in ks:
        names = [FREE] + sorted(n for n in layouts if n != FREE)
        for name in names:
            runs = layouts.get(name, {}).get(k, [])
            if not runs:
                continue
            if name == FREE:
                label = "free (the gates choose)"
            elif name == proportional_layout(k):
                label = f"{name} (`--type-split proportional`)"
            else:
                label = name
            split_here = default == "proportional" or (default == "auto" and split_at(k))
            if name == (proportional_layout(k) if split_here else FREE):
                label += ": the default"
            cells = [cell([r[c] for r in runs]) for c in ("best", "one", "ft")]
            lines.append(f"| {k} | {label} | " + " | ".join(cells) + " |")
    return lines


# Stage 6ai (session 37): the default's H/4 models (the proportional split) fine-tuned with the
# teacher (finetune-pruned.sh --teacher BASE), lines "PREFIX-kK-sS" in split-kd.txt beside the
# labels fine-tune ("ft-kK-sS" in the layout's own file): (prefix, column header)
DISTILLED_FILE = "split-kd.txt"
DISTILLED_VARIANTS = (
    ("ft", "labels (the recipe's)"),
    ("kd0.5", "distilled: KL weight 0.5 (`--teacher BASE`)"),
    (
        "kd0.5-h1",
        'distilled + hidden states (`--teacher BASE --train-args "--distill-hidden-weight 1"`)',
    ),
)


def variant_runs(finetunes: dict, prefix: str) -> Dict[int, Dict[int, Score]]:
    """{K: {gate seed: (test, valid)}} of the recipe's model in the "PREFIX-kK-sS" lines of
    FINETUNES (converged_report.fine_tune_lines)."""
    found: Dict[int, Dict[int, Score]] = {}
    for name, run in finetunes.items():
        m = re.fullmatch(re.escape(prefix) + r"-k([0-9]+)-s([0-9]+)", name)
        if m and "best" in run:
            found.setdefault(int(m.group(1)), {})[int(m.group(2))] = run["best"]
    return found


# Stage 6aj (session 38): the same models' labels fine-tune with twice the tokens per update
# (finetune-pruned.sh --train-args "--update-freq 2", still 270 updates), lines "uf2-kK-sS" in
# split-uf2.txt
BATCH_FILE = "split-uf2.txt"
BATCH_VARIANTS = (
    DISTILLED_VARIANTS[0],
    ("uf2", 'labels, twice the tokens per update (`--train-args "--update-freq 2"`)'),
)


# Stage 6ak (session 39): the split's H/4 one command rebuilt in a folder of its own (gate runs
# differ between machines), its labels fine-tune ("ft-kK-sS"), the same fine-tune with half the
# tokens per update for twice the updates ("hb-kK-sS": 540 x 2048 tokens, the recipe's tokens
# and compute) and with the shared embeddings frozen ("fe-kK-sS"), all in split-rebuilt.txt:
# its labels fine-tunes are its own
REBUILT_FILE = "split-rebuilt.txt"
REBUILT_VARIANTS = (
    ("ft", "labels (the recipe's: 270 updates of 4096 tokens)"),
    (
        "hb",
        'labels, 540 updates of 2048 tokens (`--max-update 540 --train-args "--max-tokens 2048"`)',
    ),
    ("fe", 'labels, the shared embeddings frozen (`--train-args "--train-only layers"`)'),
    # stage 6am (session 40): the recipe's fine-tune again at fine-tune seed 2 (its spread)
    ("f2", "labels, the recipe's at fine-tune seed 2 (`--seed 2`)"),
    # stage 6an (session 41): the recipe's fine-tune of the model tuned without dropout
    (
        "t0",
        "labels, the recipe's, of the model tuned at dropout 0 (tune-refit.sh's default since session 41)",
    ),
)


def variant_lines(finetunes: dict, variants=DISTILLED_VARIANTS) -> List[str]:
    """Per K and gate seed, the fine-tunes of one model side by side (VARIANTS' columns, test
    (valid)), then their means over the seeds that have every column."""
    runs = {prefix: variant_runs(finetunes, prefix) for prefix, _ in variants}
    lines = [
        "| K | gate seed | " + " | ".join(label for _, label in variants) + " |",
        "|---|---|" + "---|" * len(variants),
    ]
    for k in sorted({k for prefix, by_k in runs.items() if prefix != "ft" for k in by_k}):
        seeds = sorted({s for by_k in runs.values() for s in by_k.get(k, {})})
        for seed in seeds:
            got = [runs[p].get(k, {}).get(seed) for p, _ in variants]
            lines.append(
                f"| {k} | {seed} | "
                + " | ".join("-" if g is None else f"{g[0]:.2f} ({g[1]:.2f})" for g in got)
                + " |"
            )
        paired = [s for s in seeds if all(s in runs[p].get(k, {}) for p, _ in variants)]
        if len(paired) > 1:
            means = []
            for p, _ in variants:
                scores = [runs[p][k][s] for s in paired]
                means.append(
                    f"{statistics.mean(t for t, _ in scores):.2f} "
                    f"({statistics.mean(v for _, v in scores):.2f})"
                )
            lines.append(f"| {k} | mean of {len(paired)} | " + " | ".join(means) + " |")
    return lines
