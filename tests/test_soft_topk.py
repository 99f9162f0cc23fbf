import math

import pytest
import torch

from dsp_fairseq.gates.soft_topk import (
    distance_from_khot,
    gumbel_soft_topk,
    hard_topk_mask,
    soft_topk,
)


@pytest.mark.parametrize("h,k", [(1, 1), (12, 3), (36, 9), (72, 18), (72, 72)])
@pytest.mark.parametrize("t", [1.0, 0.1, 1e-3, 1e-8])
def test_mask_sums_to_k_and_is_nonnegative(h, k, t):
    logits = torch.randn(h)
    mask = gumbel_soft_topk(logits, k, t)
    assert mask.dtype == torch.float64
    assert torch.isfinite(mask).all()
    assert mask.min() >= 0
    assert mask.sum().item() == pytest.approx(k, abs=1e-9)


@pytest.mark.parametrize("seed", range(5))
def test_entries_within_unit_interval_once_annealed(seed):
    torch.manual_seed(seed)
    mask = gumbel_soft_topk(torch.randn(72) * 0.3, 18, 1e-5)
    assert mask.max() <= 1 + 1e-9


def test_entries_can_exceed_one_at_high_temperature():
    # Documented property of the published relaxation (see soft_topk docstring).
    mask = soft_topk(torch.tensor([2.0, 0.0]), 2, 1.0)
    assert mask[0].item() == pytest.approx(1.38, abs=0.01)
    assert mask.sum().item() == pytest.approx(2.0)


def test_zero_temperature_limit_is_hard_topk_of_scores():
    scores = torch.randn(40, dtype=torch.float64)
    for k in (1, 5, 20, 39):
        soft = soft_topk(scores, k, 1e-8)
        assert torch.allclose(soft, hard_topk_mask(scores, k), atol=1e-6)


def test_gradient_is_nonzero_at_initial_temperature():
    h = 72
    bound = math.sqrt(6 / (1 + h))
    logits = torch.empty(h).uniform_(-bound, bound).requires_grad_()
    mask = gumbel_soft_topk(logits, 18, 0.1)
    (mask * torch.randn(h, dtype=torch.float64)).sum().backward()
    assert logits.grad is not None
    assert torch.isfinite(logits.grad).all()
    assert logits.grad.abs().sum() > 1e-3


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_low_precision_logits_are_computed_in_float64(dtype):
    logits = (torch.randn(72) * 3).to(dtype).requires_grad_()
    for t in (0.1, 1e-4, 1e-8):
        mask = gumbel_soft_topk(logits, 18, t)
        assert mask.dtype == torch.float64
        assert torch.isfinite(mask).all()
        assert mask.sum().item() == pytest.approx(18, abs=1e-6)
    mask.sum().backward()
    assert torch.isfinite(logits.grad.float()).all()


def test_hard_topk_is_deterministic_on_ties_and_exact():
    scores = torch.tensor([1.0, 3.0, 3.0, 0.0, 3.0])
    mask = hard_topk_mask(scores, 2)
    assert mask.tolist() == [0.0, 1.0, 1.0, 0.0, 0.0]
    assert hard_topk_mask(scores, 0).sum() == 0


def test_distance_from_khot():
    assert distance_from_khot(torch.tensor([1.0, 0.0, 1.0]), 2) == 0
    assert distance_from_khot(torch.tensor([0.5, 0.5, 1.0]), 2) == pytest.approx(0.25)


def test_invalid_k_is_rejected():
    with pytest.raises(ValueError, match=r"\[1, 3\]"):
        soft_topk(torch.zeros(3), 4, 0.1)
