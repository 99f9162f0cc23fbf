"""transformer_dsp against stock fairseq, through fairseq's own command-line tools.

A stock ``transformer`` is trained for a few updates; its weights are then put
into a ``transformer_dsp`` without gate and one with a DSP gate at K = H (all
heads kept: the eval mask is all ones). fairseq-validate must report the same
loss and fairseq-generate (beam search: incremental decoding with beam
reordering, plus --print-alignment) the same hypotheses, scores and
alignments as for the stock model. Training: one ``--update-freq 2`` update
equals one update on the double batch, and equals stock fairseq's update.

The stock side's training runs and beam search are the console scripts (subprocesses);
the rest runs the same CLIs' entry functions in the test process (tests/inprocess.py).
"""

from __future__ import annotations

import copy

import pytest
import torch
from inprocess import fairseq_generate, fairseq_train, fairseq_validate
from robustness_helpers import BIN, PLUGIN, run, tiny_corpus

from dsp_fairseq.checkpoint_io import load_checkpoint, model_args, save_checkpoint_atomic
from dsp_fairseq.models.stock import dsp_model_args

ARCH = ["--encoder-layers", "2", "--decoder-layers", "2",
        "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
        "--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
        "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64",
        "--share-all-embeddings"]  # fmt: skip
COMMON = ["--user-dir", str(PLUGIN), "--cpu", "--num-workers", "0"]


def _with_model_args(state: dict, args) -> dict:
    new = dict(state)
    new["cfg"] = dict(state["cfg"])
    new["cfg"]["model"] = args
    new["model"] = dict(state["model"])
    return new


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """(data, {name: checkpoint}) for the stock model and its two transformer_dsp twins."""
    data = tiny_corpus(tmp_path_factory)
    out = tmp_path_factory.mktemp("stock-equivalence")
    run(BIN / "fairseq-train", data, *COMMON, "--arch", "transformer", *ARCH,
        "--optimizer", "adam", "--lr", "5e-3", "--max-tokens", "1000", "--max-update", "4",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--dropout", "0.1", "--save-dir", out, "--no-epoch-checkpoints", "--seed", "5",
        "--disable-validation", "--log-format", "simple")  # fmt: skip
    stock = load_checkpoint(str(out / "checkpoint_last.pt"))
    # A few updates leave a model that emits one token; random weight offsets give
    # diverse, sharp beams and alignments (the model stays a stock transformer).
    gen = torch.Generator().manual_seed(0)
    stock["model"] = {k: v + 0.3 * torch.randn(v.shape, generator=gen)
                      if v.is_floating_point() else v
                      for k, v in stock["model"].items()}  # fmt: skip
    no_gate = dsp_model_args(model_args(stock))  # transformer_dsp, gate_type none
    gated = copy.copy(no_gate)
    gated.gate_type, gated.heads_to_keep = "dsp", None  # K = H
    paths = {"stock": out / "stock.pt"}
    save_checkpoint_atomic(stock, str(paths["stock"]))
    paths["no-gate"] = out / "no_gate.pt"
    save_checkpoint_atomic(_with_model_args(stock, no_gate), str(paths["no-gate"]))
    state = _with_model_args(stock, gated)
    state["model"]["head_gate.logits"] = torch.randn(24)  # 24 heads; K = H keeps them all
    paths["gate-K=H"] = out / "gate_k_eq_h.pt"
    save_checkpoint_atomic(state, str(paths["gate-K=H"]))
    return data, paths


def _validate_loss(data, path) -> str:
    return fairseq_validate([data, *COMMON, "--path", path, "--task", "translation",
                             "--valid-subset", "valid", "--max-tokens", "2000"])  # fmt: skip


