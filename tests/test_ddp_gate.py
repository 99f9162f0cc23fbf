"""pytorch_ddp (with and without --ddp-comm-hook fp16) and the gate: two CPU ranks, gloo.

The fp16 communication hook compresses every gradient DDP reduces to float16, so a
gate gradient carried through it at a tiny scale arrived as exactly 0. The gate's
logits are not DDP parameters now: the task sums their raw gradient and the sample
size over the ranks in float32 itself. See ddp_gate_worker.py for what is fairseq's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from test_robustness_distributed import free_port

WORKER = Path(__file__).with_name("ddp_gate_worker.py")


MODES = ["plain", "fp16-hook", "gates-only"]


@pytest.fixture(scope="module")
def records(tmp_path_factory) -> dict:
    """{mode: both ranks' records}: one 2-process run, the modes one after another."""
    out = tmp_path_factory.mktemp("ddp-gate")
    port = free_port()
    env = dict(os.environ, OMP_NUM_THREADS="1")
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), str(out), str(r), str(port), ",".join(MODES)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=WORKER.parent,
        )  # fmt: skip
        for r in (0, 1)
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outs)
    return {m: [json.loads((out / f"r{r}-{m}.json").read_text()) for r in (0, 1)] for m in MODES}


@pytest.mark.parametrize("mode", MODES)
def test_pytorch_ddp_reduces_the_gate_gradient_in_float32_and_steps_it(records, mode):
    r0, r1 = records[mode]
    assert r0["handed"] == r1["handed"] and r0["after"] == r1["after"]
    assert r0["checksum"] == r1["checksum"]  # the model, too, is the same on both ranks
    for u in range(2):
        raw = torch.tensor(r0["raw"][u]) + torch.tensor(r1["raw"][u])
        expected = raw / (r0["sample_size"][u] + r1["sample_size"][u])
        handed = torch.tensor(r0["handed"][u])
        assert expected.abs().max() > 1e-4
        # the mean-loss gradient of the global batch, not an fp16-rounded (or zero) one
        assert torch.allclose(handed, expected, rtol=1e-6, atol=1e-9)
    moved = torch.tensor(r0["after"][0]) - torch.tensor(r0["before"][0])
    g = torch.tensor(r0["handed"][0])
    lr = 0.05 if mode == "gates-only" else 0.2  # the pipelined / joint schedules' gate lr
    assert torch.allclose(moved, -lr * g / (g.abs() + 1e-8), atol=1e-6)  # Adam's first step
