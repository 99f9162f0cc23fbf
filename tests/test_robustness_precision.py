"""Half precision: gates, gated attention and models under float16/bfloat16.

The gate computes in float64 and its logits stay float32 whatever the model's
dtype (``.to(half)``, fairseq's --fp16 ``model.half()``); logits holding
half-precision values must give finite, exactly K-hot/K-summing masks; the attention must stay finite and
close to float32. Also a real ``fairseq-train --fp16 --fp16-no-flatten-grads``
run on CPU, and the refusal of flattened --fp16/--bf16.
"""

from __future__ import annotations

import pytest
import torch
from robustness_helpers import K, dsp_args, make_dictionary, make_task, run, tiny_corpus, train_cmd

from dsp_fairseq.checkpoint_io import load_checkpoint
from dsp_fairseq.gates import GATE_REGISTRY, build_budget
from dsp_fairseq.modules.gated_multihead_attention import GatedMultiheadAttention
from dsp_fairseq.pruning.strip import strip_checkpoint

HALF = [torch.float16, torch.bfloat16]
EXACT_K_GATES = ("dsp", "dsp-st", "ste")  # training masks that sum to exactly K
TEMPERATURES = (0.1, 1e-3, 1e-8)
BUDGETS = {
    "global": build_budget([12, 8, 16], heads_to_keep=9),
    "per-type": build_budget([12, 8, 16], per_segment=[3, 0, 16]),
}


def _logits(kind: str, n: int, dtype: torch.dtype) -> torch.Tensor:
    if kind == "tied":  # all equal: low precision makes ties common
        return torch.zeros(n, dtype=dtype)
    if kind == "large":  # near the float16 range
        return (torch.randn(n) * 2e4).clamp(-6e4, 6e4).to(dtype)
    return torch.randn(n).to(dtype)


@pytest.mark.parametrize("name", sorted(GATE_REGISTRY))
@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("budget", sorted(BUDGETS))
@pytest.mark.parametrize("kind", ["normal", "tied", "large"])
def test_gate_masks_stay_finite_and_exact_in_half_precision(name, dtype, budget, kind):
    segments = BUDGETS[budget]
    gate = GATE_REGISTRY[name](36, segments).to(dtype)
    with torch.no_grad():
        gate.logits.copy_(_logits(kind, 36, dtype))
    assert gate.logits.dtype == torch.float32  # .to(dtype) leaves the logits float32
    gate.train()
    for t in TEMPERATURES:
        gate.set_temperature(t)
        gate.logits.grad = None
        gate.resample()
        mask = gate.current_mask()
        assert torch.isfinite(mask).all() and mask.min() >= 0
        if name in EXACT_K_GATES:
            for s, e, k in segments:
                assert mask[s:e].sum().item() == pytest.approx(k, abs=1e-6)
        penalty = gate.penalty()
        loss = (mask * torch.linspace(-1, 1, 36, dtype=mask.dtype)).sum()
        if penalty is not None:
            assert torch.isfinite(penalty)
            loss = loss + penalty.to(loss.dtype)
        loss.backward()
        if gate.logits.grad is not None:
            assert torch.isfinite(gate.logits.grad.float()).all()
    gate.eval()
    test = gate.current_mask()
    assert set(test.tolist()) <= {0.0, 1.0}
    for s, e, k in segments:
        assert test[s:e].sum().item() == k


def _attention_pair(dtype, cross):
    """A float32 gated attention and a copy in ``dtype``, both reading one gate."""
    embed, heads = 32, 8
    kw = (
        {"encoder_decoder_attention": True, "kdim": 24, "vdim": 24}
        if cross
        else {"self_attention": True}
    )
    ref = GatedMultiheadAttention(embed, heads, **kw)
    low = GatedMultiheadAttention(embed, heads, **kw)
    low.load_state_dict(ref.state_dict())
    low = low.to(dtype)
    gate = GATE_REGISTRY["dsp"](heads, build_budget([heads], heads_to_keep=3))
    ref.attach_gate(gate, 0)
    low.attach_gate(gate, 0)
    return ref, low, gate


