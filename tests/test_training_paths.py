"""Training and decoding paths of real users (issue 11, points 3, 4, 5, 7 and 8).

Activation checkpointing, alignment / per-head attention output, --clip-norm,
fairseq's composite optimizer, and the state a stripped checkpoint carries.
Where there is a stock fairseq counterpart, the plugin is compared with it.
"""

from __future__ import annotations

import math
import os
import stat

import pytest
import torch
from fairseq import checkpoint_utils, optim
from fairseq.logging import metrics
from fairseq.sequence_generator import SequenceGeneratorWithAlignment
from omegaconf import OmegaConf
from robustness_helpers import checkpoint_state, dsp_args, make_dictionary, make_task, random_tokens
from train_helpers import batch, fairseq_cfg, tiny_task, update

from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
from dsp_fairseq.cli import strip as strip_cli
from dsp_fairseq.pruning.strip import strip_checkpoint

# -- 3: --checkpoint-activations -------------------------------------------------------


@pytest.mark.parametrize("gate_type", ["dsp", "hard-concrete"])
def test_checkpoint_activations_gives_the_gradients_of_the_plain_model(gate_type):
    """It crashed ("backward through the graph a second time"): each checkpointed layer
    re-read the shared mask outside its inputs."""
    task = tiny_task()
    flags = ["--heads-to-keep", "5", "--gate-type", gate_type]
    plain = task.build_model(fairseq_cfg(*flags).model)
    ckpt = task.build_model(fairseq_cfg(*flags, "--checkpoint-activations").model)
    ckpt.load_state_dict(plain.state_dict())
    assert hasattr(ckpt.encoder.layers[0], "precheckpoint_forward")
    criterion = task.build_criterion(fairseq_cfg(*flags).criterion)
    sample = batch(task)
    grads = []
    for model in (plain, ckpt):
        model.train()
        model.head_gate.set_temperature(0.1)
        torch.manual_seed(7)  # the same Gumbel / Hard Concrete noise for both
        loss, _, _ = criterion(model, sample)
        loss.backward()
        grads.append({n: p.grad for n, p in model.named_parameters() if p.numel()})
        grads[-1]["head_gate.logits"] = model.head_gate.logits.grad  # not a parameter
    assert grads[0].keys() == grads[1].keys()
    for name, g in grads[0].items():
        assert torch.allclose(g, grads[1][name], rtol=1e-4, atol=1e-7 * g.abs().max()), name
    assert grads[1]["head_gate.logits"].abs().sum() > 0


# -- 4: alignment / per-head attention ----------------------------------------------------


def _masked_and_stripped(tmp_path, logits_seed=0, **budget):
    args = dsp_args(encoder_layers=1, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_embed_dim=16, decoder_embed_dim=16,
                    encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32,
                    share_all_embeddings=True, **budget)  # fmt: skip
    task = make_task(make_dictionary(30))
    model = task.build_model(args)
    with torch.no_grad():
        for p in model.parameters():  # beyond fairseq's init: sharper attention
            p.add_(torch.randn_like(p) * 0.3)
        n = model.head_gate.num_heads
        model.head_gate.logits.copy_(torch.randn(n, generator=torch.Generator().manual_seed(9)))
    save_checkpoint_atomic(checkpoint_state(model, args), str(tmp_path / "masked.pt"))
    stripped, _ = strip_checkpoint(load_checkpoint(str(tmp_path / "masked.pt")))
    save_checkpoint_atomic(stripped, str(tmp_path / "stripped.pt"))
    models = []
    for name in ("masked", "stripped"):
        loaded, _, _ = checkpoint_utils.load_model_ensemble_and_task(
            [str(tmp_path / f"{name}.pt")], task=task
        )
        models.append(loaded[0].eval())
    return task, models


def _generate_with_alignment(task, model):
    gen = torch.Generator().manual_seed(3)
    src, src_len = random_tokens(task.source_dictionary, 5, 8, gen)
    generator = SequenceGeneratorWithAlignment(
        [model], task.target_dictionary, beam_size=3, max_len_a=0, max_len_b=10,
        print_alignment="hard",
    )  # fmt: skip
    with torch.no_grad():
        return generator.generate(
            [model], {"net_input": {"src_tokens": src, "src_lengths": src_len}}
        )


