"""Layer-wise reconstruction (dsp_fairseq/pruning/reconstruct.py, dsp-reconstruct)."""

import copy
import gc

import pytest
import torch
from robustness_helpers import checkpoint_state, run
from train_helpers import batch, fairseq_cfg, tiny_task

from dsp_fairseq.checkpoint_io import CheckpointError, model_args
from dsp_fairseq.pruning.calibrate import (
    all_heads,
    reconstruct_checkpoint,
)
from dsp_fairseq.pruning.reconstruct import LinearRefit, forward_order, reconstruct
from dsp_fairseq.pruning.strip import strip_checkpoint

# -- LinearRefit: the least-squares core ---------------------------------------------


def test_refit_recovers_a_linear_map_exactly_and_streams():
    gen = torch.Generator().manual_seed(0)
    w, b = torch.randn(5, 7, generator=gen), torch.randn(5, generator=gen)
    xs = [torch.randn(30, 7, generator=gen) for _ in range(4)]
    one, streamed = LinearRefit(7, 5), LinearRefit(7, 5)
    one.add_batch(torch.cat(xs), torch.cat(xs) @ w.T + b)
    for x in xs:
        streamed.add_batch(x, x @ w.T + b)
    for fit in (one, streamed):
        sol_w, sol_b = fit.solve(ridge=0.0)
        torch.testing.assert_close(sol_w.float(), w, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sol_b.float(), b, atol=1e-5, rtol=1e-5)
        assert fit.residual_error(sol_w, sol_b) < 1e-10
    torch.testing.assert_close(one.gram, streamed.gram)
    # the mask drops rows: garbage rows masked out change nothing
    masked = LinearRefit(7, 5)
    x = torch.cat([xs[0], 100 * torch.randn(3, 7, generator=gen)])
    y = torch.cat([xs[0] @ w.T + b, torch.randn(3, 5, generator=gen)])
    masked.add_batch(x, y, torch.tensor([True] * 30 + [False] * 3))
    torch.testing.assert_close(masked.solve(0.0)[0].float(), w, atol=1e-4, rtol=1e-4)


def test_refit_state_does_not_grow_with_batches():
    fit = LinearRefit(6, 4)
    size = lambda: sum(t.numel() for t in (fit.gram, fit.cross))  # noqa: E731
    before = size()
    for _ in range(50):
        fit.add_batch(torch.randn(64, 6), torch.randn(64, 4))
    assert size() == before == 7 * 7 + 7 * 4 and fit.rows == 50 * 64


def test_no_heads_gives_the_mean_as_bias_and_ridge_shrinks():
    fit = LinearRefit(0, 3)
    y = torch.randn(40, 3)
    fit.add_batch(torch.zeros(40, 0), y)
    w, b = fit.solve(ridge=0.5)
    assert w.shape == (3, 0)
    torch.testing.assert_close(b.float(), y.mean(0), atol=1e-6, rtol=1e-6)
    fit = LinearRefit(4, 2)
    x = torch.randn(50, 4)
    fit.add_batch(x, x[:, :2] * 3)
    assert fit.solve(10.0)[0].norm() < fit.solve(0.0)[0].norm()
    with pytest.raises(ValueError, match="no calibration rows"):
        LinearRefit(2, 2).solve(0.0)


def test_ridge_toward_a_prior_interpolates_between_the_fit_and_the_prior():
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(200, 6, generator=gen)
    w = torch.randn(3, 6, generator=gen)
    fit = LinearRefit(6, 3)
    fit.add_batch(x, x @ w.T + 0.1 * torch.randn(200, 3, generator=gen))
    prior = torch.randn(3, 6, generator=gen)
    free = fit.solve(0.0)[0]
    # no ridge: the prior does not matter; a huge ridge: the prior itself, not zero
    torch.testing.assert_close(fit.solve(0.0, prior)[0], free)
    torch.testing.assert_close(fit.solve(1e8, prior)[0].float(), prior, atol=1e-4, rtol=1e-4)
    assert fit.solve(1e8)[0].abs().max() < 1e-4
    # in between: closer to the prior than the free fit is, at a higher training error
    mid_w, mid_b = fit.solve(1.0, prior)
    assert (mid_w.float() - prior).norm() < (free.float() - prior).norm()
    assert fit.residual_error(mid_w, mid_b) > fit.residual_error(*fit.solve(0.0))


# -- reconstruct() on real fairseq models with a known structure ------------------------


def _model_and_state(task):
    cfg = fairseq_cfg()
    model = task.build_model(cfg.model)
    model.eval()
    args = copy.copy(cfg.model)
    return model, checkpoint_state(model, args)


