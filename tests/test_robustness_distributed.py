"""fairseq's own distributed training with gates: two CPU processes over gloo.

Launched as STACK.md describes (one process per rank, --distributed-no-spawn,
legacy_ddp, gloo). Each rank records its gate after every update (see
robustness_dist_launcher.py). Every rank must hold the same logits after every
update: the translation_dsp task all-reduces the gate's gradient in float32
and steps the same Adam on every rank.
Then the two ranks resume from checkpoint_last.pt, where rank 1 receives the
checkpoint from rank 0 through fairseq's broadcast_object.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import torch
from robustness_helpers import BIN, K, tiny_checkpoint, tiny_corpus, train_cmd

from dsp_fairseq.checkpoint_io import load_checkpoint
from dsp_fairseq.gates import GATE_REGISTRY, build_budget

LAUNCHER = Path(__file__).with_name("robustness_dist_launcher.py")
TIMEOUT = 150


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def train_two_ranks(data, save_dir: Path, updates: int, out: Path, *extra: str):
    """Run both ranks to ``updates``; return their records and logs."""
    port = free_port()
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1")
    procs, logs = [], []
    for rank in (0, 1):
        cmd = train_cmd(data, save_dir, updates, *extra)[1:]  # drop the fairseq-train executable
        cmd += ["--distributed-no-spawn", "--distributed-world-size", "2",
                "--distributed-rank", str(rank),
                "--distributed-init-method", f"tcp://127.0.0.1:{port}",
                "--ddp-backend", "legacy_ddp", "--device-id", "0",
                "--distributed-backend", "gloo"]  # fmt: skip
        log = open(out / f"rank{rank}-{updates}.log", "w")
        logs.append(log)
        procs.append(
            subprocess.Popen(
                [sys.executable, str(LAUNCHER), str(out / f"rank{rank}-{updates}.json"), *cmd],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        )
    try:
        codes = [p.wait(timeout=TIMEOUT) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        for log in logs:
            log.close()
    texts = [(out / f"rank{r}-{updates}.log").read_text() for r in (0, 1)]
    assert codes == [0, 0], f"ranks exited with {codes}:\n" + "\n".join(t[-3000:] for t in texts)
    records = [json.loads((out / f"rank{r}-{updates}.json").read_text()) for r in (0, 1)]
    return records, texts


def test_two_ranks_keep_identical_gates_and_resume(tmp_path_factory, tmp_path):
    data = tiny_corpus(tmp_path_factory)
    save = tmp_path / "ckpt"

    records, _ = train_two_ranks(data, save, 10, tmp_path)
    r0, r1 = records
    assert (r0["world_size"], r0["rank"], r1["rank"]) == (2, 0, 1)
    assert len(r0["logits"]) == len(r1["logits"]) == 10
    # Bitwise identical after every update, not just at the end.
    assert r0["logits"] == r1["logits"]
    assert r0["param_checksum"] == r1["param_checksum"]
    assert r0["dsp_step"] == r1["dsp_step"] == list(range(1, 11))
    first, last = torch.tensor(r0["logits"][0]), torch.tensor(r0["logits"][-1])
    assert (last - first).abs().max() > 0.1  # the gates did train (gate lr 0.2)

    # Same test mask on both ranks, and it is the one rank 0 saved.
    masks = []
    for rec in records:
        gate = GATE_REGISTRY["dsp"](36, build_budget([36], heads_to_keep=K)).eval()
        with torch.no_grad():
            gate.logits.copy_(torch.tensor(rec["logits"][-1]))
        masks.append(gate.test_mask())
    assert torch.equal(masks[0], masks[1]) and masks[0].sum() == K
    saved = load_checkpoint(str(save / "checkpoint_last.pt"))["model"]["head_gate.logits"]
    assert torch.equal(saved.double(), torch.tensor(r0["logits"][-1]))

    # Resume on both ranks: rank 1 gets model, gate and optimizer state from rank 0.
    records, texts = train_two_ranks(data, save, 16, tmp_path)
    r0, r1 = records
    assert "Loaded checkpoint" in texts[0] and "(epoch 1 @ 10 updates)" in texts[0]
    assert r0["logits"] == r1["logits"] and len(r0["logits"]) == 6
    assert r0["param_checksum"] == r1["param_checksum"]
    # The gate's Adam state (dsp_step, moments) came back on every rank.
    assert r0["dsp_step"] == r1["dsp_step"] == list(range(11, 17))


def test_two_ranks_fp16_legacy_ddp_train_the_gate_by_its_adam_step(tmp_path_factory, tmp_path):
    """legacy_ddp all-reduces the model's gradients in the model's dtype (fp16 here): a gate
    gradient carried through it at a tiny scale became exactly 0 and the gate froze. The
    task reduces the gate's own gradient in float32, outside it, so the first update moves
    every logit with a gradient by the gate lr (Adam's first step: lr * g / (|g| + eps)).
    fp16 on a CPU: unflattened (fairseq's flat fp16 buffer asks for a CUDA device) and a
    small initial loss scale (fairseq's overflow branch calls .cuda())."""
    data = tiny_corpus(tmp_path_factory)
    flags = ("--fp16", "--fp16-no-flatten-grads", "--fp16-init-scale", "4",
             "--update-freq", "2", "--clip-norm", "0.1", "--log-interval", "1")  # fmt: skip
    (r0, r1), texts = train_two_ranks(data, tmp_path / "ckpt", 3, tmp_path, *flags)
    assert "loss_scale=4" in texts[0] and "gate_gnorm=" in texts[0]
    assert r0["grads"] == r1["grads"] and r0["logits"] == r1["logits"]
    assert r0["dsp_step"] == [1, 2, 3]
    grads = torch.tensor(r0["grads"])
    assert torch.isfinite(grads).all() and (grads[0].abs() > 1e-7).sum() >= K
    before = torch.tensor(r0["before"][0])
    moved = torch.tensor(r0["logits"][0]) - before
    expected = -0.2 * grads[0] / (grads[0].abs() + 1e-8)
    assert torch.allclose(moved, expected, rtol=0, atol=1e-5), (moved, expected)


def test_two_ranks_distil_from_one_teacher_each(tmp_path_factory, tmp_path):
    """The distillation criterion under fairseq's DDP: every rank loads the teacher (frozen,
    eval, on its own device), the KL term is logged, and the ranks stay identical (the
    teacher adds no parameter to the all-reduce)."""
    data = tiny_corpus(tmp_path_factory)
    teacher = tiny_checkpoint(tmp_path_factory)
    flags = ("--criterion", "dsp_distillation", "--teacher", teacher, "--distill-weight", "0.5",
             "--distill-temperature", "2", "--log-interval", "1")  # fmt: skip
    (r0, r1), texts = train_two_ranks(data, tmp_path / "ckpt", 4, tmp_path, *flags)
    # (rank 1 logs warnings only; its parameters below equal rank 0's after every update)
    assert f"distillation from {teacher}: weight 0.5, temperature 2" in texts[0]
    assert "distill_kl=" in texts[0]
    kl = [
        float(line.split("distill_kl=")[1].split()[0].rstrip(","))
        for line in texts[0].splitlines()
        if "distill_kl=" in line
    ]
    assert kl and all(v > 0 for v in kl)  # a student of other weights differs from its teacher
    assert r0["logits"] == r1["logits"] and r0["param_checksum"] == r1["param_checksum"]
    assert r0["dsp_step"] == r1["dsp_step"] == [1, 2, 3, 4]
