"""Word-level knowledge distillation from a frozen teacher checkpoint (Kim & Rush 2016).

``--criterion dsp_distillation --teacher BASE.pt`` trains on

    (1 - w) * label-smoothed CE  +  w * T^2 * sum_tokens KL(p_teacher^T || p_student^T)

where ``p^T`` is the softmax of the logits divided by the temperature ``T``
(``--distill-temperature``), ``w`` is ``--distill-weight`` and the sum runs over the
batch's target tokens (padding excluded), so both terms have the scale of fairseq's
summed losses. The teacher is loaded once, on first use, on the student's device and
in its precision, frozen, in ``eval()``; it never enters the trainer's parameters,
optimizer or checkpoints. Everything else is :class:`DSPLabelSmoothedCrossEntropyCriterion`
(gate temperature, penalty, metrics), so the criterion serves fine-tuning a pruned
model towards the unpruned one and pipelined gate training against the unpruned model.
"""

import logging
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from fairseq.criterions import register_criterion
from fairseq.logging import metrics

from .dsp_label_smoothed_cross_entropy import (
    DSPLabelSmoothedCrossEntropyConfig,
    DSPLabelSmoothedCrossEntropyCriterion,
)

logger = logging.getLogger(__name__)

#: best measured (bench/RESULTS.md, "Distillation")
DEFAULT_WEIGHT = 0.5
DEFAULT_TEMPERATURE = 1.0


@dataclass
class DSPDistillationConfig(DSPLabelSmoothedCrossEntropyConfig):
    teacher: str = field(
        default="",
        metadata={"help": "teacher checkpoint (.pt): the unpruned model, same dictionaries"},
    )
    distill_weight: float = field(
        default=DEFAULT_WEIGHT,
        metadata={"help": "weight w of the KL term; 1 - w weighs label-smoothed CE"},
    )
    distill_temperature: float = field(
        default=DEFAULT_TEMPERATURE,
        metadata={"help": "softmax temperature T of both distributions in the KL term"},
    )


def distillation_kl(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    keep: torch.Tensor,
    temperature: float = 1.0,
) -> torch.Tensor:
    """``T^2 * sum over kept positions of KL(softmax(t/T) || softmax(s/T))`` (float32)."""
    s = F.log_softmax(student_logits.float() / temperature, dim=-1)
    t = F.log_softmax(teacher_logits.float() / temperature, dim=-1)
    kl = (t.exp() * (t - s)).sum(-1)
    return kl.masked_fill(~keep, 0.0).sum() * temperature**2


def load_teacher(path: str, task):
    """The teacher checkpoint as a frozen ``transformer_dsp`` model on ``task``'s dictionaries."""
    from ..checkpoint_io import CheckpointError, load_checkpoint
    from ..checkpoint_models import model_from_state

    try:
        model = model_from_state(load_checkpoint(path), task, f"--teacher {path}")
    except CheckpointError as err:
        raise ValueError(
            str(err) if str(err).startswith("--teacher") else f"--teacher {err}"
        ) from err
    model.eval()
    for p in model.parameters():
        p.requires_grad_(False)
    return model


@register_criterion("dsp_distillation", dataclass=DSPDistillationConfig)
class DSPDistillationCriterion(DSPLabelSmoothedCrossEntropyCriterion):
    """Label-smoothed CE mixed with KL(teacher || student); see the module docstring."""

    @classmethod
    def build_criterion(cls, cfg, task):
        criterion = super().build_criterion(cfg, task)
        if not cfg.teacher:
            raise ValueError("--criterion dsp_distillation needs --teacher CHECKPOINT.pt")
        if not 0.0 <= cfg.distill_weight <= 1.0:
            raise ValueError(f"--distill-weight {cfg.distill_weight} must lie in [0, 1]")
        if not cfg.distill_temperature > 0:
            raise ValueError(f"--distill-temperature {cfg.distill_temperature} must be > 0")
        criterion.distill_weight = float(cfg.distill_weight)
        criterion.distill_temperature = float(cfg.distill_temperature)
        # Outside _modules: not a parameter of the trainer, not in any checkpoint.
        object.__setattr__(criterion, "_teacher", load_teacher(cfg.teacher, task))
        logger.info(
            "distillation from %s: weight %g, temperature %g",
            cfg.teacher,
            cfg.distill_weight,
            cfg.distill_temperature,
        )
        return criterion

    def teacher_logits(self, sample, like: torch.Tensor) -> torch.Tensor:
        teacher = self._teacher
        ref = next(teacher.parameters())
        if ref.device != like.device or ref.dtype != like.dtype:
            teacher.to(device=like.device, dtype=like.dtype)
        teacher.eval()  # fairseq's train()/eval() calls never reach it
        with torch.no_grad():
            return teacher(**sample["net_input"])[0]

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss, nll_loss = super().compute_loss(model, net_output, sample, reduce=reduce)
        self._last_kl = None
        if self.distill_weight == 0.0 or not reduce:
            return loss, nll_loss
        logits = net_output[0]
        target = model.get_targets(sample, net_output)
        if self.ignore_prefix_size > 0:
            logits = logits[:, self.ignore_prefix_size :, :]
            target = target[:, self.ignore_prefix_size :]
        teacher = self.teacher_logits(sample, logits)
        if self.ignore_prefix_size > 0:
            teacher = teacher[:, self.ignore_prefix_size :, :]
        kl = distillation_kl(logits, teacher, target.ne(self.padding_idx), self.distill_temperature)
        self._last_kl = kl.detach()
        w = self.distill_weight
        return (1.0 - w) * loss + w * kl.to(loss.dtype), nll_loss

    def forward(self, model, sample, reduce=True):
        loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        if getattr(self, "_last_kl", None) is not None:
            logging_output["distill_kl"] = float(self._last_kl)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        if any("distill_kl" in log for log in logging_outputs):
            kl = sum(log.get("distill_kl", 0.0) for log in logging_outputs)
            ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
            metrics.log_scalar("distill_kl", kl / max(ntokens, 1), ntokens, round=4)
