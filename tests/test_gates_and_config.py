"""Gate interface, per-update temperature, gate learning rate and K validation."""

import argparse

import pytest

from dsp_fairseq.criterions.dsp_label_smoothed_cross_entropy import annealed_temperature
from dsp_fairseq.gates import GATE_REGISTRY, build_budget
from dsp_fairseq.models.gate_config import budget_request, build_gate
from dsp_fairseq.models.head_layout import attention_slots, proportional_split
from dsp_fairseq.models.transformer_dsp import transformer_dsp_iwslt_de_en


def iwslt_args(**overrides):
    args = argparse.Namespace(**overrides)
    transformer_dsp_iwslt_de_en(args)
    return args


def test_iwslt_architecture_has_72_gated_heads():
    args = iwslt_args(heads_to_keep=18)
    gate, gated = build_gate(args, attention_slots(args))
    assert gate.num_heads == 72 and len(gated) == 18
    assert (args.encoder_layers, args.encoder_embed_dim, args.encoder_ffn_embed_dim) == (
        6,
        512,
        1024,
    )


@pytest.mark.parametrize("k", [0, -1, 73])
def test_out_of_range_k_names_the_allowed_range(k):
    args = iwslt_args(heads_to_keep=k)
    with pytest.raises(ValueError, match=r"choose K in \[1, 72\]"):
        build_gate(args, attention_slots(args))


def test_unknown_attention_type_is_rejected():
    with pytest.raises(ValueError, match="enc-self,dec-self,cross"):
        iwslt_args(gated_attentions="enc-self,decoder")


def test_gated_subset_changes_h():
    args = iwslt_args(gated_attentions="cross", heads_to_keep=25)
    with pytest.raises(ValueError, match=r"\[1, 24\]"):
        build_gate(args, attention_slots(args))


def test_per_type_budget():
    args = iwslt_args(heads_to_keep_per_type="enc-self=6,dec-self=0,cross=12")
    gate, _ = build_gate(args, attention_slots(args))
    gate.eval()
    mask = gate.test_mask()
    assert mask[:24].sum() == 6 and mask[24:48].sum() == 0 and mask[48:].sum() == 12
    with pytest.raises(ValueError, match=r"\[0, 24\]"):
        bad = iwslt_args(heads_to_keep_per_type="enc-self=30,dec-self=0,cross=1")
        build_gate(bad, attention_slots(bad))


@pytest.mark.parametrize(
    "k, gated, expected",
    [(18, "enc-self,dec-self,cross", [6, 6, 6]), (19, "enc-self,dec-self,cross", [6, 6, 7]),
     (20, "enc-self,dec-self,cross", [6, 7, 7]), (9, "enc-self,cross", [4, 5])],
)  # fmt: skip
def test_proportional_budget_shares_k_among_the_types(k, gated, expected):
    args = iwslt_args(
        heads_to_keep=k, heads_to_keep_per_type="proportional", gated_attentions=gated
    )
    gate, _ = build_gate(args, attention_slots(args))
    gate.eval()
    mask = gate.test_mask()
    assert [int(mask[i * 24 : (i + 1) * 24].sum()) for i in range(len(expected))] == expected


@pytest.mark.parametrize(
    "k, expected",
    [(9, [3, 3, 3]), (18, [6, 6, 6]), (19, None), (36, None)],
)  # fmt: skip
def test_proportional_at_small_k_splits_up_to_a_quarter_of_the_heads(k, expected):
    """proportional-at-small-k (prune-pipelined.sh --type-split auto): the proportional split
    where K <= H/4 (18 of 72), one global top-K above it."""
    args = iwslt_args(heads_to_keep=k, heads_to_keep_per_type="proportional-at-small-k")
    gate, _ = build_gate(args, attention_slots(args))
    assert budget_request(args, {"enc-self": 24, "dec-self": 24, "cross": 24}) == (
        {"per_segment": expected} if expected else {"heads_to_keep": k}
    )
    gate.eval()
    assert int(gate.test_mask().sum()) == k
    if expected:
        mask = gate.test_mask()
        assert [int(mask[i * 24 : (i + 1) * 24].sum()) for i in range(3)] == expected


def test_proportional_split_follows_the_types_sizes():
    sizes = {"enc-self": 48, "dec-self": 24, "cross": 24}
    assert proportional_split(10, sizes) == {"enc-self": 5, "dec-self": 2, "cross": 3}
    assert proportional_split(96, sizes) == sizes


