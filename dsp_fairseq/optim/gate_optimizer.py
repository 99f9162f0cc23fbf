"""A constant learning rate for the gate logits, whatever optimizer fairseq runs.

fairseq builds one optimizer over all parameters and one LR schedule that
overwrites every param group's LR on each update, and the default
(flattened) fp16 wrapper copies parameters into a single buffer. The DSP
reference trains the logits with their own constant LR and no weight decay.
To get that without replacing the user's ``--optimizer``, gate logits are
tagged (attribute ``dsp_gate_lr``; not fairseq's ``param_group``, which
``--optimizer composite`` uses as its grouping key), and a step pre-hook,
which torch calls before ``optimizer.step()``, applies an Adam update to the
tagged parameters that the optimizer holds and then hides their gradient from
it. The hook is installed when the first gate is built and leaves optimizers
without gate logits alone. fairseq's FP16Optimizer steps float32 copies of
the parameters; the logits stay float32 (``HeadGate._apply``), so their copy
shares their storage, which is how the hook recognises it.

The Adam moments live in the main optimizer's per-parameter ``state``, so
they are saved in and restored from fairseq checkpoints with the rest of the
optimizer state; the gradient used is the one fairseq has already
all-reduced across workers and unscaled (so every worker applies the same
update and the logits stay identical on all ranks).

``--clip-norm``: the model carries the gate's gradient through fairseq at a
scale of 2**-64 (:func:`carry_gradient_scaled`), so it weighs nothing in the
norm that fairseq clips to and checks for fp16 overflow; a spike of the
gate's heavy-tailed gradient neither shrinks the model's update nor skips it.
When fairseq does clip, the gate's gradient is scaled by the same factor
(the gate's Adam normalises scale; it is not clipped by its own norm).
"""

from __future__ import annotations

import weakref
from typing import Optional

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

BETAS = (0.9, 0.999)
EPS = 1e-8
# Power of two: scaling by it and back is exact in float32 (no under/overflow
# for gradients between ~1e-19 and ~1e57).
CARRY_SCALE = 2.0**-64

# Tagged gate logits alive in this process, to recognise fp32 copies sharing their storage.
_TAGGED: weakref.WeakSet[torch.Tensor] = weakref.WeakSet()


def tag_gate_parameter(param: torch.nn.Parameter, lr: float) -> None:
    """Mark ``param`` as gate logits trained at the constant rate ``lr``."""
    param.dsp_gate_lr = float(lr)
    _TAGGED.add(param)
    install()


def carry_gradient_scaled(param: torch.nn.Parameter) -> None:
    """Scale ``param``'s gradient by CARRY_SCALE as it is accumulated; the gate step undoes it."""
    if getattr(param, "dsp_grad_scale", None) is None:
        param.dsp_grad_scale = CARRY_SCALE
        param.register_hook(lambda grad: grad * CARRY_SCALE)


def _owner(param: torch.Tensor) -> Optional[torch.Tensor]:
    """The tagged logits ``param`` is (or is a same-storage fp32 copy of), if any."""
    if getattr(param, "dsp_gate_lr", None) is not None:
        return param
    for tagged in list(_TAGGED):
        if (
            tagged.device == param.device
            and tagged.shape == param.shape
            and tagged.data_ptr() == param.data_ptr()
        ):
            return tagged
    return None


def gate_lr_of(param: torch.Tensor) -> Optional[float]:
    """The constant LR a tagged parameter (or its fp32 copy) trains at, or None."""
    owner = _owner(param)
    return None if owner is None else owner.dsp_gate_lr


@torch.no_grad()
def adam_update_(param: torch.Tensor, grad: torch.Tensor, state: dict, lr: float) -> None:
    """One bias-corrected Adam step without weight decay, computed in float32."""
    g = grad.float()
    if "dsp_exp_avg" not in state:
        state["dsp_step"] = 0
        state["dsp_exp_avg"] = torch.zeros_like(g)
        state["dsp_exp_avg_sq"] = torch.zeros_like(g)
    state["dsp_step"] = int(state["dsp_step"]) + 1
    step = state["dsp_step"]
    m, v = state["dsp_exp_avg"].float(), state["dsp_exp_avg_sq"].float()
    m.mul_(BETAS[0]).add_(g, alpha=1 - BETAS[0])
    v.mul_(BETAS[1]).addcmul_(g, g, value=1 - BETAS[1])
    state["dsp_exp_avg"], state["dsp_exp_avg_sq"] = m, v
    denom = (v / (1 - BETAS[1] ** step)).sqrt_().add_(EPS)
    update = (m / (1 - BETAS[0] ** step)) / denom
    param.copy_((param.float() - lr * update).to(param.dtype))


def step_gate_parameters(
    optimizer: torch.optim.Optimizer, args: tuple = (), kwargs: Optional[dict] = None
) -> None:
    """Step pre-hook: update tagged gate logits, then hide them from ``optimizer``.

    torch calls it as ``hook(optimizer, args, kwargs)`` with the arguments of
    ``optimizer.step``. Optimizers that fairseq steps "with scale" (apex's fused
    Adam under --fp16 / --memory-efficient-fp16 on GPU) receive gradients that
    are still multiplied by the loss scale and not clipped, plus
    ``scale=1/multiply_factor`` meaning "divide the gradients by this"; the
    gate divides by it too, so it always steps on the true gradient.
    """
    if not _TAGGED:
        return
    scale = float((kwargs or {}).get("scale", 1.0))
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is None:
                continue
            owner = _owner(param)
            if owner is None:
                continue
            scale_all = scale * (getattr(owner, "dsp_grad_scale", None) or 1.0)
            grad = param.grad if scale_all == 1.0 else param.grad.double() / scale_all
            adam_update_(param, grad, optimizer.state[param], owner.dsp_gate_lr)
            param.grad = None


_HANDLE = None


def install() -> None:
    """Register the hook once per process (building the first gate does this)."""
    global _HANDLE
    if _HANDLE is None:
        _HANDLE = register_optimizer_step_pre_hook(step_gate_parameters)
