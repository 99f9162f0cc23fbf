"""Use a stock fairseq ``transformer`` checkpoint's config as a ``transformer_dsp`` one.

A stock Transformer's weights load into ``transformer_dsp`` unchanged (the
gated attention keeps fairseq's parameter names). Its saved config already
holds every Transformer option, so switching the architecture name to a
``transformer_dsp`` architecture only adds the DSP options (defaults; no gate).
This is how importance scoring and ``dsp-strip --importance/--random`` handle
checkpoints that were never trained with gates.
"""

from __future__ import annotations

import argparse
import copy

from ..checkpoint_io import CheckpointError

# Stock architecture -> the transformer_dsp architecture with the same defaults.
# Any other architecture of fairseq's `transformer` model maps to plain
# `transformer_dsp`: the saved config sets every option explicitly anyway.
DSP_ARCH_FOR_STOCK = {"transformer_iwslt_de_en": "transformer_dsp_iwslt_de_en"}


def arch_of(args) -> str | None:
    """The architecture fairseq builds for ``args``: ``_name`` wins over ``arch``."""
    return getattr(args, "_name", None) or getattr(args, "arch", None)


# The architectures models/transformer_dsp.py registers (a test checks the two agree):
# known without fairseq's registry, so that stripping a gated checkpoint (dsp-strip's
# common case) needs no fairseq import (~3 s per call here).
DSP_ARCHS = frozenset({"transformer_dsp", "transformer_dsp_iwslt_de_en", "transformer_dsp_small"})


def model_class_of(arch):
    """The model class fairseq registers ``arch`` for (the plugin registered first)."""
    import dsp_fairseq

    dsp_fairseq.register()
    from fairseq.models import ARCH_MODEL_REGISTRY

    return ARCH_MODEL_REGISTRY.get(arch)


def is_dsp_arch(arch) -> bool:
    if arch in DSP_ARCHS:
        return True
    cls = model_class_of(arch)
    return cls is not None and cls.__name__ == "TransformerDSPModel"


def is_stock_transformer_arch(arch) -> bool:
    """True for architectures of fairseq's own ``transformer`` model (not subclasses)."""
    from fairseq.models.transformer import TransformerModel

    return model_class_of(arch) is TransformerModel


def dsp_model_args(args: argparse.Namespace) -> argparse.Namespace:
    """A copy of a checkpoint's model config that builds a ``transformer_dsp`` model.

    ``transformer_dsp`` configs are copied as they are; stock ``transformer``
    configs get a ``transformer_dsp`` architecture and no gate
    (``gate_type="none"``). Anything else raises :class:`CheckpointError`.
    """
    arch = arch_of(args)
    new = copy.copy(args)
    if is_dsp_arch(arch):
        return new
    if not is_stock_transformer_arch(arch):
        raise CheckpointError(
            f"architecture {arch!r} is neither a transformer_dsp architecture nor one of "
            "fairseq's `transformer` model (e.g. transformer, transformer_iwslt_de_en); "
            "its attention heads cannot be scored or removed"
        )
    new.arch = DSP_ARCH_FOR_STOCK.get(arch, "transformer_dsp")
    if hasattr(new, "_name"):
        new._name = new.arch
    new.gate_type = "none"
    for key in ("heads_to_keep", "heads_to_keep_per_type", "heads_per_attention", "stripped_heads"):
        setattr(new, key, None)
    new.train_gates_only = False
    new.freeze_gates = False
    new.train_only = None
    return new
