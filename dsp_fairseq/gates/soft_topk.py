"""Pure tensor functions for exact-K head selection (no module state).

``gumbel_soft_topk`` is the relaxed top-K of Xie & Ermon (2019) used by DSP
(Li, Cotterell & Sachan, 2021); ``hard_topk_mask`` is its zero-temperature,
noise-free limit, which is what gets stripped.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import Tensor

# Every gate computation runs in this dtype whatever the training precision:
# the eps below underflows in fp16/bf16 and the K softmaxes need the headroom.
GATE_DTYPE = torch.float64


def sample_gumbel(shape, generator: Optional[torch.Generator] = None, device=None) -> Tensor:
    """Standard Gumbel noise g = -log(-log u), u ~ U(0, 1), in GATE_DTYPE."""
    tiny = torch.finfo(GATE_DTYPE).tiny
    u = torch.rand(shape, generator=generator, dtype=GATE_DTYPE, device=device)
    return -torch.log((-torch.log(u.clamp(min=tiny))).clamp(min=tiny))


def soft_topk(scores: Tensor, k: int, temperature: float) -> Tensor:
    """Iterated-softmax relaxation of a K-hot vector (DSP, Li et al. 2021; docs/methods.md).

    p_1 = softmax(r / t); r <- r + log(max(1 - p_j, eps)); mask = sum_j p_j.
    Entries are >= 0 and sum to K; as t -> 0 the result is K-hot. (At moderate
    temperatures an entry can exceed 1: scores (2, 0), K=2, t=1 give
    (1.38, 0.62). This is the published relaxation and is kept as defined.)
    Computed in float64 and returned in float64.
    """
    if not 1 <= k <= scores.numel():
        raise ValueError(f"k={k} must lie in [1, {scores.numel()}]")
    r = scores.to(GATE_DTYPE)
    eps = torch.finfo(GATE_DTYPE).tiny
    p = torch.softmax(r / temperature, dim=-1)
    mask = p
    for _ in range(k - 1):
        r = r + torch.log(torch.clamp(1.0 - p, min=eps))
        p = torch.softmax(r / temperature, dim=-1)
        mask = mask + p
    return mask


def gumbel_soft_topk(
    logits: Tensor,
    k: int,
    temperature: float,
    generator: Optional[torch.Generator] = None,
) -> Tensor:
    """DSP training mask: soft top-K of the Gumbel-perturbed logits (float64)."""
    noise = sample_gumbel(logits.shape, generator=generator, device=logits.device)
    return soft_topk(logits.to(GATE_DTYPE) + noise, k, temperature)


def hard_topk_mask(scores: Tensor, k: int) -> Tensor:
    """0/1 mask with ones at the k largest scores (ties: lowest index wins).

    Stable sorting makes the choice deterministic, so every rank, the masked
    model and ``dsp-strip`` agree on the same heads.
    """
    if not 0 <= k <= scores.numel():
        raise ValueError(f"k={k} must lie in [0, {scores.numel()}]")
    order = torch.sort(scores.detach().to(GATE_DTYPE), descending=True, stable=True).indices
    mask = torch.zeros(scores.shape, dtype=GATE_DTYPE, device=scores.device)
    mask[order[:k]] = 1.0
    return mask


def distance_from_khot(mask: Tensor, k: int) -> float:
    """How far a relaxed mask is from its nearest K-hot vector, in [0, 1].

    L1 distance to the K-hot vector of its own top K, divided by 2K (the
    largest possible value): 0 means the mask already selects exactly K heads.
    """
    mask = mask.detach().to(GATE_DTYPE)
    return float((mask - hard_topk_mask(mask, k)).abs().sum() / (2 * k))
