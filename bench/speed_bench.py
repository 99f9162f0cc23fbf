#!/usr/bin/env python3
"""Speed and memory of stripped models versus the unpruned model, on real Multi30k sentences.

All models are timed in one process on the same sentences, round-robin: every round decodes
with each model once (round 0 is a warm-up), so slow drifts of the machine hit all models
alike; median and min-max over the rounds are reported, with a fixed thread count. Peak
memory comes from a fresh subprocess per model and batch size (one batch decoded).

- variants: stock fairseq `transformer` holding the checkpoint's weights; the same weights in
  `transformer_dsp` without gates and with its gate in eval mode at K = H; stripped models at K
  in {H/8, H/4, H/2} (heads chosen by the checkpoint's gate logits: top-K); where K is a
  multiple of the number of attentions, fairseq's own `_adaptive_prune_heads` (same number of
  heads in every attention, chosen by weight magnitude) and `dsp-strip`'s surgery removing
  exactly those heads (same layout: implementation against implementation);
- workloads: free beam search (beam 5; time per decoded token and sentences/s) and a
  length-controlled one where every hypothesis is forced to exactly --fixed-steps tokens
  (min_len = max_len), at batch 1 and batch 64;
- next to each ratio, the FLOP bound B (bench/flops.py) and the share of the allowed saving
  captured, (1 - t_stripped / t_unpruned) / (1 - 1/B);
- training words/s of transformer_dsp (K = H) versus stock `transformer` (bench/core_bench.py).

    python bench/speed_bench.py --data work/multi30k/bin \
        --checkpoint work/demo/checkpoints/checkpoint_last.pt --out bench/speed
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import date

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

from bench.common import machine, quiet_fairseq  # noqa: E402


def _plugin():
    from fairseq import utils

    utils.import_user_module(argparse.Namespace(user_dir=os.path.join(ROOT, "dsp_fairseq")))


def heads_by_type(args) -> dict:
    from dsp_fairseq.models.head_layout import attention_slots

    out: dict = {}
    for s in attention_slots(args):
        out.setdefault(s.kind, []).append(s.num_heads)
    return out


def build_variant(state: dict, variant: str, k: int, task):
    """The model for one variant, from a transformer_dsp checkpoint's weights."""
    from dsp_fairseq.checkpoint_io import model_args
    from dsp_fairseq.pruning.strip import kept_from_gate, strip_checkpoint

    args = copy.copy(model_args(state))
    weights = {n: v for n, v in state["model"].items() if not n.startswith("head_gate.")}
    if variant in ("stripped", "stripped-even"):
        if variant == "stripped":
            gate_args = copy.copy(args)
            gate_args.heads_to_keep, gate_args.heads_to_keep_per_type = k, None
            kept = kept_from_gate(dict(state, cfg=dict(state["cfg"], model=gate_args)))
        else:
            kept = fairseq_kept_heads(state, k, task)
        new_state, _ = strip_checkpoint(dict(state, model=weights), kept=kept)
        args, weights = new_state["cfg"]["model"], new_state["model"]
    elif variant in ("stock", "fairseq-prune"):
        # fairseq picks the model class by `_name` before `arch`
        args.arch = args._name = "transformer"
    elif variant == "dsp-full":
        args.gate_type = "none"
    elif variant == "masked":
        # the gated model as trained, its gate in eval mode with budget K (all heads at K = H)
        args.heads_to_keep, args.heads_to_keep_per_type = k, None
        weights = state["model"]
    model = task.build_model(args)
    model.load_state_dict(weights, strict=True)
    if variant == "fairseq-prune":
        modules = dict(model.named_modules())
        for name, spans in fairseq_reserved_spans(model, k).items():
            modules[name]._adaptive_prune_heads(spans)
            modules[name]._set_skip_embed_dim_check()
    heads = {}
    for name, module in model.named_modules():
        if hasattr(module, "num_heads") and hasattr(module, "q_proj"):
            kind = (
                "cross"
                if "encoder_attn" in name
                else ("enc-self" if name.startswith("encoder") else "dec-self")
            )
            heads.setdefault(kind, []).append(module.num_heads)
    return model.eval(), heads


