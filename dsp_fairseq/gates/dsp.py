"""Differentiable Subset Pruning gate and its straight-through relatives."""

from __future__ import annotations

import torch
from torch import Tensor

from .base import HeadGate, register_gate
from .soft_topk import gumbel_soft_topk, hard_topk_mask


@register_gate("dsp")
class DSPGate(HeadGate):
    """Gumbel soft top-K of the logits (Li, Cotterell & Sachan 2021)."""

    uses_temperature = True

    def sample_mask(self) -> Tensor:
        return self.per_segment(
            lambda w, k: gumbel_soft_topk(w, k, self.temperature), self.logits
        )


@register_gate("dsp-st")
class StraightThroughDSPGate(HeadGate):
    """Forward: exactly-K-hot Gumbel top-K sample; backward: the DSP relaxation's gradient."""

    uses_temperature = True

    def sample_mask(self) -> Tensor:
        def one(w: Tensor, k: int) -> Tensor:
            soft = gumbel_soft_topk(w, k, self.temperature)
            hard = hard_topk_mask(soft, k)
            return hard + (soft - soft.detach())

        return self.per_segment(one, self.logits)


@register_gate("ste")
class StraightThroughTopKGate(HeadGate):
    """Forward: hard top-K of the logits (no noise); backward: identity."""

    def sample_mask(self) -> Tensor:
        w = self.logits.to(torch.float64)
        hard = self.per_segment(hard_topk_mask, w)
        return hard + (w - w.detach())
