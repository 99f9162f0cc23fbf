"""Baselines and pruning modes through the real CLIs on a tiny Multi30k slice.

Gate types (dsp, dsp-st, ste, hard-concrete) trained by fairseq-train and
stripped by dsp-strip; pipelined pruning of a stock fairseq transformer
(gates only, --freeze-gates fine-tuning, strip); Michel et al. importance and
random pruning of a stock checkpoint; per-type budgets.

The CLIs mostly run in-process through their entry functions (fairseq-train's
cli_main path through ``inprocess.fairseq_train``, ``fairseq_cli.generate.main``,
``dsp_fairseq.cli.*.main``) to save the ~5 s of interpreter start-up and imports
each subprocess costs. The stock checkpoint is trained by a real ``fairseq-train``
subprocess without --user-dir (so it is trained without the plugin, which the
test process has imported), and one subprocess call of dsp-strip and of
dsp-importance checks the installed entry points.
"""

import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import ROOT, write_multi30k_slice
from inprocess import call_cli, fairseq_generate, fairseq_train, one_thread

from dsp_fairseq.checkpoint_io import load_checkpoint
from dsp_fairseq.cli import importance as importance_cli
from dsp_fairseq.cli import strip as strip_cli
from dsp_fairseq.gates import GATE_REGISTRY, build_budget
from dsp_fairseq.gates.hard_concrete import TEMPERATURE, noise_free_gate
from dsp_fairseq.importance import head_importance
from dsp_fairseq.models.head_layout import parse_head_counts

BIN = Path(sys.executable).parent
# 2 + 2 layers, 4 heads: H = 8 enc-self + 8 dec-self + 8 cross = 24 heads.
SHAPE = [
    *("--encoder-embed-dim 32 --decoder-embed-dim 32 --encoder-ffn-embed-dim 64".split()),
    *("--decoder-ffn-embed-dim 64 --encoder-layers 2 --decoder-layers 2".split()),
    *("--encoder-attention-heads 4 --decoder-attention-heads 4".split()),
]
H = 24
K = 6
DSP_CRITERION = ["--criterion", "dsp_label_smoothed_cross_entropy", "--label-smoothing", "0.1"]


def run(*cmd, check=True):
    # One thread: on shared cores, 2 OpenMP threads per process slow everything down.
    env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1")
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def train(data, save_dir, *extra, arch="transformer_dsp", updates=8, user_dir=True, script=False):
    """fairseq-train, a few updates, logging every update; returns its output (stdout +
    stderr). In-process (``inprocess.fairseq_train``); the console script if ``script``."""
    argv = [
        data,
        *(["--user-dir", ROOT / "dsp_fairseq", "--task", "translation_dsp"] if user_dir else []),
        "--arch", arch, *SHAPE, "--optimizer", "adam", "--lr", "2e-3",
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "4", "--max-tokens", "1500",
        "--max-update", str(updates), "--save-dir", save_dir, "--no-epoch-checkpoints",
        "--cpu", "--seed", "3", "--log-format", "simple", "--log-interval", "1",
        "--share-all-embeddings", "--disable-validation", *extra,
    ]  # fmt: skip
    if script:
        proc = run(BIN / "fairseq-train", *argv)
        return proc.stdout + proc.stderr
    return fairseq_train(argv)


def strip(*argv, ok=True):
    code, out, err = call_cli(strip_cli.main, *argv)
    if ok:
        assert code == 0, err
    return code, out, err


def generate(data, ckpt):
    """fairseq-generate (its main(), in-process): hypothesis strings in sentence order."""
    out = fairseq_generate([
        data, "--user-dir", ROOT / "dsp_fairseq", "--path", ckpt,
        "--gen-subset", "test", "--beam", "4", "--batch-size", "40",
        "--max-len-a", "0", "--max-len-b", "12", "--cpu", "--required-batch-size-multiple", "1",
    ])  # fmt: skip
    rows = [line.split("\t") for line in out.splitlines() if line.startswith("H-")]
    hyps = [r[2] for r in sorted(rows, key=lambda r: int(r[0][2:]))]
    assert len(hyps) == 20
    return hyps


