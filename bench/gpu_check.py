#!/usr/bin/env python3
"""GPU check of the --fp16 training paths, stripping and fp16 decoding (one prepared run).

On a machine with a CUDA GPU, with the virtual environment's tools on PATH:

    python bench/gpu_check.py --work work/gpu_check            # data prepared if needed
    python bench/gpu_check.py --data-bin work/multi30k/bin ...  # reuse binarised Multi30k

1. prepares Multi30k De->En (examples/translation/prepare-multi30k.sh) unless --data-bin;
2. trains transformer_dsp_iwslt_de_en with DSP (K = --heads-to-keep) under --fp16 (fairseq's
   default flattened FP16Optimizer) at the default initial loss scale for --updates updates;
   checks that the loss scale never falls below 8, that at most --max-skipped-share of the
   updates were skipped for overflow, and that the gate learned: a finite, non-zero
   gate_gnorm logged and one gate Adam step per update made (the checkpoint's
   head_gate.adam_step);
2b. the same gate checks, --path-updates updates each, for --fp16 --fp16-no-flatten-grads,
   and for two ranks (two GPUs if there are, else both on GPU 0 over gloo) under
   --ddp-backend legacy_ddp --fp16 and --ddp-backend pytorch_ddp --ddp-comm-hook fp16
   (the paths on which the gate froze before the translation_dsp task);
2c. two ranks of --fp16 distillation (--criterion dsp_distillation) from the step-2 model, the
   teacher on each rank's GPU: the gate checks and a finite, positive distill_kl logged;
3. validates the result with fairseq-validate --fp16 (finite loss);
4. strips it with dsp-strip and decodes the test set with fp16 (BLEU of both models);
5. times fp16 decoding of the unpruned (masked) and stripped models, beam 5, batch 64 and
   128 (best of --reps runs, fairseq-generate's own sentences/s);
6. measures training words/s (--fp16) of transformer_dsp with its gate at K = H against
   stock fairseq `transformer_iwslt_de_en`, --speed-updates updates each.

Writes WORK/gpu_check.json and prints a summary; exit status 0 when the checks hold, 1 when
one fails, 2 when no CUDA GPU is visible (nothing is run then; --dry-run prints the
commands instead, which needs no GPU).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shlex
import subprocess
import sys
import time
from typing import Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLUGIN = os.path.join(ROOT, "dsp_fairseq")

NO_GPU = (
    "gpu_check: no CUDA GPU is visible (torch.cuda.is_available() is False); this check "
    "trains and decodes with --fp16 on a GPU, so nothing was run. "
    "Use --dry-run to see the commands it would run."
)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu_check.py",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--work",
        default=os.path.join(ROOT, "work", "gpu_check"),
        help="folder for data, checkpoints, logs and gpu_check.json",
    )
    p.add_argument("--data-bin", help="binarised Multi30k (fairseq-preprocess output) to reuse")
    p.add_argument("--updates", type=int, default=300, help="DSP --fp16 training updates")
    p.add_argument("--heads-to-keep", type=int, default=18, help="K (of 72 heads)")
    p.add_argument("--max-tokens", type=int, default=4096)
    p.add_argument(
        "--min-loss-scale",
        type=float,
        default=8.0,
        help="fail if fairseq's loss scale ever falls below this",
    )
    p.add_argument(
        "--max-skipped-share",
        type=float,
        default=0.05,
        help="fail if more than this share of updates is skipped for overflow",
    )
    p.add_argument(
        "--speed-updates",
        type=int,
        default=100,
        help="updates per training-speed run (gated K = H and stock)",
    )
    p.add_argument(
        "--path-updates",
        type=int,
        default=60,
        help="updates per extra training path (unflattened fp16, legacy_ddp, comm hook)",
    )
    p.add_argument("--reps", type=int, default=3, help="decode timing runs per setting (best)")
    p.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    return p  # fmt: skip


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    for name in ("updates", "heads_to_keep", "max_tokens", "speed_updates", "reps",
                 "path_updates"):  # fmt: skip
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    if args.updates < 50:
        parser.error("--updates must be >= 50: the check is about the annealed low temperatures")
    if not 0 <= args.max_skipped_share < 1:
        parser.error("--max-skipped-share must lie in [0, 1)")
    if args.data_bin and not os.path.isfile(os.path.join(args.data_bin, "dict.de.txt")):
        parser.error(
            f"--data-bin {args.data_bin}: no dict.de.txt there (fairseq-preprocess output?)"
        )


# -- fairseq log parsing ----------------------------------------------------------------

_OVERFLOW = re.compile(r"NOTE: gradient overflow detected")
_TRANSLATED = re.compile(r"Translated [\d,]+ sentences \([\d,]+ tokens\) in [\d.]+s "
                         r"\(([\d.]+) sentences/s, ([\d.]+) tokens/s\)")  # fmt: skip
_BLEU = re.compile(r"BLEU = ([\d.]+)")
_VALID_LOSS = re.compile(r"valid on '[^']+' subset \| loss ([^ |]+)")


def _json_records(text: str, tag: str) -> List[dict]:
    """fairseq's --log-format json records of one kind (train_inner, train, ...).

    fairseq logs them as ``... | INFO | TAG | {json}``; end-of-epoch records
    (``print``) prefix their keys with ``TAG_``, which is removed here.
    """
    records = []
    marker = f"| {tag} | "
    for line in text.splitlines():
        if marker not in line:
            continue
        try:
            record = json.loads(line.split(marker, 1)[1])
        except json.JSONDecodeError:
            continue
        records.append({k.removeprefix(f"{tag}_"): v for k, v in record.items()})
    return records


def train_stats(log: str) -> Dict[str, object]:
    """Loss scales, overflow count, words/s and updates from a fairseq-train json log."""
    inner = _json_records(log, "train_inner")
    final = _json_records(log, "train")
    scales = [float(r["loss_scale"]) for r in inner + final if "loss_scale" in r]
    wps = [float(r["wps"]) for r in inner if "wps" in r]
    updates = max([int(float(r.get("num_updates", 0))) for r in inner + final] or [0])
    return {
        "loss_scales": scales,
        "min_loss_scale": min(scales) if scales else None,
        "overflows": len(_OVERFLOW.findall(log)),
        # the first interval includes start-up: leave it out of the speed
        "wps": (sum(wps[1:]) / len(wps[1:])) if len(wps) > 1 else (wps[0] if wps else None),
        "updates": updates,
    }


def fp16_failures(
    stats: Dict[str, object], min_scale: float, max_skipped_share: float
) -> List[str]:
    """What is wrong with an fp16 training run, in words (empty: nothing)."""
    problems = []
    if not stats["loss_scales"]:
        problems.append("no loss_scale in the training log (was it run with --fp16?)")
    elif stats["min_loss_scale"] < min_scale:
        problems.append(f"loss scale fell to {stats['min_loss_scale']} (< {min_scale})")
    attempted = stats["updates"] + stats["overflows"]
    if attempted and stats["overflows"] > max_skipped_share * attempted:
        problems.append(
            f"{stats['overflows']} of {attempted} updates skipped for overflow "
            f"(> {max_skipped_share:.0%})"
        )
    return problems


def gate_failures(log: str, state: Optional[dict]) -> List[str]:
    """What shows that the gate did not learn in a training run (empty: it learned).

    ``state``: the run's checkpoint_last.pt (None: none was written). The task logs the
    gate's own gradient norm as gate_gnorm and saves its Adam step count with the logits.
    """
    problems = []
    norms = [float(r["gate_gnorm"]) for r in _json_records(log, "train_inner") if "gate_gnorm" in r]
    if not norms:
        problems.append(
            "no gate_gnorm in the training log (was it run with --task translation_dsp?)"
        )
    elif not all(math.isfinite(n) for n in norms) or max(norms) <= 0:
        problems.append(f"gate_gnorm {norms}: the gate got no (finite) gradient")
    updates = train_stats(log)["updates"]
    if state is None:
        problems.append("no checkpoint_last.pt written")
    else:
        model = state.get("model", {})
        steps = model.get("head_gate.adam_step")
        if steps is None:
            problems.append("the checkpoint holds no gate Adam state: the gate never stepped")
        elif int(float(steps)) != updates:
            problems.append(f"{int(float(steps))} gate Adam steps for {updates} updates")
    return problems  # fmt: skip


def distill_failures(log: str) -> List[str]:
    """What is wrong with a distilled run's log (empty: a finite, positive KL was logged)."""
    kl = [float(r["distill_kl"]) for r in _json_records(log, "train_inner") if "distill_kl" in r]
    if not kl:
        return ["no distill_kl in the training log (was --criterion dsp_distillation used?)"]
    if not all(math.isfinite(v) and v > 0 for v in kl):
        return [f"distill_kl {kl}: not finite and positive"]
    return []


