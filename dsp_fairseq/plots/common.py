"""What every figure shares: headless matplotlib, colours, saving PNG + SVG safely."""

from __future__ import annotations

import logging
import os
from typing import List

# Importing fairseq sets the root logger to DEBUG; matplotlib's font search is not news.
for _name in ("matplotlib", "PIL"):
    logging.getLogger(_name).setLevel(logging.WARNING)

import matplotlib  # noqa: E402

matplotlib.use("Agg")  # no display needed; must precede pyplot's import
import matplotlib.pyplot as plt  # noqa: E402

from ..checkpoint_io import CheckpointError, load_checkpoint  # noqa: E402
from ..safe_loading import allow_stored_checkpoint_types  # noqa: E402

TYPE_COLORS = {"enc-self": "tab:blue", "dec-self": "tab:orange", "cross": "tab:green"}
TYPE_TITLES = {
    "enc-self": "encoder self-attention",
    "dec-self": "decoder self-attention",
    "cross": "decoder cross-attention",
}
FORMATS = ("png", "svg")

# One colour per series, distinct for up to 14 series (a sweep has 12 methods and more):
# matplotlib's tab10, then four that differ from all of them in hue or lightness. The
# default colour cycle repeats after 10, which drew "dsp" and "random" in the same blue.
SERIES_COLORS = (
    "tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple", "tab:brown", "tab:pink",
    "tab:gray", "tab:olive", "tab:cyan", "#000075", "#800000", "#808000", "#f032e6",
)  # fmt: skip
SERIES_MARKERS = "osD^vP*Xh<>pd8"


def series_style(i: int) -> dict:
    """Colour and marker of series ``i``: distinct for the first 14 (then they repeat)."""
    return {
        "color": SERIES_COLORS[i % len(SERIES_COLORS)],
        "marker": SERIES_MARKERS[i % len(SERIES_MARKERS)],
    }


class PlotError(ValueError):
    """Input that cannot be plotted; the message says why."""


def output_prefix(output: str) -> str:
    """``fig.png`` / ``fig.svg`` / ``fig`` -> ``fig``; the folder must exist."""
    root, ext = os.path.splitext(output)
    prefix = root if ext.lower() in (".png", ".svg") else output
    folder = os.path.dirname(os.path.abspath(prefix))
    if not os.path.isdir(folder):
        raise PlotError(f"--output {output}: folder {folder} does not exist; create it first")
    return prefix


def save_figure(fig, output: str) -> List[str]:
    """Write ``fig`` as PREFIX.png and PREFIX.svg (each via a temporary file); close it."""
    prefix = output_prefix(output)
    paths = []
    try:
        for fmt in FORMATS:
            path = f"{prefix}.{fmt}"
            tmp = f"{path}.tmp"
            fig.savefig(tmp, format=fmt, dpi=150, bbox_inches="tight")
            os.replace(tmp, path)
            paths.append(path)
    finally:
        plt.close(fig)
    return paths


def load_state(path: str) -> dict:
    """A checkpoint for plotting: memory-mapped when possible (only a few tensors are read)."""
    import torch

    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    allow_stored_checkpoint_types()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # old (non-zip) format, or anything odd: the careful loader says why
        state = load_checkpoint(path)
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not a fairseq checkpoint (no 'model' entry)")
    return state