def kept_heads(path):
    """Heads kept by a stripped checkpoint: {(prefix, head)}, and its config."""
    state = load_checkpoint(str(path))
    kept = {(p, h) for p, heads in state["dsp_kept_heads"].items() for h in heads}
    args = state["cfg"]["model"]
    counts = parse_head_counts(args.stripped_heads)
    assert sum(sum(v) for v in counts.values()) == len(kept)
    assert not any(k.startswith("head_gate") for k in state["model"])
    return kept, args


def layout_heads():
    """(prefix, head) for the 24 heads in gate order: enc-self, dec-self, cross."""
    prefixes = [f"encoder.layers.{i}.self_attn" for i in range(2)]
    prefixes += [f"decoder.layers.{i}.self_attn" for i in range(2)]
    prefixes += [f"decoder.layers.{i}.encoder_attn" for i in range(2)]
    return [(p, h) for p in prefixes for h in range(4)]


def gate_logits(path):
    return load_checkpoint(str(path))["model"]["head_gate.logits"]


def train_inner(log):
    """Metrics of every train_inner log line: list of {name: value}."""
    lines = [line for line in log.splitlines() if "| train_inner |" in line]
    return [dict(re.findall(r"(\w+)=([-\d.e]+)", line)) for line in lines]


# -- fixtures ----------------------------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    raw = write_multi30k_slice(tmp_path_factory.mktemp("raw"), 600, 20, 20)
    out = tmp_path_factory.mktemp("data") / "m30k"
    run("bash", ROOT / "examples/translation/prepare-multi30k.sh", "--src-dir", raw,
        "--out", out, "--vocab-size", "400")  # fmt: skip
    return out / "bin"


@pytest.fixture(scope="module")
def stock(corpus, tmp_path_factory):
    """A stock fairseq `transformer` checkpoint, trained without the plugin: the module's
    one fairseq-train subprocess (the console script, in a process without dsp_fairseq)."""
    save = tmp_path_factory.mktemp("stock")
    train(corpus, save, arch="transformer", updates=12, user_dir=False, script=True)
    return save / "checkpoint_last.pt"


@pytest.fixture(scope="module")
def gated(corpus, tmp_path_factory):
    """Train each gate type once (lazily): gate -> (checkpoint, log)."""
    cache = {}

    def get(gate, *extra):
        key = (gate, *extra)
        if key not in cache:
            save = tmp_path_factory.mktemp(gate)
            log = train(corpus, save, "--gate-type", gate, *DSP_CRITERION, *extra)
            cache[key] = (save / "checkpoint_last.pt", log)
        return cache[key]

    return get


@pytest.fixture(scope="module")
def pipeline(corpus, stock, tmp_path_factory):
    """Pipelined pruning: stock -> gates only -> --freeze-gates fine-tuning."""
    gates_dir, ft_dir = tmp_path_factory.mktemp("gates"), tmp_path_factory.mktemp("ft")
    gates_log = train(
        corpus, gates_dir, "--finetune-from-model", stock, "--train-gates-only",
        "--heads-to-keep", K, "--anneal-updates", "8", *DSP_CRITERION,
    )  # fmt: skip
    gates = gates_dir / "checkpoint_last.pt"
    ft_log = train(
        corpus, ft_dir, "--finetune-from-model", gates, "--freeze-gates",
        "--heads-to-keep", K, *DSP_CRITERION, updates=6,
    )  # fmt: skip
    return {"gates": gates, "gates_log": gates_log, "ft": ft_dir / "checkpoint_last.pt",
            "ft_log": ft_log}  # fmt: skip


# -- gate types --------------------------------------------------------------


@pytest.mark.parametrize("gate", ["dsp", "dsp-st", "ste", "hard-concrete"])
def test_gate_type_strips_exactly_k_and_translates_like_masked(gate, corpus, gated, tmp_path):
    extra = ["--l0-penalty", "0.01"] if gate == "hard-concrete" else []
    masked, log = gated(gate, "--heads-to-keep", str(K), *extra)
    assert f"transformer_dsp: {gate} gate on {H} heads" in log
    pruned = tmp_path / "pruned.pt"
    _, table, _ = strip("--input", masked, "--output", pruned)
    assert f"heads kept: {K} of {H}" in table
    kept, args = kept_heads(pruned)
    assert args.arch == "transformer_dsp" and args.gate_type == "none"
    # Every gate's test mask is the top K of its logits (hard-concrete: of
    # P(open) = sigmoid(log_a - c), which ranks heads as log_a does).
    top = torch.topk(gate_logits(masked), K).indices.tolist()
    assert kept == {layout_heads()[i] for i in top}
    assert generate(corpus, masked) == generate(corpus, pruned)


