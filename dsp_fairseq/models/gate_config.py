"""Turn a model config into a gate: which heads are gated and what the budget is.

Shared by the model (at build time) and ``dsp-strip`` (which recomputes the
test mask from a checkpoint without building the model or loading data).
"""

from __future__ import annotations

from typing import Dict, List, Optional, Tuple

from ..gates import GATE_REGISTRY, HeadGate, build_budget
from ..gates.schedules import GateSchedule, default_schedule_name, get_schedule
from .head_layout import (
    PROPORTIONAL,
    PROPORTIONAL_AT_SMALL_K,
    AttentionSlot,
    heads_per_slot,
    parse_attention_types,
    parse_per_type,
    proportional_split,
    small_k,
)


def gated_slots(args, slots: List[AttentionSlot]) -> List[AttentionSlot]:
    types = set(parse_attention_types(args.gated_attentions))
    return [s for s in slots if s.kind in types]


def build_gate(args, slots: List[AttentionSlot]) -> Tuple[HeadGate, List[AttentionSlot]]:
    """The configured gate over the gated slots (validated budget), and those slots."""
    if args.gate_type not in GATE_REGISTRY:
        raise ValueError(
            f"--gate-type {args.gate_type!r} is unknown; choose one of "
            f"{', '.join(sorted(GATE_REGISTRY))}"
        )
    gate_cls = GATE_REGISTRY[args.gate_type]
    gated = gated_slots(args, slots)
    sizes: Dict[str, int] = {}
    for slot in gated:
        sizes[slot.kind] = sizes.get(slot.kind, 0) + slot.num_heads
    if getattr(args, "heads_per_attention", None):
        budget = uniform_layout_budget(args, slots, gated)
    else:
        request = budget_request(args, sizes, budget_optional=gate_cls.budget_optional)
        budget = None if request is None else build_budget(list(sizes.values()), **request)
    gate = gate_cls(sum(sizes.values()), budget)
    gate.schedule = gate_schedule(args)
    gate_lr = getattr(args, "gate_lr", None)
    # The constant rate the translation_dsp task's Adam trains the logits at.
    gate.lr = gate.schedule.gate_lr if gate_lr is None else float(gate_lr)
    return gate, gated


def gate_schedule(args) -> GateSchedule:
    """The model's --gate-schedule; by default pipelined with --train-gates-only, else joint."""
    name = getattr(args, "gate_schedule", None)
    return get_schedule(name or default_schedule_name(bool(getattr(args, "train_gates_only", 0))))


def budget_request(args, sizes: Dict[str, int], budget_optional: bool = False) -> Optional[dict]:
    """Validate K (or the per-type budgets) against the gated heads; say what is allowed.

    Without either option the budget is all heads, except for gates that can
    choose their heads themselves (``budget_optional``): then None, "the gate decides".
    """
    total = sum(sizes.values())
    layout = ", ".join(f"{k}: {v}" for k, v in sizes.items())
    spec = (args.heads_to_keep_per_type or "").strip()
    if spec in (PROPORTIONAL, PROPORTIONAL_AT_SMALL_K):
        if args.heads_to_keep is None:
            raise ValueError(
                f"--heads-to-keep-per-type {spec} shares --heads-to-keep K among the "
                "attention types; give --heads-to-keep K as well"
            )
        check_global_k(args.heads_to_keep, total, layout)
        if spec == PROPORTIONAL or small_k(args.heads_to_keep, total):
            return {"per_segment": list(proportional_split(args.heads_to_keep, sizes).values())}
        return {"heads_to_keep": args.heads_to_keep}
    if args.heads_to_keep_per_type:
        per = parse_per_type(args.heads_to_keep_per_type, list(sizes))
        # recipes always pass --heads-to-keep K; the per-type budgets may refine it if they sum to K
        if args.heads_to_keep is not None and args.heads_to_keep != sum(per.values()):
            raise ValueError(
                f"--heads-to-keep {args.heads_to_keep} contradicts --heads-to-keep-per-type "
                f"{args.heads_to_keep_per_type}, which keeps {sum(per.values())} heads; "
                f"drop --heads-to-keep or set it to {sum(per.values())}"
            )
        for kind, k in per.items():
            if not 0 <= k <= sizes[kind]:
                raise ValueError(
                    f"--heads-to-keep-per-type: {kind}={k} is out of range; "
                    f"{kind} has {sizes[kind]} gated heads, choose a value in [0, {sizes[kind]}]"
                )
        if sum(per.values()) < 1:
            raise ValueError("--heads-to-keep-per-type keeps no head at all; keep at least 1")
        return {"per_segment": [per[k] for k in sizes]}
    if args.heads_to_keep is None and budget_optional:
        return None
    k = total if args.heads_to_keep is None else args.heads_to_keep
    check_global_k(k, total, layout)
    return {"heads_to_keep": k}


def check_global_k(k: int, total: int, layout: str) -> None:
    if not 1 <= k <= total:
        raise ValueError(
            f"--heads-to-keep {k} is out of range: this model has H={total} gated heads "
            f"({layout}); choose K in [1, {total}]"
        )


def uniform_layout_budget(
    args, slots: List[AttentionSlot], gated: List[AttentionSlot]
) -> List[Tuple[int, int, int]]:
    """One budget segment per gated attention for ``--heads-per-attention ENC,DEC``.

    Every encoder self-attention keeps exactly ENC heads and every decoder self-
    and cross-attention exactly DEC (the gate still chooses which), so the
    stripped model has the same head count throughout each stack. An attention
    type left ungated keeps all its heads, which must then equal ENC or DEC.
    ``--heads-to-keep K`` may be given as well (recipes always pass it) if K is
    the layout's total.
    """
    spec = args.heads_per_attention
    if getattr(args, "heads_to_keep_per_type", None):
        raise ValueError("give either --heads-per-attention or --heads-to-keep-per-type, not both")
    ks = heads_per_slot(slots, spec)
    gated_prefixes = {s.prefix for s in gated}
    for slot, k in zip(slots, ks):
        if slot.prefix not in gated_prefixes and k != slot.num_heads:
            raise ValueError(
                f"--heads-per-attention {spec}: {slot.kind} is not gated (--gated-attentions "
                f"{args.gated_attentions}), so {slot.prefix} keeps all its {slot.num_heads} "
                f"heads, not {k}; gate it or ask for {slot.num_heads} there"
            )
    per_slot = [k for slot, k in zip(slots, ks) if slot.prefix in gated_prefixes]
    total = sum(per_slot)
    if args.heads_to_keep is not None and args.heads_to_keep != total:
        raise ValueError(
            f"--heads-to-keep {args.heads_to_keep} contradicts --heads-per-attention {spec}, "
            f"which keeps {total} gated heads; drop --heads-to-keep or set it to {total}"
        )
    if total < 1:
        raise ValueError(f"--heads-per-attention {spec} keeps no gated head; keep at least 1")
    return build_budget([s.num_heads for s in gated], per_segment=per_slot)
