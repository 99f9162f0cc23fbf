"""The ``translation_dsp`` task: fairseq's translation task that also trains the head gate.

fairseq's trainer has one optimizer and one learning-rate schedule for all of
``model.parameters()``; it clips their joint norm, flattens them under --fp16,
reduces them across workers in the model's dtype (or through a --ddp-comm-hook)
and skips the update when their norm overflows. The DSP gate must train at its
own constant learning rate, without weight decay, and its heavy-tailed gradient
must neither be clipped with the model's nor drive the fp16 loss scale. So the
gate's logits are not parameters of the model (see ``gates/base.py``), and this
task trains them itself, inside fairseq's own training loop:

* ``build_model`` gives the gate a ``torch.optim.Adam`` at its constant rate
  (``--gate-lr``; betas (0.9, 0.999), eps 1e-8, no weight decay);
* ``train_step`` lets the logits' gradient accumulate over ``--update-freq``
  micro-batches and counts their sample size (dummy batches excluded, as the
  trainer does);
* ``optimizer_step`` sums gradient and sample size over the data-parallel
  workers in float32 (one all-reduce), divides by the loss scale the backward
  used and by the global sample size (the trainer's normalisation), logs the
  norm as ``gate_gnorm``, lets fairseq step the model, then steps the gate.
  An fp16 update that fairseq skips for overflow never reaches it, so the gate
  skips too; an overflow of the gate's own gradient is reported to fairseq's
  loss scaler, which skips the whole update and lowers the scale.

The Adam moments are saved with the logits in the model's state
(``head_gate.adam_*``): fairseq 0.12's ``Trainer.load_checkpoint`` restores the
model state on every rank but never calls ``task.load_state_dict``.
"""

# No "from __future__ import annotations": fairseq reads the config fields' types.
import importlib.util
import logging
import math
from dataclasses import dataclass
from typing import Dict, Optional

import torch
from fairseq.distributed import utils as distributed_utils
from fairseq.logging import metrics
from fairseq.tasks import register_task
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from omegaconf import II

from ..gates import HeadGate

logger = logging.getLogger(__name__)

BETAS = (0.9, 0.999)
EPS = 1e-8
# --ddp-backend values under which the gate cannot be trained, and why.
UNSUPPORTED_DDP_BACKENDS = {
    "fully_sharded": "FSDP shards and saves only the parameters it wraps; the gate's logits "
    "and Adam moments are model state outside them and would be lost from sharded checkpoints",
}


@dataclass
class TranslationDSPConfig(TranslationConfig):
    # fairseq's own settings the task needs (no command-line options of their own).
    ddp_backend: str = II("distributed_training.ddp_backend")
    reset_optimizer: bool = II("checkpoint.reset_optimizer")
    bf16: bool = II("common.bf16")


def _setting(value, default):
    """A config value, or ``default`` where it is an unresolved ``${...}`` interpolation
    (a config built outside fairseq's command line, e.g. in Python)."""
    if isinstance(value, str) and value.startswith("${"):
        return default
    return default if value is None else value


def _has_torch_xla() -> bool:
    return importlib.util.find_spec("torch_xla") is not None


def find_head_gate(model) -> Optional[HeadGate]:
    """The gate of ``model``, looking through fairseq's distributed wrappers."""
    while not hasattr(model, "head_gate") and hasattr(model, "module"):
        model = model.module
    return getattr(model, "head_gate", None)


def trained_gate(model) -> Optional[HeadGate]:
    """The gate this task trains in ``model`` (None: none, or frozen, or built elsewhere)."""
    gate = find_head_gate(model)
    if gate is None or gate.frozen or gate.optimizer is None:
        return None
    return gate


def loss_scale(optimizer) -> float:
    """The factor fairseq's optimizer multiplied the loss by before ``backward``."""
    scaler = getattr(optimizer, "scaler", None)
    if scaler is None:  # fp32, --bf16
        return 1.0
    if hasattr(scaler, "loss_scale"):  # DynamicLossScaler: --fp16, --memory-efficient-fp16
        return float(scaler.loss_scale)
    return float(scaler.get_scale())  # torch's GradScaler: --amp (1.0 when disabled, on a CPU)


class _Accumulation:
    """The gate gradient's bookkeeping for one update attempt."""

    def __init__(self, scale: float):
        self.scale = scale
        self.sample_size = 0.0


