"""A constant learning rate for the gate logits, whatever optimizer fairseq runs.

fairseq builds one optimizer over all parameters and one LR schedule that
overwrites every param group's LR on each update, and the default
(flattened) fp16 wrapper copies parameters into a single buffer. The DSP
reference trains the logits with their own constant LR and no weight decay.
To get that without replacing the user's ``--optimizer``, gate logits are
tagged with fairseq's ``param_group`` attribute (which fairseq's fp16
wrappers copy to their fp32 master parameters), and a step pre-hook, which
torch calls before every ``optimizer.step()``, applies an Adam update
to the tagged parameters and then hides their gradient from the main optimizer.

The Adam moments live in the main optimizer's per-parameter ``state``, so
they are saved in and restored from fairseq checkpoints with the rest of the
optimizer state; the gradient used is the one fairseq has already
all-reduced across workers, unscaled and clipped (so every worker applies
the same update and the logits stay identical on all ranks).
"""

from __future__ import annotations

import re
from typing import Optional

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

GATE_PARAM_GROUP = "dsp_gate_logits"
_TAG = re.compile(re.escape(GATE_PARAM_GROUP) + r"\(lr=([^)]+)\)$")
BETAS = (0.9, 0.999)
EPS = 1e-8


def tag_gate_parameter(param: torch.nn.Parameter, lr: float) -> None:
    """Mark ``param`` as gate logits trained at the constant rate ``lr``."""
    param.param_group = f"{GATE_PARAM_GROUP}(lr={float(lr)!r})"


def gate_lr_of(param: torch.Tensor) -> Optional[float]:
    """The constant LR a tagged parameter trains at, or None if untagged."""
    tag = getattr(param, "param_group", None)
    if not isinstance(tag, str):
        return None
    match = _TAG.match(tag)
    return float(match.group(1)) if match else None


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
    scale = float((kwargs or {}).get("scale", 1.0))
    for group in optimizer.param_groups:
        for param in group["params"]:
            if param.grad is None:
                continue
            lr = gate_lr_of(param)
            if lr is None:
                continue
            grad = param.grad if scale == 1.0 else param.grad.float() / scale
            adam_update_(param, grad, optimizer.state[param], lr)
            param.grad = None


_HANDLE = None


def install() -> None:
    """Register the hook once per process (importing the plugin does this)."""
    global _HANDLE
    if _HANDLE is None:
        _HANDLE = register_optimizer_step_pre_hook(step_gate_parameters)