@pytest.mark.parametrize(
    "budget",
    [{"heads_to_keep": 9}, {"heads_to_keep_per_type": "enc-self=2,dec-self=3,cross=0"}],
    ids=["K=9", "no-cross-head"],
)
def test_alignment_and_attention_of_masked_and_stripped_models_agree(tmp_path, budget):
    """fairseq's decoder asks its alignment layer for per-head weights and averages them
    itself; the masked model must report the kept heads only, as the stripped one does,
    and a layer that keeps no head must give a defined (zero) attention, not NaN."""
    task, (masked, stripped) = _masked_and_stripped(tmp_path, **budget)
    last_cross = stripped.decoder.layers[-1].encoder_attn
    assert (last_cross.num_heads == 0) == ("cross=0" in str(budget))
    out_m, out_s = _generate_with_alignment(task, masked), _generate_with_alignment(task, stripped)
    for sent_m, sent_s in zip(out_m, out_s):
        for h_m, h_s in zip(sent_m, sent_s):
            assert h_m["tokens"].tolist() == h_s["tokens"].tolist()
            assert math.isclose(float(h_m["score"]), float(h_s["score"]), abs_tol=1e-4)
            assert torch.isfinite(h_m["attention"]).all()
            assert torch.allclose(h_m["attention"], h_s["attention"], atol=1e-5)
            assert len(h_m["alignment"]) > 0 and h_m["alignment"] == h_s["alignment"]
            if last_cross.num_heads == 0:
                assert h_m["attention"].abs().sum() == 0


# -- 5: --clip-norm ------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_clip_norm_is_the_stock_models_norm_and_leaves_the_gate_out(precision, monkeypatch):
    """A transformer_dsp holding a stock transformer's weights, with an ``ste`` gate at
    K = H (mask exactly 1, gate gradient non-zero): fairseq's clipping must compute the
    stock model's norm and give the stock model's update; the gate steps on its own.
    fp16: fairseq's flattened FP16Optimizer (the --fp16 default; see test_fp16 for the
    CPU device shim), which the gate's logits are not in."""
    task = tiny_task()
    flags = ["--optimizer", "sgd", "--lr", "0.5", "--clip-norm", "0.05"]
    if precision == "fp16":
        flags.append("--fp16")
        monkeypatch.setattr(torch.cuda, "current_device", lambda: None)
    stock_cfg = fairseq_cfg(*flags, arch="transformer")
    dsp_cfg = fairseq_cfg(*flags, "--gate-type", "ste")
    stock, dsp = task.build_model(stock_cfg.model), task.build_model(dsp_cfg.model)
    state = stock.state_dict()
    state["head_gate.logits"] = dsp.head_gate.logits.detach().clone()
    dsp.load_state_dict(state)
    if precision == "fp16":
        stock, dsp = stock.half(), dsp.half()
    gate_before = dsp.head_gate.logits.detach().clone()
    sample = batch(task)
    norms = []
    for cfg, model in ((stock_cfg, stock), (dsp_cfg, dsp)):
        criterion = task.build_criterion(cfg.criterion)
        params = list(model.parameters())
        if precision == "fp16":
            optimizer = optim.FP16Optimizer.build_optimizer(cfg, params)
        else:
            optimizer = optim.build_optimizer(cfg.optimizer, params)
        with metrics.aggregate(new_root=True) as agg:
            grad_norm = update(task, model, criterion, optimizer, [sample], 0, clip_norm=0.05)
        norms.append(float(grad_norm))
    assert norms[0] > 0.05  # clipping happened
    assert norms[1] == pytest.approx(norms[0], rel=1e-5 if precision == "fp32" else 1e-3)
    dsp_params = dict(dsp.named_parameters())
    for name, p in stock.named_parameters():
        atol = 1e-6 if precision == "fp32" else 1e-3
        assert torch.allclose(p.float(), dsp_params[name].float(), atol=atol), name
    moved = (dsp.head_gate.logits.detach() - gate_before).abs()
    # The gate's Adam, first step, --gate-lr 0.2: each logit with a gradient moves by 0.2.
    assert moved.max() == pytest.approx(0.2, rel=1e-3)
    # Its own norm is logged beside fairseq's gnorm (which leaves it out).
    assert agg.get_smoothed_values()["gate_gnorm"] > 0


def test_train_gates_only_logs_the_gate_norm_and_a_zero_model_norm():
    """--train-gates-only: fairseq's trainer holds no parameter of the model (only the
    gate's zero-element anchor), so its gnorm is 0, and the gate's norm is logged as
    gate_gnorm; it was 2**-64 times the true norm, and logged as gnorm."""
    task = tiny_task()
    cfg = fairseq_cfg("--heads-to-keep", "5", "--train-gates-only", "--clip-norm", "1e-9")
    model = task.build_model(cfg.model)
    params = [p for p in model.parameters() if p.requires_grad]
    assert [p.numel() for p in params] == [0]
    optimizer = optim.build_optimizer(cfg.optimizer, params)
    criterion = task.build_criterion(cfg.criterion)
    seen = []
    model.head_gate.optimizer.register_step_pre_hook(
        lambda *_: seen.append(model.head_gate.logits.grad.clone())
    )
    model.head_gate.set_temperature(0.1)
    with metrics.aggregate(new_root=True) as agg:
        grad_norm = update(task, model, criterion, optimizer, [batch(task)], 0, clip_norm=1e-9)
    assert float(grad_norm) == 0.0
    gate_gnorm = agg.get_smoothed_values()["gate_gnorm"]
    assert gate_gnorm == pytest.approx(float(seen[0].norm()), rel=1e-3) and gate_gnorm > 1e-3


# -- 8: the gate's optimizer hook, fairseq's composite optimizer --------------------------


