"""BLEU against heads kept, one line per pruning method, from a sweep's results table."""

from __future__ import annotations

import csv
import json
import os
from typing import Dict, List, Optional, Sequence

from .common import PlotError, plt, series_style

METRICS = {
    "tok_bleu": "tokenized BLEU (Moses, lowercased; paper's tables)",
    "sacrebleu": "sacreBLEU (detokenized)",
}


def read_table(path: str) -> List[dict]:
    """Rows of a results table (.json or .csv, as written by scripts/results_table.py).

    ``path`` may also be the prefix without extension.
    """
    candidates = (
        [path]
        if os.path.splitext(path)[1] in (".json", ".csv")
        else [path + ".json", path + ".csv"]
    )
    for candidate in candidates:
        if os.path.isfile(candidate):
            with open(candidate, encoding="utf-8", newline="") as f:
                if candidate.endswith(".json"):
                    rows = json.load(f)
                else:
                    rows = list(csv.DictReader(f))
            if not rows:
                raise PlotError(f"{candidate}: the results table has no rows yet")
            missing = [c for c in ("method", "heads_to_keep") if c not in rows[0]]
            if missing:
                raise PlotError(f"{candidate}: not a results table (no column {missing[0]})")
            return rows
    raise PlotError(f"{path}: no such results table (.json or .csv)")


def _number(value) -> Optional[float]:
    try:
        return None if value in (None, "") else float(value)
    except (TypeError, ValueError):
        return None


def series_by_method(rows: Sequence[dict], metric: str) -> Dict[str, List[tuple]]:
    """method -> sorted [(heads kept, score)]; rows without a score are left out."""
    out: Dict[str, List[tuple]] = {}
    for row in rows:
        y = _number(row.get(metric))
        x = _number(row.get("heads_kept")) or _number(row.get("heads_to_keep"))
        if x is not None and y is not None:
            out.setdefault(row["method"], []).append((x, y))
    return {m: sorted(v) for m, v in sorted(out.items())}


def default_title(rows: Sequence[dict], metrics: Sequence[str]) -> str:
    """Model and metric from the table itself (the data set is the caller's to add)."""
    totals = {int(float(r["heads_total"])) for r in rows if _number(r.get("heads_total"))}
    params = {int(float(r["params_unpruned"])) for r in rows if _number(r.get("params_unpruned"))}
    model = f"{next(iter(totals))}-head model" if len(totals) == 1 else "model"
    if len(params) == 1:
        model += f" ({next(iter(params)) / 1e6:.1f}M parameters)"
    which = " and ".join("tokenized BLEU" if m == "tok_bleu" else "sacreBLEU" for m in metrics)
    return f"Pruning {model}: test {which} against heads kept, per method"


def plot_sweep(
    rows: Sequence[dict],
    metrics: Sequence[str] = ("tok_bleu", "sacrebleu"),
    baseline: Optional[dict] = None,
    title: str = "",
):
    """One panel per metric; one line per method; the unpruned model as a dashed line.

    Every method has its own colour and marker (distinct for up to 14 methods); a
    fine-tuned variant (``METHOD+ft``) is dashed. The legend sits right of the panels, so it
    covers no line; ``title`` defaults to the model and metrics of the table.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise PlotError(f"unknown metric {unknown[0]!r}; choose from {', '.join(METRICS)}")
    totals = {int(float(r["heads_total"])) for r in rows if _number(r.get("heads_total"))}
    xlabel = f"heads kept (of {next(iter(totals))})" if len(totals) == 1 else "heads kept"
    methods = sorted({r["method"] for r in rows})
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(5.2 * len(metrics) + 2.2, 4.2), squeeze=False,
        layout="constrained",
    )  # fmt: skip
    handles = {}
    for ax, metric in zip(axes[0], metrics):
        series = series_by_method(rows, metric)
        if not series:
            raise PlotError(f"the results table has no {metric} numbers")
        for method, points in series.items():
            xs, ys = zip(*points)
            (line,) = ax.plot(
                xs, ys, label=method, linestyle="--" if method.endswith("+ft") else "-",
                markersize=5, **series_style(methods.index(method)),
            )  # fmt: skip
            handles.setdefault(method, line)
        if baseline and _number(baseline.get(metric)) is not None:
            handles["unpruned"] = ax.axhline(
                float(baseline[metric]),
                color="black",
                linestyle=":",
                linewidth=1.2,
                label="unpruned",
            )
        ax.set_xlabel(xlabel)
        ax.set_ylabel("BLEU")
        ax.set_title(METRICS[metric], fontsize=9)
        ax.grid(alpha=0.3)
    fig.legend(
        handles=list(handles.values()), labels=list(handles), loc="outside right upper",
        fontsize=8, title="method (dashed: + fine-tune)", title_fontsize=8,
    )  # fmt: skip
    fig.suptitle(title or default_title(rows, metrics), fontsize=10)
    return fig
