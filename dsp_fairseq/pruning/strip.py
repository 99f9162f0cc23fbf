"""Remove pruned heads from a ``transformer_dsp`` checkpoint.

The kept heads are the gate's deterministic test mask (the one the model
validates and decodes with in ``eval()``), or a given set (importance-based or
random pruning, see :mod:`~dsp_fairseq.pruning.selection`), which also works
on stock fairseq ``transformer`` checkpoints: their stripped output is a
``transformer_dsp`` checkpoint. The surgery itself is the pure function
:func:`~dsp_fairseq.pruning.surgery.prune_attention_weights`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional

import torch
from torch import Tensor

from ..checkpoint_io import CheckpointError, model_args
from ..models.gate_config import build_gate
from ..models.head_layout import AttentionSlot, attention_slots, format_head_counts
from ..models.stock import arch_of, dsp_model_args, is_dsp_arch
from .surgery import prune_attention_weights

GATE_PREFIX = "head_gate."
PROJ_KEYS = [
    f"{p}.{t}" for p in ("q_proj", "k_proj", "v_proj", "out_proj") for t in ("weight", "bias")
]


@dataclass
class StripReport:
    slots: List[AttentionSlot]
    kept: Dict[str, List[int]]  # slot prefix -> kept head indices
    params_before: int
    params_after: int

    def table(self) -> str:
        """Heads kept per attention type and layer, then the parameter counts."""
        rows = [f"{'attention':<10} {'layer':>5}  {'kept':>5}  heads kept"]
        for slot in self.slots:
            kept = self.kept[slot.prefix]
            rows.append(
                f"{slot.kind:<10} {slot.layer:>5}  {len(kept):>2}/{slot.num_heads:<2}  {kept}"
            )
        total = sum(len(v) for v in self.kept.values())
        rows.append(f"heads kept: {total} of {sum(s.num_heads for s in self.slots)}")
        rows.append(
            f"parameters: {self.params_before:,} -> {self.params_after:,} "
            f"({100.0 * self.params_after / max(1, self.params_before):.1f}%)"
        )
        return "\n".join(rows)


def count_parameters(state_dict: Dict[str, Tensor]) -> int:
    """Distinct parameter elements (tied embeddings counted once)."""
    seen, total = set(), 0
    for tensor in state_dict.values():
        if not torch.is_tensor(tensor) or tensor.dtype == torch.bool:
            continue
        key = (tensor.data_ptr(), tensor.shape) if tensor.numel() else id(tensor)
        if key not in seen:
            seen.add(key)
            total += tensor.numel()
    return total


def check_strippable(state: dict) -> None:
    """Raise CheckpointError unless ``state`` is a gated, not yet stripped, DSP checkpoint."""
    args = model_args(state)
    if not is_dsp_arch(arch_of(args)):
        raise CheckpointError(
            f"this checkpoint's architecture is {arch_of(args)!r}, not a "
            "transformer_dsp architecture, so it has no trained gates to strip. Prune it "
            "with dsp-strip --importance/--random, or train gates on it first (pipelined "
            "pruning, see README)"
        )
    if getattr(args, "stripped_heads", None):
        raise CheckpointError(
            f"this checkpoint is already stripped (heads per attention: {args.stripped_heads}); "
            "strip the masked checkpoint it came from instead"
        )
    if not any(k.startswith(GATE_PREFIX) for k in state["model"]):
        raise CheckpointError("this transformer_dsp checkpoint holds no gate parameters to strip")


def kept_from_gate(state: dict) -> Dict[str, List[int]]:
    """Kept head indices per attention prefix, from the checkpoint's gate test mask."""
    args = model_args(state)
    slots = attention_slots(args)
    gate, gated = build_gate(args, slots)
    gate_state = {
        k[len(GATE_PREFIX) :]: v for k, v in state["model"].items() if k.startswith(GATE_PREFIX)
    }
    gate.load_state_dict(gate_state)
    gate.eval()
    mask = gate.kept_heads()
    kept, start = {}, 0
    for slot in gated:
        sel = mask[start : start + slot.num_heads]
        kept[slot.prefix] = torch.nonzero(sel).view(-1).tolist()
        start += slot.num_heads
    for slot in slots:
        kept.setdefault(slot.prefix, list(range(slot.num_heads)))
    return kept


def strip_state_dict(
    model_state: Dict[str, Tensor], slots: List[AttentionSlot], kept: Dict[str, List[int]]
) -> Dict[str, Tensor]:
    """New state dict with only the kept heads' weights and without gate parameters."""
    new = {k: v for k, v in model_state.items() if not k.startswith(GATE_PREFIX)}
    for slot in slots:
        p = slot.prefix + "."
        q_rows = model_state[p + "q_proj.weight"].shape[0]
        head_dim = q_rows // slot.num_heads
        pruned = prune_attention_weights(
            {k: model_state.get(p + k) for k in PROJ_KEYS}, kept[slot.prefix], head_dim
        )
        for k, v in pruned.items():
            if v is not None:
                new[p + k] = v
    return new


