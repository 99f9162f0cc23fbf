"""How the head gates evolve over training.

Two sources, either or both:

* checkpoints of one run (e.g. written with ``--save-interval-updates N
  --keep-interval-updates -1``): every head's logit and the kept set per
  checkpoint, ordered by update;
* fairseq JSON logs (``--log-format json``): the gate metrics the DSP
  criterion logs (temperature, distance of the training mask from K-hot, mask
  sum, penalty) and the training/validation loss, against updates.
"""

from __future__ import annotations

import glob
import json
import os
import re
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
import torch

from ..checkpoint_io import CheckpointError
from ..models.head_layout import ATTENTION_TYPES
from ..pruning.strip import GATE_PREFIX
from .common import TYPE_COLORS, PlotError, load_state, plt
from .heads import gate_from_state

LOG_METRICS = ("gate_temperature", "gate_khot_dist", "gate_mask_sum", "gate_penalty", "loss")
METRIC_TITLES = {
    "gate_temperature": "temperature",
    "gate_khot_dist": "training mask: distance from K-hot",
    "gate_mask_sum": "training mask: sum",
    "gate_penalty": "gate penalty (expected open gates)",
    "loss": "loss",
}


@dataclass
class GateHistory:
    """Gate logits (snapshots x H) and kept flags at each update, with head types."""

    updates: List[int]
    logits: np.ndarray
    kept: np.ndarray
    head_types: List[str]
    skipped: List[str] = field(default_factory=list)


def checkpoint_paths(sources: Sequence[str]) -> List[str]:
    """Checkpoint files named directly or found (``*.pt``) in the given folders."""
    paths: List[str] = []
    for src in sources:
        if os.path.isdir(src):
            paths += sorted(glob.glob(os.path.join(src, "*.pt")))
        elif os.path.isfile(src):
            paths.append(src)
        else:
            raise PlotError(
                f"--checkpoints {src}: no such checkpoint file or folder; give .pt files or "
                "the folders holding them (a run's --save-dir)"
            )
    return paths


def _num_updates(state: dict) -> int:
    history = state.get("optimizer_history") or [{}]
    return int(history[-1].get("num_updates", 0))


def gate_history(paths: Sequence[str]) -> GateHistory:
    """Gate logits and kept sets over the checkpoints (one per update count)."""
    by_update: Dict[int, Tuple[np.ndarray, np.ndarray]] = {}
    skipped, gate, gated = [], None, None
    for path in paths:
        try:
            state = load_state(path)
        except CheckpointError as err:
            skipped.append(f"{os.path.basename(path)} ({err})")
            continue
        key = GATE_PREFIX + "logits"
        if key not in state["model"]:
            skipped.append(f"{os.path.basename(path)} (no gate logits)")
            continue
        if gate is None:
            gate, gated = gate_from_state(state)
        logits = state["model"][key].detach().to(gate.logits.dtype)
        if logits.shape != gate.logits.shape:
            raise PlotError(
                f"{path}: {logits.numel()} gates, expected {gate.logits.numel()}; "
                "give checkpoints of one run"
            )
        with torch.no_grad():  # an in-place op on the parameter: invalidates the mask cache
            gate.logits.copy_(logits)
        by_update[_num_updates(state)] = (
            logits.double().numpy().copy(),
            gate.kept_heads().numpy().copy(),
        )
    if not by_update:
        raise PlotError("no checkpoint with head gates among: " + ", ".join(paths or ["(none)"]))
    updates = sorted(by_update)
    types = [s.kind for s in gated for _ in range(s.num_heads)]
    return GateHistory(
        updates=updates,
        logits=np.stack([by_update[u][0] for u in updates]),
        kept=np.stack([by_update[u][1] for u in updates]),
        head_types=types,
        skipped=skipped,
    )


