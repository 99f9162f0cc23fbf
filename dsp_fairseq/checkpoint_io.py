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
import stat
import tempfile
from typing import Any, Dict, Optional

import torch

from .safe_loading import allow_stored_checkpoint_types


class CheckpointError(ValueError):
    """A checkpoint that cannot be used for what was asked; the message says why."""


# What torch's weights-only unpickler says when a file names a type or function
# outside the allowlist, as opposed to bytes that are not a pickle at all.
_REFUSAL_MARKERS = ("GLOBAL", "reduce for unrecognized function", "allowlisted")


def _unpickler_detail(err: Exception) -> str:
    """The specific line of torch's long weights-only error message."""
    text = str(err)
    _, found, rest = text.partition("WeightsUnpickler error:")
    if found:
        text = rest.split("Check the documentation of torch.load")[0]
    return " ".join(text.split())


def load_checkpoint(path: str) -> Dict[str, Any]:
    """Load a fairseq checkpoint on CPU with weights-only unpickling."""
    if os.path.isdir(path):
        raise CheckpointError(f"{path}: is a folder, not a checkpoint file")
    if not os.path.isfile(path):
        raise CheckpointError(f"{path}: no such checkpoint file")
    if os.path.getsize(path) == 0:
        raise CheckpointError(f"{path}: empty file, not a checkpoint")
    allow_stored_checkpoint_types()
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as err:
        detail = _unpickler_detail(err)
        if any(marker in detail for marker in _REFUSAL_MARKERS):
            raise CheckpointError(
                f"{path}: refused to load: it pickles an object outside the allowlist of "
                f"fairseq checkpoint types, which could run arbitrary code ({detail}). "
                "Only load it with weights_only=False if you trust its origin."
            ) from err
        # e.g. "Unsupported operand": random bytes, or a raw pickle using opcodes
        # the safe unpickler does not implement; either way nothing was run.
        raise CheckpointError(
            f"{path}: refused to load: torch's safe (weights-only) loader cannot read it "
            f"(truncated or corrupt? or pickled outside the allowlist): {detail}"
        ) from err
    except Exception as err:  # noqa: BLE001
        # Bytes that are not a torch file fail deep inside the unpickler with
        # whatever error the garbage triggers (KeyError, IndexError, EOFError,
        # RuntimeError from the zip reader, ...): all mean "unreadable".
        raise CheckpointError(
            f"{path}: not a readable checkpoint (truncated or corrupt?): "
            f"{type(err).__name__}: {err}"
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


def save_checkpoint_atomic(
    state: Dict[str, Any], path: str, mode_like: Optional[str] = None
) -> None:
    """``torch.save`` to a temporary file beside ``path``, fsync, then rename over it.

    The file gets the permission bits of ``mode_like`` (e.g. the input
    checkpoint) if given, else those of a newly created file (0666 less the
    umask), not the 0600 of the temporary file. The plugin's marker is written first
    (``dsp_fairseq.PLUGIN_KEY``): without the plugin, torch's refusal then names it.
    """
    import dsp_fairseq

    hint = getattr(dsp_fairseq, dsp_fairseq.PLUGIN_HINT)
    state = {
        dsp_fairseq.PLUGIN_KEY: hint,
        **{k: v for k, v in state.items() if k != dsp_fairseq.PLUGIN_KEY},
    }
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise CheckpointError(f"{path}: output folder {folder} does not exist")
    if os.path.isdir(path):
        raise CheckpointError(f"{path} is a folder; give the path of the file to write")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".pt", dir=folder)
    except OSError as err:
        raise CheckpointError(f"{path}: cannot write in {folder}: {err}") from err
    try:
        if mode_like is not None:
            mode = stat.S_IMODE(os.stat(mode_like).st_mode)
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        with os.fdopen(fd, "wb") as f:
            torch.save(state, f)
            f.flush()
            os.fsync(f.fileno())  # the data is on disk before the name points to it
        os.chmod(tmp, mode)
        os.replace(tmp, path)
        _fsync_folder(folder)
    except BaseException as err:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(err, OSError):  # e.g. disk full: say so, nothing was written
            raise CheckpointError(f"{path}: writing failed, nothing written: {err}") from err
        raise


def _fsync_folder(folder: str) -> None:
    """Make the rename itself durable (POSIX); not possible on every platform."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