def _model(task, state):
    args = model_args(state)
    model = task.build_model(args)
    model.load_state_dict(state["model"], strict=True, model_cfg=args)
    return model.eval()


def _outputs(model, samples):
    with torch.no_grad():
        return [model(**s["net_input"])[0] for s in samples]


@pytest.mark.parametrize(
    "target,ffn,fc1,qkv",
    [("output", False, False, False), ("residual", False, False, False),
     ("residual", True, False, False), ("residual", True, True, True)],
)  # fmt: skip
def test_duplicate_head_is_reconstructed_exactly(target, ffn, fc1, qkv):
    """Head 1 of every attention copies head 0: removing it, the refit doubles head 0's
    output columns, which gives the unpruned model's output again, to float tolerance."""
    torch.manual_seed(0)
    task = tiny_task()
    teacher, state = _model_and_state(task)
    sd = state["model"]
    d = 4  # head dim: 16 / 4 heads
    for slot, _ in teacher.attention_modules():
        for proj in ("q_proj", "k_proj", "v_proj"):
            sd[f"{slot.prefix}.{proj}.weight"][d : 2 * d] = sd[f"{slot.prefix}.{proj}.weight"][:d]
            sd[f"{slot.prefix}.{proj}.bias"][d : 2 * d] = sd[f"{slot.prefix}.{proj}.bias"][:d]
    teacher.load_state_dict(sd)
    kept = {p: [h for h in heads if h != 1] for p, heads in all_heads(state).items()}
    pruned_state, _ = strip_checkpoint(state, kept=kept)
    student = _model(task, pruned_state)
    samples = [batch(task, n=6, seed=s) for s in range(3)]
    want = _outputs(teacher, samples)
    assert max((a - b).abs().max() for a, b in zip(_outputs(student, samples), want)) > 1e-3
    report = reconstruct(
        student,
        teacher,
        lambda: samples,
        ridge=0.0,
        target=target,
        refit_ffn=ffn,
        refit_fc1=fc1,
        refit_qkv=qkv,
        kept=kept,
    )
    got = _outputs(student, samples)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=2e-4, rtol=1e-4)
    attn = [r for r in report.slots if r.heads >= 0]
    assert [r.prefix for r in attn] == forward_order(student)
    assert all(r.error_after < 1e-8 < r.error_before for r in attn)
    # one FFN refit per block (fc1 first when asked), after the block's last attention
    ffns = [r.prefix for r in report.slots if r.prefix.endswith((".fc1", ".fc2"))]
    layers = ["encoder.layers.0.", "decoder.layers.0."]
    names = ["fc1", "fc2"] if fc1 else ["fc2"]
    assert ffns == ([layer + n for layer in layers for n in names] if ffn else [])
    assert all(r.error_after < 1e-8 for r in report.slots)
    # q/k/v of every attention (kept heads' rows of the unpruned projections), before it
    projections = [r.prefix for r in report.slots if r.prefix.endswith("_proj")]
    assert projections == (
        [f"{p}.{n}" for p in forward_order(student) for n in ("q_proj", "kv_proj")] if qkv else []
    )


def test_forward_order_is_the_forward_pass():
    task = tiny_task()
    cfg = fairseq_cfg("--encoder-layers", "2", "--decoder-layers", "2")
    model = task.build_model(cfg.model)
    assert forward_order(model) == [
        "encoder.layers.0.self_attn", "encoder.layers.1.self_attn",
        "decoder.layers.0.self_attn", "decoder.layers.0.encoder_attn",
        "decoder.layers.1.self_attn", "decoder.layers.1.encoder_attn",
    ]  # fmt: skip


def _live_tensor_bytes() -> int:
    gc.collect()
    return sum(o.nelement() * o.element_size() for o in gc.get_objects() if torch.is_tensor(o))


def test_calibration_memory_does_not_grow_with_batches():
    """Peak live tensor memory during the refit is the same for 3 and for 12 batches
    (besides the batches themselves, which a generator hands out one at a time), when no
    layer inputs are kept (--calibration-cache-mb 0; what they take is bounded by it: the
    test below)."""
    torch.manual_seed(0)
    task = tiny_task()
    teacher, state = _model_and_state(task)
    kept = {p: heads[:2] for p, heads in all_heads(state).items()}
    pruned_state, _ = strip_checkpoint(state, kept=kept)

    def peak(n):
        student = _model(task, pruned_state)
        seen = []

        def batches():  # memory counted before the last batch of each pass, where kept
            for s in range(n):  # activations would have piled up the most (a gc scan is slow)
                if s == n - 1:
                    seen.append(_live_tensor_bytes())
                yield batch(task, n=16, max_len=12, seed=s)

        reconstruct(student, teacher, batches, ridge=1e-3, cache_mb=0)
        return max(seen)

    gc.freeze()  # what exists now is constant: leave it out of every scan (the scans get fast)
    try:
        small, large = peak(3), peak(12)
    finally:
        gc.unfreeze()
    assert large <= small * 1.02 + 4096


