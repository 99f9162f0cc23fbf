"""Real fairseq-train -> dsp-strip -> fairseq-generate on a tiny Multi30k slice.

The chain runs the console scripts; the refusals that need a trained model first (a bad K,
a stock checkpoint) run fairseq-train's and dsp-strip's entry functions in-process
(tests/inprocess.py), which saves the ~5 s start-up of each subprocess.
"""

import hashlib
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, write_multi30k_slice
from inprocess import call_cli, fairseq_train

from dsp_fairseq.checkpoint_io import CheckpointError, load_checkpoint

BIN = Path(sys.executable).parent
TINY = [
    "--encoder-embed-dim",
    "32",
    "--decoder-embed-dim",
    "32",
    "--encoder-ffn-embed-dim",
    "64",
    "--decoder-ffn-embed-dim",
    "64",
]
K = 5


def run(*cmd, check=True, cwd=None):
    # one thread, as everywhere in the suite: two OpenMP threads per process on two shared
    # cores (the other pytest worker runs beside) spin against each other
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def train(data, save_dir, *extra, arch="transformer_dsp_small", updates=60, script=True):
    """fairseq-train: the console script (stdout + stderr), or in-process (``script=False``)."""
    argv = [
        data,
        "--user-dir",
        ROOT / "dsp_fairseq",
        "--task",
        "translation_dsp",
        "--arch",
        arch,
        *TINY,
        "--optimizer",
        "adam",
        "--lr",
        "2e-3",
        "--lr-scheduler",
        "inverse_sqrt",
        "--warmup-updates",
        "10",
        "--max-tokens",
        "1500",
        "--max-update",
        str(updates),
        "--save-dir",
        save_dir,
        "--no-epoch-checkpoints",
        "--cpu",
        "--seed",
        "3",
        "--log-format",
        "simple",
        "--log-interval",
        "10",
        "--share-all-embeddings",
        *extra,
    ]
    if not script:
        return fairseq_train(argv)
    proc = run(BIN / "fairseq-train", *argv)
    return proc.stdout + proc.stderr


def generate(data, ckpt, *extra):
    out = run(
        BIN / "fairseq-generate",
        data,
        "--user-dir",
        ROOT / "dsp_fairseq",
        "--path",
        ckpt,
        "--gen-subset",
        "test",
        "--beam",
        "5",
        "--batch-size",
        "16",
        "--max-len-b",
        "30",
        "--cpu",
        *extra,
    ).stdout
    # (id, score, hypothesis) per sentence, in id order
    rows = [line.split("\t") for line in out.splitlines() if line.startswith("H-")]
    return sorted((int(r[0][2:]), float(r[1]), r[2]) for r in rows)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    raw = write_multi30k_slice(tmp_path_factory.mktemp("raw"), 800, 40, 40)
    out = tmp_path_factory.mktemp("data") / "m30k"
    run(
        "bash",
        ROOT / "examples/translation/prepare-multi30k.sh",
        "--src-dir",
        raw,
        "--out",
        out,
        "--vocab-size",
        "400",
    )
    return out


@pytest.fixture(scope="module")
def trained(corpus, tmp_path_factory):
    save = tmp_path_factory.mktemp("ckpt")
    log = train(
        corpus / "bin",
        save,
        "--heads-to-keep",
        str(K),
        "--criterion",
        "dsp_label_smoothed_cross_entropy",
        "--label-smoothing",
        "0.1",
        "--anneal-updates",
        "40",
    )
    return save, log


def test_training_logs_gate_metrics(trained):
    _, log = trained
    assert "gate_temperature" in log and "gate_khot_dist" in log


def test_hub_interface_decodes_a_translation_dsp_checkpoint_without_new_options(corpus, trained):
    """fairseq's hub interface sets up the task the checkpoint names (translation_dsp):
    loaded for inference, the gate gets no optimizer, and it translates."""
    from fairseq.models.transformer import TransformerModel

    save, _ = trained
    hub = TransformerModel.from_pretrained(
        str(save), "checkpoint_last.pt", data_name_or_path=str(corpus / "bin")
    )
    assert type(hub.task).__name__ == "TranslationDSPTask"
    gate = hub.models[0].head_gate
    assert gate.optimizer is None and gate.anchor is None
    words = hub.task.source_dictionary.symbols[hub.task.source_dictionary.nspecial :][:6]
    assert isinstance(hub.translate(" ".join(words), beam=2), str)
    assert int(gate.test_mask().sum()) == K


