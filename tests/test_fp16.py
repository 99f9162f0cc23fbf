"""fp16 training through fairseq's own optimizers and loss scaler (issues 11 and 18).

The model is in half precision (``model.half()``, as fairseq's trainer does
under --fp16), the optimizer is fairseq's FP16Optimizer /
MemoryEfficientFP16Optimizer / AMPOptimizer built from parsed command-line
flags, the task is translation_dsp, and the update sequence is fairseq's
trainer's (see train_helpers).

fairseq's flattened FP16Optimizer (the --fp16 default) keys its flat fp32
buffer by ``torch.cuda.current_device()``, which a CPU-only torch cannot
answer; the ``cpu_flat_fp16`` fixture answers None, the device index of a CPU
tensor, which is what fairseq groups parameters by (``p.device.index``).
"""

from __future__ import annotations

import copy

import pytest
import torch
from fairseq import optim
from fairseq.optim.amp_optimizer import AMPOptimizer
from fairseq.optim.fp16_optimizer import FP16Optimizer, MemoryEfficientFP16Optimizer
from train_helpers import batch, fairseq_cfg, tiny_task, update

from dsp_fairseq.gates.soft_topk import hard_topk_mask

K = 5  # of 12 gated heads


@pytest.fixture
def cpu_flat_fp16(monkeypatch):
    monkeypatch.setattr(torch.cuda, "current_device", lambda: None)


def gate_steps(gate) -> int:
    """Updates the translation_dsp task's Adam made to the gate's logits."""
    state = gate.optimizer.state.get(gate.logits, {})
    return int(state["step"]) if "step" in state else 0


def build(*flags, wrapper=FP16Optimizer, half=True):
    cfg = fairseq_cfg("--heads-to-keep", str(K), *flags)
    task = tiny_task()
    model = task.build_model(cfg.model)
    if half:
        model = model.half()  # what fairseq's trainer does under --fp16
    criterion = task.build_criterion(cfg.criterion)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = wrapper.build_optimizer(cfg, params)
    return task, model, criterion, optimizer


def test_model_half_keeps_the_gate_logits_float32():
    _, model, _, optimizer = build("--fp16", "--fp16-no-flatten-grads")
    assert model.encoder.layers[0].self_attn.q_proj.weight.dtype == torch.float16
    logits = model.head_gate.logits
    assert logits.dtype == torch.float32
    # Not one of fairseq's parameters: the task's Adam steps the logits themselves.
    assert all(p is not logits for p in optimizer.fp16_params)
    model.bfloat16()
    assert logits.dtype == torch.float32 and model.head_gate.logits is logits


def test_test_mask_follows_a_data_copy_of_the_logits():
    """fairseq's FP16Optimizer writes the master weights back with ``p.data.copy_()``,
    which does not bump the logits' version counter (the old cache key)."""
    _, model, _, _ = build("--fp16", "--fp16-no-flatten-grads")
    gate = model.head_gate.eval()
    first = gate.test_mask().clone()
    new = (1.0 - first).float() + torch.arange(12) * 1e-3  # top-5 among the heads dropped so far
    gate.logits.data.copy_(new)
    assert torch.equal(gate.test_mask(), hard_topk_mask(new, K))
    assert (gate.test_mask() * first).sum() == 0


def test_fp16_optimizer_at_default_loss_scale_trains_and_validates_with_the_live_top_k():
    """120 updates, temperature annealed 0.1 -> 1e-8 (through 0.01-0.03, where a float16
    gate gradient overflowed in most forwards), default initial loss scale 128."""
    updates = 120
    task, model, criterion, optimizer = build("--fp16", "--fp16-no-flatten-grads")
    assert optimizer.scaler.loss_scale == 128
    gate = model.head_gate
    master = gate.logits
    # Batches of ~700 target tokens: large enough for float16 logits to overflow.
    samples = [batch(task, n=64, max_len=20, seed=i) for i in range(4)]
    attn = model.decoder.layers[0].encoder_attn
    start = gate.logits.detach().clone()
    overflows, masks_seen = 0, set()
    for i in range(updates):
        gate.set_temperature(0.1 * (1e-7) ** (i / (updates - 1)))
        if update(task, model, criterion, optimizer, [samples[i % 4]], i) is None:
            overflows += 1
            continue
        # Validation between updates uses the top-K of the logits the optimizer just set.
        model.eval()
        live = hard_topk_mask(master.detach(), K)
        with torch.no_grad():
            out, _ = model(**samples[0]["net_input"])
            used = attn.head_mask()  # outside a pass: what a validation forward reads
        assert torch.isfinite(out).all()
        assert torch.equal(used, live[-attn.num_heads :])
        assert torch.equal(gate.test_mask(), live)
        masks_seen.add(tuple(live.tolist()))
    assert overflows <= 3, f"{overflows} skipped updates"
    assert optimizer.scaler.loss_scale >= 32
    assert not torch.equal(gate.logits.detach(), start)  # the gate trained
    assert len(masks_seen) > 1  # ... and the kept heads changed: the check above had teeth
    assert gate_steps(gate) == updates - overflows  # skipped updates skip the gate too
    assert torch.isfinite(gate.optimizer.state[gate.logits]["exp_avg_sq"]).all()