@pytest.mark.parametrize(
    "layers,options",
    [("post-norm", {}), ("pre-norm", {"refit_fc1": True, "refit_qkv": True}),
     ("post-norm", {"target": "output", "refit_ffn": False})],
)  # fmt: skip
def test_kept_layer_inputs_give_the_same_refit_within_their_budget(layers, options):
    """Keeping each batch's input to the layer being refit (the default) gives the same
    weights, bit for bit, as running the model from its embeddings for every job
    (cache 0), also when the budget keeps only some batches; the kept inputs never take
    more than the budget."""
    torch.manual_seed(0)
    task = tiny_task()
    extra = ("--encoder-layers", "2", "--decoder-layers", "2")
    if layers == "pre-norm":
        extra += ("--encoder-normalize-before", "--decoder-normalize-before")
    teacher = task.build_model(fairseq_cfg(*extra).model).eval()
    state = checkpoint_state(teacher, copy.copy(fairseq_cfg(*extra).model))
    kept = {p: heads[:2] for p, heads in all_heads(state).items()}
    pruned_state, _ = strip_checkpoint(state, kept=kept)
    samples = [batch(task, n=8 + 4 * s, max_len=10 + s, seed=s) for s in range(4)]
    weights, used = {}, {}
    for cache_mb in (0, 0.02, 64):  # none kept, some batches kept, all kept
        student = _model(task, pruned_state)
        report = reconstruct(
            student, teacher, lambda: samples, kept=kept, cache_mb=cache_mb, **options
        )
        weights[cache_mb], used[cache_mb] = student.state_dict(), report.layer_inputs_mb
    assert used[0] == 0 < used[0.02] <= 0.02 < used[64] <= 64
    for cache_mb in (0.02, 64):
        assert weights[cache_mb].keys() == weights[0].keys()
        for name, tensor in weights[0].items():
            assert torch.equal(weights[cache_mb][name], tensor), (cache_mb, name)


def _pruned_pair(heads_kept: int):
    """(task, unpruned model, the same model with the first HEADS_KEPT heads of every
    attention kept and stripped, the kept indices)."""
    torch.manual_seed(0)
    task = tiny_task()
    teacher, state = _model_and_state(task)
    kept = {p: heads[:heads_kept] for p, heads in all_heads(state).items()}
    pruned_state, _ = strip_checkpoint(state, kept=kept)
    return task, teacher, _model(task, pruned_state), kept


@pytest.mark.parametrize("richer", [False, True])
def test_refit_lowers_the_loss_of_a_pruned_model(richer):
    task, teacher, student, kept = _pruned_pair(1)
    calib = [batch(task, n=16, seed=s) for s in range(6)]
    held_out = [batch(task, n=16, seed=100 + s) for s in range(3)]

    def gap():  # distance to the unpruned model on batches not used for the fit
        return sum(
            float((a - b).pow(2).mean())
            for a, b in zip(_outputs(student, held_out), _outputs(teacher, held_out))
        )

    before = gap()
    options = {"refit_fc1": True, "refit_qkv": True, "kept": kept} if richer else {}
    reconstruct(student, teacher, lambda: calib, **options)
    assert gap() < 0.8 * before


def test_a_huge_ridge_toward_the_current_weights_keeps_them():
    """--ridge-toward current reaches every refit layer (q/k/v, out_proj, fc1, fc2): with an
    overwhelming ridge each keeps its weights (only its unshrunk bias moves)."""
    task, teacher, student, kept = _pruned_pair(2)
    before = {k: v.clone() for k, v in student.state_dict().items()}
    options = {"refit_fc1": True, "refit_qkv": True, "kept": kept}
    reconstruct(student, teacher, lambda: [batch(task, n=8, seed=0)], ridge=1e9,
                ridge_toward="current", **options)  # fmt: skip
    weights = [k for k in before if k.endswith(("proj.weight", "fc1.weight", "fc2.weight"))]
    assert weights
    for k in weights:
        torch.testing.assert_close(student.state_dict()[k], before[k], atol=1e-5, rtol=1e-4)
    reconstruct(student, teacher, lambda: [batch(task, n=8, seed=0)], ridge=1e9, **options)
    assert student.state_dict()[weights[0]].abs().max() < 1e-5  # towards zero: gone


