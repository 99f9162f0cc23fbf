"""Label-smoothed cross-entropy that also drives the head gate.

It anneals the gate temperature from the update count (so a resumed run
continues the schedule), adds the gate's penalty if it has one, and logs the
temperature and how far the training mask is from K-hot through fairseq's
metrics (console, JSON logs and tensorboard).

Unset temperatures come from the model's gate schedule (``--gate-schedule``), and
an unset ``--anneal-updates`` from the run itself: the schedule's fraction of the
updates fairseq-train will make (``--max-update``, or ``--max-epoch`` epochs of the
training data at this run's batch size, update frequency and world size).
"""

import logging
import math
from dataclasses import dataclass, field
from typing import List, Optional

import torch
from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.logging import metrics
from omegaconf import II

from ..gates import HeadGate
from ..gates.base import UNTRAINED_GATE
from .run_length import first_update_freq, run_updates, updates_per_epoch

logger = logging.getLogger(__name__)

GATE_METRICS = ("gate_temperature", "gate_khot_dist", "gate_mask_sum", "gate_penalty")


@dataclass
class DSPLabelSmoothedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    init_temperature: Optional[float] = field(
        default=None,
        metadata={"help": "gate temperature at update 0 (default: the model's --gate-schedule)"},
    )
    final_temperature: Optional[float] = field(
        default=None,
        metadata={
            "help": "gate temperature after --anneal-updates (default: the model's --gate-schedule)"
        },
    )
    anneal_updates: Optional[int] = field(
        default=None,
        metadata={
            "help": "updates over which the temperature falls geometrically (default: the "
            "gate schedule's share of the run: all of it for pipelined pruning, 75%% for "
            "joint training; from --max-update or --max-epoch)"
        },
    )
    l0_penalty: float = field(
        default=0.0,
        metadata={
            "help": "weight of the gate penalty (Hard Concrete's expected L0), per target token"
        },
    )
    # The run's length, from fairseq's own settings (no command-line options of their own).
    max_update: int = II("optimization.max_update")
    max_epoch: int = II("optimization.max_epoch")
    update_freq: List[int] = II("optimization.update_freq")
    skip_remainder_batch: Optional[bool] = II("optimization.skip_remainder_batch")
    max_tokens: Optional[int] = II("dataset.max_tokens")
    batch_size: Optional[int] = II("dataset.batch_size")
    required_batch_size_multiple: int = II("dataset.required_batch_size_multiple")
    train_subset: str = II("dataset.train_subset")
    distributed_world_size: int = II("distributed_training.distributed_world_size")


def annealed_temperature(update: int, init: float, final: float, steps: int) -> float:
    """t(s) = exp(log t0 - min(s/N, 1) * (log t0 - log t_end))."""
    frac = min(max(update, 0) / max(steps, 1), 1.0)
    return math.exp(math.log(init) - frac * (math.log(init) - math.log(final)))


def find_model(model):
    """The model inside fairseq's distributed wrappers."""
    while not hasattr(model, "head_gate") and hasattr(model, "module"):
        model = model.module
    return model


def find_head_gate(model) -> Optional[HeadGate]:
    """The model's gate, looking through fairseq's distributed wrappers."""
    return getattr(find_model(model), "head_gate", None)


