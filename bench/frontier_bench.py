#!/usr/bin/env python3
"""BLEU against decoding speed-up for every stripped model of a sweep: the frontier to pick K from.

Every stripped checkpoint of a sweep's results table (and fairseq's own removal, if given)
is timed against the unpruned model in one process, round-robin on the same test sentences
(round 0 is a warm-up; median over the rounds), beam 5 at batch 64, in two workloads:
length-controlled (every hypothesis exactly --fixed-steps tokens, so the speed-up is the
model's, not its output length's) and free decoding. The plot shows sacreBLEU on test against
the length-controlled speed-up, one line per method; the unpruned model is the point (1, BLEU).

    python bench/frontier_bench.py --data work/converged/data/bin \
        --base work/converged/baseline/checkpoint_best.pt --table work/converged/sweep/results.json \
        [--fairseq-table work/converged/fairseq-prune/results.json] --out bench/converged/frontier

Writes OUT/frontier.json, OUT/frontier.md and OUT/frontier.{png,svg}.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import statistics
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)

import speed_bench as sb  # noqa: E402

from bench.common import machine, quiet_fairseq  # noqa: E402


def load_model(path: str, task):
    """Any checkpoint (stock, gated or stripped) as the model it was saved as, in eval mode."""
    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args

    state = load_checkpoint(path)
    model = task.build_model(copy.copy(model_args(state)))
    model.load_state_dict(state["model"], strict=True)
    return model.eval()


def rows_of(table: str, label: str | None = None, selection: str | None = None) -> list:
    """The rows of a results table whose checkpoint is on disk. ``label`` names every row
    (fairseq_prune_quality.py's tables); ``selection`` renames the selection part of a sweep
    row's method (``dsp+rec`` -> ``SELECTION+rec``), for sweeps of a variant."""
    with open(table, encoding="utf-8") as f:
        rows = json.load(f)
    out = []
    for r in rows:
        # fairseq_prune_quality.py's rows name no checkpoint: it lies in OUT/kK/pruned.pt
        ckpt = r.get("checkpoint") or os.path.join(
            os.path.dirname(table), f"k{r.get('k')}", "pruned.pt"
        )
        if not os.path.isfile(ckpt) or r.get("sacrebleu") is None:
            continue
        method = label or r["method"]
        if selection:
            method = "+".join([selection, *method.split("+")[1:]])
        if label and r.get("layout"):  # fairseq_prune_quality.py: a uniform layout's row
            method += f" {r['layout']}"
        if label and r.get("reconstruct"):
            method += "+rec"
        out.append(
            {
                "method": method,
                "k": int(r.get("heads_to_keep") or r.get("k")),
                "sacrebleu": float(r["sacrebleu"]),
                "checkpoint": ckpt,
            }
        )
    return out


def table_arg(text: str) -> tuple:
    """``--table PATH`` or ``--table SELECTION=PATH``: (path, selection or None)."""
    name, sep, path = text.partition("=")
    return (path, name) if sep and not os.path.exists(text) else (text, None)


def merge_kept(kept: list, new: list) -> list:
    """Rows of an earlier frontier.json (their models timed then, against the unpruned model
    of that process: speed-ups are ratios, so they compare) with the rows timed now; a row
    timed now replaces a kept one of the same method and K."""
    fresh = {(r["method"], r["k"]) for r in new}
    return [r for r in kept if (r["method"], r["k"]) not in fresh] + new


def time_models(models: dict, task, ds, fixed: int, args) -> dict:
    """Median seconds of each model on the same batches, interleaved by rounds."""
    batches = sb.make_batches(ds, args.sentences, args.batch)
    gens = {key: sb.make_generator(m, task, 5, fixed) for key, m in models.items()}
    seconds = {key: [] for key in models}
    for rnd in range(args.reps + 1):
        for key, model in models.items():
            sec, *_ = sb.decode_pass(gens[key], model, batches)
            if rnd:
                seconds[key].append(sec)
    return {key: statistics.median(v) for key, v in seconds.items()}


TITLE = "Converged 72-head Transformer, Multi30k De-En: test sacreBLEU against decode speed-up"


def line_style(method: str) -> str:
    """Solid: the selection alone; dotted: + reconstruct (or the best of it and the gate
    run's own weights); dashed: + fine-tune; dash-dot: + distilled fine-tune."""
    steps = method.split("+")[1:]
    if "kd" in steps:
        return "-."
    if "ft" in steps:
        return "--"
    return ":" if "rec" in steps or "best" in steps else "-"


def plot(result: dict, output: str, title: str = TITLE) -> None:
    """BLEU against speed-up: one colour per selection method, its recoveries in the same
    colour (dotted: + reconstruct, dashed: + fine-tune, dash-dot: distilled), one marker per K.

    Methods at the same K decode at nearly the same speed, so labelling each point with its
    K piled the labels on top of each other ("K=36K=36"): the marker says K instead, and
    the legends sit right of the axes, off the data.
    """
    from dsp_fairseq.plots.common import SERIES_COLORS, plt, save_figure

    fig, ax = plt.subplots(figsize=(9.5, 5.2), layout="constrained")
    base = result["unpruned"]
    by_method: dict = {}
    for r in result["rows"]:
        by_method.setdefault(r["method"], []).append(r)
    methods = sorted(by_method)
    ks = sorted({r["k"] for r in result["rows"]})
    k_markers = dict(zip(ks, "os^Dv<>Ph*"))
    selections = list(dict.fromkeys(m.split("+")[0] for m in methods))
    colours = {m: SERIES_COLORS[i % len(SERIES_COLORS)] for i, m in enumerate(selections)}
    method_handles = []
    for method in methods:
        rows = sorted(by_method[method], key=lambda r: r["speedup_fixed"])
        colour, style = colours[method.split("+")[0]], line_style(method)
        ax.plot(
            [1.0] + [r["speedup_fixed"] for r in rows],
            [base["sacrebleu"]] + [r["sacrebleu"] for r in rows],
            linestyle=style, color=colour, linewidth=1.3, alpha=0.9,
        )  # fmt: skip
        for r in rows:
            ax.plot(r["speedup_fixed"], r["sacrebleu"], linestyle="none", color=colour,
                    marker=k_markers[r["k"]], markersize=6, markeredgecolor="white",
                    markeredgewidth=0.5)  # fmt: skip
        method_handles.append(plt.Line2D([], [], color=colour, linestyle=style, label=method))
    ax.plot([1.0], [base["sacrebleu"]], "k*", ms=13, zorder=5)
    method_handles.append(
        plt.Line2D([], [], color="black", marker="*", linestyle="none", ms=10, label="unpruned")
    )
    total = result.get("total_heads", 72)
    k_handles = [
        plt.Line2D([], [], color="dimgray", marker=k_markers[k], linestyle="none",
                   label=f"K = {k} (H/{total // k})" if total % k == 0 else f"K = {k}")
        for k in ks
    ]  # fmt: skip
    ax.set_xlabel(
        f"decode speed-up over the unpruned model (beam {result.get('beam', 5)}, batch "
        f"{result['batch']}, fixed output length)"
    )
    ax.set_ylabel("sacreBLEU (test_2016)")
    ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    # Figure legends "outside": the layout makes room for them (an axes legend moved off the
    # axes with bbox_to_anchor was cut off by the saved bounding box).
    fig.legend(handles=method_handles, fontsize=8, loc="outside right upper",
               title="method (dotted: + reconstruct,\ndashed: + fine-tune, dash-dot: distilled)",
               title_fontsize=8)  # fmt: skip
    fig.legend(handles=k_handles, fontsize=8, loc="outside right lower", title="heads kept",
               title_fontsize=8)  # fmt: skip
    save_figure(fig, output)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", help="fairseq binary folder")
    parser.add_argument("--base", help="the unpruned checkpoint")
    parser.add_argument("--base-score", help="its score.json (default: beside the table)")
    parser.add_argument(
        "--table",
        action="append",
        default=[],
        type=table_arg,
        metavar="[SELECTION=]PATH",
        help="sweep results.json (repeat for more); SELECTION= renames its rows' selection "
        "(e.g. dsp-default=sweep-impinit/results.json)",
    )
    parser.add_argument(
        "--keep",
        metavar="FRONTIER.json",
        help="an earlier run's frontier.json: its rows stay in the table and the plot as they "
        "were timed (their checkpoints may be gone); rows timed now replace theirs",
    )
    parser.add_argument("--fairseq-table", help="bench/fairseq_prune_quality.py results.json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--sentences", type=int, default=128)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--fixed-steps", type=int, default=20)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--replot", action="store_true", help="only redraw OUT/frontier.png from OUT/frontier.json"
    )
    args = parser.parse_args()
    if args.replot:
        with open(os.path.join(args.out, "frontier.json"), encoding="utf-8") as f:
            plot(json.load(f), os.path.join(args.out, "frontier.png"))
        return 0
    if not (args.data and args.base and args.table):
        parser.error("--data, --base and --table are required (unless --replot)")

    torch.set_num_threads(args.threads)
    quiet_fairseq()
    sb._plugin()
    rows = []
    for table, selection in args.table:  # a row already listed (method, K) is not timed twice
        seen = {(r["method"], r["k"]) for r in rows}
        rows += [r for r in rows_of(table, None, selection) if (r["method"], r["k"]) not in seen]
    if args.fairseq_table:
        rows += rows_of(args.fairseq_table, "fairseq-removal")
    if not rows:
        sys.exit(
            f"frontier_bench.py: error: {', '.join(t for t, _ in args.table)}: no row with a "
            "checkpoint on disk"
        )
    score_path = args.base_score or os.path.join(os.path.dirname(args.table[0][0]), "baseline.json")
    kept = []
    if args.keep:
        with open(args.keep, encoding="utf-8") as f:
            kept = json.load(f)["rows"]
    with open(score_path, encoding="utf-8") as f:
        base_bleu = float(json.load(f)["sacrebleu"])
    _, task, ds = sb.load_test_setup(args.base, args.data)
    models = {"unpruned": load_model(args.base, task)}
    for r in rows:
        models[(r["method"], r["k"])] = load_model(r["checkpoint"], task)
    print(f"timing {len(models)} models, {args.reps} rounds + warm-up", flush=True)
    fixed = time_models(models, task, ds, args.fixed_steps, args)
    free = time_models(models, task, ds, 0, args)
    for r in rows:
        key = (r["method"], r["k"])
        r["speedup_fixed"] = fixed["unpruned"] / fixed[key]
        r["speedup_free"] = free["unpruned"] / free[key]
        r["parameters"] = sum(p.numel() for p in models[key].parameters())
    result = {
        "machine": machine(args.threads),
        "batch": args.batch,
        "beam": 5,
        "sentences": args.sentences,
        "fixed_steps": args.fixed_steps,
        "reps": args.reps,
        "unpruned": {"sacrebleu": base_bleu, "median_s_fixed": fixed["unpruned"]},
        "rows": sorted(merge_kept(kept, rows), key=lambda r: (r["method"], r["k"])),
    }
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "frontier.json.tmp"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(os.path.join(args.out, "frontier.json.tmp"), os.path.join(args.out, "frontier.json"))
    lines = [
        f"Unpruned: {base_bleu:.2f} sacreBLEU. Speed-up: median of {args.reps} rounds, "
        f"beam 5, batch {args.batch}, {args.sentences} test sentences, {args.threads} threads.",
        "",
        "| method | K | sacreBLEU | speed-up (fixed length) | speed-up (free) | parameters |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    n_kept = len(result["rows"]) - len(rows)
    if n_kept:
        lines[1:1] = [
            "",
            f"{n_kept} of the {len(result['rows'])} rows are kept from an earlier run "
            f"({args.keep}), timed then against its own unpruned model; {len(rows)} were timed now.",
        ]
    for r in result["rows"]:
        lines.append(
            f"| {r['method']} | {r['k']} | {r['sacrebleu']:.2f} | {r['speedup_fixed']:.2f}x | "
            f"{r['speedup_free']:.2f}x | {r['parameters']:,} |"
        )
    with open(os.path.join(args.out, "frontier.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    plot(result, os.path.join(args.out, "frontier.png"))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
