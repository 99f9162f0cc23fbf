"""Shared bits of the benchmark scripts."""

from __future__ import annotations

import logging
import os
import platform

import torch


def machine(threads: int) -> str:
    """CPU model, core count, torch version and the thread count used."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}; {os.cpu_count()} cores; torch {torch.__version__}; {threads} threads"


def quiet_fairseq() -> None:
    """Keep fairseq's INFO logging out of benchmark outputs."""
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("fairseq", "dsp_fairseq"):
        logging.getLogger(name).setLevel(logging.WARNING)