@pytest.mark.parametrize("dtype", HALF)
@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("need_weights", [False, True])
def test_gated_attention_in_half_precision_matches_float32(dtype, cross, need_weights):
    ref, low, gate = _attention_pair(dtype, cross)
    tgt, src, bsz = 6, 9, 3
    x = torch.randn(tgt, bsz, 32)
    kv = torch.randn(src, bsz, 24) if cross else x
    pad = torch.zeros(bsz, kv.size(0), dtype=torch.bool)
    pad[0, -3:] = True
    causal = None if cross else torch.triu(torch.full((tgt, tgt), float("-inf")), 1)
    tol = 3e-2 if dtype == torch.bfloat16 else 5e-3
    for mode, t in (("train", 0.1), ("train", 1e-8), ("eval", None)):
        for m in (ref, low, gate):
            m.train(mode == "train")
        if t is not None:
            gate.set_temperature(t)
            gate.resample()  # one mask for both modules
        out_ref, w_ref = ref(x, kv, kv, key_padding_mask=pad, attn_mask=causal,
                             need_weights=need_weights)  # fmt: skip
        out_low, w_low = low(x.to(dtype), kv.to(dtype), kv.to(dtype), key_padding_mask=pad,
                             attn_mask=causal, need_weights=need_weights)  # fmt: skip
        assert out_low.dtype == dtype and torch.isfinite(out_low).all()
        assert (out_low.float() - out_ref).abs().max().item() < tol * (1 + out_ref.abs().max())
        if need_weights:
            assert torch.isfinite(w_low).all()
            assert (w_low.float() - w_ref).abs().max().item() < tol
    # The gate's gradient through half-precision activations is finite and non-zero.
    gate.train()
    low.train()
    gate.logits.grad = None
    gate.set_temperature(0.1)
    gate.resample()
    out, _ = low(x.to(dtype), kv.to(dtype), kv.to(dtype), need_weights=need_weights)
    out.float().pow(2).sum().backward()
    assert torch.isfinite(gate.logits.grad).all() and gate.logits.grad.abs().sum() > 0


@pytest.mark.parametrize("dtype", HALF)
def test_whole_model_in_half_precision(dtype):
    from fairseq.sequence_generator import SequenceGenerator
    from robustness_helpers import random_tokens

    args = dsp_args(encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                    decoder_attention_heads=4, encoder_embed_dim=32, decoder_embed_dim=32,
                    encoder_ffn_embed_dim=64, decoder_ffn_embed_dim=64,
                    share_all_embeddings=True, heads_to_keep=7)  # fmt: skip
    task = make_task(make_dictionary(50))
    model = task.build_model(args).to(dtype)
    assert model.head_gate.logits.dtype == torch.float32
    assert model.encoder.layers[0].self_attn.q_proj.weight.dtype == dtype
    gen = torch.Generator().manual_seed(0)
    src, src_len = random_tokens(task.source_dictionary, 4, 8, gen)
    prev = torch.cat([torch.full((4, 1), task.target_dictionary.eos()), src[:, :5]], dim=1)
    model.train()
    model.head_gate.set_temperature(1e-8)
    out, _ = model(src, src_len, prev)
    assert out.dtype == dtype and torch.isfinite(out).all()
    assert model.head_gate.current_mask().sum().item() == pytest.approx(7, abs=1e-6)
    out.float().logsumexp(-1).sum().backward()
    assert torch.isfinite(model.head_gate.logits.grad.float()).all()
    model.eval()
    assert model.head_gate.current_mask().sum().item() == 7
    with torch.no_grad():
        sample = {"net_input": {"src_tokens": src, "src_lengths": src_len}}
        generator = SequenceGenerator([model], task.target_dictionary, beam_size=3, max_len_b=8)
        hyps = generator.generate([model], sample)
    assert all(torch.isfinite(h["score"].float()) for sent in hyps for h in sent)