def decode_speed(log: str) -> Optional[float]:
    found = _TRANSLATED.findall(log)
    return float(found[-1][0]) if found else None


# -- the run --------------------------------------------------------------------------------


def commands(args: argparse.Namespace) -> Dict[str, List[str]]:
    """Every command of the check, by step name (the timing steps are run --reps times)."""
    work = os.path.abspath(args.work)
    data = args.data_bin or os.path.join(work, "multi30k", "bin")
    dsp, speed = os.path.join(work, "dsp"), os.path.join(work, "speed")
    masked, pruned = os.path.join(dsp, "checkpoint_last.pt"), os.path.join(dsp, "pruned.pt")
    train_common = [
        "--optimizer", "adam", "--adam-betas", "(0.9, 0.98)", "--lr", "5e-4",
        "--lr-scheduler", "inverse_sqrt", "--warmup-updates", "100", "--dropout", "0.3",
        "--max-tokens", str(args.max_tokens), "--share-all-embeddings", "--fp16",
        "--log-format", "json", "--log-interval", "10", "--no-epoch-checkpoints",
        "--disable-validation", "--seed", "1", "--num-workers", "2",
    ]  # fmt: skip
    dsp_flags = ["--user-dir", PLUGIN, "--task", "translation_dsp",
                 "--arch", "transformer_dsp_iwslt_de_en",
                 "--criterion", "dsp_label_smoothed_cross_entropy",
                 "--label-smoothing", "0.1"]  # fmt: skip
    cmds: Dict[str, List[str]] = {}
    if not args.data_bin:
        cmds["prepare"] = ["bash", os.path.join(ROOT, "examples/translation/prepare-multi30k.sh"),
                           "--out", os.path.join(work, "multi30k")]  # fmt: skip
    cmds["train"] = ["fairseq-train", data, *dsp_flags, *train_common,
                     "--heads-to-keep", str(args.heads_to_keep),
                     "--anneal-updates", str(args.updates), "--max-update", str(args.updates),
                     "--save-dir", dsp]  # fmt: skip
    p = str(args.path_updates)
    path_common = [data, *dsp_flags, *train_common, "--heads-to-keep", str(args.heads_to_keep),
                   "--anneal-updates", p, "--max-update", p]  # fmt: skip
    cmds["train-noflat"] = ["fairseq-train", *path_common, "--fp16-no-flatten-grads",
                            "--save-dir", os.path.join(work, "dsp-noflat")]  # fmt: skip
    for path, flags in DDP_PATHS.items():
        for rank in (0, 1):
            cmds[f"train-{path}-rank{rank}"] = [
                "fairseq-train", *path_common, *flags, *ddp_rank_flags(rank),
                "--save-dir", os.path.join(work, f"dsp-{path}"),
            ]  # fmt: skip
    # distillation from the run above (frozen teacher on each rank's GPU), fp16, two ranks
    for rank in (0, 1):
        cmds[f"train-distill-rank{rank}"] = [
            "fairseq-train", *path_common, "--ddp-backend", "legacy_ddp", *ddp_rank_flags(rank),
            "--criterion", "dsp_distillation", "--teacher", masked, "--distill-weight", "0.5",
            "--save-dir", os.path.join(work, "dsp-distill"),
        ]  # fmt: skip
    cmds["validate"] = ["fairseq-validate", data, "--user-dir", PLUGIN, "--path", masked,
                        "--fp16", "--valid-subset", "valid", "--max-tokens", str(args.max_tokens)]  # fmt: skip
    cmds["strip"] = ["dsp-strip", "--input", masked, "--output", pruned, "--force"]
    for name, path in (("unpruned", masked), ("stripped", pruned)):
        cmds[f"bleu-{name}"] = ["fairseq-generate", data, "--user-dir", PLUGIN, "--path", path,
                                "--fp16", "--beam", "5", "--batch-size", "128",
                                "--remove-bpe", "sentencepiece", "--gen-subset", "test"]  # fmt: skip
        for batch in (64, 128):
            cmds[f"time-{name}-b{batch}"] = [
                "fairseq-generate", data, "--user-dir", PLUGIN, "--path", path, "--fp16",
                "--beam", "5", "--batch-size", str(batch), "--gen-subset", "test", "--quiet",
            ]  # fmt: skip
    n = str(args.speed_updates)
    cmds["speed-gated-K=H"] = ["fairseq-train", data, *dsp_flags, *train_common,
                               "--max-update", n, "--save-dir", os.path.join(speed, "gated"),
                               "--no-save"]  # fmt: skip
    cmds["speed-stock"] = ["fairseq-train", data, "--arch", "transformer_iwslt_de_en",
                           "--criterion", "label_smoothed_cross_entropy", "--label-smoothing",
                           "0.1", *train_common, "--max-update", n,
                           "--save-dir", os.path.join(speed, "stock"), "--no-save"]  # fmt: skip
    return cmds


