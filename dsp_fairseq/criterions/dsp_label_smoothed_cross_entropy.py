"""Label-smoothed cross-entropy that also drives the head gate.

It anneals the gate temperature from the update count (so a resumed run
continues the schedule), adds the gate's penalty if it has one, and logs the
temperature and how far the training mask is from K-hot through fairseq's
metrics (console, JSON logs and tensorboard).
"""

import math
from dataclasses import dataclass, field
from typing import Optional

from fairseq.criterions import register_criterion
from fairseq.criterions.label_smoothed_cross_entropy import (
    LabelSmoothedCrossEntropyCriterion,
    LabelSmoothedCrossEntropyCriterionConfig,
)
from fairseq.logging import metrics

from ..gates import HeadGate

GATE_METRICS = ("gate_temperature", "gate_khot_dist", "gate_mask_sum", "gate_penalty")


@dataclass
class DSPLabelSmoothedCrossEntropyConfig(LabelSmoothedCrossEntropyCriterionConfig):
    init_temperature: float = field(default=0.1, metadata={"help": "gate temperature at update 0"})
    final_temperature: float = field(
        default=1e-8, metadata={"help": "gate temperature after --anneal-updates"}
    )
    anneal_updates: int = field(
        default=15000,
        metadata={"help": "updates over which the temperature falls geometrically"},
    )
    l0_penalty: float = field(
        default=0.0,
        metadata={
            "help": "weight of the gate penalty (Hard Concrete's expected L0), per target token"
        },
    )


def annealed_temperature(update: int, init: float, final: float, steps: int) -> float:
    """t(s) = exp(log t0 - min(s/N, 1) * (log t0 - log t_end))."""
    frac = min(max(update, 0) / max(steps, 1), 1.0)
    return math.exp(math.log(init) - frac * (math.log(init) - math.log(final)))


def find_head_gate(model) -> Optional[HeadGate]:
    """The model's gate, looking through fairseq's distributed wrappers."""
    while not hasattr(model, "head_gate") and hasattr(model, "module"):
        model = model.module
    return getattr(model, "head_gate", None)


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
        init_temperature=0.1,
        final_temperature=1e-8,
        anneal_updates=15000,
        l0_penalty=0.0,
    ):
        super().__init__(task, sentence_avg, label_smoothing, ignore_prefix_size, report_accuracy)
        if not (init_temperature > 0 and final_temperature > 0):
            raise ValueError("--init-temperature and --final-temperature must be > 0")
        self.init_temperature = init_temperature
        self.final_temperature = final_temperature
        self.anneal_updates = anneal_updates
        self.l0_penalty = l0_penalty

    def temperature_at(self, update: int) -> float:
        return annealed_temperature(
            update, self.init_temperature, self.final_temperature, self.anneal_updates
        )

    def forward(self, model, sample, reduce=True):
        gate = find_head_gate(model)
        training = gate is not None and gate.training
        if training and gate.uses_temperature:
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
