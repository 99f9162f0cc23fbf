"""Let fairseq checkpoints load under torch's weights-only default.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` unless told
otherwise, and fairseq 0.12's ``checkpoint_utils`` calls ``torch.load``
without the argument. fairseq checkpoints pickle a few non-tensor types;
allowlisting exactly those keeps safe loading on (never turned off
globally): anything else pickled into a checkpoint is still refused.

Distributed training needs a few more: when a multi-process run resumes,
rank 0 reads the checkpoint and fairseq's ``broadcast_object`` sends it to
the other ranks with ``torch.save``/``torch.load`` (again without
``weights_only``), after ``load_checkpoint_to_cpu`` has turned its config
into an OmegaConf ``DictConfig`` and the tensors into fairseq placeholders.
Without these types every rank but 0 fails with "Unsupported global:
omegaconf.dictconfig.DictConfig". They are plain data containers (and the
builtin types OmegaConf records as metadata): none runs code when unpickled.
"""

from __future__ import annotations

import argparse
import collections
import typing
from typing import List

import torch


def _plugin_hint() -> type:
    import dsp_fairseq

    return getattr(dsp_fairseq, dsp_fairseq.PLUGIN_HINT)


# argparse.Namespace: fairseq's pickled config; the plugin's marker (dsp_fairseq.PLUGIN_HINT).
SAFE_CHECKPOINT_GLOBALS = [argparse.Namespace, _plugin_hint()]


def broadcast_globals() -> List[object]:
    """Types in the checkpoint state that fairseq broadcasts from rank 0 on resume."""
    from fairseq.distributed.utils import _TensorPlaceholder
    from omegaconf import AnyNode, DictConfig, ListConfig
    from omegaconf.base import ContainerMetadata, Metadata

    return [
        DictConfig,
        ListConfig,
        AnyNode,
        Metadata,
        ContainerMetadata,
        _TensorPlaceholder,
        typing.Any,
        collections.defaultdict,
        dict,
        list,
        int,
    ]


def allow_stored_checkpoint_types() -> None:
    """The types a checkpoint file holds (fairseq 0.12 saves its config as plain
    containers): enough to read one, without importing fairseq (~4 s here), which the
    recipes' small helpers (``dsp_fairseq.recipes``) never need."""
    torch.serialization.add_safe_globals(SAFE_CHECKPOINT_GLOBALS)


def allow_fairseq_checkpoint_types() -> None:
    """Every type above: what a file holds and what fairseq broadcasts between ranks."""
    torch.serialization.add_safe_globals(SAFE_CHECKPOINT_GLOBALS + broadcast_globals())