@register_task("translation_dsp", dataclass=TranslationDSPConfig)
class TranslationDSPTask(TranslationTask):
    """fairseq's ``translation`` task; it also trains ``transformer_dsp``'s head gate.

    Decoding needs nothing of it: a checkpoint trained with it decodes with
    ``--task translation`` (the default of fairseq-generate) as well.
    """

    cfg: TranslationDSPConfig

    def __init__(self, cfg: TranslationDSPConfig, src_dict, tgt_dict):
        super().__init__(cfg, src_dict, tgt_dict)
        self._accumulation: Dict[int, _Accumulation] = {}

    def build_model(self, cfg, from_checkpoint=False):
        """Build the model; give a trainable gate its own Adam (not when loading for inference)."""
        if not from_checkpoint and _setting(self.cfg.bf16, False) and not _has_torch_xla():
            # fairseq 0.12's --bf16 sets --tpu; without torch_xla its trainer would stop at
            # "'NoneType' object has no attribute 'xla_device'" after the model is built
            raise ValueError(
                "--bf16 in fairseq 0.12 trains on a TPU (it sets --tpu) and needs torch_xla, "
                "which is not installed; on a GPU use --fp16 or --amp, on a CPU train in float32"
            )
        model = super().build_model(cfg, from_checkpoint)
        gate = find_head_gate(model)
        if from_checkpoint or gate is None or gate.frozen:
            return model
        backend = _setting(self.cfg.ddp_backend, "pytorch_ddp")
        if backend in UNSUPPORTED_DDP_BACKENDS:
            raise ValueError(
                f"--ddp-backend {backend} cannot train the head gate: "
                f"{UNSUPPORTED_DDP_BACKENDS[backend]}; use pytorch_ddp or legacy_ddp"
            )
        optimizer = torch.optim.Adam(
            [gate.logits], lr=gate.lr, betas=BETAS, eps=EPS, weight_decay=0.0
        )
        gate.prepare_training(optimizer, restore=not _setting(self.cfg.reset_optimizer, False))
        logger.info(
            "translation_dsp: the gate's %d logits train with their own Adam at a constant "
            "lr %g, outside fairseq's optimizer, --clip-norm and loss scaling",
            gate.num_heads,
            gate.lr,
        )
        return model

    def train_step(self, sample, model, criterion, optimizer, update_num, ignore_grad=False):
        """fairseq's forward/backward; the gate's gradient accumulates on its logits."""
        gate = trained_gate(model)
        if gate is None:
            return super().train_step(sample, model, criterion, optimizer, update_num, ignore_grad)
        if gate.anchor.grad is None or id(gate) not in self._accumulation:
            # fairseq cleared its parameters' gradients (anchor included): a new update,
            # or a retry after an overflow or OOM. The gate's partial sum goes too.
            gate.logits.grad = None
            self._accumulation[id(gate)] = _Accumulation(loss_scale(optimizer))
        loss, sample_size, logging_output = super().train_step(
            sample, model, criterion, optimizer, update_num, ignore_grad
        )
        if not ignore_grad:
            self._accumulation[id(gate)].sample_size += float(sample_size)
        return loss, sample_size, logging_output

    def optimizer_step(self, optimizer, model, update_num):
        """Step the model through fairseq's optimizer, then the gate through its Adam."""
        gate = trained_gate(model)
        if gate is None:
            return super().optimizer_step(optimizer, model, update_num)
        acc = self._accumulation.pop(id(gate), None) or _Accumulation(loss_scale(optimizer))
        # --amp lowers its scale in clip_grad_norm when the model's gradient overflowed,
        # and then still calls optimizer_step (its GradScaler skips the step).
        amp_overflow = loss_scale(optimizer) != acc.scale
        grad = self._reduced_gradient(gate, acc)
        norm = float(grad.norm())
        if not math.isfinite(norm) and not amp_overflow:
            scaler = getattr(optimizer, "scaler", None)
            if hasattr(scaler, "check_overflow"):
                # Lowers fairseq's loss scale and raises OverflowError: fairseq skips
                # the whole update, as it does when the model's gradient overflows.
                gate.logits.grad = None
                scaler.check_overflow(norm)
            if scaler is None:
                raise FloatingPointError(f"the head gate's gradient is not finite ({norm})")
            amp_overflow = True  # --amp: leave the gate out of this update
        super().optimizer_step(optimizer, model, update_num)
        if not amp_overflow:
            gate.logits.grad = grad
            gate.optimizer.step()
            metrics.log_scalar("gate_gnorm", norm, priority=401, round=3)
        gate.logits.grad = None

    @staticmethod
    def _reduced_gradient(gate: HeadGate, acc: _Accumulation) -> torch.Tensor:
        """The gate's gradient of the mean loss: summed over workers in float32, unscaled,
        divided by the global sample size (what the trainer does for its parameters)."""
        logits = gate.logits
        buffer = torch.zeros(logits.numel() + 1, dtype=torch.float32, device=logits.device)
        if logits.grad is not None:
            buffer[:-1] = logits.grad.detach().float().view(-1)
        buffer[-1] = acc.sample_size
        if distributed_utils.get_data_parallel_world_size() > 1:
            buffer = distributed_utils.all_reduce(
                buffer, group=distributed_utils.get_data_parallel_group()
            )
        sample_size = float(buffer[-1]) or 1.0
        return (buffer[:-1] / (acc.scale * sample_size)).view_as(logits)
