"""Malformed input: a clear message, and nothing lost, overwritten or half-written.

Adds to tests/test_end_to_end.py (global K out of range, output == input,
missing output folder, already stripped, truncated file, stock checkpoint):
per-type budgets, inputs that are not checkpoints at all, outputs that are
links to the input or folders, the data preparation scripts, and
fairseq-generate without --user-dir.
"""

from __future__ import annotations

import argparse
import hashlib
import os
from pathlib import Path

import pytest
import torch
from inprocess import cli_ok, fairseq_generate
from robustness_helpers import (
    BIN,
    PLUGIN,
    ROOT,
    checkpoint_state,
    dsp_args,
    make_dictionary,
    make_task,
    run,
    tiny_checkpoint,
    tiny_corpus,
    train_cmd,
)

from dsp_fairseq.checkpoint_io import save_checkpoint_atomic
from dsp_fairseq.cli import strip as strip_cli

PREPARE = ROOT / "examples/translation/prepare-multi30k.sh"
SPM_PREP = ROOT / "scripts/sentencepiece_prep.py"


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def small_args(**kw) -> argparse.Namespace:
    base = dict(encoder_layers=2, decoder_layers=2, encoder_attention_heads=2,
                decoder_attention_heads=2, encoder_embed_dim=8, decoder_embed_dim=8,
                encoder_ffn_embed_dim=16, decoder_ffn_embed_dim=16, share_all_embeddings=True)  # fmt: skip
    base.update(kw)
    return dsp_args(**base)


@pytest.fixture
def masked_ckpt(tmp_path) -> Path:
    """A small gated transformer_dsp checkpoint written in fairseq's layout."""
    args = small_args(heads_to_keep=3)
    model = make_task(make_dictionary(20)).build_model(args)
    path = tmp_path / "masked.pt"
    save_checkpoint_atomic(checkpoint_state(model, args), str(path))
    return path


def strip(capsys, *argv):
    code = strip_cli.main([str(a) for a in argv] + ["--quiet"])
    return code, capsys.readouterr().err


# -- dsp-strip: inputs that are not checkpoints -----------------------------------


def _make_bad_input(kind: str, folder: Path) -> Path:
    path = folder / f"{kind}.pt"
    if kind == "empty":
        path.write_bytes(b"")
    elif kind == "text":
        path.write_text("hello, I am not a checkpoint\n")
    elif kind == "random-bytes":
        path.write_bytes(torch.randint(0, 256, (4096,), dtype=torch.uint8).numpy().tobytes())
    elif kind == "tensor":
        torch.save(torch.ones(3), path)
    elif kind == "dict-without-model":
        torch.save({"weights": torch.ones(3)}, path)
    elif kind == "model-without-config":
        torch.save({"model": {"w": torch.ones(3)}}, path)
    elif kind == "folder":
        path.mkdir()
    return path


BAD_INPUTS = {
    "empty": "empty file, not a checkpoint",
    "text": "not a readable checkpoint (truncated or corrupt?)",
    "random-bytes": "(truncated or corrupt?",
    "tensor": "not a fairseq checkpoint (no 'model' entry)",
    "dict-without-model": "not a fairseq checkpoint (no 'model' entry)",
    "model-without-config": "no argparse model configuration",
    "folder": "is a folder, not a checkpoint file",
    "missing": "no such checkpoint file",
}


@pytest.mark.parametrize("kind", sorted(BAD_INPUTS))
def test_strip_explains_inputs_that_are_not_checkpoints(kind, tmp_path, capsys):
    bad = _make_bad_input(kind, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    keep = out / "pruned.pt"
    keep.write_bytes(b"an earlier result")  # must survive a failed run
    code, err = strip(capsys, "--input", bad, "--output", keep)
    assert code == 2
    assert err.startswith("dsp-strip: error:") and BAD_INPUTS[kind] in err
    assert "Traceback" not in err
    assert keep.read_bytes() == b"an earlier result"
    assert sorted(p.name for p in out.iterdir()) == ["pruned.pt"]  # no temporary file left


# -- dsp-strip: outputs that would overwrite the input or cannot be written ---------


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "symlink-to-folder-of-input"])
def test_strip_never_writes_through_a_link_to_its_input(kind, masked_ckpt, tmp_path, capsys):
    before = digest(masked_ckpt)
    if kind == "symlink":
        out = tmp_path / "link.pt"
        out.symlink_to(masked_ckpt)
    elif kind == "hardlink":
        out = tmp_path / "hard.pt"
        os.link(masked_ckpt, out)
    else:  # the same file reached through a linked folder
        (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)
        out = tmp_path / "alias" / masked_ckpt.name
    code, err = strip(capsys, "--input", masked_ckpt, "--output", out)
    assert code == 2 and "is the input checkpoint" in err
    assert digest(masked_ckpt) == before
    if kind == "symlink":
        assert out.is_symlink()


