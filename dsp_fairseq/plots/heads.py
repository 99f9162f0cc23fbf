"""Kept-head map: layers x heads, one panel per attention type.

Sources: a masked ``transformer_dsp`` checkpoint (kept heads = the gate's
test mask; cells shaded by the gate logits or by keep probabilities) and/or a
stripped checkpoint (kept heads = ``state['dsp_kept_heads']``). Given both,
the shading comes from the masked one and the marks from the stripped one.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Dict, List, Optional

import numpy as np
import torch

from ..checkpoint_io import model_args
from ..models.gate_config import build_gate
from ..models.head_layout import ATTENTION_TYPES, AttentionSlot, attention_slots
from ..pruning.strip import GATE_PREFIX
from .common import TYPE_TITLES, PlotError, plt

SHADES = ("logits", "probs")


@dataclass
class HeadMap:
    """Per attention type: a (layers, heads) array of shades (NaN: none) and kept flags."""

    values: Dict[str, np.ndarray]
    kept: Dict[str, np.ndarray]
    shade_label: str
    source: str
    notes: List[str] = field(default_factory=list)

    @property
    def num_kept(self) -> int:
        return int(sum(k.sum() for k in self.kept.values()))

    @property
    def num_heads(self) -> int:
        return int(sum(k.size for k in self.kept.values()))


def unstripped_slots(args) -> List[AttentionSlot]:
    """Attention slots with their original head counts (before any stripping)."""
    args = copy.copy(args)
    args.stripped_heads = None
    return attention_slots(args)


def _empty(slots: List[AttentionSlot], fill) -> Dict[str, np.ndarray]:
    out: Dict[str, np.ndarray] = {}
    for kind in ATTENTION_TYPES:
        rows = [s for s in slots if s.kind == kind]
        if rows:
            width = max(s.num_heads for s in rows)
            out[kind] = np.full((len(rows), width), fill, dtype=float)
    return out


def _scatter(slots, flat_by_slot: Dict[str, np.ndarray], fill) -> Dict[str, np.ndarray]:
    grid = _empty(slots, np.nan if fill is None else fill)
    for slot in slots:
        if slot.prefix in flat_by_slot:
            vec = flat_by_slot[slot.prefix]
            grid[slot.kind][slot.layer, : len(vec)] = vec
    return grid


def gate_from_state(state: dict):
    """(gate in eval mode, gated slots) rebuilt from a masked checkpoint's gate logits."""
    args = model_args(state)
    if getattr(args, "stripped_heads", None):
        raise PlotError("this checkpoint is stripped: it has no gates (pass it with --stripped)")
    gate_state = {
        k[len(GATE_PREFIX) :]: v for k, v in state["model"].items() if k.startswith(GATE_PREFIX)
    }
    if not gate_state or getattr(args, "gate_type", "none") in (None, "none"):
        raise PlotError(
            f"this checkpoint (arch {getattr(args, 'arch', None)!r}) has no head gates; "
            "plot a transformer_dsp checkpoint, or a stripped one with --stripped"
        )
    gate, gated = build_gate(args, unstripped_slots(args))
    gate.load_state_dict({k: v.clone() for k, v in gate_state.items()})
    gate.eval()
    return gate, gated


def keep_probabilities(gate, samples: int = 2000, temperature: float = 1e-3) -> torch.Tensor:
    """Mean of ``samples`` training masks: how often each head is kept while training.

    For DSP-type gates at a low temperature this is the probability that the
    head lies in the Gumbel-perturbed top-K; for Hard Concrete the mean gate.
    """
    gate.train()
    if getattr(gate, "uses_temperature", False):
        gate.set_temperature(temperature)
    gen_state = torch.random.get_rng_state()
    torch.manual_seed(0)  # the same figure on every run
    try:
        with torch.no_grad():
            total = sum(gate.sample_mask().detach() for _ in range(samples))
    finally:
        torch.random.set_rng_state(gen_state)
        gate.eval()
    return (total / samples).clamp(0.0, 1.0)


def head_map_from_masked(state: dict, shade: str = "logits", source: str = "") -> HeadMap:
    if shade not in SHADES:
        raise PlotError(f"--shade {shade!r}: choose one of {', '.join(SHADES)}")
    gate, gated = gate_from_state(state)
    slots = unstripped_slots(model_args(state))
    kept_vec = gate.kept_heads().numpy()
    if shade == "logits":
        shades, label = gate.logits.detach().double().numpy(), "gate logit"
    else:
        shades, label = keep_probabilities(gate).numpy(), "keep probability (sampled masks)"
    kept_by, shade_by, start = {}, {}, 0
    for slot in gated:
        kept_by[slot.prefix] = kept_vec[start : start + slot.num_heads]
        shade_by[slot.prefix] = shades[start : start + slot.num_heads]
        start += slot.num_heads
    kept = _scatter(slots, kept_by, True)
    notes = [
        f"{kind}: not gated, all heads kept"
        for kind in kept
        if not any(s.kind == kind for s in gated)
    ]
    return HeadMap(
        values=_scatter(slots, shade_by, None),
        kept={k: v.astype(bool) for k, v in kept.items()},
        shade_label=label,
        source=source,
        notes=notes,
    )