def test_dsp_st_training_mask_is_exactly_k_hot_at_every_step(gated):
    _, log = gated("dsp-st", "--heads-to-keep", str(K))
    steps = train_inner(log)
    assert len(steps) == 8  # --log-interval 1: one line per update
    for metrics in steps:
        assert float(metrics["gate_khot_dist"]) == 0.0
        assert float(metrics["gate_mask_sum"]) == K


def test_hard_concrete_without_k_keeps_gates_above_one_half(corpus, gated, tmp_path):
    # A small gate LR keeps the gates near their initialisation, so some
    # noise-free gates end above 0.5 and some below.
    masked, log = gated("hard-concrete", "--l0-penalty", "0.01", "--gate-lr", "0.01")
    assert "keeping the heads the gate itself keeps" in log
    penalties = [float(m["gate_penalty"]) for m in train_inner(log)]
    assert len(penalties) == 8 and all(0 < p < H for p in penalties)
    gate = noise_free_gate(gate_logits(masked).double())
    expected = {layout_heads()[i] for i in torch.nonzero(gate > 0.5).view(-1).tolist()}
    assert 0 < len(expected) < H
    pruned = tmp_path / "pruned.pt"
    _, table, _ = strip("--input", masked, "--output", pruned)
    assert f"heads kept: {len(expected)} of {H}" in table
    assert kept_heads(pruned)[0] == expected
    assert generate(corpus, masked) == generate(corpus, pruned)


def test_hard_concrete_gate_definition():
    gate = GATE_REGISTRY["hard-concrete"](6, None)
    with torch.no_grad():
        gate.logits.copy_(torch.tensor([-3.0, -0.2, 0.1, -0.05, 2.0, 5.0]))
    log_a = gate.logits.double()
    shift = TEMPERATURE * math.log(0.1 / 1.1)
    assert float(gate.penalty()) == pytest.approx(float(torch.sigmoid(log_a - shift).sum()))
    gate.train()
    samples = torch.stack([gate.sample_mask() for _ in range(2000)])
    assert samples.min() == 0 and samples.max() == 1  # exact zeros and ones occur
    assert ((samples > 0) & (samples < 1)).any()
    # P(s > 0) matches the penalty's per-head term.
    assert (samples > 0).double().mean(0).tolist() == pytest.approx(
        torch.sigmoid(log_a - shift).tolist(), abs=0.04
    )
    gate.eval()
    # No budget: noise-free gate sigmoid(log_a)*1.2 - 0.1 > 0.5  <=>  log_a > 0.
    assert gate.test_mask().tolist() == [0, 0, 1, 0, 1, 1]
    with_k = GATE_REGISTRY["hard-concrete"](6, build_budget([6], heads_to_keep=2))
    with_k.load_state_dict(gate.state_dict())
    assert with_k.test_mask().tolist() == [0, 0, 0, 0, 1, 1]
    with pytest.raises(ValueError, match="needs a budget"):
        GATE_REGISTRY["dsp"](6, None)


@pytest.mark.parametrize("name", ["dsp", "hard-concrete"])
def test_frozen_gate_trains_with_its_test_mask(name):
    gate = GATE_REGISTRY[name](10, build_budget([10], heads_to_keep=3))
    gate.freeze()
    gate.train()
    gate.resample()
    assert not gate.logits.requires_grad
    assert torch.equal(gate.current_mask(), gate.test_mask())
    assert gate.current_mask().sum() == 3 and not gate.current_mask().requires_grad
    assert gate.stats() == {"gate_mask_sum": 3.0, "gate_khot_dist": 0.0}


# -- pipelined pruning of a stock checkpoint ----------------------------------


def test_gates_only_leaves_every_non_gate_parameter_bit_identical(stock, pipeline):
    assert "checkpoint has no gate logits: initialising 24 gates" in pipeline["gates_log"]
    before = load_checkpoint(str(stock))["model"]
    after = load_checkpoint(str(pipeline["gates"]))["model"]
    gate_keys = {"head_gate.logits", "head_gate.adam_step", "head_gate.adam_exp_avg",
                 "head_gate.adam_exp_avg_sq"}  # the logits and their Adam moments  # fmt: skip
    assert set(after) == set(before) | gate_keys  # strict load lost nothing
    for key, value in before.items():
        assert torch.equal(after[key], value), key
    assert len(train_inner(pipeline["gates_log"])) == 8


