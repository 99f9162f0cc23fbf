"""Averaging a fine-tune's last checkpoints (dsp_fairseq.recipes.finetuned_checkpoint):
the mean of the parameters, which checkpoints are the last N, and the refusals. The recipe
end to end (finetune-pruned.sh --average-last) is in test_recovery_end_to_end.py."""

import pytest
import torch

from dsp_fairseq.checkpoint_io import CheckpointError
from dsp_fairseq.recipes.finetuned_checkpoint import average_models, last_checkpoints


def state(updates: int, **model) -> dict:
    return {"model": model, "optimizer_history": [{"num_updates": updates}], "extra_state": {}}


def test_average_is_the_mean_of_each_parameter_and_keeps_the_last_state():
    a = state(
        10,
        w=torch.tensor([1.0, 2.0]),
        h=torch.tensor([1.0], dtype=torch.float16),
        n=torch.tensor(3),
    )
    b = state(
        20,
        w=torch.tensor([3.0, 6.0]),
        h=torch.tensor([2.0], dtype=torch.float16),
        n=torch.tensor(3),
    )
    out = average_models([a, b])
    assert torch.equal(out["model"]["w"], torch.tensor([2.0, 4.0]))
    assert out["model"]["h"].dtype == torch.float16 and out["model"]["h"].item() == 1.5
    assert out["model"]["n"].item() == 3
    assert out["optimizer_history"] == b["optimizer_history"]  # the newest model's metadata
    assert torch.equal(a["model"]["w"], torch.tensor([1.0, 2.0]))  # inputs untouched


def test_average_refuses_different_models():
    a = state(1, w=torch.zeros(2))
    with pytest.raises(CheckpointError, match="shape"):
        average_models([a, state(2, w=torch.zeros(3))])
    with pytest.raises(CheckpointError, match="other parameters"):
        average_models([a, state(2, v=torch.zeros(2))])
    with pytest.raises(CheckpointError, match="non-float"):
        average_models([state(1, n=torch.tensor(1)), state(2, n=torch.tensor(2))])
    with pytest.raises(CheckpointError, match="nothing to average"):
        average_models([])


def test_last_checkpoints_are_the_newest_intervals_before_checkpoint_last(tmp_path):
    for epoch, updates in ((1, 27), (1, 54), (2, 162), (2, 189), (2, 270)):
        torch.save(state(updates, w=torch.zeros(1)), tmp_path / f"checkpoint_{epoch}_{updates}.pt")
    torch.save(state(270, w=torch.zeros(1)), tmp_path / "checkpoint_last.pt")
    torch.save(state(54, w=torch.zeros(1)), tmp_path / "checkpoint_best.pt")
    names = [p.split("/")[-1] for p in last_checkpoints(str(tmp_path), 3)]
    # the interval checkpoint at update 270 is checkpoint_last.pt's model: not counted twice;
    # ordered by update, not by name (189 after 162, 54 after 27)
    assert names == ["checkpoint_2_162.pt", "checkpoint_2_189.pt", "checkpoint_last.pt"]
    assert [p.split("/")[-1] for p in last_checkpoints(str(tmp_path), 1)] == ["checkpoint_last.pt"]
    assert len(last_checkpoints(str(tmp_path), 5)) == 5
    with pytest.raises(CheckpointError, match="5 checkpoints to average, 6 asked for"):
        last_checkpoints(str(tmp_path), 6)
    with pytest.raises(CheckpointError, match="positive"):
        last_checkpoints(str(tmp_path), 0)


def test_average_keeps_tied_weights_one_tensor():
    # --share-all-embeddings: encoder, decoder and output embeddings are one tensor
    shared_a, shared_b = torch.tensor([1.0, 3.0]), torch.tensor([3.0, 5.0])
    a = state(1, enc=shared_a, dec=shared_a, w=torch.zeros(1))
    b = state(2, enc=shared_b, dec=shared_b, w=torch.ones(1))
    out = average_models([a, b])["model"]
    assert torch.equal(out["enc"], torch.tensor([2.0, 4.0])) and out["dec"] is out["enc"]
    assert out["w"].item() == 0.5
    # tied in one checkpoint only: averaged apart
    c = state(2, enc=shared_b, dec=shared_b.clone(), w=torch.ones(1))
    out = average_models([a, c])["model"]
    assert out["dec"] is not out["enc"] and torch.equal(out["dec"], out["enc"])
