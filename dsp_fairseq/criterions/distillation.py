"""Word-level knowledge distillation from a frozen teacher checkpoint (Kim & Rush 2016).

``--criterion dsp_distillation --teacher BASE.pt`` trains on

    (1 - w) * label-smoothed CE  +  w * T^2 * sum_tokens KL(p_teacher^T || p_student^T)
                                 +  b * hidden-state distance

where ``p^T`` is the softmax of the logits divided by the temperature ``T``
(``--distill-temperature``), ``w`` is ``--distill-weight`` and the sum runs over the
batch's target tokens (padding excluded), so both terms have the scale of fairseq's
summed losses. The optional third term (``b``: ``--distill-hidden-weight``, default 0)
is layer distillation as in CoFi/TinyBERT: the squared difference between the student's
and the teacher's hidden states, averaged over the features, summed over tokens (source
tokens for the encoder output, target tokens for each decoder layer's output) and averaged
over those states. Head pruning keeps every layer and the model width, so the states line
up one to one and need no projection. The teacher is loaded once, on first use, on the student's device and
in its precision, frozen, in ``eval()``; it never enters the trainer's parameters,
optimizer or checkpoints. Everything else is :class:`DSPLabelSmoothedCrossEntropyCriterion`
(gate temperature, penalty, metrics), so the criterion serves fine-tuning a pruned
model towards the unpruned one and pipelined gate training against the unpruned model.
"""

import logging
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import List, Sequence, Tuple

import torch
import torch.nn.functional as F
from fairseq.criterions import register_criterion
from fairseq.logging import metrics

