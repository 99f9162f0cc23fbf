"""Head gates: DSP and the baselines, all behind :class:`HeadGate`."""

from . import dsp, hard_concrete  # noqa: F401  (registers the gates)
from .base import GATE_REGISTRY, Budget, HeadGate, build_budget, register_gate

__all__ = ["GATE_REGISTRY", "Budget", "HeadGate", "build_budget", "register_gate"]