def fairseq_reserved_spans(model, k: int) -> dict:
    """fairseq's own choice at total K: per stock attention (by module name), the feature
    spans ``_get_reserve_head_index`` keeps, the same number of heads in each."""
    attentions = {
        name: m for name, m in model.named_modules() if type(m).__name__ == "MultiheadAttention"
    }
    per_module = k // len(attentions)
    return {name: m._get_reserve_head_index(per_module) for name, m in attentions.items()}


def fairseq_kept_heads(state: dict, k: int, task) -> dict:
    """The head indices fairseq's ``_adaptive_prune_heads`` keeps at total K, per attention.

    Lets ``dsp-strip``'s surgery remove exactly the heads fairseq removes, so the two
    implementations are compared on the same layout.
    """
    model, _ = build_variant(state, "stock", k, task)
    modules = dict(model.named_modules())
    return {
        name: sorted(start // modules[name].head_dim for start, _ in spans)
        for name, spans in fairseq_reserved_spans(model, k).items()
    }


def load_test_setup(checkpoint: str, data: str):
    """The checkpoint state, its translation task and the test set."""
    from fairseq import tasks

    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args

    state = load_checkpoint(checkpoint)
    targs = copy.copy(model_args(state))
    targs.data = data
    task = tasks.setup_task(targs)
    task.load_dataset("test")
    return state, task, task.dataset("test")


def make_batches(ds, sentences: int, batch: int) -> list:
    ids = list(range(min(sentences, len(ds))))
    return [ds.collater([ds[i] for i in ids[j : j + batch]]) for j in range(0, len(ids), batch)]


def make_generator(model, task, beam: int, fixed: int):
    """Beam search; with ``fixed`` > 0 every hypothesis has exactly ``fixed`` tokens."""
    from fairseq.sequence_generator import SequenceGenerator

    return SequenceGenerator(
        [model],
        task.target_dictionary,
        beam_size=beam,
        max_len_a=0 if fixed else 1.2,
        max_len_b=fixed or 10,
        min_len=fixed or 1,
    )


def decode_pass(gen, model, batches) -> tuple:
    """Seconds, decoded tokens, decoder steps and (id, tokens) hypotheses of one pass.

    Decoder steps (calls of the decoder) show how long beam search ran: a batch runs until
    its slowest sentence has finished, so a model whose beams ramble takes more steps for
    the same number of tokens in its best hypotheses.
    """
    tokens, hyps, steps = 0, [], [0]
    # fairseq's generator calls decoder.forward() directly (no module hooks); the output
    # projection is called as a module once per step
    hook = model.decoder.output_projection.register_forward_hook(
        lambda *_: steps.__setitem__(0, steps[0] + 1)
    )
    start = time.perf_counter()
    try:
        with torch.inference_mode():
            for batch in batches:
                for sid, h in zip(batch["id"].tolist(), gen.generate([model], batch)):
                    tokens += h[0]["tokens"].numel()
                    hyps.append((sid, h[0]["tokens"].tolist()))
        seconds = time.perf_counter() - start
    finally:
        hook.remove()
    return seconds, tokens, steps[0], sorted(hyps)


def worker(cfg: dict) -> dict:
    """Peak memory of one variant decoding one batch, in a fresh process."""
    torch.set_num_threads(cfg["threads"])
    _plugin()
    state, task, ds = load_test_setup(cfg["checkpoint"], cfg["data"])
    model, _ = build_variant(state, cfg["variant"], cfg["k"], task)
    batches = make_batches(ds, cfg["batch"], cfg["batch"])
    decode_pass(make_generator(model, task, cfg["beam"], 0), model, batches)  # peak memory only
    from bench.common import peak_rss_mb  # after sys.path has the repository

    return {"peak_rss_mb": peak_rss_mb()}


def run_worker(cfg: dict) -> dict:
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", json.dumps(cfg)], capture_output=True, text=True
    )
    if proc.returncode != 0:
        raise RuntimeError(f"worker {cfg} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def measure(variants, models, task, ds, batch, fixed, args) -> list:
    """Time every variant on the same batches, interleaved round by round (round 0: warm-up)."""
    batches = make_batches(ds, args.sentences, batch)
    gens = {key: make_generator(models[key][0], task, 5, fixed) for key in variants}
    seconds = {key: [] for key in variants}
    last = {}
    for rnd in range(args.reps + 1):
        for key in variants:
            sec, tokens, steps, hyps = decode_pass(gens[key], models[key][0], batches)
            if rnd:
                seconds[key].append(sec)
            last[key] = (tokens, steps, hyps)
    n = sum(len(b["id"]) for b in batches)
    src_len = sum(b["net_input"]["src_lengths"].sum().item() for b in batches) / n
    rows = []
    for variant, k in variants:
        tokens, steps, hyps = last[(variant, k)]
        med = statistics.median(seconds[(variant, k)])
        model, heads = models[(variant, k)]
        rows.append(
            {
                "variant": variant,
                "k": k,
                "batch": batch,
                "beam": 5,
                "fixed_steps": fixed,
                "heads": heads,
                "seconds": seconds[(variant, k)],
                "median_s": med,
                "tokens": tokens,
                "decoder_steps": steps,
                "sentences": n,
                "avg_src_len": src_len,
                "avg_out_len": tokens / n,
                "ms_per_token": 1000 * med / tokens,
                "sentences_per_s": n / med,
                "parameters": sum(p.numel() for p in model.parameters()),
                "hypotheses_digest": hashlib.sha1(repr(hyps).encode()).hexdigest()[:16],
            }
        )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--data")
    parser.add_argument("--checkpoint", help="a trained transformer_dsp checkpoint (masked)")
    parser.add_argument("--out", default=os.path.join(HERE, "speed"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--fixed-steps", type=int, default=20)
    parser.add_argument("--batches", default="1,64")
    parser.add_argument("--skip-training", action="store_true")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    _plugin()
    quiet_fairseq()
    from bench.flops import Dims
    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args

    os.makedirs(args.out, exist_ok=True)
    margs = model_args(load_checkpoint(args.checkpoint))
    full = heads_by_type(margs)
    h_total = sum(sum(v) for v in full.values())
    n_attn = sum(len(v) for v in full.values())
    ks = [h_total // 8, h_total // 4, h_total // 2]
    dims = Dims(
        margs.encoder_embed_dim,
        margs.decoder_embed_dim,
        margs.encoder_ffn_embed_dim,
        margs.decoder_ffn_embed_dim,
        margs.encoder_embed_dim // margs.encoder_attention_heads,
        margs.decoder_embed_dim // margs.decoder_attention_heads,
        len(open(os.path.join(args.data, "dict.en.txt")).readlines()) + 4,
    )
    variants = [("stock", h_total), ("dsp-full", h_total), ("masked", h_total)]
    variants += [("stripped", k) for k in ks]
    variants += [(v, k) for k in ks if k % n_attn == 0 for v in ("stripped-even", "fairseq-prune")]
    torch.set_num_threads(args.threads)
    state, task, ds = load_test_setup(args.checkpoint, args.data)
    models = {key: build_variant(state, key[0], key[1], task) for key in variants}
    rows = []
    for batch in [int(b) for b in args.batches.split(",")]:
        for fixed in (0, args.fixed_steps):
            print(
                f"  batch {batch}, {'fixed ' + str(fixed) + ' steps' if fixed else 'free decoding'}:"
                f" {len(variants)} models interleaved, {args.reps} rounds",
                flush=True,
            )
            rows.extend(measure(variants, models, task, ds, batch, fixed, args))
        # Peak memory: each model decoding one batch of this size in a fresh process.
        for variant, k in variants:
            cfg = {"checkpoint": args.checkpoint, "data": args.data, "variant": variant, "k": k,
                   "batch": batch, "beam": 5, "threads": args.threads}  # fmt: skip
            peak = run_worker(cfg)
            for row in rows:
                if (row["variant"], row["k"], row["batch"]) == (variant, k, batch):
                    row.update(peak)
    training = None
    if not args.skip_training:
        from core_bench import training_throughput

        torch.set_num_threads(args.threads)
        print("  training throughput", flush=True)
        training = training_throughput(args.data, 12, args.reps)
    result = {
        "date": date.today().isoformat(),
        "machine": machine(args.threads),
        "command": " ".join(sys.argv),
        "rows": rows,
        "training": training,
    }
    with open(os.path.join(args.out, "speed_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    table = render(result, dims, full)
    with open(os.path.join(args.out, "speed_bench.md"), "w") as f:
        f.write(table)
    print(table)
    return 0


def render(result: dict, dims, full) -> str:
    from bench.flops import captured_share, flop_bound

    lines = [f"Machine: {result['machine']}. Date: {result['date']}.", ""]
    rows = result["rows"]
    base = {(r["batch"], r["fixed_steps"]): r for r in rows if r["variant"] == "dsp-full"}
    stock = {(r["batch"], r["fixed_steps"]): r for r in rows if r["variant"] == "stock"}
    lines.append(
        "| batch | workload | model | K | out len | decoder steps | ms/token (median, min-max) | "
        "sent/s | speed-up vs unpruned | FLOP bound B | share captured | peak RSS MB | params |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        ref = base[(r["batch"], r["fixed_steps"])]
        wl = f"fixed {r['fixed_steps']} steps" if r["fixed_steps"] else "free beam 5"
        per_tok = [1000 * s / r["tokens"] for s in r["seconds"]]
        speed = (
            ref["median_s"] / r["median_s"]
            if r["fixed_steps"]
            else ref["ms_per_token"] / r["ms_per_token"]
        )
        steps = r["fixed_steps"] or round(r["avg_out_len"])
        bound = flop_bound(dims, full, r["heads"], r["avg_src_len"], steps, r["beam"])
        t_ratio = 1 / speed
        share = captured_share(t_ratio, 1.0, bound) if bound > 1.0001 else float("nan")
        name = {
            "stock": "stock transformer",
            "dsp-full": "transformer_dsp, no gate",
            "masked": "transformer_dsp, gate (eval)",
            "stripped": "dsp-strip",
            "stripped-even": "dsp-strip, fairseq's heads",
            "fairseq-prune": "fairseq _adaptive_prune_heads",
        }[r["variant"]]
        lines.append(
            f"| {r['batch']} | {wl} | {name} | {r['k']} | {r['avg_out_len']:.1f} | "
            f"{r['decoder_steps']} | "
            f"{statistics.median(per_tok):.3f} ({min(per_tok):.3f}-{max(per_tok):.3f}) | "
            f"{r['sentences_per_s']:.1f} | {speed:.2f}x | {bound:.2f} | "
            f"{'' if share != share else f'{100 * share:.0f}%'} | {r['peak_rss_mb']:.0f} | {r['parameters']:,} |"
        )
    lines.append("")
    lines.append(
        "Speed-up: ratio of time per decoded token (free decoding) or of total time "
        "(fixed steps: identical work per hypothesis) against transformer_dsp without gate "
        "(K = H) in the same batch/workload."
    )
    masked = {(r["batch"], r["fixed_steps"]): r for r in rows if r["variant"] == "masked"}
    for key, r in stock.items():
        for label, other in (("no gate", base[key]), ("gate in eval mode", masked.get(key))):
            if other is None:
                continue
            lines.append(
                f"- K = H, transformer_dsp ({label}) vs stock transformer, batch {key[0]}, "
                f"{'fixed steps' if key[1] else 'free'}: "
                f"{r['ms_per_token'] / other['ms_per_token']:.2f}x per token "
                f"(>1: transformer_dsp faster); identical translations: "
                f"{r['hypotheses_digest'] == other['hypotheses_digest']}"
            )
    by_key = {(r["variant"], r["k"], r["batch"], r["fixed_steps"]): r for r in rows}
    for (variant, k, batch, fixed), r in by_key.items():
        ours = by_key.get(("stripped-even", k, batch, fixed))
        if variant != "fairseq-prune" or ours is None:
            continue
        lines.append(
            f"- dsp-strip vs fairseq _adaptive_prune_heads, same heads kept (K = {k}), "
            f"batch {batch}, {'fixed steps' if fixed else 'free'}: "
            f"{r['ms_per_token'] / ours['ms_per_token']:.2f}x per token (>1: dsp-strip faster); "
            f"identical translations: {r['hypotheses_digest'] == ours['hypotheses_digest']}"
        )
    if result.get("training"):
        t = result["training"]
        lines.append(
            f"- training words/s, transformer_dsp (K = H, DSP gate active) vs stock: "
            f"{t['ratio_dsp_over_stock']:.2f}x"
        )
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
