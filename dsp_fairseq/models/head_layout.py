"""Where the gated heads are: attention types, their order, and config strings.

The model's H gated heads are laid out in one vector, attention type by
attention type (``enc-self``, ``dec-self``, ``cross``), layer by layer, head
by head. Gates, stripping, plots and per-type budgets all use this order.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

ATTENTION_TYPES = ("enc-self", "dec-self", "cross")


def parse_attention_types(spec: str) -> List[str]:
    """``"enc-self,cross"`` -> ``["enc-self", "cross"]`` (canonical order)."""
    names = [s.strip() for s in (spec or "").split(",") if s.strip()]
    unknown = [n for n in names if n not in ATTENTION_TYPES]
    if unknown or not names:
        raise ValueError(
            f"--gated-attentions {spec!r}: unknown attention type(s) {unknown}; "
            f"choose a comma-separated subset of {','.join(ATTENTION_TYPES)}"
        )
    return [t for t in ATTENTION_TYPES if t in names]


def parse_per_type(spec: str, allowed: Sequence[str]) -> Dict[str, int]:
    """``"enc-self=4,cross=2"`` -> ``{"enc-self": 4, "cross": 2}``."""
    result: Dict[str, int] = {}
    for item in (spec or "").split(","):
        item = item.strip()
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep or name.strip() not in allowed or not value.strip().lstrip("-").isdigit():
            raise ValueError(
                f"--heads-to-keep-per-type {spec!r}: expected TYPE=K pairs with TYPE in "
                f"{','.join(allowed)} (the gated attention types)"
            )
        result[name.strip()] = int(value)
    missing = [t for t in allowed if t not in result]
    if missing:
        raise ValueError(f"--heads-to-keep-per-type {spec!r}: no budget for {','.join(missing)}")
    return result


PROPORTIONAL = "proportional"
# proportional where K <= H / PROPORTIONAL_UP_TO, one global K above: on the converged 72-head
# model the free choice fine-tuned best at H/2, level at H/4, worst at H/8 (bench/RESULTS.md,
# "Heads per attention type")
PROPORTIONAL_AT_SMALL_K = "proportional-at-small-k"
PROPORTIONAL_UP_TO = 4


def small_k(k: int, total: int) -> bool:
    """Where proportional-at-small-k (the recipes' --type-split auto) splits K: K <= H/4."""
    return k * PROPORTIONAL_UP_TO <= total


def proportional_split(k: int, sizes: Dict[str, int]) -> Dict[str, int]:
    """K heads shared among the attention types in proportion to their gated heads.

    ``--heads-to-keep-per-type proportional``: with equal types (3+3 layers, 8 heads: 24
    each) K = 18 gives 6,6,6. Largest remainders get the heads left over; ties go to the
    later types (cross, then dec-self), where gates on a frozen model put most heads.
    """
    total = sum(sizes.values())
    shares = {t: k * n / total for t, n in sizes.items()}
    split = {t: int(share) for t, share in shares.items()}
    order = sorted(sizes, key=lambda t: (shares[t] - split[t], list(sizes).index(t)), reverse=True)
    for t in order[: k - sum(split.values())]:
        split[t] += 1
    return split


def parse_heads_per_attention(spec) -> tuple:
    """``"2,3"`` -> ``(2, 3)``: heads kept in every encoder self-attention and in every
    decoder self- and cross-attention (``"2"`` means ``(2, 2)``)."""
    if isinstance(spec, (tuple, list)) and len(spec) == 2:
        return int(spec[0]), int(spec[1])
    parts = [p.strip() for p in str(spec or "").split(",")]
    if len(parts) == 1:
        parts = parts * 2
    if len(parts) != 2 or not all(p.isdigit() for p in parts):
        raise ValueError(
            f"--heads-per-attention {spec!r}: expected ENC,DEC (two numbers of heads, e.g. 2,2): "
            "heads kept in every encoder self-attention, and in every decoder self- and "
            "cross-attention"
        )
    return int(parts[0]), int(parts[1])


def heads_per_slot(slots: Sequence[AttentionSlot], spec) -> List[int]:
    """Heads to keep in each slot for a uniform layout ``ENC,DEC``, validated.

    ``ENC`` applies to encoder self-attentions, ``DEC`` to decoder self- and
    cross-attentions; each must be in [0, heads of that attention] and the
    layout must keep at least one head.
    """
    enc, dec = parse_heads_per_attention(spec)
    ks = []
    for slot in slots:
        k = enc if slot.kind == "enc-self" else dec
        if not 0 <= k <= slot.num_heads:
            raise ValueError(
                f"--heads-per-attention {enc},{dec}: {slot.prefix} ({slot.kind}) has "
                f"{slot.num_heads} heads, cannot keep {k}; choose a value in [0, {slot.num_heads}]"
            )
        ks.append(k)
    if sum(ks) < 1:
        raise ValueError(f"--heads-per-attention {enc},{dec} keeps no head at all; keep at least 1")
    return ks


def format_head_counts(counts: Dict[str, Sequence[int]]) -> str:
    """``{"enc-self": [4, 2]}`` -> ``"enc-self=4,2"`` (``;`` between types)."""
    return ";".join(
        f"{t}={','.join(str(n) for n in counts[t])}" for t in ATTENTION_TYPES if t in counts
    )


def parse_head_counts(spec: Optional[str]) -> Dict[str, List[int]]:
    """Inverse of :func:`format_head_counts`."""
    counts: Dict[str, List[int]] = {}
    for part in (spec or "").split(";"):
        if not part.strip():
            continue
        name, _, values = part.partition("=")
        if name not in ATTENTION_TYPES:
            raise ValueError(f"bad head-count spec {spec!r}: unknown attention type {name!r}")
        counts[name] = [int(v) for v in values.split(",") if v != ""]
    return counts


@dataclass(frozen=True)
class AttentionSlot:
    """One attention module: its type, layer, state-dict prefix and head count."""

    kind: str
    layer: int
    prefix: str
    num_heads: int


def attention_slots(args) -> List[AttentionSlot]:
    """Every attention of a ``transformer_dsp`` config, in head-layout order.

    Head counts are those present in the weights: the configured number of
    heads, or the counts ``dsp-strip`` recorded in ``args.stripped_heads``.
    """
    stripped = parse_head_counts(getattr(args, "stripped_heads", None))
    sides = {
        "enc-self": ("encoder", "encoder.layers.{}.self_attn"),
        "dec-self": ("decoder", "decoder.layers.{}.self_attn"),
        "cross": ("decoder", "decoder.layers.{}.encoder_attn"),
    }
    slots = []
    for kind, (side, pattern) in sides.items():
        if kind == "cross" and getattr(args, "no_cross_attention", False):
            continue
        layers = getattr(args, f"{side}_layers")
        heads = stripped.get(kind, [getattr(args, f"{side}_attention_heads")] * layers)
        for i in range(layers):
            slots.append(AttentionSlot(kind, i, pattern.format(i), heads[i]))
    return slots