# The paths that froze the gate before the translation_dsp task: two ranks each.
DDP_PATHS = {
    "legacy-ddp-fp16": ["--ddp-backend", "legacy_ddp"],
    "ddp-comm-hook-fp16": ["--ddp-backend", "pytorch_ddp", "--ddp-comm-hook", "fp16"],
}
DDP_PORT = 29611


def ddp_rank_flags(rank: int) -> List[str]:
    """fairseq's one-process-per-rank launch: two GPUs over NCCL when there are, else both
    ranks on GPU 0 over gloo (NCCL refuses two ranks on one device)."""
    two_gpus = _gpu_count() >= 2
    return ["--distributed-no-spawn", "--distributed-world-size", "2",
            "--distributed-rank", str(rank), "--device-id", str(rank if two_gpus else 0),
            "--distributed-init-method", f"tcp://127.0.0.1:{DDP_PORT}",
            "--distributed-backend", "nccl" if two_gpus else "gloo"]  # fmt: skip


def _gpu_count() -> int:
    try:
        import torch
    except ImportError:  # pragma: no cover
        return 0
    return torch.cuda.device_count()


def _checkpoint(path: str) -> Optional[dict]:
    if not os.path.isfile(path):
        return None
    sys.path.insert(0, ROOT)
    from dsp_fairseq.checkpoint_io import load_checkpoint

    return load_checkpoint(path)