def test_freeze_gates_fine_tunes_with_the_fixed_test_mask(pipeline):
    log = pipeline["ft_log"]
    assert "(frozen: training with the test mask)" in log
    steps = train_inner(log)
    assert len(steps) == 6
    assert all(float(m["gate_mask_sum"]) == K and float(m["gate_khot_dist"]) == 0 for m in steps)
    gates = load_checkpoint(str(pipeline["gates"]))["model"]
    tuned = load_checkpoint(str(pipeline["ft"]))["model"]
    assert torch.equal(tuned["head_gate.logits"], gates["head_gate.logits"])
    # (a frozen gate has no optimizer: the gate run's Adam moments are not carried on)
    assert "head_gate.adam_exp_avg" in gates and "head_gate.adam_exp_avg" not in tuned
    changed = [k for k in tuned if not torch.equal(gates[k], tuned[k])]
    assert "encoder.layers.0.fc1.weight" in changed


def test_pipelined_strip_translates_like_the_fine_tuned_masked_model(corpus, pipeline, tmp_path):
    pruned = tmp_path / "pruned.pt"
    _, table, _ = strip("--input", pipeline["ft"], "--output", pruned)
    assert f"heads kept: {K} of {H}" in table
    top = torch.topk(gate_logits(pipeline["ft"]), K).indices.tolist()
    assert kept_heads(pruned)[0] == {layout_heads()[i] for i in top}
    assert generate(corpus, pipeline["ft"]) == generate(corpus, pruned)


# -- importance and random pruning --------------------------------------------


def test_importance_on_stock_checkpoint_then_strip_keeps_top_k(corpus, stock, tmp_path):
    scores = tmp_path / "scores.json"
    proc = run(
        BIN / "dsp-importance", "--path", stock, "--data", corpus, "--max-tokens", "400",
        "--max-batches", "2", "--output", scores,
    )  # fmt: skip
    # progress on stderr, the result (scores per attention, the file written) on stdout
    assert "batch 2:" in proc.stderr and "batch 2:" not in proc.stdout
    assert "wrote" in proc.stdout and "enc-self layer 0:" in proc.stdout
    doc = json.loads(scores.read_text())
    assert doc["format"] == "dsp-head-importance/1" and doc["num_heads"] == H
    assert doc["metadata"]["arch"] == "transformer" and doc["metadata"]["num_batches"] == 2
    assert doc["metadata"]["num_tokens"] > 0 and doc["metadata"]["granularity"] == "token"
    flat = {}
    for entry in doc["slots"]:
        assert entry["num_heads"] == 4 and len(entry["scores"]) == 4
        for h, s in enumerate(entry["scores"]):
            assert math.isfinite(s) and s >= 0
            flat[(entry["prefix"], h)] = s
    assert set(flat) == set(layout_heads()) and max(flat.values()) > 0
    ranking = [tuple(x) for x in doc["ranking"]]
    assert sorted(ranking) == sorted(flat) and ranking == sorted(flat, key=flat.get)

    pruned = tmp_path / "pruned.pt"
    proc = run(BIN / "dsp-strip", "--input", stock, "--output", pruned, "--importance", scores,
               "--heads-to-keep", K)  # fmt: skip
    assert f"heads kept: {K} of {H}" in proc.stdout
    kept, args = kept_heads(pruned)
    assert kept == set(sorted(flat, key=flat.get)[-K:])
    assert args.arch == "transformer_dsp" and args.gate_type == "none"
    hyps = generate(corpus, pruned)  # loads as transformer_dsp and decodes
    assert all(isinstance(h, str) for h in hyps)

    code, _, err = strip("--input", stock, "--output", tmp_path / "x.pt", "--importance",
                         scores, "--heads-to-keep", H + 1, ok=False)  # fmt: skip
    assert code == 2 and f"choose K in [1, {H}]" in err and not (tmp_path / "x.pt").exists()