from .dsp_label_smoothed_cross_entropy import (
    DSPLabelSmoothedCrossEntropyConfig,
    DSPLabelSmoothedCrossEntropyCriterion,
    find_model,
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
    distill_hidden_weight: float = field(
        default=0.0,
        metadata={
            "help": "weight b of the hidden-state term: mean squared difference of the "
            "encoder output and of every decoder layer's output, summed over tokens"
        },
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


def hidden_state_distance(
    student: Sequence[torch.Tensor], teacher: Sequence[torch.Tensor], keep: Sequence[torch.Tensor]
) -> torch.Tensor:
    """Sum over kept positions of ``mean_features (s - t)^2``, averaged over the states (float32).

    ``student[i]`` and ``teacher[i]`` are ``T x B x C`` states (fairseq's layout), ``keep[i]``
    the ``B x T`` positions that count (not padding).
    """
    if len(student) != len(teacher) or not student:
        raise ValueError(
            f"hidden-state distillation needs the same layers in student and teacher, got "
            f"{len(student)} and {len(teacher)} states"
        )
    total = student[0].new_zeros((), dtype=torch.float32)
    for s, t, k in zip(student, teacher, keep):
        if s.shape != t.shape:
            raise ValueError(
                f"hidden-state distillation: student state {tuple(s.shape)} does not match the "
                f"teacher's {tuple(t.shape)} (same layers and model width needed)"
            )
        d = (s.float() - t.float()).pow(2).mean(-1).transpose(0, 1)  # B x T
        total = total + d.masked_fill(~k, 0.0).sum()
    return total / len(student)


@contextmanager
def encoder_output_of(model):
    """Capture what ``model``'s encoder returns during the forward passes inside the block."""
    box = {}
    handle = find_model(model).encoder.register_forward_hook(
        lambda _module, _args, out: box.__setitem__("encoder_out", out)
    )
    try:
        yield box
    finally:
        handle.remove()


def hidden_states(
    net_output, encoder_out, prefix: int = 0
) -> Tuple[List[torch.Tensor], torch.Tensor]:
    """(encoder output, decoder layer outputs after ``prefix`` positions), and the source mask."""
    enc = encoder_out["encoder_out"][0]
    pad = encoder_out.get("encoder_padding_mask") or []
    src_keep = ~pad[0] if len(pad) and pad[0] is not None and pad[0].numel() else None
    if src_keep is None:
        src_keep = torch.ones(enc.shape[1], enc.shape[0], dtype=torch.bool, device=enc.device)
    dec = [x[prefix:] for x in net_output[1]["inner_states"][1:]]  # each layer's output
    return [enc] + dec, src_keep


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
        if not cfg.distill_hidden_weight >= 0:
            raise ValueError(f"--distill-hidden-weight {cfg.distill_hidden_weight} must be >= 0")
        criterion.distill_hidden_weight = float(cfg.distill_hidden_weight)
        # Outside _modules: not a parameter of the trainer, not in any checkpoint.
        object.__setattr__(criterion, "_teacher", load_teacher(cfg.teacher, task))
        logger.info(
            "distillation from %s: weight %g, temperature %g, hidden-state weight %g",
            cfg.teacher,
            cfg.distill_weight,
            cfg.distill_temperature,
            cfg.distill_hidden_weight,
        )
        return criterion

    def teacher_output(self, sample, like: torch.Tensor):
        """The teacher's (logits, extra) and its encoder output on ``sample``, without gradient."""
        teacher = self._teacher
        ref = next(teacher.parameters())
        if ref.device != like.device or ref.dtype != like.dtype:
            teacher.to(device=like.device, dtype=like.dtype)
        teacher.eval()  # fairseq's train()/eval() calls never reach it
        with torch.no_grad(), encoder_output_of(teacher) as box:
            net_output = teacher(**sample["net_input"])
        return net_output, box.get("encoder_out")

    def compute_loss(self, model, net_output, sample, reduce=True):
        loss, nll_loss = super().compute_loss(model, net_output, sample, reduce=reduce)
        self._last_kl = self._last_hidden = None
        w, b = self.distill_weight, self.distill_hidden_weight
        if (w == 0.0 and b == 0.0) or not reduce:
            return loss, nll_loss
        prefix = self.ignore_prefix_size
        logits = net_output[0][:, prefix:, :]
        keep = model.get_targets(sample, net_output)[:, prefix:].ne(self.padding_idx)
        teacher, teacher_encoder_out = self.teacher_output(sample, logits)
        if w > 0.0:
            kl = distillation_kl(logits, teacher[0][:, prefix:, :], keep, self.distill_temperature)
            self._last_kl = kl.detach()
            loss = (1.0 - w) * loss + w * kl.to(loss.dtype)
        if b > 0.0:
            student_states, src_keep = hidden_states(
                net_output, self._student_box["encoder_out"], prefix
            )
            teacher_states, _ = hidden_states(teacher, teacher_encoder_out, prefix)
            keeps = [src_keep] + [keep] * (len(student_states) - 1)
            hidden = hidden_state_distance(student_states, teacher_states, keeps)
            self._last_hidden = hidden.detach()
            loss = loss + b * hidden.to(loss.dtype)
        return loss, nll_loss

    def forward(self, model, sample, reduce=True):
        # The student's encoder output is not part of fairseq's net_output: compute_loss,
        # which runs inside super().forward after the model's forward, reads it from the box.
        capture = encoder_output_of(model) if self.distill_hidden_weight > 0.0 else nullcontext({})
        with capture as self._student_box:
            loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        self._student_box = {}
        if getattr(self, "_last_kl", None) is not None:
            logging_output["distill_kl"] = float(self._last_kl)
        if getattr(self, "_last_hidden", None) is not None:
            logging_output["distill_hidden"] = float(self._last_hidden)
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        if any("distill_kl" in log for log in logging_outputs):
            kl = sum(log.get("distill_kl", 0.0) for log in logging_outputs)
            ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
            metrics.log_scalar("distill_kl", kl / max(ntokens, 1), ntokens, round=4)
        if any("distill_hidden" in log for log in logging_outputs):
            hidden = sum(log.get("distill_hidden", 0.0) for log in logging_outputs)
            ntokens = sum(log.get("ntokens", 0) for log in logging_outputs)
            metrics.log_scalar("distill_hidden", hidden / max(ntokens, 1), ntokens, round=4)
