"""Hard Concrete head gates with an expected-L0 penalty (Voita et al., ACL 2019).

The gate's ``logits`` are the per-head ``log_a`` of the Hard Concrete
distribution (so the gate's own optimizer, the ``head_gate.logits`` checkpoint key
and ``dsp-strip`` work exactly as for DSP). While training each head draws

    s = sigmoid((log u - log(1 - u) + log_a) / T),  u ~ U(0, 1),  T = 0.33,

stretched to (l, r) = (-0.1, 1.1) and clamped to [0, 1], so a gate is exactly
0 or 1 with non-zero probability. The penalty is the expected number of open
gates, sum_h P(s_h > 0) = sum_h sigmoid(log_a_h - T log(-l / r)); the
criterion weights it with ``--l0-penalty`` (per target token, see
``dsp_label_smoothed_cross_entropy``).

At test time the kept heads are the K most likely to be open when a budget is
given (``--heads-to-keep`` or per-type budgets), otherwise the heads whose
noise-free gate clamp(sigmoid(log_a) (r - l) + l, 0, 1) exceeds 0.5; with no
budget the number of kept heads is set only indirectly by ``--l0-penalty``.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .base import HeadGate, register_gate
from .soft_topk import GATE_DTYPE

TEMPERATURE = 0.33  # T of the reference implementation (fixed, not annealed)
STRETCH = (-0.1, 1.1)  # (l, r)
KEEP_THRESHOLD = 0.5  # noise-free gate value above which a head is kept (no budget)


def hard_concrete_sample(log_a: Tensor, u: Tensor) -> Tensor:
    """Stretched, clamped Hard Concrete sample for uniform noise ``u`` (same shape)."""
    low, high = STRETCH
    s = torch.sigmoid((torch.log(u) - torch.log1p(-u) + log_a) / TEMPERATURE)
    return (s * (high - low) + low).clamp(0.0, 1.0)


def prob_open(log_a: Tensor) -> Tensor:
    """P(gate > 0) = sigmoid(log_a - T log(-l / r)) for each head."""
    low, high = STRETCH
    return torch.sigmoid(log_a - TEMPERATURE * math.log(-low / high))


def noise_free_gate(log_a: Tensor) -> Tensor:
    """Test-time gate without noise: clamp(sigmoid(log_a) (r - l) + l, 0, 1)."""
    low, high = STRETCH
    return (torch.sigmoid(log_a) * (high - low) + low).clamp(0.0, 1.0)


@register_gate("hard-concrete")
class HardConcreteGate(HeadGate):
    """Stochastic Hard Concrete gate per head; L0 penalty; K optional."""

    budget_optional = True

    def _log_a(self) -> Tensor:
        return self.logits.to(GATE_DTYPE)

    def sample_mask(self) -> Tensor:
        log_a = self._log_a()
        tiny = torch.finfo(GATE_DTYPE).eps
        u = torch.rand(log_a.shape, dtype=GATE_DTYPE, device=log_a.device).clamp(tiny, 1 - tiny)
        return hard_concrete_sample(log_a, u)

    def test_scores(self) -> Tensor:
        # Top-K of the probability of being open (monotonic in log_a).
        return prob_open(self._log_a())

    def penalty(self) -> Tensor:
        return prob_open(self._log_a()).sum()

    def free_test_mask(self) -> Tensor:
        return (noise_free_gate(self._log_a()) > KEEP_THRESHOLD).to(GATE_DTYPE)