def test_iterative_importance_masks_ten_percent_steps(corpus, stock, tmp_path):
    scores = tmp_path / "scores.json"
    code, out, err = call_cli(
        importance_cli.main, "--path", stock, "--data", corpus, "--max-tokens", "400",
        "--max-batches", "1", "--iterative", "--heads-to-keep", K, "--normalize-per-layer",
        "--granularity", "sentence", "--output", scores,
    )  # fmt: skip
    assert code == 0, err
    doc = json.loads(scores.read_text())
    # 10% of 24 heads rounds up to 3 per step: 18 heads masked in 6 steps.
    assert [len(step) for step in doc["steps"]] == [3] * 6
    assert err.count("re-estimating") == 6
    masked = [tuple(h) for step in doc["steps"] for h in step]
    ranking = [tuple(h) for h in doc["ranking"]]
    assert ranking[: H - K] == masked and len(set(ranking)) == H
    pruned = tmp_path / "pruned.pt"
    strip("--input", stock, "--output", pruned, "--importance", scores, "--heads-to-keep", K)
    assert kept_heads(pruned)[0] == set(ranking[H - K :])

    code, _, err = call_cli(importance_cli.main, "--path", stock, "--data", corpus,
                            "--iterative", "--output", scores)  # fmt: skip
    assert code == 2 and "--iterative needs --heads-to-keep" in err


def test_iterative_importance_cache_shares_the_common_steps(corpus, stock, tmp_path):
    """Runs to K = 12 and then to K = 6 with one --cache-dir estimate 24..12 once, and the
    cached run to 6 ranks the heads exactly as a run without the cache."""
    common = ("--path", stock, "--data", corpus, "--max-tokens", "400", "--max-batches", "1",
              "--iterative", "--granularity", "sentence")  # fmt: skip
    cache = ("--cache-dir", tmp_path / "cache")

    def scores(k, name, *extra):
        out = tmp_path / f"{name}.json"
        code, _, err = call_cli(importance_cli.main, *common, "--heads-to-keep", k, *extra,
                                "--output", out)  # fmt: skip
        assert code == 0, err
        return json.loads(out.read_text()), err

    _, err = scores(12, "k12", *cache)  # estimates at 24, 21, 18, 15, 12 heads
    assert "0 estimates reused" in err and ", 5 made" in err
    cached, err = scores(6, "k6-cached", *cache)
    assert "5 estimates reused" in err and ", 2 made" in err  # at 9 and 6 heads
    plain, err = scores(6, "k6")
    assert "reused" not in err
    assert cached["ranking"] == plain["ranking"] and cached["steps"] == plain["steps"]
    assert cached["slots"] == plain["slots"]
    _, err = scores(12, "k12-normalized", *cache, "--normalize-per-layer")  # other options
    assert "0 estimates reused" in err
    code, _, err = call_cli(importance_cli.main, "--path", stock, "--data", corpus,
                            "--output", tmp_path / "x.json", *cache)  # fmt: skip
    assert code == 2 and "--cache-dir is only used with --iterative" in err