def test_memory_efficient_fp16_trains_the_gate_in_float32():
    task, model, criterion, optimizer = build(
        "--fp16", "--memory-efficient-fp16", wrapper=MemoryEfficientFP16Optimizer
    )
    gate = model.head_gate
    assert gate.logits.dtype == torch.float32
    before = gate.logits.detach().clone()
    samples = [batch(task, seed=i) for i in range(2)]
    done = 0
    for i in range(8):
        gate.set_temperature(0.05)
        done += update(task, model, criterion, optimizer, [samples[i % 2]], i) is not None
    assert done >= 7 and optimizer.scaler.loss_scale >= 64
    moved = (gate.logits.detach() - before).abs()
    # Adam at --gate-lr 0.2: each logit moves at most about 0.2 per update.
    assert moved.max() > 0.05 and moved.max() <= 0.2 * done + 1e-3
    assert gate_steps(gate) == done


def test_amp_keeps_the_model_float32_and_trains_the_gate():
    """--amp: fp32 model (autocast), torch's GradScaler; on a CPU the scaler is disabled."""
    with pytest.warns(UserWarning):
        task, model, criterion, optimizer = build("--amp", wrapper=AMPOptimizer, half=False)
    gate = model.head_gate
    samples = [batch(task, seed=i) for i in range(2)]
    for i in range(3):
        gate.set_temperature(0.05)
        assert update(task, model, criterion, optimizer, [samples[i % 2]], i) is not None
    assert gate.logits.dtype == torch.float32
    assert gate_steps(gate) == 3


def test_gate_gradient_stays_finite_where_float16_logits_overflowed():
    """At t = 0.02 the relaxation's gradient is heavy-tailed; with loss scale 128 the
    logits' gradient must be finite in every forward (float16 logits made it inf)."""
    task, model, criterion, optimizer = build("--fp16", "--fp16-no-flatten-grads")
    gate = model.head_gate
    gate.set_temperature(0.02)
    sample = batch(task, n=64, max_len=20)
    for seed in range(20):
        torch.manual_seed(seed)
        optimizer.zero_grad()
        task.train_step(sample, model, criterion, optimizer, 0)
        grad = gate.logits.grad
        assert torch.isfinite(grad).all() and grad.dtype == torch.float32
        assert all(torch.isfinite(p.grad).all() for p in optimizer.fp16_params)


# -- issue 18: the gate outside fairseq's fp16 machinery -----------------------------------


def _gate_gradient_handed_to_adam(gate):
    """Record the gradient the task gives the gate's Adam (a per-optimizer torch hook)."""
    seen = []
    gate.optimizer.register_step_pre_hook(lambda opt, *_: seen.append(gate.logits.grad.clone()))
    return seen


def test_flattened_fp16_trains_the_gate_by_its_adam_step_on_the_true_gradient(cpu_flat_fp16):
    """--fp16 without --fp16-no-flatten-grads (it was refused): fairseq copies every
    parameter into one flat fp32 buffer, which the gate is not in. The gradient the gate's
    Adam receives is the float32 model's (loss scale 128 and the sample size divided out),
    and the first update moves every logit by the gate lr, as Adam's first step does."""
    cfg = fairseq_cfg("--heads-to-keep", str(K), "--fp16", "--gate-type", "ste")
    task = tiny_task()
    model32 = task.build_model(cfg.model)
    model16 = copy.deepcopy(model32).half()
    samples = [batch(task, n=16, seed=1), batch(task, n=16, seed=2)]  # --update-freq 2
    grads, moved = [], []
    for model, wrapper in ((model32, None), (model16, FP16Optimizer)):
        criterion = task.build_criterion(cfg.criterion)
        params = [p for p in model.parameters() if p.requires_grad]
        if wrapper is None:
            optimizer = optim.build_optimizer(cfg.optimizer, params)
        else:
            optimizer = wrapper.build_optimizer(cfg, params)
            assert optimizer.has_flat_params and optimizer.scaler.loss_scale == 128
        seen = _gate_gradient_handed_to_adam(model.head_gate)
        before = model.head_gate.logits.detach().clone()
        assert update(task, model, criterion, optimizer, samples, 0) is not None
        grads.append(seen[0])
        moved.append(model.head_gate.logits.detach() - before)
    ref, got = grads
    assert ref.abs().max() > 1e-4
    assert torch.allclose(got, ref, rtol=2e-2, atol=2e-3 * ref.abs().max())
    has_grad = got.abs() > 1e-6
    assert has_grad.sum() >= K
    assert torch.allclose(moved[1][has_grad], -0.2 * got[has_grad].sign(), atol=1e-4)


def test_an_overflow_of_the_gate_gradient_skips_the_update_and_lowers_the_scale():
    """fairseq's loss scaler sees only its parameters; an inf in the gate's gradient alone
    goes to the same scaler, which skips the whole update and halves the scale."""
    task, model, criterion, optimizer = build("--fp16", "--fp16-no-flatten-grads")
    gate = model.head_gate
    gate.set_temperature(0.1)
    weight = model.encoder.layers[0].fc1.weight.detach().clone()
    logits = gate.logits.detach().clone()
    optimizer.zero_grad()
    task.train_step(batch(task), model, criterion, optimizer, 0)
    gate.logits.grad[0] = float("inf")
    optimizer.multiply_grads(1.0 / 8)
    optimizer.clip_grad_norm(0.0)  # the model's own gradient is finite
    with pytest.raises(OverflowError):
        task.optimizer_step(optimizer, model, 0)
    assert optimizer.scaler.loss_scale == 64
    assert torch.equal(model.encoder.layers[0].fc1.weight.detach(), weight)
    assert torch.equal(gate.logits.detach(), logits) and gate_steps(gate) == 0
    # The retry starts from a clean gradient: fairseq's zero_grad clears the anchor.
    optimizer.zero_grad()
    assert update(task, model, criterion, optimizer, [batch(task)], 0) is not None
    assert gate_steps(gate) == 1
