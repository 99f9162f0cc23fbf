"""Heads chosen by what the refit can recover: exact per-attention subsets, global DP.

An experiment on issue 17 (selection that sees the recovery), not a pruning method of the
plugin yet. For every attention of the unpruned model, the calibration batches of
``dsp-reconstruct`` give the Gram matrix of its out_proj input (the concatenated head
outputs, plus a bias column) and its cross term with the attention's own output. The
least-squares error of the best refit from any subset S of heads follows from those two
matrices alone (ridge as in the refit), so with 8 heads per attention every one of the 256
subsets is scored exactly: ``E_a(S)``. A dynamic programme then spreads the global budget K
over the attentions, minimising the sum of the per-attention errors of their best subsets,
and the chosen heads are stripped from the unpruned model and reconstructed with the
default ``dsp-reconstruct`` (the refit every "+ reconstruct" row gets).

Errors are per-token normalised by the residual stream after the sublayer (the sum the
post-norm LayerNorm divides by its scale), so that attentions of different depths count on
one scale (``--norm stream``); ``--norm none`` sums raw squared errors.

    python bench/refit_selection.py --data ../shared/data/multi30k-base72/data \\
        --base ../shared/data/multi30k-base72/checkpoint.pt --ks 36,18,9 --out work/refit-selection

Writes OUT/kK/pruned.pt (selection + default reconstruction), OUT/results.json (test and
valid sacreBLEU, heads per attention, seconds) and prints one JSON row per K.
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import time
from typing import Dict, List, Sequence, Tuple

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from bench.common import baseline_parser, evaluate_scores  # noqa: E402


def subset_errors(fit, num_heads: int, head_dim: int, ridge: float) -> Dict[Tuple[int, ...], float]:
    """Least-squares error of the best refit from each subset of heads (bias always kept)."""
    import torch

    n = fit.in_features
    gram = fit.gram.clone()  # ridge as in LinearRefit.solve (relative to the mean diagonal)
    diag = torch.diagonal(gram)[:n]
    diag += ridge * float(diag.mean().clamp_min(1e-12))
    errors = {}
    for k in range(num_heads + 1):
        for subset in itertools.combinations(range(num_heads), k):
            cols = [h * head_dim + j for h in subset for j in range(head_dim)] + [n]
            idx = torch.tensor(cols)
            g = gram[idx][:, idx]
            c = fit.cross[idx]
            try:
                sol = torch.linalg.solve(g, c)
            except RuntimeError:  # singular (ridge 0 with dependent heads)
                sol = torch.linalg.pinv(g) @ c
            # the refit's own error formula, on the solution with zeros for the dropped heads
            weight = torch.zeros(n, sol.size(1), dtype=sol.dtype)
            weight[idx[:-1]] = sol[:-1]
            errors[subset] = fit.residual_error(weight.T, sol[-1]) * fit.target_sq
    return errors


def allocate(curves: Sequence[Sequence[float]], budget: int) -> List[int]:
    """Heads per attention minimising the summed error of each attention's best subset."""
    inf = float("inf")
    best = [0.0] + [inf] * budget  # best[b]: least error with b heads over the attentions so far
    choice = []
    for curve in curves:
        new, pick = [inf] * (budget + 1), [0] * (budget + 1)
        for b in range(budget + 1):
            for k, err in enumerate(curve):
                if k <= b and best[b - k] + err < new[b]:
                    new[b], pick[b] = best[b - k] + err, k
        best = new
        choice.append(pick)
    counts, b = [], budget
    for pick in reversed(choice):
        counts.append(pick[b])
        b -= pick[b]
    return counts[::-1]