def parse_json_log(lines: Sequence[str]) -> Dict[str, List[Tuple[int, float]]]:
    """Series ``name -> [(update, value)]`` from fairseq ``--log-format json`` output.

    ``train_inner`` lines give the gate metrics and ``loss``; ``valid`` lines
    give ``valid_loss``.
    """
    series: Dict[str, List[Tuple[int, float]]] = {}
    for line in lines:
        tag = next((t for t in ("train_inner", "valid") if f"| {t} | {{" in line), None)
        if tag is None:
            continue
        try:
            stats = json.loads(line[line.index("{") :])
        except ValueError:
            continue
        if tag == "train_inner":
            step, names = stats.get("num_updates"), LOG_METRICS
        else:
            step, names = stats.get("valid_num_updates"), ("valid_loss",)
        if step is None:
            continue
        for name in names:
            if name in stats:
                try:
                    series.setdefault(name, []).append((int(float(step)), float(stats[name])))
                except ValueError:
                    pass
    return series


_SIMPLE_TRAIN = re.compile(r"\| train_inner \| epoch \d+:\s+\d+ / \d+ (.*)$")
_SIMPLE_VALID = re.compile(r"\| valid \| epoch \d+ \| valid on '[^']*' subset \| (.*)$")


def parse_simple_log(lines: Sequence[str]) -> Dict[str, List[Tuple[int, float]]]:
    """The same series as :func:`parse_json_log`, from ``--log-format simple`` output.

    ``train_inner`` lines hold ``key=value, ...``; ``valid`` lines ``key value | ...``,
    where ``loss`` is the validation loss (the JSON format calls it ``valid_loss``).
    """
    series: Dict[str, List[Tuple[int, float]]] = {}

    def add(stats: Dict[str, str], names, rename=None) -> None:
        step = stats.get("num_updates")
        if step is None:
            return
        for name in names:
            key = (rename or {}).get(name, name)
            if key in stats:
                try:
                    series.setdefault(name, []).append((int(float(step)), float(stats[key])))
                except ValueError:
                    pass

    for line in lines:
        line = line.rstrip("\n")
        m = _SIMPLE_TRAIN.search(line)
        if m:
            pairs = (item.partition("=") for item in m.group(1).split(", "))
            add({k.strip(): v.strip() for k, _, v in pairs}, LOG_METRICS)
            continue
        m = _SIMPLE_VALID.search(line)
        if m:
            pairs = (item.strip().partition(" ") for item in m.group(1).split(" | "))
            add({k: v.strip() for k, _, v in pairs}, ("valid_loss",), {"valid_loss": "loss"})
    return series


def read_logs(paths: Sequence[str], strict: bool = False) -> Dict[str, List[Tuple[int, float]]]:
    """Series from fairseq-train logs, ``--log-format json`` or ``simple`` (each file either).

    ``strict``: a file from which nothing can be read (another format, not a training log)
    is refused, naming the formats that are read, instead of leaving its panels out.
    """
    series: Dict[str, List[Tuple[int, float]]] = {}
    for path in paths:
        if not os.path.isfile(path):
            raise PlotError(f"--log {path}: no such log file; give fairseq-train's output")
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.readlines()
        found = parse_json_log(lines) or parse_simple_log(lines)
        if strict and not found:
            raise PlotError(
                f"--log {path}: no train_inner or valid lines that can be read; give the "
                "output of fairseq-train run with --log-format json (or simple), e.g. "
                "fairseq-train ... --log-format json 2>&1 | tee train.log"
            )
        for name, points in found.items():
            series.setdefault(name, []).extend(points)
    return {k: sorted(v) for k, v in series.items()}


def read_json_logs(paths: Sequence[str]) -> Dict[str, List[Tuple[int, float]]]:
    """Lenient :func:`read_logs` (the sweep report reads whatever logs a run has)."""
    return read_logs(paths, strict=False)


