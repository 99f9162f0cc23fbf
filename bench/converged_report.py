#!/usr/bin/env python3
"""The converged-model quality table (markdown) from bench/converged/'s raw results.

    python bench/converged_report.py [--dir bench/converged] > bench/converged/table.md
    python bench/converged_report.py --splice README.md --splice bench/RESULTS.md

--splice FILE replaces the text between ``<!-- converged-table -->`` and
``<!-- /converged-table -->`` in FILE with the table (and the seed spread), and between
``<!-- converged-goals -->`` and ``<!-- /converged-goals -->`` with the goals.

Rows: every method of the sweep (test sacreBLEU, validation sacreBLEU in brackets) at each K,
fairseq's own head removal, and, where seed runs exist, mean and spread (min-max) over seeds.
Cells of rows that were not run yet are left empty, so the table can be made at any time.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

LABELS = {
    "dsp": "pipelined DSP, plain gates (labels, frozen model)",
    "dsp-ref": "pipelined DSP, reference schedule",
    "dsp-st": "pipelined dsp-st",
    "ste": "pipelined STE",
    "hard-concrete": "pipelined Hard Concrete (top-K at test)",
    "importance": "head importance, one-shot",
    "importance-iter": "head importance, iterative",
    "random": "random heads",
    "fairseq-removal": "fairseq `_adaptive_prune_heads`",
    "joint-dsp": "joint DSP (trained with the model)",
    "dsp+ft": "pipelined DSP + fine-tune",
    "importance+ft": "head importance + fine-tune",
    "hard-concrete+ft": "Hard Concrete + fine-tune",
    # recovery (issue 17): +rec = dsp-reconstruct, +kd = distilled fine-tune (270 updates)
    "dsp+rec": "pipelined DSP + reconstruct",
    "dsp-ref+rec": "pipelined DSP, reference schedule + reconstruct",
    "hard-concrete+rec": "Hard Concrete + reconstruct",
    "importance+rec": "head importance, one-shot + reconstruct",
    "importance-iter+rec": "head importance, iterative + reconstruct",
    "random+rec": "random heads + reconstruct",
    "fairseq-removal+rec": "fairseq `_adaptive_prune_heads` + reconstruct",
    "dsp+kd": "pipelined DSP + distilled fine-tune",
    "importance+kd": "head importance + distilled fine-tune",
    "dsp+rec+kd": "pipelined DSP + reconstruct + distilled fine-tune",
    "importance+rec+kd": "head importance + reconstruct + distilled fine-tune",
    "hard-concrete+rec+kd": "Hard Concrete + reconstruct + distilled fine-tune",
    # the same start without the teacher (plain fine-tune of the reconstructed model)
    "dsp+rec+ft": "pipelined DSP + reconstruct + fine-tune",
    "importance+rec+ft": "head importance + reconstruct + fine-tune",
}


# results-sweep-NAME.json files of selection variants -> row label
# (file name prefixes: results-sweep-gateopffn36.json holds the same variant at K = 36)
VARIANTS = {
    "results-sweep-gatekd": "pipelined DSP, gates trained on KL to the unpruned model",
    "results-sweep-gatekdopffn": "pipelined DSP, KL + out_proj,fc2 gates, plain start (session 7's default)",
    "results-sweep-gateopffn": "pipelined DSP, gates trained with out_proj and fc2",
    "results-sweep-gateop": "pipelined DSP, gates trained with the output projections",
    # session 7: the default gates with their output layers trained at lr 1e-4 (preset: 1e-3)
    "results-sweep-gatelr1e4": "pipelined DSP, default gates, output layers at lr 1e-4",
    # session 7: the KL + out_proj,fc2 gates with logits started from head importance (the
    # recipes' default since session 8)
    "results-sweep-impinit": "pipelined DSP, default gates (KL + out_proj,fc2, started from head importance)",
}


# files of rows run beside the table's sweep: their cells fill the table's empty ones
# (results-sweep-kdK: distilled fine-tunes; sweep-imp36ft: importance + rec + ft at K = 36)
SIDE_FILES = ("results-sweep-kd", "results-sweep-imp36ft")


# dsp-pick-k runs, newest defaults first: session 9's (gates started from head importance),
# session 7's (distill gates, recovery best), session 5's (plain gates, reconstruct)
PICK_RUNS = ("pick-k-impinit", "pick-k-best", "pick-k-rec")


# selections that do not depend on the seed (their seed folders hold the calibration
# samples of METHOD+rec; the stripped rows there repeat the table's)
DETERMINISTIC = ("importance", "importance-iter")


def variant_of(name: str):
    """(prefix, label) of the longest VARIANTS prefix of a file name, or None."""
    for prefix in sorted(VARIANTS, key=len, reverse=True):
        if name.startswith(prefix) and name.endswith(".json"):
            return prefix, VARIANTS[prefix]
    return None


def _is_seed_file(name: str, found) -> bool:
    """results-sweep-VARIANT-sN.json, or -kK-sN.json (runs of one K: the first fills the
    variant's empty cells, the next add seeds); -sNb.json is a later session's rerun of seed N
    (the gate run is not bit-reproducible across sessions), counted as one more run."""
    return re.fullmatch(re.escape(found[0]) + r"(-k[0-9]+)?-s[0-9]+[a-z]?\.json", name) is not None


SUFFIXES = {
    "rec": "reconstruct",
    "ft": "fine-tune",
    "kd": "distilled fine-tune",
    "best": "best of own weights or reconstruct on valid",
}


def suffix_label(method: str) -> str:
    """' + reconstruct + fine-tune' for 'dsp+rec+ft' (the recovery steps of a sweep row)."""
    return "".join(f" + {SUFFIXES[s]}" for s in method.split("+")[1:])


# bench/recovery/finetune-settings.txt (stage 6o): fine-tunes of the default gates' models with
# one setting changed, "kK-SETTING-sSEED: best test T valid V; ..."; the setting the recipe uses
# by default since session 14 (dropout 0.1) becomes a row of the table and of the goals
FT_SETTINGS_FILE = "finetune-settings.txt"
FT_DEFAULT_SETTING = "drop0.1"
FT_DEFAULT_METHOD = "results-sweep-impinit:dsp+best+ft@dropout0.1"
LABELS[FT_DEFAULT_METHOD] = (
    "pipelined DSP, default gates (KL + out_proj,fc2, started from head importance) + best of own "
    "weights or reconstruct on valid + fine-tune at dropout 0.1 (the recipe's default since session 14)"
)


def finetune_setting_runs(path: str, setting: str) -> dict:
    """{K: [(test, valid), ...]} of SETTING's lines in a finetune-settings.txt, seed order."""
    runs: dict = {}
    if not os.path.isfile(path):
        return runs
    for line in open(path, encoding="utf-8"):
        m = re.match(r"k([0-9]+)-(.+)-s([0-9]+): best test ([0-9.]+) valid ([0-9.]+)", line)
        if m and m.group(2) == setting:
            runs.setdefault(int(m.group(1)), []).append(
                (int(m.group(3)), float(m.group(4)), float(m.group(5)))
            )
    return {k: [(t, v) for _, t, v in sorted(r)] for k, r in runs.items()}


def load(path: str):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", default=os.path.join(os.path.dirname(__file__), "converged"))
    parser.add_argument("--splice", action="append", default=[], metavar="FILE")
    parser.add_argument(
        "--marker",
        default="converged",
        help="splice between <!-- MARKER-table --> / <!-- MARKER-goals --> (default converged)",
    )
    args = parser.parse_args()
    rows = load(os.path.join(args.dir, "results.json")) or []
    base = load(os.path.join(args.dir, "baseline.json"))
    base_valid = load(os.path.join(args.dir, "baseline.valid.json"))
    if base is None:
        sys.exit(f"converged_report.py: error: no baseline.json in {args.dir}; run the benchmark")
    cells: dict = {}
    for r in rows:
        cells[(r["method"], int(r["heads_to_keep"]))] = (
            float(r["sacrebleu"]),
            None if r.get("valid_sacrebleu") is None else float(r["valid_sacrebleu"]),
        )
    for r in load(os.path.join(args.dir, "fairseq_prune.json")) or []:
        if r.get("layout") is None and r.get("sacrebleu") is not None:
            name = "fairseq-removal+rec" if r.get("reconstruct") else "fairseq-removal"
            valid = r.get("valid_sacrebleu")  # bench/fairseq_prune_quality.py --valid
            cells[(name, int(r["k"]))] = (
                float(r["sacrebleu"]),
                None if valid is None else float(valid),
            )
    for name in sorted(os.listdir(args.dir)):  # rows run beside the table (SIDE_FILES)
        if name.startswith(SIDE_FILES) and name.endswith(".json") and kd_setting(name) is None:
            for r in load(os.path.join(args.dir, name)) or []:
                cells.setdefault(
                    (r["method"], int(r["heads_to_keep"])),
                    (
                        float(r["sacrebleu"]),
                        None if r.get("valid_sacrebleu") is None else float(r["valid_sacrebleu"]),
                    ),
                )
    seeds: dict = {}
    for name in sorted(os.listdir(args.dir)):
        if name.startswith("results-sweep-seed") and name.endswith(".json"):
            for r in load(os.path.join(args.dir, name)) or []:
                if r["method"] in DETERMINISTIC:  # the same heads for every seed: no spread
                    continue
                seeds.setdefault((r["method"], int(r["heads_to_keep"])), []).append(
                    float(r["sacrebleu"])
                )
    # selection variants (issue 17, item 3): the variant's own file first; its seed files
    # (results-sweep-VARIANT-sN.json) add seeds, or the cell of a row the first file lacks
    variant_files = [(n, variant_of(n)) for n in sorted(os.listdir(args.dir)) if variant_of(n)]
    variant_files.sort(key=lambda item: _is_seed_file(*item))
    for name, (prefix, label) in variant_files:
        seed_file = _is_seed_file(name, (prefix, label))
        for r in load(os.path.join(args.dir, name)) or []:
            method, k = f"{prefix}:{r['method']}", int(r["heads_to_keep"])
            if seed_file and (method, k) in cells:
                seeds.setdefault((method, k), []).append(float(r["sacrebleu"]))
                continue
            LABELS.setdefault(method, label + suffix_label(r["method"]))
            cells[(method, k)] = (
                float(r["sacrebleu"]),
                None if r.get("valid_sacrebleu") is None else float(r["valid_sacrebleu"]),
            )
    ft_runs = finetune_setting_runs(os.path.join(args.dir, FT_SETTINGS_FILE), FT_DEFAULT_SETTING)
    for k, runs in ft_runs.items():  # the first run is the cell, the others its spread
        cells[(FT_DEFAULT_METHOD, k)] = runs[0]
        if len(runs) > 1:
            seeds[(FT_DEFAULT_METHOD, k)] = [t for t, _ in runs[1:]]
    for name in sorted(
        os.listdir(os.path.join(args.dir, "alternating"))
        if os.path.isdir(os.path.join(args.dir, "alternating"))
        else []
    ):
        r = load(os.path.join(args.dir, "alternating", name))  # bench/alternating_refits.py
        method = f"alternating-r{r['rounds']}"
        label = f"pipelined DSP, gate training alternated with {r['rounds'] - 1} refits"
        LABELS.setdefault(method, label)
        LABELS.setdefault(method + "+rec", label + " + reconstruct")
        cells[(method, int(r["heads_to_keep"]))] = (r["stripped_test"], r["stripped_valid"])
        cells[(method + "+rec", int(r["heads_to_keep"]))] = (r["rec_test"], r["rec_valid"])
    ks = [18, 36, 9]
    out = [
        f"Unpruned (72 heads): **{base['sacrebleu']:.2f}** sacreBLEU on test_2016"
        + (f" ({base_valid['sacrebleu']:.2f} on valid)" if base_valid else "")
        + ". Cells: test sacreBLEU (valid sacreBLEU); an empty cell was not run yet.",
        "",
        "| method | K = 18 (H/4) | K = 36 (H/2) | K = 9 (H/8) |",
        "|---|---|---|---|",
    ]
    for method, label in LABELS.items():
        if not any((method, k) in cells for k in ks):
            continue
        line = [label]
        for k in ks:
            if (method, k) not in cells:
                line.append("")
                continue
            test, valid = cells[(method, k)]
            line.append(f"{test:.2f}" + (f" ({valid:.2f})" if valid is not None else ""))
        out.append("| " + " | ".join(line) + " |")
    spread = []
    for (method, k), extra in sorted(seeds.items()):
        if (method, k) in cells:
            values = [cells[(method, k)][0]] + extra
            spread.append(
                f"| {LABELS.get(method, method)} | {k} | {len(values)} | "
                f"{statistics.mean(values):.2f} | {min(values):.2f}-{max(values):.2f} |"
            )
    if spread:
        out += ["", "| method | K | runs | mean | min-max |", "|---|---:|---:|---:|---|", *spread]
    settings = kd_settings(args.dir, cells)
    if settings:
        out += ["", *settings]
    # dsp-pick-k with the recipes' defaults: the latest run there is (PICK_RUNS, newest first)
    pick = next(
        (p for p in (load(os.path.join(args.dir, d, "pick.json")) for d in PICK_RUNS) if p), None
    )
    goals = goal_lines(cells, seeds, float(base["sacrebleu"]), pick)
    if args.marker == "recovery":  # the recovery table: the issue-17 goals only
        goals = goals[: goals.index("")]
    parts = {f"{args.marker}-table": "\n".join(out), f"{args.marker}-goals": "\n".join(goals)}
    if args.marker == "recovery":  # the README's short version (a block of its own)
        parts["recovery-summary"] = "\n".join(summary_lines(cells, base, ks))
    for path in args.splice:
        splice(path, parts)
    if not args.splice:
        print("\n".join(out + [""] + goals))
    return 0


def kd_setting(name: str):
    """(weight, temperature) of a results-sweep-kdw{W}t{T}.json file name, else None."""
    m = re.fullmatch(r"results-sweep-kdw([0-9.]+)t([0-9.]+)\.json", name)
    return None if m is None else (float(m.group(1)), float(m.group(2)))


def kd_settings(folder: str, cells: dict) -> list:
    """The distillation weight/temperature table: dsp+rec+kd at K = 18 for each setting, the
    default (0.5, 1: the table's row) and the plain fine-tune of the same start beside them."""
    rows = []
    if ("dsp+rec+kd", 18) in cells:
        rows.append(((0.5, 1.0), cells[("dsp+rec+kd", 18)]))
    for name in sorted(os.listdir(folder)):
        wt = kd_setting(name)
        for r in (load(os.path.join(folder, name)) or []) if wt else []:
            if r["method"] == "dsp+rec+kd" and int(r["heads_to_keep"]) == 18:
                rows.append((wt, (float(r["sacrebleu"]), float(r["valid_sacrebleu"]))))
    if len(rows) < 2:
        return []
    lines = [
        "| DSP + reconstruct, K = 18, fine-tuned 270 updates on | test | valid |",
        "|---|---|---|",
    ]
    if ("dsp+rec+ft", 18) in cells:
        test, valid = cells[("dsp+rec+ft", 18)]
        lines.append(f"| labels only (plain fine-tune) | {test:.2f} | {valid:.2f} |")
    for (w, t), (test, valid) in sorted(rows):
        lines.append(f"| distillation weight {w:g}, temperature {t:g} | {test:.2f} | {valid:.2f} |")
    return lines


SUMMARY_ROWS = (
    (
        "pipelined DSP, default gates (started from importance; KL, out_proj and fc2 trained)",
        "results-sweep-impinit:dsp",
    ),
    (
        "pipelined DSP, session 7's gates (the same, plain start)",
        "results-sweep-gatekdopffn:dsp",
    ),
    ("pipelined DSP, plain gates (labels, frozen model)", "dsp"),
    ("Hard Concrete", "hard-concrete"),
    ("head importance, one-shot", "importance"),
    ("head importance, iterative", "importance-iter"),
    ("random heads", "random"),
    ("fairseq `_adaptive_prune_heads`", "fairseq-removal"),
)
STAGES = ("", "+rec", "+rec+kd")


def summary_lines(cells: dict, base: dict, ks: list) -> list:
    """One row per selection method, each cell "stripped / + reconstruct / + reconstruct +
    distilled fine-tune" (test sacreBLEU), the best of each recovery stage per K in bold."""
    best = {
        (stage, k): max((cells[(m + stage, k)][0] for _, m in SUMMARY_ROWS if (m + stage, k) in cells),
                        default=None)
        for stage in STAGES[1:]
        for k in ks
    }  # fmt: skip
    lines = [
        f"Unpruned (72 heads): **{base['sacrebleu']:.2f}**. Cells: test_2016 sacreBLEU stripped"
        " / + reconstruct / + reconstruct + distilled fine-tune (270 updates), one seed; - not"
        " run. Bold: the best of its column and stage.",
        "",
        "| heads chosen by | K = 18 (H/4) | K = 36 (H/2) | K = 9 (H/8) |",
        "|---|---|---|---|",
    ]
    for label, method in SUMMARY_ROWS:
        if not any((method + stage, k) in cells for stage in STAGES for k in ks):
            continue
        row = [label]
        for k in ks:
            parts = []
            for stage in STAGES:
                if (method + stage, k) not in cells:
                    parts.append("-")
                    continue
                test = cells[(method + stage, k)][0]
                bold = stage and best[(stage, k)] == test
                parts.append(f"**{test:.2f}**" if bold else f"{test:.2f}")
            row.append(" / ".join(parts))
        lines.append("| " + " | ".join(row) + " |")
    return lines


def splice(path: str, parts: dict) -> None:
    """Replace each ``<!-- NAME -->...<!-- /NAME -->`` block of ``path`` that exists."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for name, body in parts.items():
        start, end = f"<!-- {name} -->", f"<!-- /{name} -->"
        if start in text and end in text:
            head, rest = text.split(start, 1)
            text = head + start + "\n" + body + "\n" + end + rest.split(end, 1)[1]
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(path + ".tmp", path)


BASELINES = ("importance", "importance-iter", "hard-concrete", "ste", "random", "fairseq-removal")
NAMES = {18: "H/4", 36: "H/2", 9: "H/8"}


REC_BASELINES = tuple(f"{b}+rec" for b in BASELINES)
# the variant prune-pipelined.sh trains DSP gates with by default (--gate-objective distill,
# --gate-init importance)
DEFAULT_GATES = "results-sweep-impinit"
# the same gates from their own start (--gate-init none): the README's path to a fine-tune
PLAIN_START_GATES = "results-sweep-gatekdopffn"
KD_BASELINES = ("importance+rec+kd", "hard-concrete+rec+kd")


def goal_lines(cells: dict, seeds: dict, unpruned: float, pick=None) -> list:
    """The issue's goals, measured from the table: met, not met, or not measured yet."""

    def test(method, k):
        return cells[(method, k)][0] if (method, k) in cells else None

    def within(method, limits) -> str:
        parts, failed, missing = [], False, False
        for k, limit in limits.items():
            got = values(method, k)
            if not got:
                parts.append(f"{NAMES[k]}: not run")
                missing = True
                continue
            b = statistics.mean(got)  # the mean where there are seeds
            runs = f" (mean of {len(got)})" if len(got) > 1 else ""
            parts.append(f"{NAMES[k]}: {b:.2f}{runs}, {unpruned - b:.2f} below (limit {limit})")
            failed = failed or unpruned - b > limit
        verdict = "**not met**" if failed else ("not measured yet" if missing else "met")
        return "; ".join(parts) + f" | {verdict} |"

    def values(method, k) -> list:
        return ([test(method, k)] if test(method, k) is not None else []) + seeds.get(
            (method, k), []
        )

    def versus(dsp, rivals) -> str:
        parts, ok, measured = [], True, False
        for k in (18, 36, 9):
            mine = values(dsp, k)
            best = max(
                ((statistics.mean(values(r, k)), r) for r in rivals if values(r, k)), default=None
            )
            if not mine or best is None:
                continue
            measured = True
            mean = statistics.mean(mine)
            theirs = values(best[1], k)
            gap = mean - statistics.mean(theirs)
            note = ""
            if len(mine) > 1:  # a win counts only beyond the seeds' spread (both sides')
                width = max(max(v) - min(v) for v in (mine, theirs))
                beyond = abs(gap) > width
                note = (f", means of {len(mine)} and {len(theirs)} runs, largest range "
                        f"{width:.2f}: {'beyond' if beyond else 'inside'} it")  # fmt: skip
            parts.append(f"{NAMES[k]}: {gap:+.2f} vs {LABELS.get(best[1], best[1])}{note}")
            ok = ok and gap >= 0
        if not measured:
            return "not run yet | not measured yet |"
        return "; ".join(parts) + f" | {'met' if ok else '**not met**'} |"

    def pick_goal() -> str:
        if not pick or "chosen_k" not in pick:
            return "not run yet | not measured yet |"
        k, total = int(pick["chosen_k"]), int(pick.get("heads_total", 72))
        removed = total - k
        recovery = pick.get("recovery", "none")
        return (f"K = {k} ({removed} of {total} heads removed, recovery {recovery}) | "
                f"{'met' if removed * 3 >= total else '**not met**'} |")  # fmt: skip

    default = f"{DEFAULT_GATES}:dsp"  # the cells of prune-pipelined.sh's default gates
    return [
        "| goal (issue 17: with recovery) | measured | met |",
        "|---|---|---|",
        "| retraining-free: DSP (default gates) + reconstruct within 2.0 BLEU of unpruned at "
        "H/2, 6.0 at H/4 | " + within(default + "+rec", {36: 2.0, 18: 6.0}),
        "| retraining-free with the recipes' default recovery: DSP (default gates, best on valid "
        "of the gate run's own output layers, which the gate run trains, or the refit) within "
        "2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(default + "+best", {36: 2.0, 18: 6.0}),
        "| retraining-free: DSP (plain gates) + reconstruct within 2.0 BLEU of unpruned at H/2, "
        "6.0 at H/4 | " + within("dsp+rec", {36: 2.0, 18: 6.0}),
        "| retraining-free: `dsp-pick-k --tolerance 0.5` removes at least a third of the heads | "
        + pick_goal(),
        "| distilled fine-tune: DSP + reconstruct + KD within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within("dsp+rec+kd", {36: 0.3, 18: 1.0, 9: 2.5}),
        "| 270-update fine-tune (the recipes' default until session 14: labels, dropout 0.2): DSP "
        "(default gates, default recovery: best on valid) + fine-tune within 0.3 at H/2, 1.0 at "
        "H/4, 2.5 at H/8 | " + within(default + "+best+ft", {36: 0.3, 18: 1.0, 9: 2.5}),
        "| 270-update fine-tune (the recipes' default: labels, dropout 0.1): DSP (default gates, "
        "default recovery: best on valid) + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 "
        "| " + within(FT_DEFAULT_METHOD, {36: 0.3, 18: 1.0, 9: 2.5}),
        "| 270-update fine-tune from the gates' own start (the README's fine-tune path for K = 36 "
        "in sessions 10-13; dropout 0.2): DSP "
        "(KL + out_proj,fc2 gates, own start: `--gate-init none --recovery reconstruct`) + "
        "reconstruct + fine-tune within 0.3 "
        "at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(f"{PLAIN_START_GATES}:dsp+rec+ft", {36: 0.3, 18: 1.0, 9: 2.5}),
        "| DSP (default gates, default recovery: best on valid) at least as good as every "
        "baseline + reconstruct | " + versus(default + "+best", REC_BASELINES),
        "| DSP (default gates) + reconstruct at least as good as every baseline + reconstruct | "
        + versus(default + "+rec", REC_BASELINES),
        "| DSP + reconstruct at least as good as every baseline + reconstruct | "
        + versus("dsp+rec", REC_BASELINES),
        "| DSP + reconstruct + KD at least as good as every baseline with the same recovery | "
        + versus("dsp+rec+kd", KD_BASELINES),
        "",
        "| goal (earlier issue: no recovery) | measured | met |",
        "|---|---|---|",
        "| no fine-tune: DSP within 1.0 BLEU of unpruned at H/2, 2.5 at H/4 | "
        + within("dsp", {36: 1.0, 18: 2.5}),
        "| fine-tuned: DSP within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within("dsp+ft", {36: 0.3, 18: 1.0, 9: 2.5}),
        "| no fine-tune: DSP at least as good as the best baseline at each K | "
        + versus("dsp", BASELINES),
        "| fine-tuned: DSP + ft at least as good as the best fine-tuned baseline | "
        + versus("dsp+ft", ("importance+ft", "hard-concrete+ft")),
        "| the default schedule at least as good as the reference schedule | "
        + versus("dsp", ("dsp-ref",)),
    ]


if __name__ == "__main__":
    sys.exit(main())