@register_criterion(
    "dsp_label_smoothed_cross_entropy", dataclass=DSPLabelSmoothedCrossEntropyConfig
)
class DSPLabelSmoothedCrossEntropyCriterion(LabelSmoothedCrossEntropyCriterion):
    def __init__(
        self,
        task,
        sentence_avg,
        label_smoothing,
        ignore_prefix_size=0,
        report_accuracy=False,
        init_temperature=None,
        final_temperature=None,
        anneal_updates=None,
        l0_penalty=0.0,
        max_update=0,
        max_epoch=0,
        update_freq=(1,),
        skip_remainder_batch=False,
        max_tokens=None,
        batch_size=None,
        required_batch_size_multiple=8,
        train_subset="train",
        distributed_world_size=1,
    ):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        for name, value in (("init", init_temperature), ("final", final_temperature)):
            if value is not None and not value > 0:
                raise ValueError(f"--{name}-temperature must be > 0, got {value}")
        if anneal_updates is not None and anneal_updates < 1:
            raise ValueError(f"--anneal-updates must be >= 1, got {anneal_updates}")
        self.init_temperature = init_temperature
        self.final_temperature = final_temperature
        self.anneal_updates = anneal_updates
        self.l0_penalty = l0_penalty
        self.run = dict(
            max_update=max_update,
            max_epoch=max_epoch,
            update_freq=first_update_freq(update_freq or 1),
            skip_remainder_batch=bool(skip_remainder_batch),
            max_tokens=max_tokens,
            max_sentences=batch_size,
            required_batch_size_multiple=required_batch_size_multiple or 1,
            train_subset=train_subset or "train",
            world_size=distributed_world_size or 1,
        )
        self._resolved = False

    def temperature_at(self, update: int) -> float:
        return annealed_temperature(
            update, self.init_temperature, self.final_temperature, self.anneal_updates
        )

    def resolve_schedule(self, gate: HeadGate, model=None) -> None:
        """Fill unset temperatures from the gate's schedule and the anneal length from the run."""
        schedule = gate.schedule
        if self.init_temperature is None:
            self.init_temperature = schedule.init_temperature
        if self.final_temperature is None:
            self.final_temperature = schedule.final_temperature
        if self.anneal_updates is None:
            total, how = self.run_length(model)
            self.anneal_updates = max(1, round(schedule.anneal_fraction * total))
            logger.info(
                "gate temperature %g -> %g over %d updates (%s of the run's %d updates, %s)",
                self.init_temperature,
                self.final_temperature,
                self.anneal_updates,
                f"{schedule.anneal_fraction:.0%}",
                total,
                how,
            )
        self._resolved = True

    def run_length(self, model=None):
        """(updates the run will make, how that was found); fails clearly if unbounded."""
        r = self.run
        epoch_updates, how = None, f"--max-update {r['max_update']}"
        if r["max_epoch"] and r["max_epoch"] > 0:
            dataset = self.task.datasets.get(r["train_subset"]) if self.task else None
            if dataset is not None:
                max_positions = self.task.max_positions()
                if model is not None:
                    from fairseq.utils import resolve_max_positions

                    max_positions = resolve_max_positions(
                        max_positions, model.max_positions(), r["max_tokens"]
                    )
                epoch_updates = updates_per_epoch(
                    self.task,
                    dataset,
                    max_positions,
                    r["max_tokens"],
                    r["max_sentences"],
                    r["required_batch_size_multiple"],
                    r["world_size"],
                    r["update_freq"],
                    r["skip_remainder_batch"],
                )
        total = run_updates(r["max_update"], r["max_epoch"], epoch_updates)
        if total is None:
            raise ValueError(
                "cannot tell how long to anneal the gate temperature: give --anneal-updates, "
                "or bound the run with --max-update or --max-epoch"
            )
        if epoch_updates is not None and total != r["max_update"]:
            how = (
                f"--max-epoch {r['max_epoch']} x {epoch_updates} updates per epoch at "
                f"--max-tokens {r['max_tokens']}, --update-freq {r['update_freq']}, "
                f"{r['world_size']} worker(s)"
            )
        return total, how

    def forward(self, model, sample, reduce=True):
        gate = find_head_gate(model)
        training = gate is not None and gate.training
        if training and not gate.frozen and gate.optimizer is None and torch.is_grad_enabled():
            raise RuntimeError(UNTRAINED_GATE)  # before the first update, not after it
        if training and gate.uses_temperature:
            if not self._resolved:
                self.resolve_schedule(gate, find_model(model))
            gate.set_temperature(self.temperature_at(gate.num_updates))
        loss, sample_size, logging_output = super().forward(model, sample, reduce=reduce)
        if not training:
            return loss, sample_size, logging_output
        penalty = gate.penalty()
        if penalty is not None and self.l0_penalty > 0:
            # Scaled by the batch's sample size so that one --l0-penalty value
            # means the same per token whatever the batch size.
            loss = loss + self.l0_penalty * sample_size * penalty.to(loss.dtype)
            logging_output["gate_penalty"] = float(penalty)
        stats = gate.stats()
        if gate.uses_temperature:
            stats["gate_temperature"] = gate.temperature
        logging_output.update(stats)
        logging_output["gate_count"] = 1
        return loss, sample_size, logging_output

    @classmethod
    def reduce_metrics(cls, logging_outputs) -> None:
        super().reduce_metrics(logging_outputs)
        count = sum(log.get("gate_count", 0) for log in logging_outputs)
        if not count:
            return
        for key in GATE_METRICS:
            if any(key in log for log in logging_outputs):
                # Summed over workers and micro-batches, so average by count.
                value = sum(log.get(key, 0) for log in logging_outputs) / count
                metrics.log_scalar(
                    key, value, weight=0, round=10 if key == "gate_temperature" else 4
                )
