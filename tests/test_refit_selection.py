"""bench/refit_selection.py's pure parts: the exact subset errors and the budget allocation."""

import itertools
import random
import sys

import torch
from conftest import ROOT

from dsp_fairseq.pruning.reconstruct import LinearRefit

sys.path.insert(0, str(ROOT / "bench"))
from refit_selection import allocate, subset_errors  # noqa: E402


def test_a_duplicated_head_costs_nothing_and_the_errors_match_a_direct_fit():
    torch.manual_seed(0)
    heads, dim, rows = 3, 4, 400
    x = torch.randn(rows, heads * dim, dtype=torch.float64)
    x[:, dim : 2 * dim] = x[:, :dim] * 2.0  # head 1 is head 0, scaled
    w, b = torch.randn(5, heads * dim, dtype=torch.float64), torch.randn(5, dtype=torch.float64)
    y = x @ w.T + b
    fit = LinearRefit(heads * dim, 5)
    fit.add_batch(x[:200], y[:200])
    fit.add_batch(x[200:], y[200:])
    errors = subset_errors(fit, heads, dim, ridge=0.0)
    assert len(errors) == 2**heads
    # without head 1 (or head 0) the others reproduce the output exactly
    assert errors[(0, 2)] < 1e-6 * errors[()] and errors[(1, 2)] < 1e-6 * errors[()]
    assert errors[(0, 1)] > 1e-2 * errors[()]  # head 2 is not recoverable
    # each error is that of a direct least-squares fit from those columns and a bias
    for subset in [(), (2,), (0, 1)]:
        cols = [h * dim + j for h in subset for j in range(dim)]
        xa = torch.cat([x[:, cols], torch.ones(rows, 1, dtype=torch.float64)], dim=1)
        sol = torch.linalg.lstsq(xa, y, driver="gelsd").solution  # rank-deficient: SVD
        direct = float(((xa @ sol - y) ** 2).sum())
        assert abs(errors[subset] - direct) <= 1e-6 * max(direct, 1.0)


def test_allocation_is_the_exact_optimum_of_the_budget():
    rng = random.Random(3)
    for _ in range(20):
        curves = []
        for _ in range(4):
            c = sorted((rng.random() * 10 for _ in range(5)), reverse=True)
            curves.append(c)  # error with 0..4 heads kept, falling
        budget = rng.randint(0, 16)
        counts = allocate(curves, budget)
        assert sum(counts) == budget
        best = min(
            sum(c[k] for c, k in zip(curves, ks))
            for ks in itertools.product(range(5), repeat=4)
            if sum(ks) == budget
        )
        assert abs(sum(c[k] for c, k in zip(curves, counts)) - best) < 1e-9