@pytest.mark.parametrize(
    "budget, message",
    [({}, "give --heads-to-keep K as well"), ({"heads_to_keep": 73}, r"choose K in \[1, 72\]")],
)
@pytest.mark.parametrize("spec", ["proportional", "proportional-at-small-k"])
def test_proportional_budget_refusals(budget, message, spec):
    args = iwslt_args(heads_to_keep_per_type=spec, **budget)
    with pytest.raises(ValueError, match=message):
        build_gate(args, attention_slots(args))


@pytest.mark.parametrize("name", sorted(GATE_REGISTRY))
def test_every_gate_masks_exactly_k_at_test_time(name):
    gate = GATE_REGISTRY[name](36, build_budget([36], heads_to_keep=9))
    gate.set_temperature(0.1)
    gate.train()
    gate.resample()
    train_mask = gate.current_mask()
    assert train_mask.shape == (36,)
    train_mask.sum().backward()
    assert gate.logits.grad is not None
    gate.eval()
    assert gate.current_mask().sum() == 9
    assert set(gate.current_mask().tolist()) <= {0.0, 1.0}


@pytest.mark.parametrize("name", ["dsp-st", "ste"])
def test_straight_through_gates_are_k_hot_while_training(name):
    gate = GATE_REGISTRY[name](20, build_budget([20], heads_to_keep=5))
    gate.set_temperature(0.5)
    gate.train()
    for _ in range(5):
        gate.resample()
        mask = gate.current_mask().detach()
        assert mask.sum() == 5 and set(mask.tolist()) <= {0.0, 1.0}


def test_annealing_schedule():
    assert annealed_temperature(0, 0.1, 1e-8, 100) == pytest.approx(0.1)
    assert annealed_temperature(50, 0.1, 1e-8, 100) == pytest.approx(10**-4.5)
    assert annealed_temperature(100, 0.1, 1e-8, 100) == pytest.approx(1e-8)
    assert annealed_temperature(10_000, 0.1, 1e-8, 100) == pytest.approx(1e-8)


def test_gate_logits_get_constant_lr_without_weight_decay():
    """The gate trains outside fairseq's optimizer: its learning-rate schedule (a
    changing lr) and weight decay never reach the logits; the task's Adam moves each
    logit by --gate-lr on its first steps (a gradient of constant sign: lr per step)."""
    from fairseq import optim
    from train_helpers import batch, fairseq_cfg, tiny_task, update

    task = tiny_task()
    cfg = fairseq_cfg("--heads-to-keep", "5", "--weight-decay", "0.5", "--gate-lr", "0.2")
    model = task.build_model(cfg.model)
    gate = model.head_gate
    assert all(p is not gate.logits for p in model.parameters())
    optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
    criterion = task.build_criterion(cfg.criterion)
    gate.set_temperature(0.1)
    before = gate.logits.detach().clone()
    for step in range(2):
        optimizer.set_lr(1e-6 * (step + 1))  # a schedule the gate must ignore
        update(task, model, criterion, optimizer, [batch(task, seed=step)], step)
        if step == 0:
            first = gate.logits.detach() - before
    assert first.abs().max() == pytest.approx(0.2, rel=1e-4)
    state = gate.optimizer.state[gate.logits]
    assert int(state["step"]) == 2 and gate.optimizer.param_groups[0]["weight_decay"] == 0.0
    assert gate.optimizer.param_groups[0]["lr"] == 0.2


@pytest.mark.parametrize("no_cross", [False, True])
def test_pick_k_counts_the_heads_of_the_models_own_layout(tmp_path, no_cross):
    """dsp-pick-k counted 2 x decoder heads whatever the decoder had (--no-cross-attention)."""
    from dsp_fairseq.checkpoint_io import save_checkpoint_atomic
    from dsp_fairseq.cli.pick_k import count_heads

    args = argparse.Namespace(arch="transformer", encoder_layers=2, decoder_layers=3,
                              encoder_attention_heads=4, decoder_attention_heads=8,
                              no_cross_attention=no_cross)  # fmt: skip
    save_checkpoint_atomic({"cfg": {"model": args}, "model": {}}, str(tmp_path / "base.pt"))
    assert count_heads(str(tmp_path / "base.pt")) == 2 * 4 + 3 * 8 * (1 if no_cross else 2)


