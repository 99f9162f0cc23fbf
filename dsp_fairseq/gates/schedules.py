"""Named gate-training schedules: temperature range, gate learning rate, anneal fraction.

A schedule is what a user would otherwise have to tune by hand. The model picks one
(``--gate-schedule``, default: ``pipelined`` with ``--train-gates-only``, else ``joint``);
explicit ``--init-temperature``, ``--final-temperature``, ``--gate-lr`` and
``--anneal-updates`` override its values one by one.

- ``pipelined``: the best setting of the schedule study (bench/quality/schedule-study and
  the converged-model study in bench/RESULTS.md): the temperature falls from 1 to 1e-3 over
  the whole gate-training run, gate Adam at 0.05. It beats the reference schedule by
  11 BLEU at K = 9 of 36 on the 500-update model (7.16 -> 18.48).
- ``reference``: the DSP reference code's pipelined setting (t 0.1 -> 1e-8, gate lr 0.2).
- ``joint``: DSP trained with the model from scratch (t 0.1 -> 1e-8, gate lr 0.2), annealed
  over the first 75% of the run so that the last quarter trains the weights under an
  (almost) hard K-hot mask.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict


@dataclass(frozen=True)
class GateSchedule:
    init_temperature: float
    final_temperature: float
    gate_lr: float
    #: share of the run's updates over which the temperature anneals
    anneal_fraction: float


GATE_SCHEDULES: Dict[str, GateSchedule] = {
    "pipelined": GateSchedule(1.0, 1e-3, 0.05, 1.0),
    "reference": GateSchedule(0.1, 1e-8, 0.2, 1.0),
    "joint": GateSchedule(0.1, 1e-8, 0.2, 0.75),
}


def default_schedule_name(train_gates_only: bool) -> str:
    return "pipelined" if train_gates_only else "joint"


def get_schedule(name: str) -> GateSchedule:
    try:
        return GATE_SCHEDULES[name]
    except KeyError:
        raise ValueError(
            f"--gate-schedule {name!r} is unknown; choose one of {', '.join(GATE_SCHEDULES)}"
        ) from None
