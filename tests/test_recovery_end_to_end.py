"""Recovery after pruning, end to end with the real CLIs on a tiny Multi30k slice:
dsp-strip --reconstruct / dsp-reconstruct, fairseq-validate, fairseq-generate, and a
distilled fine-tune (finetune-pruned.sh --teacher)."""

import json
import re

import pytest
import torch
from conftest import ROOT
from robustness_helpers import BIN, PLUGIN, run, tiny_corpus, train_cmd

from dsp_fairseq.checkpoint_io import load_checkpoint


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def base(corpus, tmp_path_factory):
    """transformer_dsp_small trained 100 updates with every head (the unpruned model)."""
    save = tmp_path_factory.mktemp("recovery-base")
    run(*train_cmd(corpus, save, 100, "--heads-to-keep", "36", "--lr", "5e-3"), timeout=900)
    return save / "checkpoint_last.pt"


def valid_loss(corpus, ckpt) -> float:
    proc = run(BIN / "fairseq-validate", corpus, "--user-dir", PLUGIN, "--path", ckpt, "--task", "translation",
               "--valid-subset", "valid", "--max-tokens", "2000", "--cpu")  # fmt: skip
    found = re.findall(r"\| loss ([0-9.]+)", proc.stdout + proc.stderr)
    assert found, proc.stdout[-2000:] + proc.stderr[-2000:]
    return float(found[-1])


def test_reconstruction_lowers_the_validation_loss(corpus, base, tmp_path):
    plain, rec = tmp_path / "plain.pt", tmp_path / "rec.pt"
    select = ["--random", "--heads-to-keep", "12", "--seed", "2"]
    run("dsp-strip", "--input", base, "--output", plain, *select)
    proc = run("dsp-strip", "--input", base, "--output", rec, *select, "--reconstruct",
               "--data", corpus, "--calibration-batches", "4", "--calibration-max-tokens", "1000")  # fmt: skip
    assert "reconstruction: target residual" in proc.stdout
    # progress on stderr: 9 attentions and 6 FFN output layers
    assert "[14/15] decoder.layers.2.encoder_attn" in proc.stderr
    assert "[15/15] decoder.layers.2.fc2" in proc.stderr
    state = load_checkpoint(str(rec))
    record = state["dsp_reconstruction"]
    assert record["calibration_batches"] == 4 and record["target"] == "residual"
    assert state["dsp_kept_heads"] == load_checkpoint(str(plain))["dsp_kept_heads"]
    loss_base, loss_plain, loss_rec = (valid_loss(corpus, c) for c in (base, plain, rec))
    assert loss_base < loss_rec < loss_plain
    # the same refit from the already stripped model (dsp-reconstruct) gives the same weights
    again = tmp_path / "again.pt"
    run("dsp-reconstruct", "--pruned", plain, "--base", base, "--data", corpus,
        "--output", again, "--calibration-batches", "4", "--calibration-max-tokens", "1000",
        "--quiet")  # fmt: skip
    a, b = load_checkpoint(str(again))["model"], state["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in b)
    # decodes with fairseq-generate, one hypothesis per sentence
    out = run(BIN / "fairseq-generate", corpus, "--user-dir", PLUGIN, "--path", rec,
              "--gen-subset", "test", "--beam", "2", "--batch-size", "16",
              "--required-batch-size-multiple", "1", "--max-len-b", "20", "--cpu").stdout  # fmt: skip
    assert sum(line.startswith("H-") for line in out.splitlines()) == 40


def test_refusals(corpus, base, tmp_path):
    plain = tmp_path / "plain.pt"
    run("dsp-strip", "--input", base, "--output", plain, "--random", "--heads-to-keep", "9")
    out = tmp_path / "out.pt"
    # a model that is not pruned
    proc = run("dsp-reconstruct", "--pruned", base, "--base", base, "--data", corpus,
               "--output", out, check=False)  # fmt: skip
    assert proc.returncode == 2 and "not stripped" in proc.stderr
    # no such data folder
    proc = run("dsp-reconstruct", "--pruned", plain, "--base", base, "--data", tmp_path / "nope",
               "--output", out, check=False)  # fmt: skip
    assert proc.returncode == 2 and "--data" in proc.stderr and "no such folder" in proc.stderr
    # a data folder with other dictionaries
    other = tmp_path / "other"
    other.mkdir()
    for f in corpus.iterdir():
        (other / f.name).symlink_to(f)
    for lang in ("de", "en"):
        (other / f"dict.{lang}.txt").unlink()
        (other / f"dict.{lang}.txt").write_text("".join(f"x{i} 1\n" for i in range(50)))
    proc = run("dsp-reconstruct", "--pruned", plain, "--base", base, "--data", other,
               "--output", out, check=False)  # fmt: skip
    assert proc.returncode == 2 and "do not fit" in proc.stderr and "dictionaries" in proc.stderr
    assert not out.exists() and not list(tmp_path.glob(".tmp-*"))


def test_distilled_finetune_recipe(corpus, base, tmp_path):
    plain = tmp_path / "plain.pt"
    run("dsp-strip", "--input", base, "--output", plain, "--random", "--heads-to-keep", "12")
    data = corpus.parent
    save = tmp_path / "ft"
    run("bash", ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned", plain,
        "--save-dir", save, "--max-update", "6", "--preset", "cpu-small", "--teacher", base,
        "--train-args", "--max-tokens 1000 --num-workers 0 --validate-interval-updates 3",
        timeout=900)  # fmt: skip
    logs = [json.loads(line.split("|", 3)[-1]) for line in (save / "train.log").read_text().splitlines()
            if "| train |" in line or "| train_inner |" in line]  # fmt: skip
    assert logs and all(any(k.endswith("distill_kl") for k in log) for log in logs)
    assert (save / "pruned.pt").is_file()
