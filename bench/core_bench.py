#!/usr/bin/env python3
"""Core speed benchmark (issue: core plugin), all ratios measured in one process.

1. Training words/s (target tokens/s, fairseq's "wps") of transformer_dsp at K = H
   (DSP gates active) versus stock fairseq `transformer` of the same size, on the
   same real batches, the two models taking turns pass by pass (median of the passes).
2. Decoding of the Multi30k 2016 test set with the masked demo checkpoint versus its
   stripped version: beam 5, batch 64, sentences/s and ms per generated token.

    python bench/core_bench.py --data work/multi30k/bin \
        --masked work/demo/checkpoints/checkpoint_last.pt \
        --stripped work/demo/checkpoints/pruned.pt --out bench/core_bench.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from datetime import date

import torch
from fairseq import checkpoint_utils, options, tasks, utils

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
utils.import_user_module(argparse.Namespace(user_dir=os.path.join(ROOT, "dsp_fairseq")))

from bench.common import machine, quiet_fairseq  # noqa: E402


def build(arch: str, data: str, extra: list[str]):
    parser = options.get_training_parser()
    argv = [
        data,
        "--arch",
        arch,
        "--user-dir",
        os.path.join(ROOT, "dsp_fairseq"),
        "--cpu",
        "--share-all-embeddings",
        "--dropout",
        "0.1",
        "--encoder-layers",
        "3",
        "--decoder-layers",
        "3",
        "--encoder-embed-dim",
        "256",
        "--decoder-embed-dim",
        "256",
        "--encoder-ffn-embed-dim",
        "1024",
        "--decoder-ffn-embed-dim",
        "1024",
        "--encoder-attention-heads",
        "4",
        "--decoder-attention-heads",
        "4",
        *extra,
    ]
    args = options.parse_args_and_arch(parser, argv)
    task = tasks.setup_task(args)
    model = task.build_model(args)
    return task, model, args


def training_throughput(data: str, batches: int, repeats: int) -> dict:
    task, dsp, _ = build("transformer_dsp", data, [])  # K = H: every head kept
    _, stock, _ = build("transformer", data, [])
    task.load_dataset("train")
    itr = task.get_batch_iterator(
        task.dataset("train"), max_tokens=4096, seed=1, max_positions=(1024, 1024)
    ).next_epoch_itr(shuffle=True)
    samples = [s for _, s in zip(range(batches), itr)]
    models = {"transformer_dsp (K=H)": dsp, "transformer (stock)": stock}
    opts = {n: torch.optim.Adam(m.parameters(), lr=1e-4) for n, m in models.items()}
    times = {n: [] for n in models}

    def step(name, sample):
        model = models[name]
        model.train()
        if getattr(model, "head_gate", None) is not None:
            model.head_gate.set_temperature(0.1)
        out = model(**sample["net_input"])
        lprobs = model.get_normalized_probs(out, log_probs=True)
        loss = torch.nn.functional.nll_loss(
            lprobs.view(-1, lprobs.size(-1)),
            sample["target"].view(-1),
            ignore_index=1,
            reduction="sum",
        )
        opts[name].zero_grad()
        loss.backward()
        opts[name].step()

    for name in models:  # warm-up
        step(name, samples[0])
    tokens = sum(s["ntokens"] for s in samples)
    for _ in range(repeats):
        for name in models:
            start = time.perf_counter()
            for sample in samples:
                step(name, sample)
            times[name].append(time.perf_counter() - start)
    result = {
        n: {"wps_median": tokens / statistics.median(t), "seconds": t} for n, t in times.items()
    }
    names = list(models)
    result["ratio_dsp_over_stock"] = result[names[0]]["wps_median"] / result[names[1]]["wps_median"]
    return result


def decode_speed(data: str, ckpt: str, repeats: int) -> dict:
    models, cfg, task = checkpoint_utils.load_model_ensemble_and_task(
        [ckpt], arg_overrides={"data": data}
    )
    model = models[0].eval()
    cfg.generation.beam = 5
    generator = task.build_generator(models, cfg.generation)
    task.load_dataset("test")
    runs, hyps = [], []
    for _ in range(repeats):
        itr = task.get_batch_iterator(
            task.dataset("test"), max_sentences=64, max_positions=(1024, 1024)
        ).next_epoch_itr(shuffle=False)
        n_sent = n_tok = 0
        hyps = []
        start = time.perf_counter()
        with torch.inference_mode():
            for sample in itr:
                out = task.inference_step(generator, models, sample)
                for sid, h in zip(sample["id"].tolist(), out):
                    hyps.append((sid, h[0]["tokens"].tolist()))
                    n_tok += h[0]["tokens"].numel()
                n_sent += len(out)
        runs.append(time.perf_counter() - start)
    med = statistics.median(runs)
    params = sum(p.numel() for p in model.parameters())
    return {
        "sentences": n_sent,
        "tokens": n_tok,
        "seconds": runs,
        "sentences_per_s": n_sent / med,
        "ms_per_token": 1000 * med / n_tok,
        "parameters": params,
        "hypotheses": sorted(hyps),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True)
    parser.add_argument("--masked", required=True)
    parser.add_argument("--stripped", required=True)
    parser.add_argument("--out", default=os.path.join(ROOT, "bench", "core_bench.json"))
    parser.add_argument("--train-batches", type=int, default=12)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--decode-repeats", type=int, default=2)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    quiet_fairseq()

    print("training throughput ...", flush=True)
    train = training_throughput(args.data, args.train_batches, args.repeats)
    print("decoding (masked, then stripped) ...", flush=True)
    masked = decode_speed(args.data, args.masked, args.decode_repeats)
    stripped = decode_speed(args.data, args.stripped, args.decode_repeats)
    identical = masked.pop("hypotheses") == stripped.pop("hypotheses")
    result = {
        "date": date.today().isoformat(),
        "machine": machine(args.threads),
        "training": train,
        "decode_masked": masked,
        "decode_stripped": stripped,
        "identical_hypotheses": identical,
        "decode_speedup_sentences": stripped["sentences_per_s"] / masked["sentences_per_s"],
        "decode_speedup_per_token": masked["ms_per_token"] / stripped["ms_per_token"],
    }
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    t = train
    names = [n for n in t if n != "ratio_dsp_over_stock"]
    print("\n| measurement | baseline | dsp-fairseq | ratio |\n|---|---|---|---|")
    print(
        f"| training words/s, 3+3 layers 256/1024 | {t[names[1]]['wps_median']:.0f} (stock transformer) "
        f"| {t[names[0]]['wps_median']:.0f} (transformer_dsp, K=H) | {t['ratio_dsp_over_stock']:.2f}x |"
    )
    print(
        f"| decode sentences/s, beam 5, batch 64 | {masked['sentences_per_s']:.1f} (masked) "
        f"| {stripped['sentences_per_s']:.1f} (stripped) | {result['decode_speedup_sentences']:.2f}x |"
    )
    print(
        f"| decode ms per output token | {masked['ms_per_token']:.3f} (masked) "
        f"| {stripped['ms_per_token']:.3f} (stripped) | {result['decode_speedup_per_token']:.2f}x |"
    )
    print(
        f"| parameters | {masked['parameters']:,} | {stripped['parameters']:,} | "
        f"{stripped['parameters'] / masked['parameters']:.2f}x |"
    )
    print(f"\nidentical hypotheses: {identical}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
