"""Reading and writing fairseq checkpoints safely.

Loading goes through torch's weights-only unpickler with the plugin's
allowlist (see :mod:`dsp_fairseq.safe_loading`); anything else pickled into a
file is refused, not executed. Writing goes to a temporary file in the target
folder and is renamed into place, so a crash never leaves half a checkpoint.
"""

from __future__ import annotations

import argparse
import os
import pickle
import tempfile
from typing import Any, Dict

import torch

from .safe_loading import allow_fairseq_checkpoint_types


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for what was asked; the message says why."""


def load_checkpoint(path: str) -> Dict[str, Any]:
    """Load a fairseq checkpoint on CPU with weights-only unpickling."""
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    allow_fairseq_checkpoint_types()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        raise CheckpointError(
            f"{path}: refused to load: it pickles an object outside the allowlist of "
            f"fairseq checkpoint types, which could run arbitrary code ({err}). "
            "Only load it with weights_only=False if you trust its origin."
        ) from err
    except (RuntimeError, EOFError, OSError, ValueError) as err:
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or corrupt?): {err}"
        ) from err
    if not isinstance(state, dict) or "model" not in state:
        raise CheckpointError(f"{path}: not a fairseq checkpoint (no 'model' entry)")
    return state


def model_args(state: Dict[str, Any]) -> argparse.Namespace:
    """The model's configuration stored in a fairseq checkpoint."""
    cfg = state.get("cfg") or {}
    args = cfg.get("model") if isinstance(cfg, dict) else None
    if args is None:
        args = state.get("args")
    if not isinstance(args, argparse.Namespace):
        raise CheckpointError(
            "checkpoint has no argparse model configuration (cfg.model); "
            "was it written by fairseq-train?"
        )
    return args


def save_checkpoint_atomic(state: Dict[str, Any], path: str) -> None:
    """``torch.save`` to a temporary file beside ``path``, then rename over it."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CheckpointError(f"{path}: output folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
