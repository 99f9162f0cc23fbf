"""dsp-importance: score every attention head of a trained checkpoint (Michel et al. 2019).

    dsp-importance --path checkpoints/checkpoint_best.pt --data data-bin \\
        --subset valid --output scores.json
    dsp-strip --input checkpoints/checkpoint_best.pt --output pruned.pt \\
        --importance scores.json --heads-to-keep 24

Works on stock fairseq ``transformer`` checkpoints (loaded as ``transformer_dsp``
without gates) and on ``transformer_dsp`` ones (a gated model keeps its test
mask). The score of a head is the absolute gradient of the loss with respect
to a head mask at 1, accumulated per target token and divided by the number
of tokens; --iterative masks the lowest 10% of heads at a time and
re-estimates until --heads-to-keep remain.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from itertools import islice

from .data_folder import DataFolderError, binaries_folder, missing_file

# torch and fairseq are imported in main(), after the arguments are parsed.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-importance",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--path", required=True, help="trained checkpoint (.pt)")
    parser.add_argument(
        "--data",
        required=True,
        help="fairseq binaries folder (dict.SRC.txt, dict.TGT.txt, SPLIT.*.bin), or the "
        "prepared corpus folder holding it in bin/",
    )
    parser.add_argument("--subset", default="valid", help="data split to score on (default: valid)")
    parser.add_argument("--max-tokens", type=int, default=4096, help="tokens per batch")
    parser.add_argument("--max-batches", type=int, help="use only the first N batches")
    parser.add_argument(
        "--granularity",
        choices=("token", "sentence", "batch"),
        default="token",
        help="unit over which |gradient| is taken: target token (default: the paper's "
        "per-example definition taken per token; see docs/methods.md), sentence, or batch "
        "(what the authors' code does); token costs one backward pass per target position",
    )
    parser.add_argument(
        "--normalize-per-layer",
        action="store_true",
        help="L2-normalise each attention's scores (off by default here; on by default in "
        "Michel et al.'s code, which the paper found helps pruning)",
    )
    parser.add_argument(
        "--iterative",
        action="store_true",
        help="mask the least important heads step by step, re-estimating after each step",
    )
    parser.add_argument(
        "--heads-to-keep", type=int, metavar="K", help="with --iterative: stop at K heads"
    )
    parser.add_argument(
        "--step-fraction",
        type=float,
        default=0.1,
        help="with --iterative: fraction of all heads masked per step (default: 0.1)",
    )
    parser.add_argument(
        "--cache-dir",
        metavar="DIR",
        help="with --iterative: keep every estimate in DIR and reuse the ones found there "
        "(same checkpoint, data and options); runs to several K share their common steps",
    )
    parser.add_argument("--cpu", action="store_true", help="run on CPU even if CUDA is available")
    parser.add_argument("--output", required=True, help="where to write the scores (JSON)")
    parser.add_argument(
        "--force", action="store_true", help="replace an existing --output (refused without it)"
    )
    return parser


def load_model_and_task(path: str, data: str):
    """The checkpoint's model built as ``transformer_dsp`` (strict load), its task and
    its own saved model config."""
    from ..checkpoint_io import load_checkpoint, model_args
    from ..checkpoint_models import model_from_state, setup_task

    state = load_checkpoint(path)
    task, _ = setup_task(state, data)
    return model_from_state(state, task, path), task, model_args(state)


def batch_factory(task, model, subset: str, max_tokens: int, max_batches, device):
    """A function returning a fresh iterator over the same batches each call."""
    from fairseq import utils

    from ..checkpoint_models import batch_epochs

    epoch, dataset = batch_epochs(task, model, subset, max_tokens, error=f"--subset {subset}")

    def batches():
        for sample in islice(epoch(), max_batches):
            if sample and device.type == "cuda":
                sample = utils.move_to_cuda(sample)
            if sample:
                yield sample

    return batches, dataset


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.iterative and args.heads_to_keep is None:
        parser.error("--iterative needs --heads-to-keep K (the number of heads to stop at)")
    if args.heads_to_keep is not None and not args.iterative:
        parser.error(
            "--heads-to-keep is only used with --iterative; "
            "give K to dsp-strip --importance instead"
        )
    if args.cache_dir is not None and not args.iterative:
        parser.error("--cache-dir is only used with --iterative")
    if args.max_batches is not None and args.max_batches < 1:
        parser.error("--max-batches must be >= 1")
    problem = missing_file("--path", args.path, "a trained checkpoint (.pt) to score")
    if problem:
        print(f"dsp-importance: error: {problem}", file=sys.stderr)
        return 2
    try:
        data, note = binaries_folder("--data", args.data)
    except DataFolderError as err:
        print(f"dsp-importance: error: {err}", file=sys.stderr)
        return 2

    import torch

    import dsp_fairseq

    dsp_fairseq.register()  # the model, criterion and checkpoint types, now that args are valid

    from ..checkpoint_io import CheckpointError
    from ..importance import head_importance, iterative_head_importance
    from ..importance.michel import attention_modules
    from ..importance.scores_file import (
        EstimateCache,
        file_sha256,
        importance_document,
        write_json_atomic,
    )

    def say(msg: str) -> None:
        # Progress goes to stderr; stdout carries only the result (the scores, the file).
        print(f"dsp-importance: {msg}", file=sys.stderr, flush=True)

    if note:
        say(note)

    try:
        folder = os.path.dirname(os.path.abspath(args.output))
        if not os.path.isdir(folder):
            raise CheckpointError(f"--output {args.output}: folder {folder} does not exist")
        if os.path.exists(args.output) and os.path.samefile(args.output, args.path):
            raise CheckpointError("--output is the checkpoint itself; choose another path")
        if os.path.exists(args.output) and not args.force:
            raise CheckpointError(
                f"--output {args.output} exists; pass --force to replace it or choose another path"
            )
        model, task, saved_cfg = load_model_and_task(args.path, data)
        device = torch.device("cuda" if torch.cuda.is_available() and not args.cpu else "cpu")
        model.to(device)
        batches, dataset = batch_factory(
            task, model, args.subset, args.max_tokens, args.max_batches, device
        )
        say(f"{saved_cfg.arch}, {args.subset}: {len(dataset)} sentences, device {device}")
        start = time.time()

        def progress(batch: int, tokens: int) -> None:
            say(f"  batch {batch}: {tokens} target tokens so far ({time.time() - start:.1f}s)")

        def on_step(step: int, left: int, masked) -> None:
            say(f"step {step}: masked {len(masked)} heads, {left} left; re-estimating")

        if args.iterative:
            cache = None
            if args.cache_dir is not None:
                fingerprint = {
                    "checkpoint_sha256": file_sha256(args.path),
                    "data": os.path.abspath(data),
                    "subset": args.subset,
                    "max_tokens": args.max_tokens,
                    "max_batches": args.max_batches,
                    "granularity": args.granularity,
                    "normalize_per_layer": args.normalize_per_layer,
                }
                slots = [slot for slot, _ in attention_modules(model)]
                cache = EstimateCache(args.cache_dir, fingerprint, slots)
                say(f"estimates cached in {args.cache_dir} ({len(cache)} there for this model)")
            result = iterative_head_importance(
                model,
                batches,
                args.heads_to_keep,
                step_fraction=args.step_fraction,
                granularity=args.granularity,
                normalize=args.normalize_per_layer,
                progress=progress,
                on_step=on_step,
                cache=cache,
            )
            if cache is not None:
                say(f"{cache.hits} estimates reused from {args.cache_dir}, {cache.stored} made")
        else:
            result = head_importance(
                model,
                batches(),
                granularity=args.granularity,
                normalize=args.normalize_per_layer,
                progress=progress,
            )
        metadata = {
            "checkpoint": os.path.abspath(args.path),
            "arch": getattr(saved_cfg, "arch", None),
            "data": os.path.abspath(data),
            "subset": args.subset,
            "max_tokens": args.max_tokens,
            "max_batches": args.max_batches,
            "granularity": args.granularity,
            "loss": "token nll (no label smoothing), eval mode",
            "normalize_per_layer": args.normalize_per_layer,
            "iterative": args.iterative,
            "heads_to_keep": args.heads_to_keep,
            "step_fraction": args.step_fraction if args.iterative else None,
        }
        write_json_atomic(importance_document(result, metadata), args.output)
    except (CheckpointError, ValueError) as err:
        print(f"dsp-importance: error: {err}", file=sys.stderr)
        return 2
    for slot, scores in zip(result.slots, result.per_slot().values()):
        text = " ".join(f"{s:.4g}" for s in scores) or "(no heads)"
        print(f"{slot.kind:<8} layer {slot.layer}: {text}")
    print(
        f"wrote {args.output} ({sum(s.num_heads for s in result.slots)} heads, "
        f"{result.num_tokens} tokens, {time.time() - start:.1f}s)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