# -- real fairseq-train ------------------------------------------------------------------


def test_fp16_training_on_cpu_trains_the_gates(tmp_path_factory, tmp_path):
    """--fp16 --fp16-no-flatten-grads: fp16 model, fp32 master weights in fairseq's
    optimizer; the gate's logits stay float32 and the translation_dsp task steps them.

    A small initial loss scale: on an overflow fairseq 0.12 calls ``.cuda()``
    (trainer.py, ``grad_norm = torch.tensor(0.0).cuda()``), which fails on a CPU.
    """
    data = tiny_corpus(tmp_path_factory)
    proc = run(*train_cmd(data, tmp_path, 6, "--fp16", "--fp16-no-flatten-grads",
                          "--fp16-init-scale", "4", "--log-interval", "1"))  # fmt: skip
    log = proc.stdout + proc.stderr
    assert "loss_scale=4" in log and "num_updates=6" in log
    assert f"gate_mask_sum={K}" in log
    state = load_checkpoint(str(tmp_path / "checkpoint_last.pt"))
    logits = state["model"]["head_gate.logits"]
    assert torch.isfinite(logits).all()
    assert int(state["model"]["head_gate.adam_step"]) == 6
    assert torch.isfinite(state["model"]["head_gate.adam_exp_avg_sq"]).all()
    _, report = strip_checkpoint(state)
    assert sum(len(v) for v in report.kept.values()) == K  # every attention is gated


def test_training_a_gate_without_its_task_is_refused(tmp_path_factory, tmp_path):
    """fairseq's own translation task never steps the gate (its logits are not trainer
    parameters): refused at the first forward, naming the task, before any update."""
    data = tiny_corpus(tmp_path_factory)
    cmd = [c if c != "translation_dsp" else "translation" for c in train_cmd(data, tmp_path, 2)]
    proc = run(*cmd, check=False)
    assert proc.returncode != 0
    assert "--task translation_dsp" in proc.stderr
    assert not list(tmp_path.glob("*.pt"))


def test_fully_sharded_data_parallel_is_refused_before_training(tmp_path):
    """FSDP (--ddp-backend fully_sharded) saves only the parameters it shards."""
    from train_helpers import fairseq_cfg, tiny_task

    from dsp_fairseq.tasks.translation_dsp import TranslationDSPConfig, TranslationDSPTask

    task = tiny_task()
    d = task.source_dictionary
    task = TranslationDSPTask(TranslationDSPConfig(ddp_backend="fully_sharded"), d, d)
    with pytest.raises(ValueError, match="--ddp-backend fully_sharded cannot train the head gate"):
        task.build_model(fairseq_cfg("--heads-to-keep", "5").model)
    # decoding a checkpoint needs no training setup
    assert task.build_model(fairseq_cfg("--heads-to-keep", "5").model, from_checkpoint=True)


def test_bf16_without_torch_xla_is_refused_before_training():
    """fairseq 0.12's --bf16 means a TPU; without torch_xla its trainer fails obscurely."""
    from train_helpers import fairseq_cfg, tiny_task

    from dsp_fairseq.tasks import translation_dsp
    from dsp_fairseq.tasks.translation_dsp import TranslationDSPConfig, TranslationDSPTask

    assert not translation_dsp._has_torch_xla()  # (not installed here)
    d = tiny_task().source_dictionary
    task = TranslationDSPTask(TranslationDSPConfig(bf16=True), d, d)
    with pytest.raises(ValueError, match="--bf16 in fairseq 0.12 trains on a TPU"):
        task.build_model(fairseq_cfg("--heads-to-keep", "5").model)
    assert task.build_model(fairseq_cfg("--heads-to-keep", "5").model, from_checkpoint=True)