def test_bad_options_are_refused():
    task = tiny_task()
    teacher, _ = _model_and_state(task)
    with pytest.raises(ValueError, match="target"):
        reconstruct(teacher, teacher, lambda: [], target="logits")
    with pytest.raises(ValueError, match="ridge"):
        reconstruct(teacher, teacher, lambda: [], ridge=-1)
    with pytest.raises(ValueError, match="fc1 needs the FFN refit"):
        reconstruct(teacher, teacher, lambda: [], refit_ffn=False, refit_fc1=True)
    with pytest.raises(ValueError, match="kept heads' indices"):
        reconstruct(teacher, teacher, lambda: [], refit_qkv=True)
    with pytest.raises(ValueError, match="ridge-toward"):
        reconstruct(teacher, teacher, lambda: [], ridge_toward="one")


# -- checkpoints and the command line ------------------------------------------------------


def test_cli_defaults_are_the_library_defaults():
    from dsp_fairseq.cli import reconstruct as cli
    from dsp_fairseq.pruning import calibrate

    names = ("BATCHES", "RIDGE", "TARGET", "REFIT_FFN", "REFIT_FC1", "REFIT_QKV", "RIDGE_TOWARD")
    names += ("CACHE_MB",)
    assert [getattr(cli, "DEFAULT_" + n) for n in names] == [
        getattr(calibrate, "DEFAULT_" + n) for n in names
    ]


def test_unstripped_checkpoint_is_refused(tmp_path):
    task = tiny_task()
    _, state = _model_and_state(task)
    with pytest.raises(CheckpointError, match="not stripped"):
        reconstruct_checkpoint(state, state, str(tmp_path))


def test_strip_reconstruct_needs_data(tmp_path):
    proc = run("dsp-strip", "--input", tmp_path / "x.pt", "--output", tmp_path / "y.pt",
               "--reconstruct", check=False)  # fmt: skip
    assert proc.returncode == 2 and "--reconstruct needs --data" in proc.stderr
    proc = run("dsp-reconstruct", "--pruned", tmp_path / "x.pt", "--base", tmp_path / "b.pt",
               "--data", tmp_path, "--output", tmp_path / "y.pt", "--ridge", "-1", check=False)  # fmt: skip
    assert proc.returncode == 2 and "--ridge" in proc.stderr
    assert not (tmp_path / "y.pt").exists()


# -- selection that sees the recovery: gates trained with the output projections ------------


def test_train_gates_with_unfreezes_only_the_named_parameters():
    task = tiny_task()
    cfg = fairseq_cfg(
        "--train-gates-only", "--train-gates-with", "out_proj", "--heads-to-keep", "6"
    )
    model = task.build_model(cfg.model)
    trained = {  # (the gate's zero-element trainer anchor aside: translation_dsp's business)
        n for n, p in model.named_parameters() if p.requires_grad and not n.startswith("head_gate.")
    }
    assert trained and all(".out_proj." in n for n in trained)
    assert len(trained) == 2 * len(list(model.attention_modules()))  # weight and bias each
    for bad, message in ((["--train-gates-with", "nope"], "no parameter"),
                         ([], "needs --train-gates-only")):  # fmt: skip
        flags = ["--train-gates-only", *bad] if bad else ["--train-gates-with", "out_proj"]
        with pytest.raises(ValueError, match=message):
            task.build_model(fairseq_cfg(*flags, "--heads-to-keep", "6").model)


def test_train_only_freezes_a_stripped_model_but_the_named_layers():
    """--train-only out_proj,fc2: a reconstructed (stripped, gate-less) model is tuned in the
    layers the refit set, nothing else; refused with --train-gates-only and for no match."""
    torch.manual_seed(0)
    task = tiny_task()
    _, state = _model_and_state(task)
    pruned_state, _ = strip_checkpoint(state, kept={p: h[:1] for p, h in all_heads(state).items()})
    args = model_args(pruned_state)
    args.train_only = "out_proj,fc2"
    model = task.build_model(args)
    trained = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trained and all(".out_proj." in n or ".fc2." in n for n in trained)
    assert len(trained) == 2 * (len(list(model.attention_modules())) + 2)  # + 1+1 layers' fc2
    args.train_only = "nope"
    with pytest.raises(ValueError, match="no parameter"):
        task.build_model(args)
    with pytest.raises(ValueError, match="--train-gates-with instead"):
        task.build_model(
            fairseq_cfg("--train-gates-only", "--train-only", "fc2", "--heads-to-keep", "6").model
        )