def _run_ranks(name: str, cmds: List[List[str]], logs: str) -> List[str]:
    """Start both ranks of a run together; their logs, rank 0 first."""
    procs = []
    for rank, cmd in enumerate(cmds):
        print(f"[gpu_check] {name} rank {rank}: {shlex.join(cmd)}", flush=True)
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                      text=True))  # fmt: skip
    texts = [p.communicate()[0] for p in procs]
    for rank, (proc, text) in enumerate(zip(procs, texts)):
        with open(os.path.join(logs, f"{name}-rank{rank}.log"), "w") as f:
            f.write(text)
        if proc.returncode != 0:
            raise RuntimeError(
                f"{name} rank {rank} failed ({proc.returncode}); see {logs}/{name}-rank{rank}.log:"
                f"\n{text[-2000:]}"
            )
    return texts


def _run(name: str, cmd: List[str], logs: str) -> str:
    print(f"[gpu_check] {name}: {shlex.join(cmd)}", flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True)
    text = proc.stdout + proc.stderr
    with open(os.path.join(logs, f"{name}.log"), "w") as f:
        f.write(text)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{name} failed ({proc.returncode}); see {logs}/{name}.log:\n{text[-2000:]}"
        )
    return text


def run_check(args: argparse.Namespace) -> int:
    cmds = commands(args)
    logs = os.path.join(os.path.abspath(args.work), "logs")
    os.makedirs(logs, exist_ok=True)
    result: Dict[str, object] = {"failures": []}
    failures: List[str] = result["failures"]
    if "prepare" in cmds:
        _run("prepare", cmds["prepare"], logs)
    work = os.path.abspath(args.work)
    log = _run("train", cmds["train"], logs)
    stats = train_stats(log)
    result["train"] = {k: v for k, v in stats.items() if k != "loss_scales"}
    failures += fp16_failures(stats, args.min_loss_scale, args.max_skipped_share)
    failures += [f"train (flat fp16): {p}" for p in
                 gate_failures(log, _checkpoint(os.path.join(work, "dsp", "checkpoint_last.pt")))]  # fmt: skip
    paths = {"noflat": _run("train-noflat", cmds["train-noflat"], logs)}
    for path in DDP_PATHS:
        ranks = [cmds[f"train-{path}-rank{r}"] for r in (0, 1)]
        paths[path] = _run_ranks(f"train-{path}", ranks, logs)[0]
    result["gate_paths"] = {}
    for path, text in paths.items():
        ckpt = _checkpoint(os.path.join(work, f"dsp-{path}", "checkpoint_last.pt"))
        problems = gate_failures(text, ckpt)
        result["gate_paths"][path] = problems or "the gate learned"
        failures += [f"train-{path}: {p}" for p in problems]
    distill = _run_ranks("train-distill", [cmds[f"train-distill-rank{r}"] for r in (0, 1)], logs)[0]
    problems = gate_failures(
        distill, _checkpoint(os.path.join(work, "dsp-distill", "checkpoint_last.pt"))
    )
    problems += distill_failures(distill)
    result["distill"] = problems or "the teacher ran on the GPU and the gate learned"
    failures += [f"train-distill: {p}" for p in problems]
    loss = _VALID_LOSS.findall(_run("validate", cmds["validate"], logs))
    result["valid_loss"] = float(loss[-1]) if loss else None
    if result["valid_loss"] is None or not math.isfinite(result["valid_loss"]):
        failures.append(f"fairseq-validate --fp16 gave no finite loss ({loss})")
    _run("strip", cmds["strip"], logs)
    for name in ("unpruned", "stripped"):
        bleu = _BLEU.findall(_run(f"bleu-{name}", cmds[f"bleu-{name}"], logs))
        result[f"bleu_{name}"] = float(bleu[-1]) if bleu else None
        if not bleu:
            failures.append(f"fp16 decoding of the {name} model printed no BLEU")
    timing: Dict[str, float] = {}
    for batch in (64, 128):
        for name in ("unpruned", "stripped"):
            key = f"time-{name}-b{batch}"
            runs = [decode_speed(_run(key, cmds[key], logs)) for _ in range(args.reps)]
            timing[f"{name}_b{batch}_sent_per_s"] = max(r for r in runs if r is not None)
        timing[f"speedup_b{batch}"] = (
            timing[f"stripped_b{batch}_sent_per_s"] / timing[f"unpruned_b{batch}_sent_per_s"]
        )
    result["decode"] = timing
    gated = train_stats(_run("speed-gated-K=H", cmds["speed-gated-K=H"], logs))
    stock = train_stats(_run("speed-stock", cmds["speed-stock"], logs))
    result["train_wps"] = {"gated_K=H": gated["wps"], "stock": stock["wps"]}
    if gated["wps"] and stock["wps"]:
        result["train_wps"]["ratio"] = gated["wps"] / stock["wps"]
    failures += [
        f"gated K=H speed run: {p}" for p in fp16_failures(gated, args.min_loss_scale, 1.0)
    ]
    with open(os.path.join(os.path.abspath(args.work), "gpu_check.json"), "w") as f:
        json.dump(result, f, indent=2)
    print(json.dumps(result, indent=2))
    for problem in failures:
        print(f"gpu_check: FAILED: {problem}", file=sys.stderr)
    return 1 if failures else 0


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_args(parser, args)
    if args.dry_run:
        for name, cmd in commands(args).items():
            print(f"{name}: {shlex.join(cmd)}")
        return 0
    import torch

    if not torch.cuda.is_available():
        print(NO_GPU, file=sys.stderr)
        return 2
    print(f"[gpu_check] {torch.cuda.get_device_name(0)}; torch {torch.__version__}", flush=True)
    start = time.time()
    try:
        status = run_check(args)
    except RuntimeError as err:
        print(f"gpu_check: {err}", file=sys.stderr)
        return 1
    print(f"[gpu_check] done in {time.time() - start:.0f}s", flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