def test_strip_then_generate_matches_masked(corpus, trained, tmp_path):
    save, _ = trained
    masked = save / "checkpoint_last.pt"
    pruned = tmp_path / "pruned.pt"
    before = hashlib.sha256(masked.read_bytes()).hexdigest()
    table = run(BIN / "dsp-strip", "--input", masked, "--output", pruned).stdout
    assert f"heads kept: {K} of 36" in table and "parameters:" in table
    assert hashlib.sha256(masked.read_bytes()).hexdigest() == before

    state = load_checkpoint(str(pruned))
    args = state["cfg"]["model"]
    counts = [
        int(n) for part in args.stripped_heads.split(";") for n in part.split("=")[1].split(",")
    ]
    assert sum(counts) == K
    assert not any(k.startswith("head_gate") for k in state["model"])
    n_masked = sum(v.numel() for v in load_checkpoint(str(masked))["model"].values())
    n_pruned = sum(v.numel() for v in state["model"].values())
    assert n_pruned < n_masked
    assert not list(tmp_path.glob(".tmp-*"))  # atomic write left nothing behind

    hyp_masked = generate(corpus / "bin", masked)
    hyp_stripped = generate(corpus / "bin", pruned)
    assert len(hyp_masked) == 40
    # Identical translations; scores equal up to float summation order.
    assert [h[2] for h in hyp_masked] == [h[2] for h in hyp_stripped]
    assert [h[1] for h in hyp_masked] == pytest.approx([h[1] for h in hyp_stripped], abs=1e-4)


def test_bad_k_fails_before_training(corpus, tmp_path):
    with pytest.raises(AssertionError) as err:
        train(
            corpus / "bin",
            tmp_path / "ck",
            "--heads-to-keep",
            "37",
            "--criterion",
            "dsp_label_smoothed_cross_entropy",
            script=False,
        )
    assert "choose K in [1, 36]" in str(err.value)
    assert "num_updates" not in str(err.value)
    assert not (tmp_path / "ck" / "checkpoint_last.pt").exists()


def strip_in_process(*args) -> tuple:
    """(exit code, stderr) of dsp-strip's main() in this process (no interpreter start-up)."""
    from dsp_fairseq.cli.strip import main

    code, _, err = call_cli(main, *args)
    return code, err


def test_strip_refuses_bad_inputs(corpus, trained, tmp_path):
    save, _ = trained
    masked = save / "checkpoint_last.pt"
    digest = hashlib.sha256(masked.read_bytes()).hexdigest()
    # the console script itself once; the other refusals through its main() in this process
    same = run(BIN / "dsp-strip", "--input", masked, "--output", masked, check=False)
    assert same.returncode == 2 and "never overwrites its input" in same.stderr
    code, err = strip_in_process("--input", masked, "--output", tmp_path / "no" / "x.pt")
    assert code == 2 and "does not exist" in err
    assert hashlib.sha256(masked.read_bytes()).hexdigest() == digest

    pruned = tmp_path / "pruned.pt"
    assert strip_in_process("--input", masked, "--output", pruned)[0] == 0
    code, err = strip_in_process("--input", pruned, "--output", tmp_path / "p2.pt")
    assert code == 2 and "already stripped" in err

    truncated = tmp_path / "truncated.pt"
    truncated.write_bytes(masked.read_bytes()[:5000])
    code, err = strip_in_process("--input", truncated, "--output", tmp_path / "t.pt")
    assert code == 2 and "truncated or corrupt" in err
    assert not (tmp_path / "t.pt").exists()


def test_strip_refuses_stock_transformer(corpus, tmp_path):
    from dsp_fairseq.cli.strip import main

    train(corpus / "bin", tmp_path, arch="transformer_tiny", updates=3, script=False)
    code, _, err = call_cli(
        main, "--input", tmp_path / "checkpoint_last.pt", "--output", tmp_path / "x.pt"
    )
    assert code == 2 and "not a transformer_dsp architecture" in err


class Exploit:
    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_unexpected_pickled_global_is_refused(tmp_path):
    path = tmp_path / "evil.pt"
    with open(path, "wb") as f:
        pickle.dump({"model": {}, "payload": Exploit()}, f)
    with pytest.raises(CheckpointError, match="refused to load"):
        load_checkpoint(str(path))
    torch.save({"model": {"w": torch.ones(1)}, "args": None}, tmp_path / "ok.pt")
    assert load_checkpoint(str(tmp_path / "ok.pt"))["model"]["w"].item() == 1