def _plot_logits(ax, hist: GateHistory) -> None:
    final = hist.kept[-1]
    for h, kind in enumerate(hist.head_types):
        ax.plot(
            hist.updates,
            hist.logits[:, h],
            color=TYPE_COLORS[kind],
            linestyle="-" if final[h] else ":",
            linewidth=1.4 if final[h] else 0.8,
            alpha=0.9 if final[h] else 0.6,
            marker="." if len(hist.updates) < 30 else None,
        )
    handles = [
        plt.Line2D([], [], color=TYPE_COLORS[k], label=k)
        for k in ATTENTION_TYPES
        if k in hist.head_types
    ]
    handles += [
        plt.Line2D([], [], color="grey", linestyle="-", label="kept at the end"),
        plt.Line2D([], [], color="grey", linestyle=":", label="pruned at the end"),
    ]
    ax.legend(handles=handles, fontsize=7, loc="best")
    ax.set_xlabel("update")
    ax.set_ylabel("gate logit")
    ax.set_title("gate logits", fontsize=9)


def _plot_kept(ax, hist: GateHistory) -> None:
    ax.imshow(
        hist.kept.T.astype(float),
        aspect="auto",
        cmap="Greys",
        vmin=0,
        vmax=1,
        interpolation="nearest",
    )
    ticks = range(len(hist.updates))
    step = max(1, len(hist.updates) // 8)
    ax.set_xticks(list(ticks)[::step])
    ax.set_xticklabels([str(u) for u in hist.updates][::step], fontsize=7)
    start, centers, labels = 0, [], []
    for kind in ATTENTION_TYPES:
        n = hist.head_types.count(kind)
        if n:
            if start:
                ax.axhline(start - 0.5, color="tab:red", linewidth=1)
            centers.append(start + (n - 1) / 2)
            labels.append(f"{kind}\n({n})")
            start += n
    ax.set_yticks(centers)
    ax.set_yticklabels(labels, fontsize=7)
    changes = int(np.abs(np.diff(hist.kept.astype(int), axis=0)).sum()) // 2
    ax.set_xlabel("checkpoint (update)")
    ax.set_ylabel("heads, layer by layer")
    ax.set_title(f"kept heads (black); {changes} swaps between checkpoints", fontsize=9)


def plot_gate_history(
    hist: Optional[GateHistory],
    series: Optional[Dict[str, List[Tuple[int, float]]]],
    title: str = "",
):
    """Figure: logits and kept sets (checkpoints) and logged metrics (logs), as available."""
    series = {k: v for k, v in (series or {}).items() if v}
    panels = (
        (2 if hist is not None else 0)
        + sum(1 for m in LOG_METRICS if m in series and m != "loss")
        + (1 if "loss" in series or "valid_loss" in series else 0)
    )
    if panels == 0:
        raise PlotError("nothing to plot: no gate checkpoints and no gate metrics in the logs")
    cols = 2 if panels > 1 else 1
    rows = (panels + cols - 1) // cols
    fig, axes = plt.subplots(
        rows, cols, figsize=(6 * cols, 3.4 * rows), squeeze=False, constrained_layout=True
    )
    flat = list(axes.flat)
    i = 0
    if hist is not None:
        _plot_logits(flat[0], hist)
        _plot_kept(flat[1], hist)
        i = 2
    for name in LOG_METRICS:
        if name == "loss" or name not in series:
            continue
        ax = flat[i]
        xs, ys = zip(*series[name])
        ax.plot(xs, ys, marker="." if len(xs) < 40 else None)
        if name == "gate_temperature":
            ax.set_yscale("log")
        ax.set_title(METRIC_TITLES[name], fontsize=9)
        ax.set_xlabel("update")
        i += 1
    if "loss" in series or "valid_loss" in series:
        ax = flat[i]
        for name, label in (("loss", "train (label-smoothed)"), ("valid_loss", "valid")):
            if name in series:
                xs, ys = zip(*series[name])
                ax.plot(xs, ys, marker="." if len(xs) < 40 else None, label=label)
        ax.legend(fontsize=7)
        ax.set_title("loss (base 2)", fontsize=9)
        ax.set_xlabel("update")
        i += 1
    for ax in flat[i:]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig
