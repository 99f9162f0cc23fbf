#!/usr/bin/env python3
"""Alternate pipelined gate training with reconstruction (issue 17, item 3).

The pipelined gates are trained on a frozen model, so they pick the heads that are best
*without* recovery. Here the one epoch of gate training is cut into ``--rounds`` pieces;
after each piece but the last, the heads the gates keep now are stripped, refit against
the unpruned model (``dsp-reconstruct``'s defaults), and the refit output projections
(kept heads' columns and bias) and FFN output layers are written back into the gated
model, so the next piece trains the gates on a model that has recovered from the current
choice. The temperature schedule runs over the whole epoch, as in one run (fairseq
resumes ``checkpoint_last.pt``; only the frozen weights change between rounds). The final
gates' heads are stripped from the unpruned model (``pruned.pt``, the selection alone) and
refit like any ``+ reconstruct`` row (``pruned.rec.pt``).

    python bench/alternating_refits.py --data ../shared/data/multi30k-base72/data \\
        --base ../shared/data/multi30k-base72/checkpoint.pt --heads-to-keep 18 \\
        --rounds 3 --out work/converged/alternating/k18-r3 [--seed 1]

Writes OUT/gates/ (the gated run), OUT/round{N}.json (the kept heads after each round),
OUT/pruned.pt, OUT/pruned.rec.pt, OUT/eval*/ and OUT/result.json (test and valid
sacreBLEU of both, heads per stack, seconds). Finished steps are skipped on a rerun.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench.common import evaluate_sacrebleu  # noqa: E402

RECIPES = os.path.join(ROOT, "examples", "translation")


def stacks(kept: dict) -> dict:
    """Heads kept per attention type (enc-self, dec-self, dec-cross)."""
    out = {"encoder.self_attn": 0, "decoder.self_attn": 0, "decoder.encoder_attn": 0}
    for prefix, heads in kept.items():
        out[f"{prefix.split('.')[0]}.{prefix.rsplit('.', 1)[1]}"] += len(heads)
    return out


def write_back(gated: dict, refit: dict) -> dict:
    """``gated`` with the refit's output projections (kept columns, bias) and fc2 layers."""
    from dsp_fairseq.checkpoint_io import model_args
    from dsp_fairseq.pruning.surgery import restore_columns

    args = model_args(gated)
    model = dict(gated["model"])
    rmodel = refit["model"]
    for prefix, heads in refit["dsp_kept_heads"].items():
        key = f"{prefix}.out_proj.weight"
        num_heads = (
            args.encoder_attention_heads
            if prefix.startswith("encoder")
            else args.decoder_attention_heads
        )
        head_dim = model[key].shape[1] // num_heads
        model[key] = restore_columns(model[key], rmodel[key], heads, head_dim)
        model[f"{prefix}.out_proj.bias"] = rmodel[f"{prefix}.out_proj.bias"].clone()
    for key, value in rmodel.items():
        if ".fc2." in key:
            model[key] = value.clone()
    return {**gated, "model": model}


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", required=True, help="prepared corpus folder (bin/, spm/, raw/)")
    p.add_argument("--base", required=True, help="the unpruned checkpoint")
    p.add_argument("--heads-to-keep", type=int, required=True)
    p.add_argument("--rounds", type=int, default=3, help="pieces of the gate epoch (default 3)")
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--preset", default="cpu-small")
    args = p.parse_args()
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    import dsp_fairseq  # noqa: F401
    from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
    from dsp_fairseq.pruning.calibrate import reconstruct_checkpoint
    from dsp_fairseq.pruning.strip import strip_checkpoint

    bin_dir = os.path.join(args.data, "bin")
    gates = os.path.join(args.out, "gates")
    os.makedirs(gates, exist_ok=True)
    start = time.time()
    epoch = int(
        subprocess.check_output(
            [sys.executable, "-m", "dsp_fairseq.recipes.pipelined_args", "--epoch-updates",
             "--data", bin_dir, "--base", args.base, "--max-tokens", "1024"],
            text=True,
        ).split()[-1]
    )  # fmt: skip
    base = None
    for r in range(1, args.rounds + 1):
        record = os.path.join(args.out, f"round{r}.json")
        if os.path.exists(record):
            continue
        updates = round(epoch * r / args.rounds)
        for name in (".done", "pruned.pt", "recovery"):  # the recipe's markers of a finished run
            if os.path.exists(os.path.join(gates, name)):
                os.unlink(os.path.join(gates, name))
        subprocess.run(
            ["bash", os.path.join(RECIPES, "prune-pipelined.sh"), "--data", args.data,
             "--base", args.base, "--heads-to-keep", str(args.heads_to_keep), "--save-dir", gates,
             "--preset", args.preset, "--seed", str(args.seed), "--recovery", "none",
             "--validate-interval", "0", "--anneal-updates", str(epoch),
             "--importance-args", "--granularity token",  # the gate init it measured
             "--type-split", "free",  # and the choice among all heads
             "--train-args", f"--max-update {updates}"],
            check=True,
        )  # fmt: skip
        last = os.path.join(gates, "checkpoint_last.pt")
        gated = load_checkpoint(last)
        stripped, _ = strip_checkpoint(gated)
        kept = stripped["dsp_kept_heads"]
        info = {"round": r, "updates": updates, "heads": stacks(kept), "kept": kept}
        if r < args.rounds:
            base = base or load_checkpoint(args.base)
            refit, _ = reconstruct_checkpoint(stripped, base, bin_dir)
            save_checkpoint_atomic(write_back(gated, refit), last, mode_like=last)
        print(json.dumps({k: v for k, v in info.items() if k != "kept"}), flush=True)
        with open(record + ".tmp", "w") as f:
            json.dump(info, f, indent=1)
        os.replace(record + ".tmp", record)
    pruned = os.path.join(args.out, "pruned.pt")
    rec = os.path.join(args.out, "pruned.rec.pt")
    if not os.path.exists(rec):
        # the final heads stripped from the unpruned model itself (the gated model holds the
        # last intermediate refit), then refit like every + reconstruct row
        final, _ = strip_checkpoint(load_checkpoint(os.path.join(gates, "checkpoint_last.pt")))
        base = load_checkpoint(args.base)
        stripped, _ = strip_checkpoint(base, kept=final["dsp_kept_heads"])
        save_checkpoint_atomic(stripped, pruned)
        refit, _ = reconstruct_checkpoint(stripped, base, bin_dir)
        save_checkpoint_atomic(refit, rec)
    result = {
        "heads_to_keep": args.heads_to_keep,
        "rounds": args.rounds,
        "seed": args.seed,
        "heads": stacks(load_checkpoint(rec)["dsp_kept_heads"]),
    }
    for name, ckpt in (("stripped", pruned), ("rec", rec)):
        for subset, folder in (("test", "eval"), ("valid", "eval-valid")):
            result[f"{name}_{subset}"] = evaluate_sacrebleu(
                args.data, ckpt, os.path.join(args.out, folder, name), subset, reuse=True
            )
    result["seconds"] = round(time.time() - start)
    with open(os.path.join(args.out, "result.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
