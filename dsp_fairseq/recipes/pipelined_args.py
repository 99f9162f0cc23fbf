"""fairseq-train arguments for pipelined pruning of a trained model.

    python -m dsp_fairseq.recipes.pipelined_args --base BASE.pt [--gate-type TYPE[,TYPE...]]
    python -m dsp_fairseq.recipes.pipelined_args --epoch-updates --data BIN [--max-tokens N]
        [--update-freq N] [--base BASE.pt]

Prints, one per line, the model arguments that build a ``transformer_dsp`` of
exactly the base checkpoint's shape (so ``--finetune-from-model BASE.pt``
loads it; the gates start fresh). Fails with a clear message on a checkpoint
that is not an unpruned Transformer or on an unknown gate type.

With ``--epoch-updates`` it prints the number of updates in one epoch of BIN's
training data at ``--max-tokens`` (batched as fairseq-train does, with the base
model's maximum positions when ``--base`` is given); the recipe derives its
validation interval from it. The temperature schedule needs no such number: the
criterion computes the run's length itself.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
from typing import List

from ..checkpoint_io import CheckpointError, load_checkpoint, model_args
from ..models.stock import DSP_ARCH_FOR_STOCK, DSP_ARCHS

SHAPE_VALUES = [
    "encoder_layers",
    "decoder_layers",
    "encoder_embed_dim",
    "decoder_embed_dim",
    "encoder_ffn_embed_dim",
    "decoder_ffn_embed_dim",
    "encoder_attention_heads",
    "decoder_attention_heads",
    "activation_fn",
]
SHAPE_FLAGS = [
    "share_all_embeddings",
    "share_decoder_input_output_embed",
    "encoder_normalize_before",
    "decoder_normalize_before",
    "encoder_learned_pos",
    "decoder_learned_pos",
    "no_token_positional_embeddings",
    "no_scale_embedding",
    "layernorm_embedding",
]


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def shape_args(state: dict, stripped_ok: bool = False) -> List[str]:
    """Arguments building a gated ``transformer_dsp`` shaped like ``state``'s model.

    With ``stripped_ok``, a stripped checkpoint gives the arguments of the same stripped,
    gate-free model (``--stripped-heads``), to fine-tune it with its kept heads fixed.
    """
    args = model_args(state)
    stripped = getattr(args, "stripped_heads", None)
    if stripped and not stripped_ok:
        raise CheckpointError(
            "the base checkpoint is already stripped; pipelined pruning starts from the "
            "unpruned model"
        )
    if "encoder.layers.0.self_attn.q_proj.weight" not in state["model"]:
        raise CheckpointError(
            f"the base checkpoint (arch {getattr(args, 'arch', None)!r}) is not a fairseq "
            "Transformer encoder-decoder"
        )
    arch = getattr(args, "arch", "")
    if arch not in DSP_ARCHS:
        arch = DSP_ARCH_FOR_STOCK.get(arch, "transformer_dsp")
    out = ["--arch", arch]
    for name in SHAPE_VALUES:
        if getattr(args, name, None) is not None:
            out += [_opt(name), str(getattr(args, name))]
    out += [_opt(name) for name in SHAPE_FLAGS if getattr(args, name, False)]
    if stripped:
        out += ["--stripped-heads", stripped, "--gate-type", "none"]
    return out


def epoch_updates(
    data: str, max_tokens: int, update_freq: int = 1, max_positions: int | None = None
) -> int:
    """Updates in one epoch of ``data``'s train split, batched as fairseq-train does."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    from ..criterions.run_length import updates_per_epoch

    cfg = TranslationConfig(data=data)
    if max_positions:
        cfg.max_source_positions = cfg.max_target_positions = max_positions
    # Fields that normally come from the dataset config by interpolation.
    cfg.dataset_impl, cfg.train_subset, cfg.required_seq_len_multiple = None, "train", 1
    task = TranslationTask.setup_task(cfg)
    task.load_dataset("train")
    return updates_per_epoch(
        task,
        task.dataset("train"),
        task.max_positions(),
        max_tokens,
        update_freq=update_freq,
    )


def has_dictionaries(data: str) -> bool:
    """A fairseq binary folder: it has dict.LANG.txt files (any languages, not only en)."""
    return os.path.isdir(data) and len(glob.glob(os.path.join(data, "dict.*.txt"))) >= 1


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", help="trained (unpruned) checkpoint")
    parser.add_argument("--data", help="fairseq binary folder (for --epoch-updates)")
    parser.add_argument(
        "--epoch-updates",
        action="store_true",
        help="print the updates of one epoch of --data at --max-tokens instead",
    )
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--update-freq", type=int, default=1)
    parser.add_argument("--gate-type", help="check that these (comma-separated) gate types exist")
    parser.add_argument(
        "--stripped-ok",
        action="store_true",
        help="accept a stripped --base: print the arguments of that stripped model (fine-tuning)",
    )
    args = parser.parse_args(argv)

    import logging
    import warnings

    logging.disable(logging.INFO)  # keep stdout to the arguments alone
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    from .. import gates

    def fail(message: str) -> int:
        print(f"pipelined_args: error: {message}", file=sys.stderr)
        return 2

    unknown = [g for g in (args.gate_type or "").split(",") if g and g not in gates.GATE_REGISTRY]
    if unknown:
        return fail(
            f"gate type {', '.join(unknown)} is not available; "
            f"this installation has {', '.join(sorted(gates.GATE_REGISTRY))}"
        )

    if args.epoch_updates:
        if not args.data or not has_dictionaries(args.data):
            return fail(f"--data {args.data}: not a fairseq binary folder (no dict.*.txt)")
        max_positions = None
        if args.base:
            try:
                state_args = model_args(load_checkpoint(args.base))
            except CheckpointError as err:
                return fail(str(err))
            max_positions = getattr(state_args, "max_source_positions", None)
        print(epoch_updates(args.data, args.max_tokens, args.update_freq, max_positions))
        return 0
    if not args.base:
        return fail("--base is required")
    try:
        out = shape_args(load_checkpoint(args.base), stripped_ok=args.stripped_ok)
    except CheckpointError as err:
        return fail(str(err))
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