def _generate(data, path, script=False):
    argv = [data, *COMMON, "--path", path, "--gen-subset", "test", "--beam", "4",
            "--batch-size", "16", "--print-alignment", "--max-len-b", "20"]  # fmt: skip
    out = run(BIN / "fairseq-generate", *argv).stdout if script else fairseq_generate(argv)
    lines = sorted(line for line in out.splitlines() if line[:2] in ("H-", "P-", "A-"))
    assert sum(line.startswith("A-") for line in lines) == 40
    return lines


def _same_lines(ours, stock):
    """Same hypotheses and alignments; scores equal to float rounding."""
    assert len(ours) == len(stock)
    for a, b in zip(ours, stock):
        ka, *va = a.split("\t")
        kb, *vb = b.split("\t")
        assert ka == kb
        if ka.startswith("A-"):
            assert va == vb
        elif ka.startswith("H-"):
            assert va[1] == vb[1]  # the translation
            assert float(va[0]) == pytest.approx(float(vb[0]), abs=2e-4)
        else:  # P-: positional scores
            assert [float(x) for x in va[0].split()] == pytest.approx(
                [float(x) for x in vb[0].split()], abs=2e-4
            )


def test_validate_loss_equals_stock(checkpoints):
    data, paths = checkpoints
    stock = _validate_loss(data, paths["stock"])
    assert _validate_loss(data, paths["no-gate"]) == stock
    assert _validate_loss(data, paths["gate-K=H"]) == stock


def test_beam_search_and_alignment_equal_stock(checkpoints):
    data, paths = checkpoints
    stock = _generate(data, paths["stock"], script=True)  # the reference: the console script
    assert len({line.split("\t")[-1] for line in stock if line.startswith("H-")}) > 1
    _same_lines(_generate(data, paths["no-gate"]), stock)
    _same_lines(_generate(data, paths["gate-K=H"]), stock)


def _one_update(data, save_dir, arch, *extra, script=False):
    argv = [data, *COMMON, "--task", "translation_dsp", "--arch", arch, *ARCH,
        "--optimizer", "sgd", "--lr", "0.5", "--max-update", "1",
        "--train-subset", "valid", "--valid-subset", "valid", "--disable-validation",
        "--required-batch-size-multiple", "1", "--dropout", "0", "--seed", "5",
        "--criterion", "label_smoothed_cross_entropy", "--label-smoothing", "0.1",
        "--save-dir", save_dir, "--no-epoch-checkpoints", "--log-format", "simple",
        *extra]  # fmt: skip
    if script:
        run(BIN / "fairseq-train", *argv)
    else:
        fairseq_train(argv)
    return load_checkpoint(str(save_dir / "checkpoint_last.pt"))["model"]


def test_update_freq_2_equals_the_double_batch_and_stock(tmp_path_factory, tmp_path):
    """One update over the 40 validation sentences: two batches of 20 with --update-freq 2,
    or one batch of 40, for transformer_dsp with an ``ste`` gate at K = H (mask exactly 1,
    gate gradient non-zero), and for stock fairseq with --update-freq 2."""
    data = tiny_corpus(tmp_path_factory)
    ste = ["--gate-type", "ste"]
    accumulated = _one_update(data, tmp_path / "uf2", "transformer_dsp", *ste,
                              "--batch-size", "20", "--update-freq", "2")  # fmt: skip
    double = _one_update(data, tmp_path / "double", "transformer_dsp", *ste, "--batch-size", "40")
    stock = _one_update(data, tmp_path / "stock", "transformer", "--batch-size", "20",
                        "--update-freq", "2", script=True)  # fmt: skip
    gate = {"head_gate.logits", "head_gate.adam_step", "head_gate.adam_exp_avg",
            "head_gate.adam_exp_avg_sq"}  # the logits and their Adam state  # fmt: skip
    assert set(accumulated) == set(double) == set(stock) | gate
    for name, value in double.items():
        assert torch.allclose(accumulated[name], value, atol=1e-6), name
        if name not in gate:
            assert torch.allclose(stock[name], value, atol=1e-6), name
    # (head_gate.logits: one Adam step at --gate-lr, the same in both runs, checked above.)
