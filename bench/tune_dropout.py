"""The tuned refit at dropout 0.1 and 0 from the same starts (stage 6an, session 41): the table.

Reads ``tune-dropout.txt`` (``tune_dropout`` of bench/run_converged_bench.sh), one line per
start: ``NAME: start valid V test T loss L kl K hidden H; d0.1 valid ...; d0 valid ...``, the
start being the model tune-refit.sh starts from (the recipe's ``pruned.untuned.pt``), d0.1 its
tuning at dropout 0.1 (the default until session 41) and d0 at dropout 0. Imports nothing of
fairseq (bench/converged_report.py splices the table into bench/RESULTS.md).
"""

from __future__ import annotations

import re
import statistics
from typing import Dict, List

TUNE_DROPOUT_FILE = "tune-dropout.txt"
MODELS = ("start", "d0.1", "d0")
FIELDS = ("valid", "test", "loss", "kl", "hidden")
_MODEL = re.compile(r"(start|d0\.1|d0) " + " ".join(rf"{f} ([0-9.]+)" for f in FIELDS))


def tune_dropout_runs(path: str) -> Dict[str, Dict[str, Dict[str, float]]]:
    """NAME -> model (start, d0.1, d0) -> field (valid, test, loss, kl, hidden); {} without
    the file. A line without all three models is skipped."""
    runs: Dict[str, Dict[str, Dict[str, float]]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            lines = [line.strip() for line in f if ":" in line and not line.startswith("#")]
    except FileNotFoundError:
        return runs
    for line in lines:
        name, rest = line.split(":", 1)
        models = {m[0]: dict(zip(FIELDS, map(float, m[1:]))) for m in _MODEL.findall(rest)}
        if set(models) == set(MODELS):
            runs[name] = models
    return runs


def _label(name: str) -> str:
    pick = re.fullmatch(r"pick-k(\d+)", name)
    if pick:
        return f"K = {pick[1]}, dsp-pick-k's probe (free)"
    split = re.fullmatch(r"split-k(\d+)-s(\d+)", name)
    if split:
        return f"K = {split[1]}, split 6,6,6, gate seed {split[2]}"
    return name


def _cells(models: Dict[str, Dict[str, float]], field: str, fmt: str) -> str:
    return " / ".join(format(models[m][field], fmt) for m in MODELS)


def tune_dropout_lines(runs: Dict[str, Dict[str, Dict[str, float]]]) -> List[str]:
    """The table: per start, valid and test sacreBLEU and the validation loss (KL + hidden
    states, the tuning's objective) of the start, the tuning at 0.1 and at 0; then the mean of
    each group of gate seeds (split-kK-sS) that has more than one."""
    lines = [
        "| start | valid sacreBLEU: start / tuned at 0.1 / at 0 | test_2016: start / 0.1 / 0 "
        "| validation loss (KL + hidden): start / 0.1 / 0 |",
        "|---|---|---|---|",
    ]
    for name in sorted(runs, key=lambda n: (n.startswith("split"), n)):
        models = runs[name]
        lines.append(
            f"| {_label(name)} | {_cells(models, 'valid', '.2f')} | "
            f"{_cells(models, 'test', '.2f')} | {_cells(models, 'loss', '.3f')} |"
        )
    groups: Dict[str, List[str]] = {}
    for name in runs:
        group = re.fullmatch(r"(split-k\d+)-s\d+", name)
        if group:
            groups.setdefault(group[1], []).append(name)
    for group, names in sorted(groups.items()):
        if len(names) < 2:
            continue
        mean = {
            m: {f: statistics.mean(runs[n][m][f] for n in names) for f in FIELDS} for m in MODELS
        }
        lines.append(
            f"| K = {group.split('-k')[1]}, split 6,6,6: mean of {len(names)} | "
            f"{_cells(mean, 'valid', '.2f')} | {_cells(mean, 'test', '.2f')} | "
            f"{_cells(mean, 'loss', '.3f')} |"
        )
    return lines
