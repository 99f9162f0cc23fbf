#!/usr/bin/env python3
"""BLEU of fairseq's own head removal (``MultiheadAttention._adaptive_prune_heads``).

fairseq keeps, in every attention, the heads with the largest summed |q/k/v weights|, the
same number in each. This script applies exactly that choice to a trained stock checkpoint
through ``dsp-strip``'s surgery (it gives fairseq's outputs: tests/test_surgery.py and the
speed benchmark check it) and scores the result with ``examples/translation/evaluate.sh``,
the evaluation of every other row of the quality benchmark.

    python bench/fairseq_prune_quality.py --data work/quality/data \
        --base work/quality/baseline/checkpoint_best.pt --ks 9,18 --out work/quality/fairseq-prune

K must be a multiple of the number of attentions (9 for 3+3 layers). Writes
OUT/kK/pruned.pt, OUT/kK/eval/score.json and OUT/results.json, and prints a table last.

    python bench/fairseq_prune_quality.py ... --ks '' --layouts 2,2;1,2

scores fairseq's choice at uniform layouts ENC,DEC instead (ENC heads in every encoder
self-attention, DEC in every decoder self- and cross-attention; OUT/lENCxDEC/), the layouts of
``--heads-per-attention`` and ``dsp-strip --heads-per-attention``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import speed_bench as sb  # noqa: E402

from bench.common import (  # noqa: E402
    baseline_parser,
    evaluate_scores,
    fairseq_choice_at_layout,
    quiet_fairseq,
)


def main() -> int:
    p = baseline_parser(__doc__, "9,18", "trained stock transformer checkpoint")
    p.add_argument("--layouts", default="", help="uniform layouts ENC,DEC separated by ;")
    p.add_argument("--out", required=True)
    p.add_argument(
        "--reconstruct",
        action="store_true",
        help="also score each model refit by dsp-reconstruct (defaults) against --base "
        "(OUT/.../pruned.rec.pt, rows with reconstruct: true)",
    )
    p.add_argument(
        "--valid",
        action="store_true",
        help="also score every model on the validation split (rows get valid_sacrebleu)",
    )
    args = p.parse_args()
    sb._plugin()
    quiet_fairseq()
    from dsp_fairseq.checkpoint_io import model_args, save_checkpoint_atomic
    from dsp_fairseq.pruning.strip import strip_checkpoint

    state, task, _ = sb.load_test_setup(args.base, os.path.join(args.data, "bin"))
    n_attn = sum(len(v) for v in sb.heads_by_type(model_args(state)).values())
    from dsp_fairseq.models.head_layout import parse_heads_per_attention

    jobs = []
    for k in [int(x) for x in args.ks.split(",") if x.strip()]:
        if k % n_attn:
            p.error(f"K = {k} is not a multiple of the {n_attn} attentions")
        jobs.append((k, None))
    for spec in [x for x in args.layouts.split(";") if x.strip()]:
        jobs.append((None, parse_heads_per_attention(spec)))
    rows = []
    for k, layout in jobs:
        out = os.path.join(args.out, f"k{k}" if layout is None else "l{}x{}".format(*layout))
        os.makedirs(out, exist_ok=True)
        pruned = os.path.join(out, "pruned.pt")
        if not os.path.isfile(pruned):
            if layout is None:
                kept = sb.fairseq_kept_heads(state, k, task)
            else:
                stock, _ = sb.build_variant(state, "stock", 0, task)
                kept = fairseq_choice_at_layout(stock, layout)
            new_state, report = strip_checkpoint(state, kept=kept)
            save_checkpoint_atomic(new_state, pruned)
            print(report.table(), flush=True)
        models = [(pruned, "eval", False)]
        if args.reconstruct:
            rec = os.path.join(out, "pruned.rec.pt")
            if not os.path.isfile(rec):
                subprocess.run(
                    ["dsp-reconstruct", "--pruned", pruned, "--base", args.base,
                     "--data", os.path.join(args.data, "bin"), "--output", rec],
                    check=True,
                )  # fmt: skip
            models.append((rec, "eval-rec", True))
        for ckpt, eval_dir, reconstructed in models:
            score = evaluate_scores(
                args.data, ckpt, os.path.join(out, eval_dir), "test", quiet=False
            )
            if layout is not None:
                k = sum(len(v) for v in kept_heads_of(pruned).values())
            rows.append({"k": k, "layout": None if layout is None else "{},{}".format(*layout),
                         "reconstruct": reconstructed, "sacrebleu": score["sacrebleu"],
                         "tok_bleu": score["tok_bleu"], "checkpoint": ckpt})  # fmt: skip
            if args.valid:
                valid = evaluate_scores(
                    args.data, ckpt, os.path.join(out, eval_dir + "-valid"), "valid", quiet=False
                )
                rows[-1]["valid_sacrebleu"] = valid["sacrebleu"]
    with open(os.path.join(args.out, "results.json"), "w") as f:
        json.dump(rows, f, indent=1)
    print(
        "\n| K | layout | reconstructed | sacreBLEU | tokenized BLEU | valid sacreBLEU |"
        "\n|---|---|---|---|---|---|"
    )
    for r in rows:
        print(
            f"| {r['k']} | {r['layout'] or ''} | {'yes' if r['reconstruct'] else 'no'} | "
            f"{r['sacrebleu']} | {r['tok_bleu']} | {r.get('valid_sacrebleu', '')} |"
        )
    return 0


def kept_heads_of(pruned: str) -> dict:
    from dsp_fairseq.checkpoint_io import load_checkpoint

    return load_checkpoint(pruned)["dsp_kept_heads"]


if __name__ == "__main__":
    sys.exit(main())
