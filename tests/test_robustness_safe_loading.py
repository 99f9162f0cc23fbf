"""A checkpoint carrying an unexpected pickled global is refused, never executed.

The payload would create a marker file when unpickled; every load path must
refuse the file and leave no marker: dsp-strip, fairseq's own
``load_checkpoint_to_cpu`` with the plugin imported, ``fairseq-generate
--user-dir``, and ``fairseq-train`` resuming from a poisoned
checkpoint_last.pt. Also: the types the plugin allowlists for distributed
resume (see dsp_fairseq/safe_loading.py) are data classes only, and fairseq's
rank-0 -> rank-N checkpoint broadcast loads with them.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import os

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.distributed.utils import _put_tensors_in_obj, _split_tensors_from_obj
from robustness_helpers import (
    BIN,
    PLUGIN,
    checkpoint_state,
    dsp_args,
    make_dictionary,
    make_task,
    run,
    tiny_checkpoint,
    tiny_corpus,
    train_cmd,
)

from dsp_fairseq.checkpoint_io import CheckpointError, load_checkpoint
from dsp_fairseq.cli import strip as strip_cli
from dsp_fairseq.safe_loading import SAFE_CHECKPOINT_GLOBALS, broadcast_globals


class Payload:
    """Unpickling this runs ``touch MARKER``."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def poison(state: dict, marker, where: str) -> dict:
    state = dict(state)
    if where == "top-level":
        state["extra"] = Payload(marker)
    else:  # hidden inside the allowlisted model configuration
        args = argparse.Namespace(**vars(state["cfg"]["model"]))
        args.note = Payload(marker)
        state["cfg"] = dict(state["cfg"], model=args)
    return state


def _sha(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


@pytest.fixture
def small_state():
    args = dsp_args(encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                    decoder_attention_heads=2, encoder_embed_dim=8, decoder_embed_dim=8,
                    encoder_ffn_embed_dim=16, decoder_ffn_embed_dim=16,
                    share_all_embeddings=True, heads_to_keep=2)  # fmt: skip
    return checkpoint_state(make_task(make_dictionary(20)).build_model(args), args)


def test_payload_really_runs_when_loaded_unsafely(small_state, tmp_path):
    """Control: the payload is live, so its absence below means it was not executed."""
    marker = tmp_path / "marker"
    torch.save(poison(small_state, marker, "top-level"), tmp_path / "evil.pt")
    torch.load(tmp_path / "evil.pt", weights_only=False)
    assert marker.exists()


@pytest.mark.parametrize("where", ["top-level", "inside-namespace"])
def test_plugin_and_fairseq_loaders_refuse_in_process(where, small_state, tmp_path, capsys):
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    torch.save(poison(small_state, marker, where), evil)
    with pytest.raises(CheckpointError, match="refused to load.*posix.system"):
        load_checkpoint(str(evil))
    with pytest.raises(Exception, match="GLOBAL posix.system"):
        checkpoint_utils.load_checkpoint_to_cpu(str(evil))  # fairseq's path, plugin imported
    assert strip_cli.main(["--input", str(evil), "--output", str(tmp_path / "out.pt")]) == 2
    assert "refused to load" in capsys.readouterr().err
    assert not marker.exists() and not (tmp_path / "out.pt").exists()


def test_fairseq_cli_tools_refuse_a_poisoned_checkpoint(tmp_path_factory, tmp_path):
    data = tiny_corpus(tmp_path_factory)
    real = load_checkpoint(str(tiny_checkpoint(tmp_path_factory)))
    marker = tmp_path / "marker"

    evil = tmp_path / "evil.pt"
    torch.save(poison(real, marker, "top-level"), evil)
    gen = run(BIN / "fairseq-generate", data, "--user-dir", PLUGIN, "--path", evil,
              "--gen-subset", "test", "--beam", "2", "--max-len-b", "5", "--cpu",
              check=False)  # fmt: skip
    assert gen.returncode != 0 and "H-" not in gen.stdout
    assert "GLOBAL posix.system" in gen.stderr

    # fairseq-train resumes from checkpoint_last.pt in its save dir.
    save = tmp_path / "save"
    save.mkdir()
    torch.save(poison(real, marker, "inside-namespace"), save / "checkpoint_last.pt")
    before = _sha(save / "checkpoint_last.pt")
    train = run(*train_cmd(data, save, 2), check=False)
    assert train.returncode != 0
    assert "GLOBAL posix.system" in train.stderr
    assert _sha(save / "checkpoint_last.pt") == before
    assert sorted(p.name for p in save.iterdir()) == ["checkpoint_last.pt"]
    assert not marker.exists()


def test_allowlist_holds_only_data_classes():
    """Classes can only be constructed by the unpickler; no function may be allowlisted."""
    allowed = SAFE_CHECKPOINT_GLOBALS + broadcast_globals()
    assert all(isinstance(g, type) for g in allowed), allowed
    modules = {g.__module__.split(".")[0] for g in allowed}
    assert modules <= {"argparse", "omegaconf", "fairseq", "typing", "collections", "builtins",
                       "dsp_fairseq"}  # fmt: skip
    # the plugin's own entry is only the marker checkpoints carry: no attribute but its doc
    ours = [g for g in allowed if g.__module__ == "dsp_fairseq"]
    assert len(ours) == 1 and not [a for a in vars(ours[0]) if not a.startswith("__")]
    registered = set(torch.serialization.get_safe_globals())
    assert set(allowed) <= registered


def test_rank0_broadcast_of_a_checkpoint_loads_on_other_ranks(tmp_path_factory):
    """What fairseq's broadcast_object does when a multi-process run resumes.

    Rank 0 loads the checkpoint (its cfg becomes an OmegaConf DictConfig),
    swaps tensors for placeholders and torch.save()s the rest; every other rank
    torch.load()s it with torch's default, weights_only=True. Before the
    plugin allowlisted these types, rank 1 died with "Unsupported global:
    omegaconf.dictconfig.DictConfig".
    """
    state = checkpoint_utils.load_checkpoint_to_cpu(str(tiny_checkpoint(tmp_path_factory)))
    tensors: list = []
    buffer = io.BytesIO()
    torch.save(_split_tensors_from_obj(state, tensors), buffer)
    buffer.seek(0)
    received = _put_tensors_in_obj(torch.load(buffer, map_location="cpu"), tensors)
    assert received["cfg"].model.heads_to_keep == state["cfg"].model.heads_to_keep
    assert torch.equal(received["model"]["head_gate.logits"], state["model"]["head_gate.logits"])
    assert received["last_optimizer_state"]["state"].keys() == (
        state["last_optimizer_state"]["state"].keys()
    )