def prunable_slots(state: dict) -> List[AttentionSlot]:
    """Attention slots of a checkpoint whose heads may be removed by a given set.

    Accepts ``transformer_dsp`` checkpoints (gated or not) and stock fairseq
    ``transformer`` checkpoints; refuses already stripped ones.
    """
    args = dsp_model_args(model_args(state))
    if getattr(args, "stripped_heads", None):
        raise CheckpointError(
            f"this checkpoint is already stripped (heads per attention: {args.stripped_heads}); "
            "prune the unstripped checkpoint it came from instead"
        )
    return attention_slots(args)


def check_kept(slots: List[AttentionSlot], kept: Dict[str, List[int]]) -> None:
    """CheckpointError unless ``kept`` names valid, distinct heads for every slot."""
    for slot in slots:
        heads = kept.get(slot.prefix)
        if heads is None:
            raise CheckpointError(f"no kept heads given for attention {slot.prefix}")
        if len(set(heads)) != len(heads) or any(not 0 <= h < slot.num_heads for h in heads):
            raise CheckpointError(
                f"{slot.prefix}: kept heads {list(heads)} must be distinct indices in "
                f"[0, {slot.num_heads})"
            )
    unknown = set(kept) - {s.prefix for s in slots}
    if unknown:
        raise CheckpointError(f"kept heads name unknown attentions: {sorted(unknown)}")


def strip_checkpoint(state: dict, kept: Optional[Dict[str, List[int]]] = None):
    """Return ``(stripped_state, report)``; ``state`` itself is left untouched.

    ``kept`` (attention prefix -> head indices) overrides the gate's test mask,
    which is how importance-based and random pruning reuse this path; it may
    then be a stock ``transformer`` checkpoint, and the output is configured as
    a ``transformer_dsp`` architecture (no gate) so that it loads again.
    """
    if kept is None:
        check_strippable(state)
        kept = kept_from_gate(state)
        slots = attention_slots(model_args(state))
    else:
        slots = prunable_slots(state)
        check_kept(slots, kept)
        kept = {s.prefix: sorted(int(h) for h in kept[s.prefix]) for s in slots}
    new_model = strip_state_dict(state["model"], slots, kept)

    new_args = dsp_model_args(model_args(state))
    counts: Dict[str, List[int]] = {}
    for slot in slots:
        counts.setdefault(slot.kind, []).append(len(kept[slot.prefix]))
    new_args.stripped_heads = format_head_counts(counts)
    new_args.gate_type = "none"
    new_args.train_gates_only = False
    new_args.freeze_gates = False
    new_args.train_only = None

    new_state = {k: v for k, v in state.items() if k != "last_optimizer_state"}
    new_state["model"] = new_model
    if isinstance(state.get("cfg"), dict):
        new_state["cfg"] = dict(state["cfg"])
        new_state["cfg"]["model"] = new_args
    if state.get("args") is not None:
        new_state["args"] = new_args
    # The optimizer state refers to the removed weights; fine-tuning restarts it.
    new_state["optimizer_history"] = [
        dict(h, optimizer_name=h.get("optimizer_name")) for h in state.get("optimizer_history", [])
    ]
    new_state["dsp_kept_heads"] = {s.prefix: list(kept[s.prefix]) for s in slots}
    new_state["extra_state"] = fresh_extra_state(state.get("extra_state"))
    report = StripReport(slots, kept, count_parameters(state["model"]), count_parameters(new_model))
    return new_state, report


# extra_state entries that describe the training run of the unstripped model:
# its data iterator position, best validation loss, EMA weights (shaped like
# the unstripped model) and meters. Fine-tuning the stripped model restarts them.
STALE_EXTRA_STATE = ("train_iterator", "val_loss", "best", "ema", "ema_fp32_params", "metrics")


def fresh_extra_state(extra_state: Optional[dict]) -> dict:
    """``extra_state`` without the training-run entries that no longer apply.

    fairseq needs a ``train_iterator`` entry whenever ``extra_state`` is present
    (trainer.load_checkpoint): a fresh one, the start of epoch 1.
    """
    extra = {k: v for k, v in (extra_state or {}).items() if k not in STALE_EXTRA_STATE}
    extra["train_iterator"] = {"epoch": 1, "iterations_in_epoch": 0}
    extra["previous_training_time"] = 0
    return extra


def raise_if_unusable_output(input_path: str, output_path: str, option: str = "--output") -> None:
    import os

    if not output_path or os.path.isdir(output_path):
        raise CheckpointError(
            f"{option} {output_path!r} is {'a folder' if output_path else 'empty'}, not a file "
            "path; name the file to write, "
            f"e.g. {os.path.join(output_path or '.', 'pruned.pt')}"
        )
    # samefile also catches a symlink or hard link to the input.
    if os.path.abspath(input_path) == os.path.abspath(output_path) or (
        os.path.exists(input_path)
        and os.path.exists(output_path)
        and os.path.samefile(input_path, output_path)
    ):
        raise CheckpointError(
            f"{option} {output_path} is the input checkpoint; choose another path "
            "(dsp-strip never overwrites its input)"
        )
    folder = os.path.dirname(os.path.abspath(output_path))
    if not os.path.isdir(folder):
        raise CheckpointError(
            f"{option} {output_path}: folder {folder} does not exist; create it first"
        )
