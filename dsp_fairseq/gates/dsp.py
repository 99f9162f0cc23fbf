"""Differentiable Subset Pruning gate and its straight-through relatives."""

from __future__ import annotations

import torch
from torch import Tensor

from .base import HeadGate, register_gate
from .soft_topk import GATE_DTYPE, gumbel_soft_topk, hard_topk_mask


def segment_soft_topk(w: Tensor, k: int, temperature: float) -> Tensor:
    """Gumbel soft top-k of one budget segment; all zeros when k = 0.

    A per-type budget may keep no head of a type (``enc-self=0``); that
    segment's mask is then 0 everywhere (and its logits get no gradient)
    instead of an error from ``soft_topk``, which needs k >= 1.
    """
    if k == 0:
        return torch.zeros(w.shape, dtype=GATE_DTYPE, device=w.device)
    return gumbel_soft_topk(w, k, temperature)


@register_gate("dsp")
class DSPGate(HeadGate):
    """Gumbel soft top-K of the logits (Li, Cotterell & Sachan 2021)."""

    uses_temperature = True

    def sample_mask(self) -> Tensor:
        return self.per_segment(lambda w, k: segment_soft_topk(w, k, self.temperature), self.logits)


@register_gate("dsp-st")
class StraightThroughDSPGate(HeadGate):
    """Forward: exactly-K-hot Gumbel top-K sample; backward: the DSP relaxation's gradient."""

    uses_temperature = True

    def sample_mask(self) -> Tensor:
        def one(w: Tensor, k: int) -> Tensor:
            soft = segment_soft_topk(w, k, self.temperature)
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