@pytest.mark.parametrize("kind", ["existing-folder", "empty-string"])
def test_strip_refuses_an_output_that_is_not_a_file_path(kind, masked_ckpt, tmp_path, capsys):
    out = tmp_path / "results" if kind == "existing-folder" else ""
    if out:
        out.mkdir()
    code, err = strip(capsys, "--input", masked_ckpt, "--output", out)
    assert code == 2 and "not a file path" in err and "Traceback" not in err
    if out:
        assert list(out.iterdir()) == []
    assert not list(tmp_path.glob(".tmp-*"))


def test_strip_of_a_missing_input_onto_an_existing_file(tmp_path, capsys):
    # Regression: samefile() on a missing input raised FileNotFoundError.
    existing = tmp_path / "existing.pt"
    existing.write_bytes(b"keep me")
    code, err = strip(capsys, "--input", tmp_path / "missing.pt", "--output", existing)
    assert code == 2 and "no such checkpoint file" in err
    assert existing.read_bytes() == b"keep me"


def test_strip_refuses_to_replace_an_existing_output_without_force(masked_ckpt, tmp_path, capsys):
    existing = tmp_path / "pruned.pt"
    existing.write_bytes(b"a pruned model fine-tuned since")
    code, err = strip(capsys, "--input", masked_ckpt, "--output", existing)
    assert code == 2 and "--output" in err and "exists; pass --force" in err
    assert existing.read_bytes() == b"a pruned model fine-tuned since"
    assert not list(tmp_path.glob(".tmp-*"))
    code, err = strip(capsys, "--input", masked_ckpt, "--output", existing, "--force")
    assert code == 0, err
    assert existing.read_bytes() != b"a pruned model fine-tuned since"
    assert strip_cli.output_exists(str(masked_ckpt), str(existing))


# -- budgets per attention type ------------------------------------------------------


def test_per_type_k_out_of_range_fails_before_training(tmp_path_factory, tmp_path):
    data = tiny_corpus(tmp_path_factory)
    cmd = train_cmd(data, tmp_path, 2)
    i = cmd.index("--heads-to-keep")
    cmd[i : i + 2] = ["--heads-to-keep-per-type", "enc-self=13,dec-self=2,cross=2"]
    proc = run(*cmd, check=False)
    assert proc.returncode != 0
    assert "enc-self=13 is out of range" in proc.stderr and "[0, 12]" in proc.stderr
    assert "num_updates" not in proc.stdout + proc.stderr
    assert not list(tmp_path.glob("*.pt"))


@pytest.mark.parametrize(
    "budget, message",
    [
        ({"heads_to_keep_per_type": "enc-self=1,dec-self=1,cross=5"}, r"cross=5 .*\[0, 4\]"),
        ({"heads_to_keep_per_type": "enc-self=-1,dec-self=1,cross=1"}, r"\[0, 4\]"),
        ({"heads_to_keep_per_type": "enc-self=0,dec-self=0,cross=0"}, "keeps no head at all"),
        ({"heads_to_keep_per_type": "enc-self=1,cross=1"}, "no budget for dec-self"),
        ({"heads_to_keep_per_type": "encoder=1,dec-self=1,cross=1"}, "expected TYPE=K pairs"),
        ({"heads_to_keep_per_type": "enc-self=1", "gated_attentions": "cross"},
         "expected TYPE=K pairs"),
        ({"heads_to_keep": 2, "heads_to_keep_per_type": "enc-self=1,dec-self=1,cross=1"},
         "contradicts .* keeps 3 heads"),
    ],
)  # fmt: skip
def test_per_type_budget_errors_at_model_build(budget, message):
    task = make_task(make_dictionary(20))
    with pytest.raises(ValueError, match=message):
        task.build_model(small_args(**budget))


def test_per_type_budget_may_refine_an_equal_global_k():
    """Recipes always pass --heads-to-keep K: per-type budgets summing to K refine it."""
    task = make_task(make_dictionary(20))
    per_type = "enc-self=0,dec-self=1,cross=2"
    model = task.build_model(small_args(heads_to_keep=3, heads_to_keep_per_type=per_type)).eval()
    mask = model.head_gate.current_mask()
    assert mask[:4].sum() == 0 and mask[4:8].sum() == 1 and mask[8:].sum() == 2


@pytest.mark.parametrize("gate_type", ["dsp", "dsp-st", "ste"])
def test_a_type_with_budget_zero_trains(gate_type):
    """Regression: a per-type budget of 0 crashed DSP training at the first forward."""
    task = make_task(make_dictionary(20))
    model = task.build_model(
        small_args(gate_type=gate_type, heads_to_keep_per_type="enc-self=0,dec-self=1,cross=2")
    ).train()
    model.head_gate.set_temperature(0.1)
    src = torch.tensor([[5, 6, 7, 2], [8, 9, 10, 2]])
    out, _ = model(src, torch.tensor([4, 4]), src)
    mask = model.head_gate.current_mask()
    assert mask[:4].abs().sum() == 0 and mask[4:8].sum().item() == pytest.approx(1)
    out.logsumexp(-1).sum().backward()
    grad = model.head_gate.logits.grad
    assert torch.isfinite(grad).all()
    model.eval()
    assert model.head_gate.current_mask().tolist()[:4] == [0.0] * 4


