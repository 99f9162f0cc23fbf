"""dsp-pick-k: the smallest number of heads whose pruned model stays within a BLEU tolerance.

    dsp-pick-k --data data/multi30k --base baseline/checkpoint_best.pt \\
        --out pick --tolerance 0.5 [--ks 9,18,27,36,45,54,63] [--preset cpu-small]

--data is the prepared corpus folder that examples/translation/prepare-*.sh writes
(bin/ with the fairseq binaries, spm/spm.model, raw/): BLEU needs the sentencepiece
model and the raw references. Its bin/ is accepted too and stands for the corpus.

For a trained (unpruned) checkpoint, it prunes with pipelined DSP
(``examples/translation/prune-pipelined.sh`` with its defaults, except the recovery: gates
started from head importance's scores (per sentence, computed once, OUT/gate-init-scores.json) and trained on
KL to the unpruned model with the output layers adapting, and the better on valid of the
gate run's own weights and the refit against the unpruned model (``--recovery best``; the
recipe's default, tuned, costs 3-5 minutes more per probe); ``--gate-objective labels``
for gates trained on the references with the model frozen, ``--recovery reconstruct`` or
``none`` to score one of the two candidates, ``--recovery tuned`` to tune the chosen one's
transformer layers towards the unpruned model (tune-refit.sh, here at a learning rate of 2e-4:
``--tune-args``); ``--restarts N`` for the best of N gate runs
on valid at each K) at a few K,
scores each stripped model with sacreBLEU on the validation set
(``evaluate.sh --subset valid``; the test set is never used to choose) and
bisects the candidate list for the smallest K whose BLEU is at most
``--tolerance`` below the unpruned model's, then bisects the K between the last
failing and the first passing candidate (``--refine-step``, default 1: the exact
smallest K; 0: the candidates only). This assumes BLEU does not fall as K
grows; every probed K is reported, and pick.md names the probes where it falls.

Writes OUT/pick.json (the unpruned score, every probed K, the choice),
OUT/pick.md (the table), OUT/frontier.{png,svg} (validation BLEU against K, with
the tolerance band) and OUT/pruned.pt (the chosen stripped model). Each probe
is a resumable recipe run under OUT/runs/dsp-kK, so an interrupted search
continues where it stopped.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from .data_folder import DataFolderError, corpus_folder

PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPES = os.path.join(os.path.dirname(PACKAGE), "examples", "translation")
# The tuning of --recovery tuned: the probes are scored without a fine-tune, where a learning
# rate of 2e-4 decodes better than tune-refit.sh's 5e-4 (bench/RESULTS.md, stage 6au)
PICK_TUNE_ARGS = "--lr 2e-4"


def smallest_passing(candidates: Sequence[int], passes: Callable[[int], bool]) -> Optional[int]:
    """Bisection: the smallest candidate for which ``passes`` holds, assuming monotonicity.

    ``candidates`` must be sorted; ``passes`` is called O(log n) times. None when even the
    largest candidate fails.
    """
    lo, hi = -1, len(candidates)  # candidates[lo] fails, candidates[hi] passes (virtual ends)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if passes(candidates[mid]):
            hi = mid
        else:
            lo = mid
    return candidates[hi] if hi < len(candidates) else None


def search(
    candidates: Sequence[int],
    passes: Callable[[int], bool],
    step: int,
    on_refine: Callable[[List[int]], None] = lambda finer: None,
) -> Optional[int]:
    """``smallest_passing`` over ``candidates``, then over the K strictly between the
    largest failing and the smallest passing candidate, ``step`` apart (skipped when
    ``step`` is 0, when the smallest candidate passes or when none does: the answer stays
    inside the candidates' range). ``on_refine`` hears the finer list before it is probed."""
    seen: Dict[int, bool] = {}

    def recorded(k: int) -> bool:
        seen[k] = passes(k)
        return seen[k]

    chosen = smallest_passing(candidates, recorded)
    if chosen is None or step <= 0:
        return chosen
    below = [k for k, ok in seen.items() if not ok and k < chosen]
    finer = list(range(max(below) + step, chosen, step)) if below else []
    if not finer:
        return chosen
    on_refine(finer)
    return smallest_passing(finer, recorded) or chosen


def default_candidates(total_heads: int) -> List[int]:
    """H/8, 2H/8, ..., 7H/8 (rounded, at least 1, no duplicates)."""
    return sorted({max(1, round(total_heads * i / 8)) for i in range(1, 8)})


def count_heads(base: str) -> int:
    """Gated heads of an unpruned checkpoint: the heads of every attention it has (the
    model's own layout, so a decoder built with --no-cross-attention has no cross heads)."""
    from ..checkpoint_io import load_checkpoint, model_args
    from ..models.head_layout import attention_slots

    args = model_args(load_checkpoint(base))
    if getattr(args, "stripped_heads", None):
        raise ValueError(f"{base} is already stripped; start from the unpruned model")
    return sum(slot.num_heads for slot in attention_slots(args))


def run_recipe(name: str, *args: str) -> None:
    cmd = ["bash", os.path.join(RECIPES, name), *map(str, args)]
    if subprocess.run(cmd).returncode != 0:
        raise RuntimeError(f"{name} failed (its messages are above)")


def valid_bleu(data: str, checkpoint: str, out: str, gen_args: str) -> float:
    run_recipe(
        "evaluate.sh", "--data", data, "--checkpoint", checkpoint, "--out", out,
        "--subset", "valid", "--gen-args", gen_args,
    )  # fmt: skip
    with open(os.path.join(out, "score.json"), encoding="utf-8") as f:
        return float(json.load(f)["sacrebleu"])


def chosen_valid_bleu(row: str, recovery: str) -> Optional[float]:
    """The valid score prune-pipelined.sh already measured for its choice (of the tuned refit
    with --recovery tuned, of the gate runs with --restarts, of the recoveries with --recovery
    best)."""
    names = (
        [os.path.join("tuned", "tune.json")] * (recovery == "tuned")
        + ["restarts.json"]
        + ["recovery.json"] * (recovery in ("best", "tuned"))
    )
    for path in (os.path.join(row, name) for name in names):
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as f:
                return float(json.load(f)["valid_sacrebleu_chosen"])
    return None


def falls_with_k(probes: Sequence[dict]) -> List[Tuple[int, int]]:
    """(K, next probed K) wherever the larger K scores lower on valid. The bisection assumes
    BLEU does not fall as K grows; where it does, a K below the chosen one that was never
    probed may also be within the tolerance."""
    rows = sorted(probes, key=lambda p: p["k"])
    return [
        (a["k"], b["k"])
        for a, b in zip(rows, rows[1:])
        if b["valid_sacrebleu"] < a["valid_sacrebleu"]
    ]


def falls_note(probes: Sequence[dict]) -> Optional[str]:
    falls = falls_with_k(probes)
    if not falls:
        return None
    score = {p["k"]: p["valid_sacrebleu"] for p in probes}
    pairs = ", ".join(f"{a} -> {b} ({score[a]:.2f} -> {score[b]:.2f})" for a, b in falls)
    return (
        f"BLEU falls as K grows between K = {pairs}: the search assumes it does not, so a "
        "K below the chosen one that it skipped may also be within the tolerance (probe it "
        "with --ks)."
    )


def write_atomic(path: str, text: str) -> None:
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


def table_markdown(result: dict) -> str:
    restarts = ""
    tuning = f" ({result['tune_args']})" if result.get("tune_args") else ""
    if result.get("restarts", 1) > 1:
        by = " by valid NLL" if result.get("restart_metric") == "nll" else ""
        restarts = f", best of {result['restarts']} gate runs{by}"
    if result.get("seed", 1) != 1:
        restarts += f", gate seed {result['seed']}"
    lines = [
        f"Unpruned: {result['unpruned_valid_sacrebleu']:.2f} sacreBLEU on valid "
        f"({result['total_heads']} heads); tolerance {result['tolerance']} BLEU; gates trained "
        f"on {result.get('gate_objective', 'labels')} (started from "
        f"{result.get('gate_init', 'none')}), recovery {result.get('recovery', 'none')}"
        f"{tuning}{restarts}.",
        f"Candidates: K = {', '.join(map(str, result['candidates']))}"
        + (
            f", then the K between the last failing and the first passing one, "
            f"{result['refine_step']} apart (--refine-step)."
            if result.get("refine_step")
            else "."
        ),
        "",
        "| K | valid sacreBLEU | vs unpruned | within tolerance |",
        "|---:|---:|---:|:---:|",
    ]
    for p in result["probes"]:
        lines.append(
            f"| {p['k']} | {p['valid_sacrebleu']:.2f} | {p['delta']:+.2f} | "
            f"{'yes' if p['within'] else 'no'} |"
        )
    chosen = result["chosen_k"]
    lines += ["", f"Chosen: K = {chosen}" if chosen else "No probed K is within the tolerance."]
    note = falls_note(result["probes"])
    lines += ["", note] if note else []
    return "\n".join(lines) + "\n"


def plot_frontier(result: dict, output: str) -> List[str]:
    from ..plots.common import plt, save_figure

    probes = sorted(result["probes"], key=lambda p: p["k"])
    base, tol = result["unpruned_valid_sacrebleu"], result["tolerance"]
    fig, ax = plt.subplots(figsize=(7.5, 4), layout="constrained")
    ax.axhspan(base - tol, base, color="tab:green", alpha=0.15, label=f"within {tol} BLEU")
    ax.axhline(base, color="black", lw=1, ls="--", label="unpruned")
    ax.plot([p["k"] for p in probes], [p["valid_sacrebleu"] for p in probes], "o-", label="DSP")
    if result["chosen_k"]:
        chosen = next(p for p in probes if p["k"] == result["chosen_k"])
        ax.plot([chosen["k"]], [chosen["valid_sacrebleu"]], "r*", ms=14, label="chosen K")
    ax.set_xlabel(f"heads kept (K of {result['total_heads']})")
    ax.set_ylabel("sacreBLEU on valid")
    recovery = result.get("recovery", "none")
    ax.set_title(
        "Pipelined DSP"
        + {
            "reconstruct": " + reconstruction",
            "best": " + best recovery on valid",
            "tuned": " + tuned refit",
        }.get(recovery, "")
        + ": validation BLEU against heads kept",
        fontsize=10,
    )
    # off the axes: inside, any corner can hide a probe (the BLEU curve need not be monotonic)
    fig.legend(loc="outside right upper", fontsize=8)
    ax.grid(alpha=0.3)
    return save_figure(fig, output)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        prog="dsp-pick-k",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--data",
        required=True,
        help="prepared corpus folder (prepare-*.sh --out: bin/, spm/spm.model, raw/)",
    )
    parser.add_argument("--base", required=True, help="trained, unpruned checkpoint")
    parser.add_argument("--out", required=True, help="output folder")
    parser.add_argument(
        "--tolerance", type=float, default=0.5, help="allowed BLEU loss on valid (default 0.5)"
    )
    parser.add_argument("--ks", help="candidate K, comma-separated (default H/8, 2H/8, ..., 7H/8)")
    parser.add_argument(
        "--refine-step",
        type=int,
        default=1,
        help="after bisecting the candidates, bisect the K between the last failing and the "
        "first passing one, this many heads apart (default 1: the smallest passing K exactly, "
        "at most 4 more probes between H/8 steps of a 72-head model; 0: the candidates only)",
    )
    parser.add_argument("--preset", default="cpu-small", help="recipe preset (default cpu-small)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--gate-args", default="", help="more fairseq-train args for the gates")
    parser.add_argument("--gen-args", default="", help="more fairseq-generate arguments")
    parser.add_argument(
        "--gate-objective",
        choices=("distill", "labels"),
        default="distill",
        help="what the gates train on (prune-pipelined.sh --gate-objective): distill "
        "(default, the best measured: KL to the unpruned model, out_proj and fc2 adapting) "
        "or labels (label-smoothed CE, the model frozen)",
    )
    parser.add_argument(
        "--gate-init",
        choices=("importance", "none"),
        default=None,
        help="where the gate logits start (prune-pipelined.sh --gate-init; default: importance "
        "with --gate-objective distill, from head importance's scores computed once in "
        "OUT/gate-init-scores.json; none otherwise)",
    )
    parser.add_argument(
        "--importance-args",
        default="",
        help="more dsp-importance arguments for the gate init's scores (prune-pipelined.sh "
        '--importance-args; e.g. "--granularity token" for the per-token scores of '
        "sessions 11-28)",
    )
    parser.add_argument(
        "--recovery",
        choices=("best", "tuned", "reconstruct", "none"),
        default="best",
        help="what each probe's stripped model gets before it is scored (prune-pipelined.sh "
        "--recovery): best (default: the better on valid of the gate run's own weights and "
        "the refit), tuned (best, then the transformer layers tuned towards the unpruned model for "
        "one epoch, kept if better on valid: tune-refit.sh, the recipes' default; here it "
        "adds 3-5 minutes per probe on 2 CPU cores; on the 72-head benchmark it keeps 39 heads "
        "at gate seed 1 and 51 at seed 2 where best keeps 54, with its tuning at 2e-4 "
        "(--tune-args; 50 at tune-refit.sh's 5e-4); README, dsp-pick-k), reconstruct (dsp-strip --reconstruct on training "
        "batches) or none",
    )
    parser.add_argument(
        "--tune-args",
        default=PICK_TUNE_ARGS,
        help="tune-refit.sh options for --recovery tuned (prune-pipelined.sh --tune-args; "
        f'default "{PICK_TUNE_ARGS}"; a value replaces it). The probes are scored as they are, '
        "without a fine-tune, and without one the tuning at 2e-4 decodes better than "
        "tune-refit.sh's 5e-4 (which wins after the recipe's fine-tune); on the 72-head "
        'benchmark it keeps 39 heads (gate seed 1) where 5e-4 kept 50. E.g. "--lr 2e-4 --layers '
        'out_proj,fc2" (the tuning of the layers the refit sets)',
    )
    parser.add_argument(
        "--restarts",
        type=int,
        default=1,
        help="gate runs per probe, seeds SEED..SEED+N-1, the best on valid kept "
        "(prune-pipelined.sh --restarts; default 1)",
    )
    parser.add_argument(
        "--restart-metric",
        choices=("bleu", "nll"),
        default="bleu",
        help="what the restarts choose by (prune-pipelined.sh --restart-metric): bleu, the "
        "validation sacreBLEU (default), or nll, the lowest validation NLL of each run's kept "
        "model; the probe is still scored by its valid sacreBLEU",
    )
    parser.add_argument(
        "--gate-epochs",
        type=int,
        default=1,
        help="epochs of gate training per probe (prune-pipelined.sh --gate-epochs; default 1)",
    )
    parser.add_argument(
        "--type-split",
        choices=("auto", "free", "proportional"),
        default=None,
        help="how each probe's gates share K among the attention types (prune-pipelined.sh "
        "--type-split; default: its default, auto): free, one global top-K, proportional, K "
        "split by each type's heads, worked out again at every probed K, or auto, "
        "proportional where K <= H/4 and free above",
    )
    args = parser.parse_args(argv)
    if args.gate_init is None:
        args.gate_init = "importance" if args.gate_objective == "distill" else "none"

    def fail(message: str) -> int:
        print(f"dsp-pick-k: error: {message}", file=sys.stderr)
        return 2

    if args.tolerance < 0:
        return fail(f"--tolerance must be >= 0, got {args.tolerance}")
    if args.refine_step < 0:
        return fail(f"--refine-step must be >= 0, got {args.refine_step}")
    if args.restarts < 1:
        return fail(f"--restarts must be >= 1, got {args.restarts}")
    if args.gate_epochs < 1:
        return fail(f"--gate-epochs must be >= 1, got {args.gate_epochs}")
    if not os.path.isdir(RECIPES):
        return fail(f"the recipes folder {RECIPES} is missing; install from a source checkout")
    try:
        args.data, note = corpus_folder("--data", args.data)
    except DataFolderError as err:
        return fail(str(err))
    if note:
        print(f"dsp-pick-k: {note}", file=sys.stderr)
    if not os.path.isfile(args.base):
        return fail(f"--base {args.base}: no such file")
    try:
        total = count_heads(args.base)
    except Exception as err:  # a clear message for a wrong or broken checkpoint
        return fail(f"--base {args.base}: {err}")
    try:
        ks = sorted({int(k) for k in args.ks.split(",")}) if args.ks else default_candidates(total)
    except ValueError:
        return fail(f"--ks {args.ks!r}: give comma-separated numbers")
    if not ks or ks[0] < 1 or ks[-1] > total:
        return fail(f"--ks must lie in [1, {total}] (the model has {total} heads)")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        return fail(f"--out {args.out} is a file; give a folder (created if missing)")
    # Folders this run creates, removed again if it fails before writing anything in them
    # (a failed run used to leave an empty OUT/runs/ behind).
    created = [p for p in (args.out, os.path.join(args.out, "runs")) if not os.path.exists(p)]
    os.makedirs(os.path.join(args.out, "runs"), exist_ok=True)

    def fail_and_tidy(message: str) -> int:
        for folder in reversed(created):
            try:
                os.rmdir(folder)  # only if still empty: never deletes a probe's results
            except OSError:
                pass
        return fail(message)

    def say(message: str) -> None:
        print(f"== dsp-pick-k: {message}", flush=True)

    try:
        say(f"unpruned model on valid ({total} heads)")
        base = valid_bleu(
            args.data, args.base, os.path.join(args.out, "unpruned-valid"), args.gen_args
        )
        say(f"unpruned: {base:.2f}; candidates K = {ks}, tolerance {args.tolerance} BLEU")
        probes: Dict[int, dict] = {}
        budget = [len(ks).bit_length()]  # the most probes of the current phase, for progress

        def passes(k: int) -> bool:
            say(f"probe {len(probes) + 1} (at most {budget[0]}): K = {k}")
            row = os.path.join(args.out, "runs", f"dsp-k{k}")
            run_recipe(
                "prune-pipelined.sh", "--data", args.data, "--base", args.base,
                "--heads-to-keep", k, "--save-dir", row, "--preset", args.preset,
                "--seed", args.seed, "--train-args", args.gate_args,
                "--gate-objective", args.gate_objective, "--recovery", args.recovery,
                "--gate-init", args.gate_init,
                "--importance-scores", os.path.join(args.out, "gate-init-scores.json"),
                "--importance-args", args.importance_args,
                "--gen-args", args.gen_args, "--tune-args", args.tune_args,
                "--restarts", args.restarts, "--restart-metric", args.restart_metric,
                "--gate-epochs", args.gate_epochs,
                *(("--type-split", args.type_split) if args.type_split else ()),
            )  # fmt: skip
            bleu = chosen_valid_bleu(row, args.recovery)
            if bleu is None:
                bleu = valid_bleu(
                    args.data, os.path.join(row, "pruned.pt"), os.path.join(row, "eval-valid"),
                    args.gen_args,
                )  # fmt: skip
            within = bleu >= base - args.tolerance
            probes[k] = {"k": k, "valid_sacrebleu": bleu, "delta": bleu - base, "within": within}
            say(f"K = {k}: {bleu:.2f} ({bleu - base:+.2f}) {'within' if within else 'outside'}")
            return within

        def refining(finer: List[int]) -> None:
            budget[0] = len(probes) + len(finer).bit_length()
            lo, hi = finer[0] - args.refine_step, finer[-1] + args.refine_step
            say(f"refining between K = {lo} (outside) and {hi} (within): K = {finer}")

        chosen = search(ks, passes, args.refine_step, refining)
    except RuntimeError as err:
        return fail_and_tidy(str(err))
    result = {
        "base": os.path.abspath(args.base),
        "total_heads": total,
        "tolerance": args.tolerance,
        "recovery": args.recovery,
        "tune_args": args.tune_args if args.recovery == "tuned" else "",
        "gate_objective": args.gate_objective,
        "gate_init": args.gate_init,
        "importance_args": args.importance_args,
        "seed": args.seed,
        "restarts": args.restarts,
        "restart_metric": args.restart_metric,
        "gate_epochs": args.gate_epochs,
        "type_split": args.type_split or "recipe default",
        "unpruned_valid_sacrebleu": base,
        "candidates": ks,
        "refine_step": args.refine_step,
        "probes": [probes[k] for k in sorted(probes)],
        "chosen_k": chosen,
    }
    write_atomic(os.path.join(args.out, "pick.json"), json.dumps(result, indent=1) + "\n")
    text = table_markdown(result)
    write_atomic(os.path.join(args.out, "pick.md"), text)
    plot_frontier(result, os.path.join(args.out, "frontier.png"))
    print(text, end="")
    if chosen is None:
        say("no candidate is within the tolerance: keep the unpruned model, or raise --tolerance")
        return 1
    chosen_ckpt = os.path.join(args.out, "runs", f"dsp-k{chosen}", "pruned.pt")
    shutil.copyfile(chosen_ckpt, os.path.join(args.out, "pruned.pt.tmp"))
    os.replace(os.path.join(args.out, "pruned.pt.tmp"), os.path.join(args.out, "pruned.pt"))
    say(f"chosen K = {chosen}: {os.path.join(args.out, 'pruned.pt')} (stripped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