def _composite_cfg():
    """The model's config, and a composite optimizer with one (default) group: SGD."""
    cfg = fairseq_cfg("--heads-to-keep", "5")
    group = {
        "lr": [0.1],
        "optimizer": {"_name": "sgd", "lr": [0.1], "momentum": 0.0, "weight_decay": 0.0},
        "lr_scheduler": {"_name": "fixed", "lr": [0.1], "force_anneal": None,
                         "lr_shrink": 0.1, "warmup_updates": 0},
    }  # fmt: skip
    composite = {"_name": "composite", "groups": {"default": group}, "dynamic_groups": False}
    return cfg, OmegaConf.create(composite)


def test_composite_optimizer_trains_model_and_gate():
    """fairseq's --optimizer composite groups parameters by ``param.param_group``; the
    gate's tag used to live there too (KeyError)."""
    cfg, ccfg = _composite_cfg()
    task = tiny_task()
    model = task.build_model(cfg.model)
    assert not hasattr(model.head_gate.logits, "param_group")
    optimizer = optim.build_optimizer(ccfg, list(model.parameters()))
    criterion = task.build_criterion(cfg.criterion)
    gate_before = model.head_gate.logits.detach().clone()
    weight_before = model.encoder.layers[0].fc1.weight.detach().clone()
    model.head_gate.set_temperature(0.1)
    assert update(task, model, criterion, optimizer, [batch(task)], 0) is not None
    assert int(model.head_gate.optimizer.state[model.head_gate.logits]["step"]) == 1
    assert (model.head_gate.logits.detach() - gate_before).abs().max() == pytest.approx(
        0.2, rel=1e-3
    )
    assert not torch.equal(model.encoder.layers[0].fc1.weight.detach(), weight_before)


# -- 7: stripped checkpoints ---------------------------------------------------------------


def test_stripped_checkpoint_drops_stale_state_fsyncs_and_keeps_the_input_mode(
    tmp_path, monkeypatch
):
    args = dsp_args(encoder_layers=1, decoder_layers=1, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_embed_dim=16, decoder_embed_dim=16,
                    encoder_ffn_embed_dim=32, decoder_ffn_embed_dim=32, heads_to_keep=5)  # fmt: skip
    task = make_task(make_dictionary(20))
    model = task.build_model(args)
    state = checkpoint_state(model, args, num_updates=40)
    state["extra_state"] = {
        "train_iterator": {"epoch": 7, "iterations_in_epoch": 3, "shuffle": True},
        "val_loss": 1.5, "best": 1.25, "previous_training_time": 99.0, "metrics": {},
        "ema": {k: v.clone() for k, v in model.state_dict().items()},
    }  # fmt: skip
    src, out = tmp_path / "masked.pt", tmp_path / "pruned.pt"
    torch.save(state, src)
    os.chmod(src, 0o640)

    events = []
    real_fsync, real_replace = os.fsync, os.replace
    monkeypatch.setattr(os, "fsync", lambda fd: (events.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(
        os, "replace", lambda a, b: (events.append("replace"), real_replace(a, b))[1]
    )
    assert strip_cli.main(["--input", str(src), "--output", str(out), "--quiet"]) == 0
    assert events.index("fsync") < events.index("replace")
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o640

    extra = load_checkpoint(str(out))["extra_state"]
    for stale in ("best", "val_loss", "ema", "metrics"):
        assert stale not in extra
    assert extra["train_iterator"] == {"epoch": 1, "iterations_in_epoch": 0}
    # fairseq's own loader (upgrades included) reads it.
    assert checkpoint_utils.load_checkpoint_to_cpu(str(out))["extra_state"]["train_iterator"]


def test_atomic_write_without_a_model_file_uses_the_umask(tmp_path):
    umask = os.umask(0o027)
    try:
        save_checkpoint_atomic({"model": {}}, str(tmp_path / "a.pt"))
    finally:
        os.umask(umask)
    assert stat.S_IMODE(os.stat(tmp_path / "a.pt").st_mode) == 0o640


def test_freeze_gates_trains_the_model_with_the_fixed_test_mask():
    """--freeze-gates under the task: no gate optimizer, no gradient on the logits, the
    model.s weights train."""
    task = tiny_task()
    cfg = fairseq_cfg("--heads-to-keep", "5", "--freeze-gates")
    model = task.build_model(cfg.model)
    gate = model.head_gate
    assert gate.frozen and gate.optimizer is None and gate.anchor is None
    optimizer = optim.build_optimizer(cfg.optimizer, list(model.parameters()))
    criterion = task.build_criterion(cfg.criterion)
    logits = gate.logits.detach().clone()
    weight = model.encoder.layers[0].fc1.weight.detach().clone()
    for step in range(2):
        assert update(task, model, criterion, optimizer, [batch(task, seed=step)], step)
    assert torch.equal(gate.logits.detach(), logits) and gate.logits.grad is None
    assert not torch.equal(model.encoder.layers[0].fc1.weight.detach(), weight)
