"""Reconstruction of pruned checkpoints: data, models and the saved record.

``reconstruct_checkpoint(pruned_state, base_state, data)`` builds the pruned
(stripped) model and the unpruned base from their checkpoint states on the
fairseq task of ``data``, refits the pruned model with
:func:`~dsp_fairseq.pruning.reconstruct.reconstruct` on shuffled training
batches, and returns a new stripped state that records what was done
(``dsp_reconstruction``). It is an ordinary stripped checkpoint afterwards.
"""

from __future__ import annotations

import os
import time
from itertools import islice
from typing import Callable, Dict, List, Optional, Tuple

import torch

from ..checkpoint_io import CheckpointError, model_args
from ..checkpoint_models import batch_epochs, model_from_state, setup_task
from .layer_inputs import DEFAULT_CACHE_MB
from .reconstruct import ReconstructionReport, reconstruct
from .strip import prunable_slots, strip_checkpoint

#: best measured defaults (bench/RESULTS.md, "Reconstruction")
DEFAULT_BATCHES = 20
DEFAULT_RIDGE = 1e-3
DEFAULT_TARGET = "residual"
DEFAULT_REFIT_FFN = True
DEFAULT_REFIT_FC1 = False
DEFAULT_REFIT_QKV = False
DEFAULT_RIDGE_TOWARD = "zero"
DEFAULT_MAX_TOKENS = 4096


def calibration_batches(
    task,
    model,
    num_batches: int,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    seed: int = 1,
    subset: str = "train",
) -> Callable[[], List[dict]]:
    """A function returning the same ``num_batches`` shuffled batches of ``subset`` each call.

    Shuffled (fairseq's own iterator, ``seed``) so that the batches are a sample
    of all sentence lengths, not the shortest ones; read once and kept, since
    they are used once per refit layer (N batches of ~``max_tokens`` tokens).
    """
    epoch, _ = batch_epochs(
        task, model, subset, max_tokens, seed=seed, shuffle=True, error=f"--data: no {subset} split"
    )
    itr = epoch()
    samples = [s for s in islice(itr, num_batches) if s]
    if not samples:
        raise CheckpointError(f"--data: the {subset} split has no usable batch")
    return lambda: samples


def all_heads(state: dict) -> Dict[str, List[int]]:
    return {s.prefix: list(range(s.num_heads)) for s in prunable_slots(state)}


def reconstruct_checkpoint(
    pruned_state: dict,
    base_state: dict,
    data: str,
    num_batches: int = DEFAULT_BATCHES,
    ridge: float = DEFAULT_RIDGE,
    target: str = DEFAULT_TARGET,
    refit_ffn: bool = DEFAULT_REFIT_FFN,
    refit_fc1: bool = DEFAULT_REFIT_FC1,
    refit_qkv: bool = DEFAULT_REFIT_QKV,
    ridge_toward: str = DEFAULT_RIDGE_TOWARD,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    seed: int = 1,
    progress: Optional[Callable[[str], None]] = None,
    cache_mb: float = DEFAULT_CACHE_MB,
) -> Tuple[dict, ReconstructionReport]:
    """A copy of the stripped ``pruned_state`` refit against the unpruned ``base_state``.

    ``base_state`` may be a stock ``transformer`` or a ``transformer_dsp`` checkpoint
    (a gated one counts with all its heads). ``cache_mb``: see
    :func:`~dsp_fairseq.pruning.reconstruct.reconstruct` (speed only, same result).
    """

    if num_batches < 1:
        raise CheckpointError(f"--calibration-batches {num_batches} must be >= 1")
    if not getattr(model_args(pruned_state), "stripped_heads", None):
        raise CheckpointError(
            "the pruned checkpoint is not stripped (no --stripped-heads in its config): "
            "reconstruction refits a pruned model; strip it with dsp-strip (a head set: the "
            "gate's test mask, --importance or --random) and --reconstruct"
        )
    if refit_qkv and not isinstance(pruned_state.get("dsp_kept_heads"), dict):
        raise CheckpointError(
            "the pruned checkpoint does not record which heads it kept (dsp_kept_heads), "
            "which the q/k/v refit needs; strip it with dsp-strip, or reconstruct without "
            "--refit-qkv"
        )
    teacher_state, _ = strip_checkpoint(base_state, kept=all_heads(base_state))
    task, data = setup_task(pruned_state, data)
    student = model_from_state(pruned_state, task, "the pruned checkpoint")
    teacher = model_from_state(teacher_state, task, "the unpruned checkpoint")
    _check_same_model(student, teacher)
    start = time.time()
    batches = calibration_batches(task, student, num_batches, max_tokens, seed)
    if len(batches()) < num_batches and progress is not None:
        progress(
            f"note: the training split has only {len(batches())} batches of {max_tokens} "
            f"tokens, not {num_batches}; calibrating on all of them"
        )
    report = reconstruct(
        student,
        teacher,
        batches,
        ridge=ridge,
        target=target,
        refit_ffn=refit_ffn,
        refit_fc1=refit_fc1,
        refit_qkv=refit_qkv,
        kept=pruned_state.get("dsp_kept_heads") if refit_qkv else None,
        ridge_toward=ridge_toward,
        progress=progress,
        cache_mb=cache_mb,
    )
    new_state = dict(pruned_state)
    new_model = dict(pruned_state["model"])
    live = student.state_dict()
    for name, old in pruned_state["model"].items():  # the refit layers' tensors
        if name in live and not torch.equal(live[name], old.to(live[name].dtype)):
            new_model[name] = live[name].detach().clone().to(old.dtype)
    new_state["model"] = new_model
    record = report.as_dict()
    record.update(
        data=os.path.abspath(data),
        seed=seed,
        max_tokens=max_tokens,
        refit_ffn=refit_ffn,
        refit_fc1=refit_fc1,
        refit_qkv=refit_qkv,
        seconds=round(time.time() - start, 1),
    )
    new_state["dsp_reconstruction"] = record
    return new_state, report


def _check_same_model(student, teacher) -> None:
    """The pruned model must be the base with heads removed: same dictionaries and sizes."""
    s = {k: v.shape for k, v in student.state_dict().items()}
    t = {k: v.shape for k, v in teacher.state_dict().items()}
    attn = (".q_proj.", ".k_proj.", ".v_proj.", ".out_proj.")
    diff = [k for k in s if not any(a in k for a in attn) and (k not in t or t[k] != s[k])]
    if diff:
        raise CheckpointError(
            f"the pruned checkpoint is not a pruned copy of the base: {diff[0]} has shape "
            f"{tuple(s[diff[0]])} there and {tuple(t[diff[0]]) if diff[0] in t else 'none'} "
            "in the base (other dictionaries or model sizes?)"
        )
