"""Interrupting training mid-anneal and resuming equals never interrupting it.

Run A trains to N1 updates and stops; fairseq-train is started again with the
same save dir and --max-update N2, so it resumes from checkpoint_last.pt
(N1 lies inside epoch 1, N2 in epoch 2; fairseq restores the data
iterator's position in the epoch). Run B trains straight to N2 with the same
seed. --anneal-updates (40) is larger than N2, so the temperature is still
falling when the run is cut.
"""

from __future__ import annotations

import os
import re
import subprocess

import pytest
import torch
from robustness_helpers import run, tiny_corpus, train_cmd

from dsp_fairseq.checkpoint_io import load_checkpoint
from dsp_fairseq.criterions.dsp_label_smoothed_cross_entropy import annealed_temperature

N1, N2, ANNEAL = 10, 30, 40
INNER = re.compile(r"\| train_inner \|.*?gate_temperature=([0-9.e+-]+),.*?num_updates=(\d+),")


def gate_adam_state(state: dict) -> dict:
    """The gate's Adam state, saved with the logits in the model state (translation_dsp)."""
    model = state["model"]
    return {k: model[f"head_gate.adam_{k}"] for k in ("step", "exp_avg", "exp_avg_sq")}


def logged_temperatures(log: str) -> dict:
    return {int(u): float(t) for t, u in INNER.findall(log)}


def test_resumed_run_continues_the_schedule_and_the_gate_state(tmp_path_factory, tmp_path):
    data = tiny_corpus(tmp_path_factory)
    resumed, straight = tmp_path / "resumed", tmp_path / "straight"
    # The uninterrupted run goes in parallel with the interrupted one (2 cores).
    with open(tmp_path / "straight.log", "w") as log:
        other = subprocess.Popen(
            train_cmd(data, straight, N2),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ, OMP_NUM_THREADS="1"),
        )
        try:
            run(*train_cmd(data, resumed, N1))
            mid = load_checkpoint(str(resumed / "checkpoint_last.pt"))
            second = run(*train_cmd(data, resumed, N2))
        finally:
            code = other.wait(timeout=300)
    assert code == 0, (tmp_path / "straight.log").read_text()[-3000:]
    assert mid["optimizer_history"][-1]["num_updates"] == N1
    assert int(gate_adam_state(mid)["step"]) == N1

    log = second.stdout + second.stderr
    assert f"Loaded checkpoint {resumed / 'checkpoint_last.pt'} (epoch 1 @ {N1} updates)" in log

    # Temperatures logged after the resume are the schedule's: the value logged
    # at update u is the one of the last forward, made at update count u - 1.
    temps = logged_temperatures(log)
    assert sorted(temps) == list(range(N1 + 5, N2 + 1, 5))
    for update, logged in temps.items():
        expected = annealed_temperature(update - 1, 0.1, 1e-8, ANNEAL)
        # The log prints 6 significant digits of a value rounded to 10 decimals.
        assert logged == pytest.approx(expected, rel=1e-5, abs=1e-10)
    assert logged_temperatures((tmp_path / "straight.log").read_text())[N2] == temps[N2]

    a = load_checkpoint(str(resumed / "checkpoint_last.pt"))
    b = load_checkpoint(str(straight / "checkpoint_last.pt"))
    # Expected bitwise equal: fairseq reseeds torch from seed + num_updates before every
    # update (dropout and Gumbel noise repeat), restores the data order, and the
    # checkpoint stores float32 exactly. 1e-6 only absorbs a different float summation
    # order, if a kernel picked one; anything lost on resume (gate Adam moments,
    # temperature, update count) moves a logit by about the gate lr (0.2) per update.
    la, lb = a["model"]["head_gate.logits"], b["model"]["head_gate.logits"]
    assert torch.equal(la, lb), (la - lb).abs().max()  # bit for bit
    assert (la - mid["model"]["head_gate.logits"]).abs().max() > 1e-3  # it kept training
    ga, gb = gate_adam_state(a), gate_adam_state(b)
    assert int(ga["step"]) == int(gb["step"]) == N2  # N2 - N1 if the Adam state had been lost
    assert torch.equal(ga["exp_avg"], gb["exp_avg"]) and torch.equal(
        ga["exp_avg_sq"], gb["exp_avg_sq"]
    )
    worst = max((a["model"][k].float() - b["model"][k].float()).abs().max() for k in a["model"])
    assert worst <= 1e-6