# -- data preparation ----------------------------------------------------------------


def test_prepare_refuses_a_missing_source_folder_before_creating_anything(tmp_path):
    out = tmp_path / "out"
    proc = run("bash", PREPARE, "--src-dir", tmp_path / "nowhere", "--out", out, check=False)
    assert proc.returncode == 1
    assert f"--src-dir {tmp_path / 'nowhere'}: no such folder" in proc.stderr
    assert not out.exists()


def test_prepare_names_a_missing_source_file_and_keeps_earlier_outputs(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    out = tmp_path / "out"
    (out / "raw").mkdir(parents=True)
    (out / "raw" / "train.de").write_text("schon da\n")  # an earlier, complete output
    proc = run("bash", PREPARE, "--src-dir", src, "--out", out, check=False)
    assert proc.returncode == 1
    assert f"{src}/train.en.gz not found" in proc.stderr
    assert (out / "raw" / "train.de").read_text() == "schon da\n"
    assert not list((out / "raw").glob("*.tmp"))


def test_prepare_refuses_to_mix_encodings_of_a_lost_sentencepiece_model(tmp_path):
    out = tmp_path / "out"
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            (out / "raw").mkdir(parents=True, exist_ok=True)
            (out / "raw" / f"{split}.{lang}").write_text("ein satz\n")
    (out / "spm").mkdir()
    (out / "spm" / "train.de").write_text("▁ein ▁satz\n")  # encoded by a model now gone
    proc = run("bash", PREPARE, "--src-dir", tmp_path, "--out", out, check=False)
    assert proc.returncode == 1
    assert "spm.model is missing" in proc.stderr and "remove" in proc.stderr
    assert (out / "spm" / "train.de").read_text() == "▁ein ▁satz\n"
    assert not (out / "spm" / "spm.model").exists()


def test_sentencepiece_prep_explains_missing_and_broken_files(tmp_path):
    text = tmp_path / "in.txt"
    text.write_text("ein satz\n")
    broken = tmp_path / "broken.model"
    broken.write_text("not a model")
    out = tmp_path / "out.txt"
    cases = [
        (["encode", "--model", tmp_path / "none.model", "--input", text, "--output", out],
         "sentencepiece model not found"),
        (["encode", "--model", broken, "--input", text, "--output", out],
         "is not a usable sentencepiece model"),
        (["encode", "--model", broken, "--input", tmp_path / "none.txt", "--output", out],
         "input text not found"),
        (["train", "--model-prefix", tmp_path / "spm", tmp_path / "none.txt"],
         "training input not found"),
        (["train", "--model-prefix", tmp_path / "no" / "spm", text],
         "does not exist"),
    ]  # fmt: skip
    for argv, message in cases:
        proc = run(BIN / "python", SPM_PREP, *argv, check=False)
        assert proc.returncode == 1, argv
        assert message in proc.stderr and "Traceback" not in proc.stderr, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["broken.model", "in.txt"]


# -- fairseq-generate without the plugin ----------------------------------------------


def test_generate_on_a_stripped_checkpoint_without_user_dir(tmp_path_factory, tmp_path):
    """What a user sees when --user-dir is forgotten (documented in the README notes).

    fairseq 0.12 never imports a plugin named in a checkpoint (cfg.common.user_dir
    is stored but unused on load) and has no plugin entry points, so nothing of
    the plugin runs: the load stops in torch's weights-only unpickler. The checkpoint's
    first entry is the plugin's marker, so the message names it (and what to do) rather
    than argparse.Namespace. No translation is produced.
    """
    data = tiny_corpus(tmp_path_factory)
    masked = tiny_checkpoint(tmp_path_factory)
    pruned = tmp_path / "pruned.pt"
    cli_ok(strip_cli.main, "--input", masked, "--output", pruned, "--quiet")
    common = [data, "--path", pruned, "--gen-subset", "test",
              "--beam", "2", "--batch-size", "8", "--max-len-b", "5", "--cpu"]  # fmt: skip
    bare = run(BIN / "fairseq-generate", *common, check=False)  # a process without the plugin
    assert bare.returncode != 0 and "H-" not in bare.stdout
    assert "Weights only load failed" in bare.stderr
    marker = "Unsupported global: GLOBAL dsp_fairseq.PLUGIN_NEEDED__load_with_fairseq_option"
    assert marker in bare.stderr and "user_dir_set_to_output_of_command_dsp_user_dir" in bare.stderr
    with_plugin = fairseq_generate([*common, "--user-dir", PLUGIN])  # (in-process)
    assert sum(line.startswith("H-") for line in with_plugin.splitlines()) == 40
