"""fairseq-train arguments for pipelined pruning of a trained model.

    python -m dsp_fairseq.recipes.pipelined_args --base BASE.pt [--data BIN --max-tokens N]
        [--gate-type TYPE[,TYPE...]]

Prints, one per line, the model arguments that build a ``transformer_dsp`` of
exactly the base checkpoint's shape (so ``--finetune-from-model BASE.pt``
loads it; the gates start fresh) and, with ``--data``, ``--anneal-updates N``
where N is the number of updates in one epoch of the training set at
``--max-tokens`` (the DSP reference anneals the temperature over the one
epoch of gate training). Fails with a clear message on a checkpoint that is
not an unpruned Transformer or on an unknown gate type.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from typing import List

from ..checkpoint_io import CheckpointError, load_checkpoint, model_args

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
DSP_ARCH_OF = {"transformer_iwslt_de_en": "transformer_dsp_iwslt_de_en"}


def _opt(name: str) -> str:
    return "--" + name.replace("_", "-")


def shape_args(state: dict) -> List[str]:
    """Arguments building a gated ``transformer_dsp`` shaped like ``state``'s model."""
    args = model_args(state)
    if getattr(args, "stripped_heads", None):
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
    if not arch.startswith("transformer_dsp"):
        arch = DSP_ARCH_OF.get(arch, "transformer_dsp")
    out = ["--arch", arch]
    for name in SHAPE_VALUES:
        if getattr(args, name, None) is not None:
            out += [_opt(name), str(getattr(args, name))]
    out += [_opt(name) for name in SHAPE_FLAGS if getattr(args, name, False)]
    return out


def updates_per_epoch(data: str, max_tokens: int, update_freq: int = 1) -> int:
    """Updates in one epoch of ``data``'s train split, batched as fairseq-train does."""
    from fairseq.tasks.translation import TranslationConfig, TranslationTask

    cfg = TranslationConfig(data=data)
    # Fields that normally come from the dataset config by interpolation.
    cfg.dataset_impl, cfg.train_subset, cfg.required_seq_len_multiple = None, "train", 1
    task = TranslationTask.setup_task(cfg)
    task.load_dataset("train")
    itr = task.get_batch_iterator(
        task.dataset("train"),
        max_tokens=max_tokens,
        max_positions=(cfg.max_source_positions, cfg.max_target_positions),
        ignore_invalid_inputs=True,
        required_batch_size_multiple=8,
        seed=1,
    )
    return math.ceil(len(itr.next_epoch_itr(shuffle=False)) / update_freq)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--base", required=True, help="trained (unpruned) checkpoint")
    parser.add_argument("--data", help="fairseq binary folder: add --anneal-updates (1 epoch)")
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--update-freq", type=int, default=1)
    parser.add_argument("--gate-type", help="check that these (comma-separated) gate types exist")
    args = parser.parse_args(argv)

    import logging
    import warnings

    logging.disable(logging.INFO)  # keep stdout to the arguments alone
    warnings.filterwarnings("ignore", message=".*pin_memory.*")
    from .. import gates

    unknown = [g for g in (args.gate_type or "").split(",") if g and g not in gates.GATE_REGISTRY]
    if unknown:
        print(
            f"pipelined_args: error: gate type {', '.join(unknown)} is not available; "
            f"this installation has {', '.join(sorted(gates.GATE_REGISTRY))}",
            file=sys.stderr,
        )
        return 2
    try:
        out = shape_args(load_checkpoint(args.base))
    except CheckpointError as err:
        print(f"pipelined_args: error: {err}", file=sys.stderr)
        return 2
    if args.data:
        if not os.path.isfile(os.path.join(args.data, "dict.en.txt")):
            print(
                f"pipelined_args: error: {args.data} is not a fairseq binary folder",
                file=sys.stderr,
            )
            return 2
        out += [
            "--anneal-updates",
            str(updates_per_epoch(args.data, args.max_tokens, args.update_freq)),
        ]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