def main() -> int:
    p = baseline_parser(__doc__, "36,18,9", "the unpruned checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument("--norm", choices=("stream", "none"), default="stream")
    p.add_argument("--calibration-batches", type=int, default=20)
    p.add_argument("--ridge", type=float, default=1e-3)
    p.add_argument("--no-eval", action="store_true", help="only select, strip and refit")
    args = p.parse_args()

    import torch

    import dsp_fairseq  # noqa: F401
    from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
    from dsp_fairseq.checkpoint_models import model_from_state, setup_task
    from dsp_fairseq.pruning.calibrate import (
        all_heads,
        calibration_batches,
        reconstruct_checkpoint,
    )
    from dsp_fairseq.pruning.reconstruct import LinearRefit, _capture, _positions, forward_order
    from dsp_fairseq.pruning.strip import strip_checkpoint

    torch.set_grad_enabled(False)
    os.makedirs(args.out, exist_ok=True)
    bin_dir = os.path.join(args.data, "bin")
    base = load_checkpoint(args.base)
    full, _ = strip_checkpoint(base, kept=all_heads(base))
    task, _ = setup_task(full, bin_dir)
    model = model_from_state(full, task, "the unpruned checkpoint").eval()
    pad = model.decoder.dictionary.pad()
    batches = calibration_batches(task, model, args.calibration_batches)
    start = time.time()
    prefixes = forward_order(model)
    # the curves depend on the model, the batches, the norm and the ridge only: cached, so
    # that another K (or a rerun after an interruption) skips the captures
    cache = os.path.join(
        args.out, f"curves-{args.norm}-n{args.calibration_batches}-r{args.ridge:g}.json"
    )
    if os.path.exists(cache):
        with open(cache) as f:
            saved = json.load(f)
        curves = saved["curves"]
        subsets = [{int(k): tuple(v) for k, v in best.items()} for best in saved["subsets"]]
        select_seconds = saved["seconds"]
    else:
        curves, subsets = [], []
        for prefix in prefixes:
            attn = model.get_submodule(prefix)
            fit = LinearRefit(attn.out_proj.in_features, attn.out_proj.out_features)
            for sample in batches():
                got = _capture(model, prefix, sample, "attn")
                x, y = got["x"].double(), got["out"].double()
                if args.norm == "stream":  # per token, by the residual stream after the sublayer
                    scale = (y + got["residual"].double()).norm(dim=-1, keepdim=True)
                    x, y = x / scale.clamp_min(1e-6), y / scale.clamp_min(1e-6)
                fit.add_batch(x, y, _positions(sample, prefix, pad))
            errors = subset_errors(fit, attn.num_heads, attn.head_dim, args.ridge)
            best = {}
            for subset, err in errors.items():
                if len(subset) not in best or err < errors[best[len(subset)]]:
                    best[len(subset)] = subset
            curves.append([errors[best[k]] for k in range(attn.num_heads + 1)])
            subsets.append(best)
            print(
                f"{prefix}: best-subset error by heads kept "
                + " ".join(f"{e:.3g}" for e in curves[-1]),
                file=sys.stderr,
                flush=True,
            )
        select_seconds = time.time() - start
        with open(cache + ".tmp", "w") as f:
            json.dump({"curves": curves, "subsets": subsets, "seconds": select_seconds}, f)
        os.replace(cache + ".tmp", cache)
    table = os.path.join(args.out, "results.json")
    rows = json.load(open(table)) if os.path.exists(table) else []
    for k in [int(k) for k in args.ks.split(",")]:
        t0 = time.time()
        counts = allocate(curves, k)
        kept = {prefix: list(subsets[i][c]) for i, (prefix, c) in enumerate(zip(prefixes, counts))}
        stripped, _ = strip_checkpoint(base, kept=kept)
        rec, _ = reconstruct_checkpoint(stripped, base, bin_dir)
        folder = os.path.join(args.out, f"k{k}")
        os.makedirs(folder, exist_ok=True)
        ckpt = os.path.join(folder, "pruned.pt")
        save_checkpoint_atomic(rec, ckpt)
        row = {
            "k": k,
            "norm": args.norm,
            "heads_per_attention": dict(zip(prefixes, counts)),
            "kept": kept,
            "select_seconds": round(select_seconds, 1),
            "strip_refit_seconds": round(time.time() - t0, 1),
        }
        if not args.no_eval:
            for subset, key in (("test", "test_sacrebleu"), ("valid", "valid_sacrebleu")):
                row[key] = evaluate_scores(
                    args.data, ckpt, os.path.join(folder, f"eval-{subset}"), subset
                )["sacrebleu"]
        print(json.dumps(row), flush=True)
        rows = [r for r in rows if (r["k"], r["norm"]) != (k, args.norm)] + [row]
        with open(table + ".tmp", "w") as f:
            json.dump(rows, f, indent=1)
        os.replace(table + ".tmp", table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
