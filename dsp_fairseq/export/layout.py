"""How a stripped model's head layout maps onto CTranslate2's Transformer spec.

CTranslate2 (4.x) declares one ``num_heads`` for the encoder stack and one for the
decoder stack (decoder self- and cross-attention share it), and a ``head_dim`` per
attention. A stripped model keeps any number of heads in each attention, so:

* an attention keeping ``n`` heads of width ``d`` is written as ``N`` heads of width ``d``,
  ``N`` being its stack's count; the ``N - n`` extra heads have zero weights (exact:
  their query/key are 0 and their value is 0, so they add nothing);
* an attention keeping no head is written as ``N`` zero heads of width 1 (exact too; its
  output is the output-projection bias, as in the stripped model, at almost no cost);
* ``N`` is the largest count in the stack (1 when the whole stack is empty:
  CTranslate2 cannot load a stack with 0 heads).

A uniform layout (the same count in every attention of a stack, see
``--heads-per-attention``) needs no padding. Everything here is pure arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Sequence

STACK_OF = {"enc-self": "encoder", "dec-self": "decoder", "cross": "decoder"}


@dataclass(frozen=True)
class AttentionPlan:
    """How one attention is written: ``heads`` heads of width ``head_dim``."""

    kind: str
    layer: int
    kept: int  # heads of the stripped model
    heads: int  # heads written (the stack's count)
    head_dim: int  # width of each written head (1 for an empty attention)

    @property
    def padding(self) -> int:
        """Zero heads of full width added to reach the stack's count."""
        return self.heads - self.kept if self.kept else 0

    @property
    def computed(self) -> int:
        """Full-width heads CTranslate2 computes here (placeholders of width 1 not counted)."""
        return self.heads if self.kept else 0


@dataclass(frozen=True)
class ExportPlan:
    encoder_heads: int
    decoder_heads: int
    attentions: List[AttentionPlan]

    @property
    def kept(self) -> int:
        return sum(a.kept for a in self.attentions)

    @property
    def computed(self) -> int:
        return sum(a.computed for a in self.attentions)

    @property
    def padding(self) -> int:
        return sum(a.padding for a in self.attentions)

    @property
    def placeholders(self) -> int:
        """Attentions with no head, written as zero heads of width 1."""
        return sum(1 for a in self.attentions if not a.kept)

    @property
    def uniform(self) -> bool:
        return self.padding == 0 and self.placeholders == 0

    def describe(self) -> str:
        """Layout, padding and cost, for people."""
        lines = ["attention   layers: heads kept (written)"]
        for kind in ("enc-self", "dec-self", "cross"):
            row = [a for a in self.attentions if a.kind == kind]
            if row:
                cells = " ".join(f"{a.kept}({a.heads if a.kept else f'{a.heads}x1'})" for a in row)
                lines.append(f"{kind:<10}  {cells}")
        lines.append(
            f"CTranslate2 num_heads: encoder {self.encoder_heads}, decoder {self.decoder_heads} "
            "(decoder self- and cross-attention share it)"
        )
        if self.uniform:
            lines.append(f"uniform layout: no padding; heads computed = kept = {self.kept}")
        else:
            lines.append(
                f"padded layout: {self.padding} zero heads added, {self.placeholders} empty "
                f"attention(s) written as zero heads of width 1"
            )
            if self.padding:
                lines.append(
                    f"cost: {self.computed} full-width heads computed for {self.kept} kept "
                    f"({self.computed / max(1, self.kept):.2f}x); a uniform layout "
                    "(--heads-per-attention) computes only the kept heads"
                )
            else:
                lines.append(
                    f"cost: heads computed = kept = {self.kept}, plus the width-1 zero heads "
                    "of the empty attentions (almost free)"
                )
        return "\n".join(lines)


def stack_heads(counts: Sequence[int]) -> int:
    """A stack's CTranslate2 head count: its widest attention, at least 1."""
    return max([1, *counts])


def plan_export(counts: Dict[str, Sequence[int]], head_dims: Dict[str, int]) -> ExportPlan:
    """The export plan for head counts by type and layer (``{"enc-self": [4, 2, 0], ...}``)
    and the head width of each stack (``{"encoder": 64, "decoder": 64}``)."""
    unknown = set(counts) - set(STACK_OF)
    if unknown:
        raise ValueError(f"unknown attention types {sorted(unknown)}")
    per_stack = {"encoder": [], "decoder": []}
    for kind, row in counts.items():
        per_stack[STACK_OF[kind]].extend(row)
    heads = {stack: stack_heads(row) for stack, row in per_stack.items()}
    attentions = []
    for kind in ("enc-self", "dec-self", "cross"):
        stack = STACK_OF[kind]
        for layer, kept in enumerate(counts.get(kind, ())):
            if kept < 0:
                raise ValueError(f"{kind} layer {layer}: negative head count {kept}")
            width = head_dims[stack] if kept else 1
            attentions.append(AttentionPlan(kind, layer, int(kept), heads[stack], width))
    return ExportPlan(heads["encoder"], heads["decoder"], attentions)
