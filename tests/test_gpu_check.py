"""What a CPU can check of bench/gpu_check.py: options, commands, log checks, no-GPU exit."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
import torch
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import gpu_check  # noqa: E402


def _json_line(tag, record):
    # fairseq's --log-format json: "<time> | INFO | <tag> | {json}"
    return f"2026-01-01 00:00:00 | INFO | {tag} | {json.dumps(record)}"


def _train_log(scales, overflows, updates=300):
    lines = [
        _json_line("train_inner", {"loss_scale": str(s), "wps": str(w), "num_updates": str(n)})
        for s, w, n in zip(
            scales, (1000.0, 5000.0, 7000.0, 6000.0), range(10, 10 * len(scales) + 1, 10)
        )
    ]
    lines += [
        "2026-01-01 00:00:00 | INFO | fairseq.trainer | NOTE: gradient overflow detected, "
        "ignoring gradient, setting loss scale to: 64.0"
    ] * overflows
    lines.append(_json_line("train", {"train_loss_scale": str(scales[-1]),
                                      "train_num_updates": str(updates)}))  # fmt: skip
    return "\n".join(lines)


def test_train_log_checks():
    healthy = gpu_check.train_stats(_train_log([128, 128, 64, 64], overflows=1))
    assert healthy["min_loss_scale"] == 64 and healthy["overflows"] == 1
    assert healthy["updates"] == 300
    assert healthy["wps"] == pytest.approx(6000.0)  # first interval (start-up) left out
    assert gpu_check.fp16_failures(healthy, 8, 0.05) == []

    collapsed = gpu_check.train_stats(_train_log([128, 16, 2, 0.5], overflows=40))
    problems = gpu_check.fp16_failures(collapsed, 8, 0.05)
    assert any("loss scale fell to 0.5" in p for p in problems)
    assert any("40 of 340 updates skipped" in p for p in problems)
    fp32 = gpu_check.train_stats("no json here")
    assert gpu_check.fp16_failures(fp32, 8, 0.05) == [
        "no loss_scale in the training log (was it run with --fp16?)"
    ]


def test_decode_speed_reads_fairseq_generate():
    log = "... | INFO | fairseq_cli.generate | Translated 1,000 sentences (13,370 tokens) in 4.2s (238.10 sentences/s, 3183.33 tokens/s)"
    assert gpu_check.decode_speed(log) == pytest.approx(238.10)
    assert gpu_check.decode_speed("nothing") is None


def test_dry_run_prints_the_fp16_pipeline(capsys, tmp_path):
    assert gpu_check.main(["--dry-run", "--work", str(tmp_path), "--updates", "200"]) == 0
    cmds = {}
    for line in capsys.readouterr().out.splitlines():
        name, cmd = line.split(": ", 1)
        cmds[name] = shlex.split(cmd)
    assert "prepare-multi30k.sh" in cmds["prepare"][1]
    train = cmds["train"]
    assert "--fp16" in train and "--fp16-init-scale" not in train  # default initial scale
    assert train[train.index("--max-update") + 1] == "200"
    # the flattened fp16 default, trained by the task; then the other gate paths
    assert train[train.index("--task") + 1] == "translation_dsp"
    assert "--fp16-no-flatten-grads" not in train
    assert "--fp16-no-flatten-grads" in cmds["train-noflat"]
    legacy, hook = cmds["train-legacy-ddp-fp16-rank1"], cmds["train-ddp-comm-hook-fp16-rank0"]
    assert legacy[legacy.index("--ddp-backend") + 1] == "legacy_ddp" and "--fp16" in legacy
    assert legacy[legacy.index("--distributed-rank") + 1] == "1"
    assert hook[hook.index("--ddp-comm-hook") + 1] == "fp16"
    assert hook[hook.index("--ddp-backend") + 1] == "pytorch_ddp"
    distill = cmds["train-distill-rank0"]
    assert distill[len(distill) - 1 - distill[::-1].index("--criterion") + 1] == "dsp_distillation"
    assert distill[distill.index("--teacher") + 1] == str(tmp_path / "dsp" / "checkpoint_last.pt")
    assert "--fp16" in distill and cmds["train-distill-rank1"][-1] == distill[-1]
    assert "--fp16" in cmds["validate"] and cmds["strip"][0] == "dsp-strip"
    for name in ("unpruned", "stripped"):
        for batch in ("64", "128"):
            cmd = cmds[f"time-{name}-b{batch}"]
            assert cmd[cmd.index("--beam") + 1] == "5" and "--fp16" in cmd
            assert cmd[cmd.index("--batch-size") + 1] == batch
    assert "--heads-to-keep" not in cmds["speed-gated-K=H"]  # K = H
    stock = cmds["speed-stock"]
    assert stock[stock.index("--arch") + 1] == "transformer_iwslt_de_en"
    assert "--user-dir" not in stock


def test_data_bin_skips_preparation(capsys, tmp_path):
    (tmp_path / "dict.de.txt").write_text("a 1\n")
    assert gpu_check.main(["--dry-run", "--data-bin", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "prepare:" not in out and f"fairseq-train {tmp_path} " in out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--updates", "10"], "--updates must be >= 50"),
        (["--max-skipped-share", "1.5"], "--max-skipped-share must lie in [0, 1)"),
        (["--reps", "0"], "--reps must be >= 1"),
        (["--data-bin", "/nonexistent"], "no dict.de.txt there"),
    ],
)
def test_bad_options_are_refused(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        gpu_check.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a GPU")
def test_without_a_gpu_it_runs_nothing_and_says_so(capsys, tmp_path):
    assert gpu_check.main(["--work", str(tmp_path / "w")]) == 2
    assert "no CUDA GPU is visible" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_gate_checks_read_the_log_and_the_checkpoint():
    def log(norms, updates=20):
        lines = [_json_line("train_inner", {"gate_gnorm": str(n), "num_updates": str(10 * (i + 1))})
                 for i, n in enumerate(norms)]  # fmt: skip
        return "\n".join(lines + [_json_line("train", {"train_num_updates": str(updates)})])

    learned = {"model": {"head_gate.adam_step": torch.tensor(20.0)}}
    assert gpu_check.gate_failures(log([0.5, 0.2]), learned) == []
    assert "no gate_gnorm" in gpu_check.gate_failures(log([]), learned)[0]
    assert "no (finite) gradient" in gpu_check.gate_failures(log([0.0, 0.0]), learned)[0]
    frozen = {"model": {}}
    assert "never stepped" in gpu_check.gate_failures(log([0.5]), frozen)[0]
    half = {"model": {"head_gate.adam_step": torch.tensor(10.0)}}
    assert gpu_check.gate_failures(log([0.5]), half) == ["10 gate Adam steps for 20 updates"]
    assert gpu_check.gate_failures(log([0.5]), None) == ["no checkpoint_last.pt written"]


def test_distill_checks_read_the_kl():
    line = '2026 | INFO | train_inner | {"epoch": 1, "distill_kl": "%s", "num_updates": "10"}'
    assert gpu_check.distill_failures(line % "0.52") == []
    assert "not finite and positive" in gpu_check.distill_failures(line % "nan")[0]
    assert "no distill_kl" in gpu_check.distill_failures("nothing logged")[0]