def test_token_importance_matches_per_token_brute_force(corpus, stock):
    """The batched per-token estimate equals one backward pass per (sentence, token),
    with the mask applied through the attention's own head-mask mechanism."""
    model, task, _ = importance_cli.load_model_and_task(str(stock), str(corpus))
    batches, _ = importance_cli.batch_factory(task, model, "valid", 120, 1, torch.device("cpu"))
    sample = next(iter(batches()))
    with one_thread():
        fast = head_importance(model, [sample], granularity="token")

    class FixedMask(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.mask = torch.ones(H, requires_grad=True)

        def current_mask(self):
            return self.mask

    source = FixedMask()
    start = 0
    for _, attn in model.attention_modules():
        attn.attach_gate(source, start)
        start += attn.num_heads
    model.eval()
    pad = task.source_dictionary.pad()
    total, tokens = torch.zeros(H, dtype=torch.float64), 0
    net = sample["net_input"]
    with one_thread():
        for b in range(sample["target"].size(0)):
            src = net["src_tokens"][b][net["src_tokens"][b].ne(pad)].unsqueeze(0)
            tgt = sample["target"][b][sample["target"][b].ne(pad)].unsqueeze(0)
            prev = net["prev_output_tokens"][b][: tgt.size(1)].unsqueeze(0)
            out = model(src, torch.tensor([src.size(1)]), prev)
            lprobs = model.get_normalized_probs(out, log_probs=True)
            nll = -lprobs.gather(-1, tgt.unsqueeze(-1)).view(-1)
            for t in range(nll.numel()):
                (grad,) = torch.autograd.grad(nll[t], source.mask, retain_graph=True)
                total += grad.abs().double()
            tokens += nll.numel()
    for _, attn in model.attention_modules():
        attn.detach_gate()
    assert fast.num_tokens == tokens and fast.num_sentences == sample["target"].size(0) > 1
    assert fast.scores.tolist() == pytest.approx((total / tokens).tolist(), rel=1e-3, abs=1e-7)


def test_random_strip_keeps_k_and_is_reproducible(stock, tmp_path):
    def random_strip(seed, name):
        out = tmp_path / name
        _, table, _ = strip("--input", stock, "--output", out, "--random", "--heads-to-keep", K,
                            "--seed", seed)  # fmt: skip
        assert f"heads kept: {K} of {H}" in table
        kept, args = kept_heads(out)
        assert args.arch == "transformer_dsp" and len(kept) == K
        return kept

    first = random_strip(5, "a.pt")
    assert random_strip(5, "b.pt") == first
    assert random_strip(6, "c.pt") != first
    proc = run(BIN / "dsp-strip", "--input", stock, "--output", tmp_path / "d.pt", "--random",
               "--heads-to-keep", K, "--seed", 5)  # fmt: skip
    assert kept_heads(tmp_path / "d.pt")[0] == first and "wrote" in proc.stdout

    for k in (0, H + 1):
        code, _, err = strip("--input", stock, "--output", tmp_path / "e.pt", "--random",
                             "--heads-to-keep", k, ok=False)  # fmt: skip
        assert code == 2 and f"choose K in [1, {H}]" in err
    code, _, err = strip("--input", stock, "--output", tmp_path / "e.pt", "--heads-to-keep", K,
                         ok=False)  # fmt: skip
    assert code == 2 and "needs --importance or --random" in err
    code, _, err = strip("--input", stock, "--output", tmp_path / "e.pt", ok=False)
    assert code == 2 and "not a transformer_dsp architecture" in err
    assert not (tmp_path / "e.pt").exists()


# -- per-type budgets -----------------------------------------------------------


def test_per_type_budget_trains_and_strips_to_the_requested_counts(gated, tmp_path):
    spec = "enc-self=1,dec-self=3,cross=2"
    masked, log = gated("dsp", "--heads-to-keep-per-type", spec)
    assert all(float(m["gate_mask_sum"]) == pytest.approx(K) for m in train_inner(log))
    pruned = tmp_path / "pruned.pt"
    _, table, _ = strip("--input", masked, "--output", pruned)
    assert f"heads kept: {K} of {H}" in table
    counts = parse_head_counts(kept_heads(pruned)[1].stripped_heads)
    assert {t: sum(v) for t, v in counts.items()} == {"enc-self": 1, "dec-self": 3, "cross": 2}


def test_stock_iwslt_weights_load_strictly_into_transformer_dsp_iwslt(corpus):
    """What --finetune-from-model does with a stock transformer_iwslt_de_en checkpoint."""
    from fairseq import options, tasks

    def build(*arch_args):
        parser = options.get_training_parser()
        argv = [str(corpus), "--user-dir", str(ROOT / "dsp_fairseq"), *arch_args]
        args = options.parse_args_and_arch(parser, [*argv, "--share-all-embeddings"])
        return tasks.setup_task(args).build_model(args)

    stock_model = build("--arch", "transformer_iwslt_de_en")
    dsp_model = build("--arch", "transformer_dsp_iwslt_de_en", "--heads-to-keep", "18")
    assert dsp_model.head_gate.num_heads == 72
    fresh_logits = dsp_model.head_gate.logits.detach().clone()
    stock_state = {k: v.clone() for k, v in stock_model.state_dict().items()}
    dsp_model.load_state_dict(dict(stock_state), strict=True)  # raises on a lost key
    loaded = dsp_model.state_dict()
    assert set(loaded) == set(stock_state) | {"head_gate.logits"}
    assert all(torch.equal(loaded[k], v) for k, v in stock_state.items())
    assert torch.equal(loaded["head_gate.logits"], fresh_logits)