def _scores_file(path, slots, scores):
    """A dsp-importance file (format dsp-head-importance/1) with these per-head scores."""
    import json

    docs, start = [], 0
    for s in slots:
        docs.append({"prefix": s.prefix, "kind": s.kind, "layer": s.layer,
                     "num_heads": s.num_heads, "scores": scores[start:start + s.num_heads]})  # fmt: skip
        start += s.num_heads
    path.write_text(json.dumps({"format": "dsp-head-importance/1", "slots": docs}))
    return path


def test_gate_logits_start_from_importance_scores(tmp_path):
    """--gate-init-scores: the first test mask keeps the heads the scores rank highest (the
    heads dsp-strip --importance keeps from the same file), the logits are the standardised
    log scores times --gate-init-scale, and loading a gate-less (stock) checkpoint keeps
    them; a checkpoint with gate logits brings its own."""
    import torch
    from train_helpers import fairseq_cfg, tiny_task

    from dsp_fairseq.importance.scores_file import ranking_for_model, read_importance
    from dsp_fairseq.pruning.selection import kept_from_ranking

    task = tiny_task()
    plain = task.build_model(fairseq_cfg("--heads-to-keep", "5").model)
    slots = attention_slots(plain.args)
    scores = torch.rand(12, generator=torch.Generator().manual_seed(3)).add(0.01).tolist()
    scores[4] = 0.0  # a head with no measured effect: still finite after the log
    path = _scores_file(tmp_path / "imp.json", slots, scores)
    cfg = fairseq_cfg("--heads-to-keep", "5", "--gate-init-scores", str(path),
                      "--gate-init-scale", "1.5")  # fmt: skip
    model = task.build_model(cfg.model)
    logits = model.head_gate.logits.detach().double()
    assert logits.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert logits.std().item() == pytest.approx(1.5, rel=1e-5)
    assert torch.equal(logits.argsort(), torch.tensor(scores).argsort())  # the same order
    mask = model.head_gate.test_mask()
    flat, start = {}, 0
    for s in slots:
        for h in range(s.num_heads):
            flat[(s.prefix, h)] = start + h
        start += s.num_heads
    kept = kept_from_ranking(slots, ranking_for_model(read_importance(str(path)), slots), 5)
    expected = sorted(flat[(p, h)] for p, heads in kept.items() for h in heads)
    assert mask.nonzero().flatten().tolist() == expected
    stock = {k: v for k, v in plain.state_dict().items() if not k.startswith("head_gate")}
    again = task.build_model(cfg.model)
    again.load_state_dict(stock, strict=False, model_cfg=cfg.model)
    assert torch.equal(again.head_gate.logits.detach(), model.head_gate.logits.detach())
    gated = task.build_model(cfg.model)
    gated.load_state_dict(plain.state_dict(), strict=True, model_cfg=cfg.model)
    assert torch.equal(gated.head_gate.logits.detach(), plain.head_gate.logits.detach())


def test_gate_init_scores_refusals(tmp_path):
    """A scores file of another layout fails at build time; a missing file fails only where
    it was needed (a gate-less checkpoint to start from), saying what to do."""
    from train_helpers import fairseq_cfg, tiny_task

    from dsp_fairseq.gates.dsp import DSPGate

    task = tiny_task()
    plain = task.build_model(fairseq_cfg("--heads-to-keep", "5").model)
    slots = attention_slots(plain.args)
    short = _scores_file(tmp_path / "short.json", slots[:-1], [1.0] * 8)
    with pytest.raises(ValueError, match="another attention layout"):
        task.build_model(
            fairseq_cfg("--heads-to-keep", "5", "--gate-init-scores", str(short)).model
        )
    missing = fairseq_cfg("--heads-to-keep", "5", "--gate-init-scores", str(tmp_path / "no.json"))
    model = task.build_model(missing.model)  # e.g. dsp-strip reading a trained gated checkpoint
    model.load_state_dict(plain.state_dict(), strict=True, model_cfg=missing.model)
    stock = {k: v for k, v in plain.state_dict().items() if not k.startswith("head_gate")}
    with pytest.raises(ValueError, match="no such file.*run dsp-importance first"):
        task.build_model(missing.model).load_state_dict(
            stock, strict=False, model_cfg=missing.model
        )
    gate = DSPGate(4, build_budget([4], heads_to_keep=2))
    with pytest.raises(ValueError, match="3 scores for a gate of 4 heads"):
        gate.init_from_scores([1.0, 2.0, 3.0], 2.0)
    with pytest.raises(ValueError, match="finite and non-negative"):
        gate.init_from_scores([1.0, -2.0, 3.0, 1.0], 2.0)
