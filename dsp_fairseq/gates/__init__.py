"""Head gates: DSP and the baselines, all behind :class:`HeadGate`."""

from .base import GATE_REGISTRY, Budget, HeadGate, build_budget, register_gate
from . import dsp  # noqa: F401  (registers the gates)

__all__ = ["GATE_REGISTRY", "Budget", "HeadGate", "build_budget", "register_gate"]