def head_map_from_stripped(state: dict, source: str = "") -> HeadMap:
    kept_idx = state.get("dsp_kept_heads")
    if not isinstance(kept_idx, dict):
        raise PlotError(
            "this checkpoint has no 'dsp_kept_heads' record; it is not a checkpoint written "
            "by dsp-strip (a masked transformer_dsp checkpoint goes to --masked)"
        )
    slots = unstripped_slots(model_args(state))
    flags = {}
    for slot in slots:
        if slot.prefix not in kept_idx:
            raise PlotError(f"dsp_kept_heads has no entry for {slot.prefix}")
        row = np.zeros(slot.num_heads, dtype=float)
        row[list(kept_idx[slot.prefix])] = 1.0
        flags[slot.prefix] = row
    grid = _scatter(slots, flags, 0.0)
    return HeadMap(
        values=grid,
        kept={k: v > 0.5 for k, v in grid.items()},
        shade_label="kept (stripped checkpoint)",
        source=source,
    )


def differing_heads(masked: HeadMap, stripped: HeadMap) -> int:
    """How many heads one map keeps and the other does not (same layout required)."""
    if set(masked.kept) != set(stripped.kept) or any(
        masked.kept[k].shape != stripped.kept[k].shape for k in masked.kept
    ):
        raise PlotError("the masked and the stripped checkpoint have different head layouts")
    return sum(int((masked.kept[k] != stripped.kept[k]).sum()) for k in masked.kept)


def combine(masked: Optional[HeadMap], stripped: Optional[HeadMap]) -> HeadMap:
    """Shading of the masked map, kept marks of the stripped one (notes on disagreement)."""
    if masked is None and stripped is None:
        raise PlotError("give a masked checkpoint, a stripped one, or both")
    if masked is None or stripped is None:
        return masked or stripped
    differ = differing_heads(masked, stripped)
    notes = masked.notes + (
        [f"{differ} heads differ between the gate's test mask and the stripped model"]
        if differ
        else []
    )
    return HeadMap(
        masked.values,
        stripped.kept,
        masked.shade_label,
        f"{masked.source} + {stripped.source}",
        notes,
    )


def plot_head_map(hmap: HeadMap, title: Optional[str] = None):
    """Figure: one panel per attention type; kept heads circled; shared colour bar."""
    kinds = [k for k in ATTENTION_TYPES if k in hmap.kept]
    fig, axes = plt.subplots(
        1, len(kinds), figsize=(2.2 + 2.4 * len(kinds), 3.6), squeeze=False, constrained_layout=True
    )
    finite = np.concatenate([v[np.isfinite(v)] for v in hmap.values.values()] + [np.zeros(0)])
    if "logit" in hmap.shade_label and finite.size:
        bound = float(np.abs(finite).max()) or 1.0
        cmap, vmin, vmax = "coolwarm", -bound, bound
    else:
        cmap, vmin, vmax = "Greens", 0.0, 1.0
    image = None
    for ax, kind in zip(axes[0], kinds):
        values, kept = hmap.values[kind], hmap.kept[kind]
        image = ax.imshow(
            np.ma.masked_invalid(values), cmap=cmap, vmin=vmin, vmax=vmax, aspect="auto"
        )
        ys, xs = np.nonzero(kept)
        ax.scatter(xs, ys, s=120, facecolors="none", edgecolors="black", linewidths=1.8)
        layers, heads = kept.shape
        ax.set_xticks(range(heads))
        ax.set_yticks(range(layers))
        ax.set_xlabel("head")
        ax.set_ylabel("layer")
        ax.set_title(f"{TYPE_TITLES[kind]}\nkept {int(kept.sum())}/{kept.size}", fontsize=9)
    if image is not None:
        fig.colorbar(image, ax=axes[0].tolist(), shrink=0.85, label=hmap.shade_label)
    heading = title or f"heads kept: {hmap.num_kept} of {hmap.num_heads} (circled)"
    if hmap.notes:
        heading += "\n" + "; ".join(hmap.notes)
    fig.suptitle(heading, fontsize=10)
    return fig
