"""Let fairseq checkpoints load under torch's weights-only default.

torch >= 2.6 unpickles checkpoints with ``weights_only=True`` unless told
otherwise, and fairseq 0.12's ``checkpoint_utils`` calls ``torch.load``
without the argument. fairseq checkpoints pickle a few non-tensor types;
allowlisting exactly those keeps safe loading on (never turned off
globally): anything else pickled into a checkpoint is still refused.
"""

from __future__ import annotations

import argparse

import torch

SAFE_CHECKPOINT_GLOBALS = [argparse.Namespace]


def allow_fairseq_checkpoint_types() -> None:
    torch.serialization.add_safe_globals(SAFE_CHECKPOINT_GLOBALS)
