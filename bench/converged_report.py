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

from finetune_budget import BUDGET_FILE, budget_lines, budget_runs
from layout_split import (
    BATCH_FILE,
    BATCH_VARIANTS,
    DISTILLED_FILE,
    FREE,
    REBUILT_FILE,
    REBUILT_VARIANTS,
    layout_files,
    layout_lines,
    layout_of,
    proportional_file,
    proportional_layout,
    proportional_runs,
    recipe_type_split,
    runs_of,
    split_at,
    variant_lines,
    variant_runs,
)
from paired_runs import (
    GATE_ALL_LAYERS_FILE,
    GATE_DROPOUT_FILE,
    TUNE_LAYERS_FILE,
    TUNE_LR_FILE,
    by_seed,
    paired_lines,
    recipe_tune_layers,
    recipe_tune_lr,
    tuned_layer_runs,
)
from tune_dropout import TUNE_DROPOUT_FILE, tune_dropout_lines, tune_dropout_runs

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


# dsp-pick-k runs, newest defaults first: session 40's (the gates of today: per-sentence
# importance, validation in the second half, --type-split auto), session 22's (the grid refined
# one head at a time), session 9's (gates started from head importance), session 7's (distill
# gates, recovery best), session 5's (plain gates, reconstruct); with --recovery tuned:
# session 47's (pick-k's tuning at 2e-4), session 46's (the tuning of every layer), session
# 41's (the tuning at dropout 0), session 40's, session 21's
PICK_RUNS = ("pick-k-s40", "pick-k-refined", "pick-k-impinit", "pick-k-best", "pick-k-rec")
# the newest tuned search's settings at other gate seeds (run folder: gate seed; pick.json
# records the seed since session 48): session 48's
TUNED_PICK_SEED_RUNS = {"pick-k-tuned-seed2": 2}
# what the gate run trains beside the gates: today's (out_proj,fc2), stage 6ay's (every layer)
GATE_TRAINS = ("out_proj,fc2", "every layer")
TUNED_PICK_RUNS = (
    "pick-k-tuned-lr",
    "pick-k-tuned-tl",
    "pick-k-tuned-d0",
    "pick-k-tuned-s40",
    "pick-k-tuned",
)


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
# bench/recovery/checkpoint-averaging.txt (stage 6q): the recipe's fine-tune saving a checkpoint
# every 27 updates, its final model ("last") and the averages of its last N checkpoints;
# "kK-sS" lines start from the default gates' models (stage 6o's starts, so their final models
# repeat stage 6o's dropout-0.1 runs), "impK-sS" from head importance + reconstruct, whose
# final models are the rival's fine-tune at the recipe's default
AVERAGING_FILE = "checkpoint-averaging.txt"
IMP_FT_DEFAULT_METHOD = "importance+rec+ft@dropout0.1"
# since session 15 the recipe's model is the average of the last 3 checkpoints (cpu-small)
DEFAULT_AVERAGE = 3
FT_AVG_METHOD = f"results-sweep-impinit:dsp+best+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
IMP_FT_AVG_METHOD = f"importance+rec+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
_DEFAULT_GATES_BEST = (
    "pipelined DSP, default gates (KL + out_proj,fc2, started from head importance) + best of own "
    "weights or reconstruct on valid"
)
_IMPORTANCE_REC = "head importance, one-shot + reconstruct"
_AT_S14 = " + fine-tune at dropout 0.1, final model (session 14's default)"
_AT_DEFAULT = (
    f" + fine-tune at dropout 0.1, average of the last {DEFAULT_AVERAGE} checkpoints "
    "(the recipe's default since session 15)"
)
LABELS[FT_DEFAULT_METHOD] = _DEFAULT_GATES_BEST + _AT_S14
LABELS[IMP_FT_DEFAULT_METHOD] = _IMPORTANCE_REC + _AT_S14
LABELS[FT_AVG_METHOD] = _DEFAULT_GATES_BEST + _AT_DEFAULT
LABELS[IMP_FT_AVG_METHOD] = _IMPORTANCE_REC + _AT_DEFAULT


# bench/recovery/gate-layer-distillation.txt (stage 6r, session 16): prune-pipelined.sh with
# layer distillation in the gate run (--train-args "--distill-hidden-weight 1"), one line per run,
# "gK-sS: own valid V; refit valid V; best CHOSEN test T valid V", and the recipe's fine-tune of
# gate seed S's model, "ftK-sS: best test T valid V; last test ..." (best = the average of the
# last 3, the recipe's model; fine-tune seed 1)
GATE_LAYERS_FILE = "gate-layer-distillation.txt"
LAYER_GATES_BEST = "gate-layers:dsp+best"
LAYER_GATES_FT = f"gate-layers:dsp+best+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
_LAYER_GATES_BEST = (
    "pipelined DSP, default gates with layer distillation in the gate run (KL + hidden states + "
    "out_proj,fc2, started from head importance) + best of own weights or reconstruct on valid"
)
LABELS[LAYER_GATES_BEST] = _LAYER_GATES_BEST
LABELS[LAYER_GATES_FT] = _LAYER_GATES_BEST + _AT_DEFAULT
# the same runs, read as prune-pipelined.sh --restarts 2 (session 17): of seeds 1-2, 3-4, 5-6
# the one whose recipe's model decodes valid best
RESTARTS = 2
LAYER_GATES_RESTARTS = f"gate-layers:dsp+best,restarts{RESTARTS}"
LAYER_GATES_RESTARTS_FT = LAYER_GATES_RESTARTS + f"+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
_LAYER_GATES_RESTARTS = (
    _LAYER_GATES_BEST + f", the best of {RESTARTS} gate runs on valid (`--restarts {RESTARTS}`)"
)
LABELS[LAYER_GATES_RESTARTS] = _LAYER_GATES_RESTARTS
LABELS[LAYER_GATES_RESTARTS_FT] = _LAYER_GATES_RESTARTS + _AT_DEFAULT
# bench/recovery/gate-two-epochs.txt (stages 6t-6u, sessions 18-19): the same gate run for two
# epochs (--train-args "--distill-hidden-weight 1 --max-epoch 2"; the temperature anneals over
# both), lines "gK-sS-e2" and the recipe's fine-tune of a restart group's choice, "ftK-sS"
TWO_EPOCHS_FILE = "gate-two-epochs.txt"
TWO_EPOCHS_BEST = "gate-two-epochs:dsp+best"
TWO_EPOCHS_RESTARTS = f"gate-two-epochs:dsp+best,restarts{RESTARTS}"
TWO_EPOCHS_RESTARTS_FT = TWO_EPOCHS_RESTARTS + f"+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
_TWO_EPOCHS_BEST = (
    "pipelined DSP, default gates with layer distillation, gate run of two epochs + best of own "
    "weights or reconstruct on valid"
)
LABELS[TWO_EPOCHS_BEST] = _TWO_EPOCHS_BEST
_TWO_EPOCHS_RESTARTS = (
    _TWO_EPOCHS_BEST + f", the best of {RESTARTS} gate runs on valid (`--restarts {RESTARTS}`)"
)
LABELS[TWO_EPOCHS_RESTARTS] = _TWO_EPOCHS_RESTARTS
LABELS[TWO_EPOCHS_RESTARTS_FT] = _TWO_EPOCHS_RESTARTS + _AT_DEFAULT
# bench/recovery/tuned-refit.txt (stages 6v-6w, sessions 20-21): the tuned refit (tune-refit.sh:
# out_proj and fc2 trained towards the unpruned model for one epoch, the rest frozen) of the
# layer-distilled gates' models ("tuned-gateK-sS-lr5e-4") and of head importance + reconstruct
# ("tuned-impK-lr5e-4[-sT]", tuning seed T), read as --recovery tuned keeps them
TUNED_FILE = "tuned-refit.txt"
TUNED_LR = "5e-4"  # tune-refit.sh's default learning rate
TUNED_GATES = "tuned-refit:gate-layers"
TUNED_IMP = "tuned-refit:importance"
_TUNED = (
    " + tuned refit (out_proj,fc2 trained towards the unpruned model for one epoch, the rest "
    "frozen; kept if better on valid: `--recovery tuned`)"
)
LABELS[TUNED_GATES] = _LAYER_GATES_BEST + _TUNED
LABELS[TUNED_IMP] = "head importance, one-shot + reconstruct" + _TUNED
# bench/recovery/tuned-default.txt (stages 6y-6z, sessions 22-23): the one command with
# --recovery tuned, the recipes' default since session 23: prune-pipelined.sh, gate seed S,
# "kK-sS: recovery best -> R; untuned test T valid V; tuned test T valid V; kept C", and
# prune-importance.sh, tuning seed S, "impK-sS: untuned valid V; tuned valid V; kept C; test T"
# (the latter add tuning seeds to TUNED_IMP)
TUNED_DEFAULT_FILE = "tuned-default.txt"
TUNED_DEFAULT = "tuned-default:dsp"
TUNED_DEFAULT_FT = f"tuned-default:dsp+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
LABELS[TUNED_DEFAULT] = _DEFAULT_GATES_BEST + _TUNED + " (the recipes' default since session 23)"
LABELS[TUNED_DEFAULT_FT] = LABELS[TUNED_DEFAULT] + _AT_DEFAULT
# and its "ft-kK-sS[-fF]" lines (bench/score_line.py: best = the average of the last 3, last =
# the final model; fine-tune seed F, default 1), "ft-impK-sS" those of importance's one command:
# finetune-pruned.sh --choose valid keeps the better of the two on valid (session 25: measured
# level with the average, the recipe's model)
TUNED_DEFAULT_FT_VALID = "tuned-default:dsp+ft@valid-choice"
TUNED_IMP_FT = f"tuned-default:importance+ft@dropout0.1,avg{DEFAULT_AVERAGE}"
# bench/recovery/fast-default.txt (stage 6ad, session 29): the one command with the defaults of
# session 29 (the gate init from per-sentence importance, computed in the run; validation in the
# gate run's second half; the tuning's start decoded once), the kK-sS lines of tuned-default.txt
# ending in "; one command N s", its wall time alone on 2 cores
FAST_DEFAULT_FILE = "fast-default.txt"
FAST_DEFAULT = "fast-default:dsp"
# and its "ft-kK-sG" lines: the recipe's fine-tune at its learning rate (5e-4) of gate seed G's
FAST_DEFAULT_FT = "fast-default:dsp+ft"
# session 31: stage 6ad's K = 9 runs again in a fresh work folder (session 29's models were
# gone; the same commands and gate seeds, on a 2.1 times slower machine: other heads, other
# scores), lines "k9-sS" with their fine-tunes "ft-k9-sS", the H/8 fine-tunes of FAST_DEFAULT_FT
FAST_DEFAULT_RERUN_FILE = "fast-default-rerun.txt"
FAST_DEFAULT_RERUN = "fast-default:dsp,rerun"
# and the tuning's start in those lines ("untuned"): what --recovery best gives since session 29
FAST_DEFAULT_BEST = "fast-default:dsp+best"
TUNED_IMP_FT_VALID = "tuned-default:importance+ft@valid-choice"
# bench/recovery/fast-restarts3.txt (stage 6af, sessions 30-31): the one command with --restarts 3
# (the best on valid of 3 gate runs, each with --recovery best; the chosen one tuned), its
# "kK-sFIRST" and "ft-kK-sFIRST" lines; the group of seeds 1-3 is made of fast-default.txt's
# runs, chosen the same way
FAST_RESTARTS_FILE = "fast-restarts3.txt"
FAST_RESTARTS_N = 3
FAST_RESTARTS = f"fast-default:dsp,restarts{FAST_RESTARTS_N}"
FAST_RESTARTS_FT = FAST_RESTARTS + "+ft"
# bench/recovery/fast-default-kd.txt (stage 6ae, sessions 30-31, at K = 9): the recipe's fine-tune of
# fast-default's models distilled from the unpruned model (--teacher BASE, KL weight W)
FAST_DEFAULT_KD_FILE = "fast-default-kd.txt"
FAST_DEFAULT_KD_WEIGHT = "0.5"
FAST_DEFAULT_KD = f"fast-default:dsp+kd{FAST_DEFAULT_KD_WEIGHT}"
_VALID_CHOICE = (
    " + fine-tune at dropout 0.1, the better on valid of the average of the last "
    f"{DEFAULT_AVERAGE} checkpoints and the final model (`--choose valid`)"
)
LABELS[TUNED_DEFAULT_FT_VALID] = LABELS[TUNED_DEFAULT] + _VALID_CHOICE
LABELS[FAST_DEFAULT_BEST] = (
    _DEFAULT_GATES_BEST + " (`--recovery best`, the gate run of the recipes' default since "
    "session 29: the gate init from per-sentence importance scores, validation in its second half)"
)
LABELS[FAST_DEFAULT] = (
    _DEFAULT_GATES_BEST + _TUNED + " (the recipes' default since session 29: the gate init from "
    "per-sentence importance scores, validation in the gate run's second half)"
)
_TUNED_IMP_ONE_COMMAND = "head importance's one command: one-shot + reconstruct" + _TUNED
LABELS[TUNED_IMP_FT] = _TUNED_IMP_ONE_COMMAND + _AT_DEFAULT
LABELS[TUNED_IMP_FT_VALID] = _TUNED_IMP_ONE_COMMAND + _VALID_CHOICE
# stage 6ab (session 26, bench/finetune_budget.py): those fine-tunes (fine-tune seed 1) trained
# on to N updates, lines "ft-kK-sG-uN" of finetune-budget.txt
LONGER_UPDATES = (540, 810, 1080)
TUNED_DEFAULT_FT_LONGER = {n: f"{TUNED_DEFAULT_FT},u{n}" for n in LONGER_UPDATES}
for _n, _method in TUNED_DEFAULT_FT_LONGER.items():
    LABELS[_method] = (
        LABELS[TUNED_DEFAULT_FT] + f", trained on to {_n} updates (`--max-update {_n}`)"
    )
# stage 6ac (session 27): importance's one command's fine-tunes trained on the same way (lines
# "ft-impK-sS-uN" of finetune-budget.txt), and the one command's fine-tune at a constant
# learning rate LR instead of the recipe's 3e-4 (lines "ft-kK-sG-lrLR" of finetune-lr.txt)
TUNED_IMP_FT_LONGER = {n: f"{TUNED_IMP_FT},u{n}" for n in LONGER_UPDATES}
for _n, _method in TUNED_IMP_FT_LONGER.items():
    LABELS[_method] = LABELS[TUNED_IMP_FT] + f", trained on to {_n} updates (`--max-update {_n}`)"
FINETUNE_LR_FILE = "finetune-lr.txt"


DEFAULT_FT_LR = "5e-4"  # finetune-pruned.sh's for cpu-small since session 27 (3e-4 before)
_DEFAULT_SINCE = " (the recipe's default since session 27)"
LABELS[FAST_DEFAULT_FT] = (
    LABELS[FAST_DEFAULT] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}{_DEFAULT_SINCE}"
)
LABELS[FAST_DEFAULT_RERUN] = (
    LABELS[FAST_DEFAULT] + ", rerun in sessions 31-34 on a slower machine (the models of the H/8 "
    "fine-tunes, and at H/4 those of stage 6ag's choice)"
)
LABELS[FAST_RESTARTS] = (
    LABELS[FAST_DEFAULT] + f", the best of {FAST_RESTARTS_N} gate runs on valid "
    f"(`--restarts {FAST_RESTARTS_N}`)"
)
LABELS[FAST_RESTARTS_FT] = (
    LABELS[FAST_RESTARTS] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}{_DEFAULT_SINCE}"
)
LABELS[FAST_DEFAULT_KD] = (
    LABELS[FAST_DEFAULT_FT] + ", distilled from the unpruned model (`--teacher BASE`, KL "
    f"weight {FAST_DEFAULT_KD_WEIGHT}, temperature 1)"
)
# stage 6ah (sessions 35-36): the one command with K split among the attention types by their
# heads (`--type-split proportional`: 12,12,12 / 6,6,6 / 3,3,3), the layout-eE-dD-cC.txt files of
# that layout at their K (layout_split.proportional_runs): --recovery best's start, the model
# kept, its fine-tune
PROPORTIONAL = "proportional:dsp"
PROPORTIONAL_BEST = PROPORTIONAL + "+best"
PROPORTIONAL_FT = PROPORTIONAL + "+ft"
_SPLIT = " with K split among the attention types by their heads (`--type-split proportional`)"
LABELS[PROPORTIONAL_BEST] = LABELS[FAST_DEFAULT_BEST] + _SPLIT
LABELS[PROPORTIONAL] = LABELS[FAST_DEFAULT] + _SPLIT
LABELS[PROPORTIONAL_FT] = (
    LABELS[PROPORTIONAL] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}{_DEFAULT_SINCE}"
)
# the recipes' default since session 36, --type-split auto: the split where K <= H/4, the free
# choice above; its cells are those runs (with_auto_split), for the README's table and the goals
AUTO = "auto-split:dsp"
AUTO_BEST = AUTO + "+best"
AUTO_FT = AUTO + "+ft"
AUTO_FROM = ((AUTO, PROPORTIONAL, FAST_DEFAULT), (AUTO_BEST, PROPORTIONAL_BEST, FAST_DEFAULT_BEST),
             (AUTO_FT, PROPORTIONAL_FT, FAST_DEFAULT_FT))  # fmt: skip

# stage 6ai (session 37): the default's models at K <= H/4 (the split) fine-tuned with the
# teacher, KL weight 0.5 (`--teacher BASE`), and with the hidden-state term as well
# (layout_split.DISTILLED_VARIANTS; split-kd.txt)
AUTO_KD = AUTO + "+kd0.5"
AUTO_KD_HIDDEN = AUTO + "+kd0.5-h1"
LABELS[AUTO_KD] = (
    LABELS[PROPORTIONAL] + ", the recipe's fine-tune distilled from the unpruned model "
    "(`--teacher BASE`, KL weight 0.5, temperature 1)"
)
LABELS[AUTO_KD_HIDDEN] = (
    LABELS[AUTO_KD] + ' and its hidden states (`--train-args "--distill-hidden-weight 1"`)'
)


def with_auto_split(cells: dict, seeds: dict) -> tuple:
    """Copies of CELLS and SEEDS with the AUTO methods: per K, the split's runs or the free
    layout's (stage 6ad's), as --type-split auto chooses."""
    cells, seeds = dict(cells), {m: list(v) for m, v in seeds.items()}
    for auto, split, free in AUTO_FROM:
        for k in (36, 18, 9):
            source = split if split_at(k) else free
            if (source, k) in cells:
                cells[(auto, k)] = cells[(source, k)]
                if (source, k) in seeds:
                    seeds[(auto, k)] = list(seeds[(source, k)])
    return cells, seeds


# the recipes' default since session 41: the tuning at dropout 0 (tune-refit.sh --dropout 0),
# the one command otherwise as AUTO's. H/2 and H/8: stage 6ao's runs (TODAY_FILE, "kK-sS" and
# "ft-kK-sS" lines); H/4: stage 6an's tunings at 0 of stage 6ak's rebuilt split gate runs
# (tune-dropout.txt "split-k18-sS": the start and the tuning at 0, the recipe keeping the tuning
# where it decodes valid better; their fine-tunes "t0-k18-sS" in split-rebuilt.txt)
TODAY = "today:dsp"
TODAY_BEST = TODAY + "+best"
TODAY_FT = TODAY + "+ft"
TODAY_FILE = "one-command-t0.txt"
_AT_D0 = " with the tuning at dropout 0 (tune-refit.sh's default since session 41)"
LABELS[TODAY_BEST] = LABELS[FAST_DEFAULT_BEST] + ", `--type-split auto` (the tunings' starts below)"
LABELS[TODAY] = LABELS[FAST_DEFAULT] + ", `--type-split auto`" + _AT_D0
LABELS[TODAY_FT] = LABELS[TODAY] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}"


def today_runs(directory: str) -> tuple:
    """({K: [{"best", "one", "ft"}, ...]}, {K: [one command seconds]}) of the one command at
    today's defaults (TODAY's sources above); the H/4 seconds are those of stage 6ak's one
    commands, whose tuning (at 0.1) 6an repeated at 0."""
    path = os.path.join(directory, TODAY_FILE)
    runs = runs_of(one_command_lines(path), fine_tune_lines(path))
    seconds = one_command_seconds(path)
    rebuilt_path = os.path.join(directory, REBUILT_FILE)
    rebuilt = fine_tune_lines(rebuilt_path)
    tunings = tune_dropout_runs(os.path.join(directory, TUNE_DROPOUT_FILE))
    rebuilt_seconds = one_command_seconds(rebuilt_path)
    for name, models in sorted(tunings.items()):
        m = re.fullmatch(r"split-k([0-9]+)-s([0-9]+)", name)
        if not m:
            continue
        start, tuned = ((models[x]["test"], models[x]["valid"]) for x in ("start", "d0"))
        ft = rebuilt.get(f"t0-k{m[1]}-s{m[2]}", {}).get("best")
        one = tuned if tuned[1] > start[1] else start
        runs.setdefault(int(m[1]), []).append(
            {"seed": int(m[2]), "best": start, "one": one, "ft": ft}
        )
        seconds.setdefault(int(m[1]), rebuilt_seconds.get(int(m[1]), []))
    return runs, seconds


# the tuned refit of every transformer layer (stage 6as, session 44: tune-refit.sh --layers
# layers from today's gate runs' starts; tune-layers.txt, paired_runs.tuned_layer_runs)
TUNE_LAYERS = "tune-layers:dsp"
TUNE_LAYERS_FT = TUNE_LAYERS + "+ft"
LABELS[TUNE_LAYERS] = (
    LABELS[TODAY] + ", the tuning training every transformer layer instead (`--layers layers`)"
)
LABELS[TUNE_LAYERS_FT] = LABELS[TUNE_LAYERS] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}"
# the same tuning at learning rate 2e-4 (stage 6au, session 46: tune-lr2e-4.txt)
TUNE_LR = "tune-lr:dsp"
TUNE_LR_FT = TUNE_LR + "+ft"
LABELS[TUNE_LR] = LABELS[TUNE_LAYERS] + ", at learning rate 2e-4 (`--lr 2e-4`)"
LABELS[TUNE_LR_FT] = LABELS[TUNE_LR] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}"


# head importance's one command at today's defaults (stage 6aq, session 43): prune-importance.sh
# with its own scores (dsp-importance per token on valid) and the tuning at dropout 0, tuning
# seeds 1-3; "impK-sS" lines as tuned-default.txt's and their fine-tunes "ft-impK-sS" (learning
# rate DEFAULT_FT_LR) in TODAY_IMP_FILE
TODAY_IMP = "today:importance"
TODAY_IMP_FT = TODAY_IMP + "+ft"
TODAY_IMP_FILE = "importance-t0.txt"
LABELS[TODAY_IMP] = (
    "head importance's one command (`prune-importance.sh`, its own scores per token): "
    "one-shot + reconstruct" + _TUNED + _AT_D0
)
LABELS[TODAY_IMP_FT] = LABELS[TODAY_IMP] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}"


def importance_runs(directory: str, name: str = TODAY_IMP_FILE) -> dict:
    """{K: [{"seed", "one", "ft"}, ...]} of head importance's one command (the model the tuning
    kept) and the recipe's fine-tune of it (None where not run yet), by tuning seed, from the
    "impK-sS" and "ft-impK-sS" lines of NAME (TODAY_IMP_FILE or TL_IMP_FILE)."""
    path = os.path.join(directory, name)
    finetunes = fine_tune_lines(path)
    return {
        k: [
            {"seed": seed, "one": run, "ft": finetunes.get(f"ft-imp{k}-s{seed}", {}).get("best")}
            for seed, run in sorted(v)
        ]
        for k, v in tuned_default_runs(path)[1].items()
    }


def today_importance_runs(directory: str, name: str = TODAY_IMP_FILE) -> tuple:
    """({K: [(test, valid), ...]} of head importance's one command at today's defaults (the model
    the tuning kept), {K: [(test, valid), ...]} of the recipe's fine-tune of each), in tuning-seed
    order (importance_runs of NAME)."""
    runs = importance_runs(directory, name)
    fts = {k: [r["ft"] for r in v if r["ft"]] for k, v in runs.items()}
    return {k: [r["one"] for r in v] for k, v in runs.items()}, {k: v for k, v in fts.items() if v}


# head importance's one command with the tuning of every transformer layer (stage 6at, session
# 45: stage 6aq again once tune-refit.sh trains every layer by default), lines as TODAY_IMP_FILE's
TL_IMP = "tune-layers:importance"
TL_IMP_FT = TL_IMP + "+ft"
TL_IMP_FILE = "importance-tl.txt"
LABELS[TL_IMP] = (
    LABELS[TODAY_IMP] + ", the tuning training every transformer layer instead (`--layers layers`)"
)
LABELS[TL_IMP_FT] = LABELS[TL_IMP] + _AT_DEFAULT + f", at learning rate {DEFAULT_FT_LR}"


def importance_today_lines(today_imp: tuple, old_imp: tuple, dsp: dict, unpruned: float) -> list:
    """Stage 6aq's table: head importance's one command and its fine-tune at today's defaults
    (TODAY_IMP_FILE's runs), beside the same at the tuning of 0.1 (OLD_IMP: sessions 23-28's
    runs, the README table's importance columns until session 43) and DSP's one command at
    today's defaults (DSP: today_runs()), each mean (min-max) on test_2016 and mean on valid."""

    def cell(runs) -> str:
        if not runs:
            return "-"
        tests, valids = [t for t, _ in runs], [v for _, v in runs if v is not None]
        text = f"{statistics.mean(tests):.2f} ({min(tests):.2f}-{max(tests):.2f})"
        return text + (f", valid {statistics.mean(valids):.2f}" if valids else "")

    out = [
        "| K | importance, the one command (tuned at 0) | + fine-tune | the same tuned at 0.1 "
        "(sessions 23-28; one command / + fine-tune) | DSP, the one command / + fine-tune "
        "(today's defaults) | importance below unpruned: one command / + fine-tune |",
        "|---|---|---|---|---|---|",
    ]
    for k in (36, 18, 9):
        one, ft = today_imp[0].get(k, []), today_imp[1].get(k, [])
        if not one:
            continue
        gaps = " / ".join(
            f"{unpruned - statistics.mean(t for t, _ in r):.2f}" if r else "-" for r in (one, ft)
        )
        dsp_runs = dsp.get(k, [])
        out.append(
            f"| {k} ({NAMES[k]}) | {cell(one)} | {cell(ft)} | "
            f"{cell(old_imp[0].get(k, []))} / {cell(old_imp[1].get(k, []))} | "
            f"{cell([r['one'] for r in dsp_runs])} / {cell([r['ft'] for r in dsp_runs if r['ft']])} "
            f"| {gaps} |"
        )
    return out


def ft_lr_method(method: str, lr: str) -> str:
    """METHOD's fine-tune at constant learning rate LR (its label registered on first use)."""
    now = _DEFAULT_SINCE if lr == DEFAULT_FT_LR else ""
    LABELS.setdefault(f"{method},lr{lr}", LABELS[method] + f", at learning rate {lr}{now}")
    return f"{method},lr{lr}"


def tagged_finetunes(runs: dict, start: str, tag: str) -> dict:
    """{VALUE: {K: [((F, S), (test, valid)), ...]}} of the fine-tune lines
    "ft-STARTK-sS[-fF]-TAGVALUE" of RUNS (fine_tune_lines; F the fine-tune seed, default 1): the
    recipe's model ("best"), ordered by F, then S, as tuned_finetunes orders them."""
    found: dict = {}
    pattern = (
        r"ft-"
        + re.escape(start)
        + r"([0-9]+)-s([0-9]+)(?:-f([0-9]+))?-"
        + re.escape(tag)
        + r"(\S+)"
    )
    for name, run in runs.items():
        m = re.fullmatch(pattern, name)
        if m and "best" in run:
            by_k = found.setdefault(m.group(4), {}).setdefault(int(m.group(1)), [])
            by_k.append(((int(m.group(3) or 1), int(m.group(2))), run["best"]))
    return {v: {k: sorted(rs) for k, rs in by_k.items()} for v, by_k in found.items()}


def scores_only(by_k: dict) -> dict:
    """{K: [(test, valid), ...]} of tagged_finetunes' {K: [(seeds, (test, valid)), ...]}."""
    return {k: [r for _, r in rs] for k, rs in by_k.items()}


def learning_rate_lines(tuned_ft_lines: dict, lrs_by_start: dict) -> list:
    """The paired table of stage 6ac: each fine-tune (a start and a fine-tune seed) at the
    recipe's 3e-4 (tuned-default.txt's "ft-STARTK-sS[-fF]") and at each other learning rate
    (LRS_BY_START: {START: tagged_finetunes(..., START, "lr")}, START "k" for DSP's one command,
    "imp" for importance's), then per START the mean change over the pairs, and, pooled over
    both starts, each other rate's change against the default (DEFAULT_FT_LR) on the same runs."""
    names = {"k": "DSP", "imp": "head importance"}
    cols = sorted({lr for lrs in lrs_by_start.values() for lr in lrs}, key=float)
    if not cols:
        return []
    against_default: dict = {lr: [] for lr in cols if lr != DEFAULT_FT_LR}
    out = [
        "| one command | K | seed | fine-tune seed | 3e-4 (the recipe's until session 27) | "
        + " | ".join(lr + (" (since)" if lr == DEFAULT_FT_LR else "") for lr in cols)
        + " |",
        "|---|---|---|---|---|" + "---|" * len(cols),
    ]
    for start, lrs in lrs_by_start.items():
        runs = {(k, s, f) for by_k in lrs.values() for k, rs in by_k.items() for (f, s), _ in rs}
        paired: dict = {lr: [] for lr in cols}
        # K = 36, 18, 9 as in the other tables, then the seed and the fine-tune seed
        for k, s, f in sorted(runs, key=lambda r: (-r[0], r[1], r[2])):
            name = f"ft-{start}{k}-s{s}" + (f"-f{f}" if f > 1 else "")
            base = tuned_ft_lines.get(name, {}).get("best")
            got = {lr: dict(lrs.get(lr, {}).get(k, [])).get((f, s)) for lr in cols}
            cells = [f"{g[0]:.2f} ({g[1]:.2f})" if g else "" for g in got.values()]
            default = got.get(DEFAULT_FT_LR)
            for lr, g in got.items():
                if g and base:
                    paired[lr].append((g[0] - base[0], g[1] - base[1]))
                if g and default and lr in against_default:
                    against_default[lr].append((g[0] - default[0], g[1] - default[1]))
            first = f"{base[0]:.2f} ({base[1]:.2f})" if base else ""
            out.append(
                f"| {names[start]} | {k} | {s} | {f} | {first} | " + " | ".join(cells) + " |"
            )
        change = [_mean_change(paired[lr]) for lr in cols]
        out.append(
            f"| {names[start]}: mean change against 3e-4 | | | | | " + " | ".join(change) + " |"
        )
    if any(against_default.values()):
        # the question once a rate is the default: does another one beat it? Pooled over both
        # one commands, as the decision rule of stage 6ac reads it
        out.append(
            f"| both: mean change against {DEFAULT_FT_LR} (the same start and fine-tune seed) "
            "| | | | | "
            + " | ".join(_mean_change(against_default.get(lr, [])) for lr in cols)
            + " |"
        )
    return out


def _mean_change(d: list) -> str:
    """The cell "+T (+V), test up in A of N, valid in B" of the (test, valid) changes D."""
    if not d:
        return ""
    return (
        f"{statistics.mean(t for t, _ in d):+.2f} ({statistics.mean(v for _, v in d):+.2f}), "
        f"test up in {sum(t > 0 for t, _ in d)} of {len(d)}, valid in {sum(v > 0 for _, v in d)}"
    )


def gate_layer_seeds(path: str, tag: str = "") -> dict:
    """{K: {seed: (test, valid)}} of the "gK-sS" lines ("gK-sS-TAG" with TAG) of a gate-run
    file such as gate-layer-distillation.txt: the recipe's model (the better of own weights
    and refit on valid) on test and valid."""
    found: dict = {}
    pattern = (
        r"g([0-9]+)-s([0-9]+)" + (f"-{tag}" if tag else "") + r": own valid [0-9.]+; "
        r"refit valid [0-9.]+; best \S+ test ([0-9.]+) valid ([0-9.]+)"
    )
    for m in line_matches(path, pattern):
        scores = (float(m.group(3)), float(m.group(4)))
        found.setdefault(int(m.group(1)), {})[int(m.group(2))] = scores
    return found


def gate_layer_runs(path: str, tag: str = "") -> dict:
    """{K: [(test, valid), ...]} of gate_layer_seeds, in seed order."""
    return {k: [r[s] for s in sorted(r)] for k, r in gate_layer_seeds(path, tag).items()}


def restart_runs(by_seed: dict, n: int, then=None) -> dict:
    """{K: [(test, valid), ...]} of prune-pipelined.sh --restarts N --seed S for S = 1, N+1,
    2N+1, ...: of the gate runs of seeds S..S+N-1 (only complete groups) the one with the best
    valid score (ties: the lowest seed), as the recipe chooses; THEN ({(K, seed): (test,
    valid)}) gives what to report for the chosen seed instead (its fine-tune), if there."""
    found: dict = {}
    for k, runs in by_seed.items():
        for first in range(1, max(runs, default=0) + 1, n):
            group = range(first, first + n)
            if all(s in runs for s in group):
                chosen = max(group, key=lambda s: (runs[s][1], -s))
                scores = runs[chosen] if then is None else then.get((k, chosen))
                if scores:
                    found.setdefault(k, []).append(scores)
    return found


def averaging_runs(runs: dict, start: str, model) -> dict:
    """{K: [(test, valid), ...]} of the fine-tune runs "STARTK-sS" (seed order): MODEL is
    "last" (the final model), "best" (the recipe's pruned.pt) or N (the average of the last N
    checkpoints)."""
    found: dict = {}
    for name, run in runs.items():
        m = re.fullmatch(re.escape(start) + r"([0-9]+)-s([0-9]+)", name)
        scores = run.get(model) if model in ("last", "best") else run["avg"].get(model)
        if m and scores:
            found.setdefault(int(m.group(1)), []).append((int(m.group(2)), scores))
    return {k: [scores for _, scores in sorted(r)] for k, r in found.items()}


def stage_6r(runs: dict) -> dict:
    """The fine-tune lines of gate seeds 1-3 (stage 6r fine-tuned them without a choice)."""
    return {n: r for n, r in runs.items() if int(n.rsplit("-s", 1)[1]) <= 3}


def gate_layer_finetunes(path: str) -> dict:
    """{(K, gate seed): (test, valid)} of the "ftK-sS" lines (the recipe's model)."""
    found = {}
    for name, run in fine_tune_lines(path).items():
        m = re.fullmatch(r"ft([0-9]+)-s([0-9]+)", name)
        if m and "best" in run:
            found[(int(m.group(1)), int(m.group(2)))] = run["best"]
    return found


def line_matches(path: str, pattern: str) -> list:
    """The matches of PATTERN at the start of PATH's lines (stripped), in line order; none for
    a missing file."""
    if not os.path.isfile(path):
        return []
    with open(path, encoding="utf-8") as f:
        return [m for m in (re.match(pattern, line.strip()) for line in f) if m]


def fine_tune_lines(path: str) -> dict:
    """{NAME: {"best": (test, valid), "last": (test, valid), "avg": {N: (test, valid)}}} of a
    file of bench/score_line.py lines ("NAME: best test T valid V; last test T valid V; ...")
    and bench/average_study.py lines ("NAME: avgN test T valid V")."""
    runs: dict = {}
    if not os.path.isfile(path):
        return runs
    for line in open(path, encoding="utf-8"):
        m = re.match(
            r"(\S+): best test ([0-9.]+) valid ([0-9.]+); last test ([0-9.]+) valid ([0-9.]+)", line
        )
        if m:
            run = runs.setdefault(m.group(1), {"avg": {}})
            run["best"] = (float(m.group(2)), float(m.group(3)))
            run["last"] = (float(m.group(4)), float(m.group(5)))
            continue
        m = re.match(r"(\S+): avg([0-9]+) test ([0-9.]+) valid ([0-9.]+)", line)
        if m:
            runs.setdefault(m.group(1), {"avg": {}})["avg"][int(m.group(2))] = (
                float(m.group(3)),
                float(m.group(4)),
            )
    return runs


def finetune_setting_runs(path: str, setting: str, start: str = "k") -> dict:
    """{K: [(test, valid), ...]} of SETTING's lines "STARTK-SETTING-sSEED: ..." in a
    finetune-settings.txt (best checkpoint), seed order."""
    runs: dict = {}
    for name, run in fine_tune_lines(path).items():
        m = re.fullmatch(re.escape(start) + r"([0-9]+)-(.+)-s([0-9]+)", name)
        if m and m.group(2) == setting and "best" in run:
            runs.setdefault(int(m.group(1)), []).append((int(m.group(3)), run["best"]))
    return {k: [scores for _, scores in sorted(r)] for k, r in runs.items()}


def averaging_lines(runs: dict) -> list:
    """The checkpoint-averaging table: each run's final model against the averages of its last
    N checkpoints, then the mean change and how many runs each average improves on valid."""
    runs = {name: run for name, run in runs.items() if run["avg"] and "last" in run}
    if not runs:
        return []
    ns = sorted({n for run in runs.values() for n in run["avg"]})

    def cell(scores) -> str:
        return f"{scores[0]:.2f} ({scores[1]:.2f})" if scores else ""

    lines = [
        "| fine-tune run | final model (update 270) | "
        + " | ".join(f"average of the last {n}" for n in ns)
        + " |",
        "|---|---|" + "---|" * len(ns),
    ]
    for name, run in runs.items():
        lines.append(
            f"| {name} | {cell(run['last'])} | "
            + " | ".join(cell(run["avg"].get(n)) for n in ns)
            + " |"
        )
    change = []
    for n in ns:
        pairs = [(run["avg"][n], run["last"]) for run in runs.values() if n in run["avg"]]
        test = statistics.mean(a[0] - b[0] for a, b in pairs)
        valid = statistics.mean(a[1] - b[1] for a, b in pairs)
        better = sum(a[1] > b[1] for a, b in pairs)
        change.append(f"{test:+.2f} ({valid:+.2f}), valid up in {better} of {len(pairs)}")
    lines.append("| mean change against the final model | | " + " | ".join(change) + " |")
    return lines


def load(path: str):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def tuned_runs(path: str, start: str, starts: dict) -> dict:
    """{K: [(test, valid), ...]} of tuned-refit.txt's "tuned-STARTK[-sS]-lrLR[-sT]" lines at
    tune-refit.sh's learning rate, in line order, as tune-refit.sh keeps them: the tuned model
    when it decodes valid better than the model it started from (STARTS: {(K, S): (test,
    valid)}, S = 0 for a start without a gate seed), else that start; a line whose start is
    not in STARTS is left out."""
    found: dict = {}
    pattern = (re.escape(start) + r"([0-9]+)(?:-s([0-9]+))?-lr" + re.escape(TUNED_LR)
               + r"(?:-s[0-9]+)?: best test ([0-9.]+) valid ([0-9.]+)")  # fmt: skip
    for m in line_matches(path, pattern):
        k, seed = int(m.group(1)), int(m.group(2) or 0)
        if (k, seed) not in starts:
            continue
        tuned = (float(m.group(3)), float(m.group(4)))
        kept = tuned if tuned[1] > starts[(k, seed)][1] else starts[(k, seed)]
        found.setdefault(k, []).append(kept)
    return found


def tuned_default_runs(path: str) -> tuple:
    """({K: [(test, valid), ...]} of the DSP one command's kept models, {K: [(tuning seed,
    (test, valid)), ...]} of head importance's) from tuned-default.txt, in line order."""
    dsp: dict = {}
    imp: dict = {}
    for k, _, _, kept in one_command_lines(path):
        dsp.setdefault(k, []).append(kept)
    pattern = (
        r"imp([0-9]+)-s([0-9]+): untuned valid ([0-9.]+); tuned valid ([0-9.]+); "
        r"kept (tuned|untuned); test ([0-9.]+)"
    )
    for m in line_matches(path, pattern):
        valid = float(m.group(4) if m.group(5) == "tuned" else m.group(3))
        imp.setdefault(int(m.group(1)), []).append((int(m.group(2)), (float(m.group(6)), valid)))
    return dsp, imp


def untuned_starts(path: str) -> dict:
    """{K: [(test, valid), ...]} of the tuning's start (the "untuned" model, --recovery best's
    choice) in the "kK-sS" lines of tuned-default.txt or fast-default.txt, in line order."""
    found: dict = {}
    for m in line_matches(path, r"k([0-9]+)-s[0-9]+: .*untuned test ([0-9.]+) valid ([0-9.]+);"):
        found.setdefault(int(m.group(1)), []).append((float(m.group(2)), float(m.group(3))))
    return found


def one_command_seeds(path: str) -> dict:
    """{K: {S: (untuned, kept)}} of the "kK-sS" lines of tuned-default.txt, fast-default.txt or
    fast-restarts3.txt: the tuning's start (--recovery best's model) and the model kept, each
    (test, valid)."""
    found: dict = {}
    for k, seed, untuned, kept in one_command_lines(path):
        found.setdefault(k, {})[seed] = (untuned, kept)
    return found


def one_command_lines(path: str) -> list:
    """[(K, S, untuned, kept), ...] of the "kK-sS" lines of a one command's file, in line order:
    the tuning's start (--recovery best's model) and the model kept, each (test, valid)."""
    found = []
    pattern = (
        r"k([0-9]+)-s([0-9]+): .*untuned test ([0-9.]+) valid ([0-9.]+); "
        r"tuned test ([0-9.]+) valid ([0-9.]+); kept (tuned|untuned)"
    )
    for m in line_matches(path, pattern):
        untuned = (float(m.group(3)), float(m.group(4)))
        tuned = (float(m.group(5)), float(m.group(6)))
        kept = tuned if m.group(7) == "tuned" else untuned
        found.append((int(m.group(1)), int(m.group(2)), untuned, kept))
    return found


def tagged_by_k(runs: dict) -> dict:
    """{K: [scores in seed order]} of {(K, S): scores}."""
    found: dict = {}
    for (k, _), scores in sorted(runs.items()):
        found.setdefault(k, []).append(scores)
    return found


def seeded_finetunes(runs: dict, prefix: str = "ft") -> dict:
    """{(K, S): (test, valid)} of the recipe's model in the "PREFIX-kK-sS" lines of RUNS
    (fine_tune_lines)."""
    return {
        (k, s): r for k, by_seed in variant_runs(runs, prefix).items() for s, r in by_seed.items()
    }


def restarts_rows(default_path: str, restarts_path: str, n: int) -> tuple:
    """({K: [kept (test, valid)]}, {K: [its fine-tune]}) of prune-pipelined.sh --restarts N:
    the groups of gate seeds 1..N, N+1..2N, ... of DEFAULT_PATH's one commands (each run's
    --recovery best model scored on valid, the best one kept and tuned: its kept model and
    fine-tune are the seed's own), then RESTARTS_PATH's own runs ("kK-sFIRST" lines)."""
    seeds = one_command_seeds(default_path)
    ft = seeded_finetunes(fine_tune_lines(default_path))
    by_seed = {k: {s: runs[s][0] for s in runs} for k, runs in seeds.items()}
    kept = restart_runs(by_seed, n, {(k, s): seeds[k][s][1] for k in seeds for s in seeds[k]})
    tuned_ft = restart_runs(by_seed, n, ft)
    for k, runs in one_command_seeds(restarts_path).items():
        own_ft = seeded_finetunes(fine_tune_lines(restarts_path))
        for first, (_, model) in sorted(runs.items()):
            kept.setdefault(k, []).append(model)
            if (k, first) in own_ft:
                tuned_ft.setdefault(k, []).append(own_ft[(k, first)])
    return kept, tuned_ft


def one_command_seconds(path: str) -> dict:
    """{K: [wall seconds of the one command, ...]} of the "kK-sS: ...; one command N s" lines."""
    found: dict = {}
    for m in line_matches(path, r"k([0-9]+)-s[0-9]+: .*; one command ([0-9]+) s$"):
        found.setdefault(int(m.group(1)), []).append(int(m.group(2)))
    return found


def tuning_seeds(path: str, start: str) -> set:
    """{(K, T)} of tuned-refit.txt's "tuned-STARTK-lrLR[-sT]" lines (T = 1 without -sT)."""
    pattern = re.escape(start) + r"([0-9]+)-lr" + re.escape(TUNED_LR) + r"(?:-s([0-9]+))?:"
    return {(int(m.group(1)), int(m.group(2) or 1)) for m in line_matches(path, pattern)}


def tuned_finetunes(runs: dict, start: str) -> dict:
    """{K: [(name, run), ...]} of the fine-tune lines "ft-STARTK-sS[-fF]" of RUNS
    (fine_tune_lines of tuned-default.txt: S the gate or tuning seed, F the fine-tune seed,
    default 1), ordered by F, then S."""
    found: dict = {}
    for name, run in runs.items():
        m = re.fullmatch(r"ft-" + re.escape(start) + r"([0-9]+)-s([0-9]+)(?:-f([0-9]+))?", name)
        if m and "last" in run:
            order = (int(m.group(3) or 1), int(m.group(2)))
            found.setdefault(int(m.group(1)), []).append((order, name, run))
    return {k: [(n, r) for _, n, r in sorted(v, key=lambda x: x[0])] for k, v in found.items()}


def chosen_on_valid(run: dict) -> tuple:
    """finetune-pruned.sh --choose valid: the final model where it decodes valid better than
    the average of the last checkpoints (the line's "best"), else the average."""
    return run["last"] if run["last"][1] > run["best"][1] else run["best"]


def choice_lines(finetunes: dict, earlier: dict) -> list:
    """The average-or-final table: each fine-tune's average and final model, the one the
    validation set chooses, and the mean change of each against the average; then the same
    means over EARLIER (fine_tune_lines of the session-15 averaging study: its final models
    and the averages of their last 3)."""
    runs = [item for k in (36, 18, 9) for item in finetunes.get(k, [])]
    if not runs:
        return []

    def cell(scores) -> str:
        return f"{scores[0]:.2f} ({scores[1]:.2f})"

    lines = [
        f"| fine-tune run | average of the last {DEFAULT_AVERAGE} (the recipe's model) | "
        "final model | chosen on valid (`--choose valid`) |",
        "|---|---|---|---|",
    ]
    for name, run in runs:
        chosen = "final" if chosen_on_valid(run) is run["last"] else "average"
        lines.append(
            f"| {name} | {cell(run['best'])} | {cell(run['last'])} | "
            f"{cell(chosen_on_valid(run))}: {chosen} |"
        )

    def mean_change(group: list, label: str) -> str:
        change = []
        for pick in (lambda r: r["last"], chosen_on_valid):
            test = statistics.mean(pick(r)[0] - r["best"][0] for r in group)
            valid = statistics.mean(pick(r)[1] - r["best"][1] for r in group)
            change.append(f"{test:+.2f} ({valid:+.2f})")
        finals = sum(chosen_on_valid(r) is r["last"] for r in group)
        return (
            f"| {label} ({len(group)} runs) | | {change[0]} | {change[1]}, the final model "
            f"chosen in {finals} of {len(group)} |"
        )

    lines.append(mean_change([r for _, r in runs], "mean change against the average"))
    older = [
        {"best": run["avg"][DEFAULT_AVERAGE], "last": run["last"]}
        for run in earlier.values()
        if DEFAULT_AVERAGE in run["avg"] and "last" in run
    ]
    if older:
        lines.append(
            mean_change(older, "the same over session 15's averaging study (untuned starts)")
        )
    return lines


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
    settings_file = os.path.join(args.dir, FT_SETTINGS_FILE)
    averaged = fine_tune_lines(os.path.join(args.dir, AVERAGING_FILE))
    layers_file = os.path.join(args.dir, GATE_LAYERS_FILE)
    two_epochs_file = os.path.join(args.dir, TWO_EPOCHS_FILE)
    tuned_file = os.path.join(args.dir, TUNED_FILE)
    gate_starts = {
        (k, seed): scores
        for k, runs in gate_layer_seeds(layers_file).items()
        for seed, scores in runs.items()
    }
    imp_starts = {(k, 0): cells[(m, k)] for (m, k) in list(cells) if m == "importance+rec"}
    tuned_default_file = os.path.join(args.dir, TUNED_DEFAULT_FILE)
    dsp_tuned, imp_tuned_lines = tuned_default_runs(tuned_default_file)
    fast_file = os.path.join(args.dir, FAST_DEFAULT_FILE)
    dsp_fast, _ = tuned_default_runs(fast_file)
    rerun_file = os.path.join(args.dir, FAST_DEFAULT_RERUN_FILE)
    # session 29's fine-tunes, then the rerun's (at K = 9 the only ones: session 29's models
    # were gone; at K = 18 more runs: the same gate seeds drew other heads on that machine)
    dsp_fast_ft = tuned_finetunes(fine_tune_lines(fast_file), "k")
    for k, runs in tuned_finetunes(fine_tune_lines(rerun_file), "k").items():
        dsp_fast_ft.setdefault(k, []).extend(runs)
    # the restarts' first group: the rerun's seeds 1-3, whose fine-tunes exist
    fast_restarts = restarts_rows(
        rerun_file, os.path.join(args.dir, FAST_RESTARTS_FILE), FAST_RESTARTS_N
    )
    kd_file = os.path.join(args.dir, FAST_DEFAULT_KD_FILE)
    layouts = {
        layout_of(p): runs_of(one_command_lines(p), fine_tune_lines(p))
        for p in layout_files(args.dir)
    }
    split = proportional_runs(layouts)
    today, today_seconds = today_runs(args.dir)
    tune_layers_path = os.path.join(args.dir, TUNE_LAYERS_FILE)
    today_by_seed = by_seed(today)  # what each changed run is paired with
    tune_layers = tuned_layer_runs(
        tune_layers_path, fine_tune_lines(tune_layers_path), today_by_seed
    )
    tune_lr_path = os.path.join(args.dir, TUNE_LR_FILE)  # stage 6au, paired with 6as
    tune_lr = tuned_layer_runs(tune_lr_path, fine_tune_lines(tune_lr_path), today_by_seed)
    today_imp = today_importance_runs(args.dir)
    tl_imp = today_importance_runs(args.dir, TL_IMP_FILE)
    # the distilled fine-tunes of the split's models beside their labels fine-tunes
    distilled = fine_tune_lines(os.path.join(args.dir, DISTILLED_FILE))
    batch = fine_tune_lines(os.path.join(args.dir, BATCH_FILE))  # stage 6aj: --update-freq 2
    # stage 6ak: models of their own, so their labels fine-tunes are in the same file
    rebuilt = fine_tune_lines(os.path.join(args.dir, REBUILT_FILE))
    for variants in (distilled, batch):
        if variants:
            for k in NAMES:
                variants.update(fine_tune_lines(os.path.join(args.dir, proportional_file(k))))
    split_seconds = {
        k: secs
        for p in layout_files(args.dir)
        for k, secs in one_command_seconds(p).items()
        if layout_of(p) == proportional_layout(k)
    }
    tuned_ft_lines = fine_tune_lines(tuned_default_file)
    dsp_tuned_ft = tuned_finetunes(tuned_ft_lines, "k")
    imp_tuned_ft = tuned_finetunes(tuned_ft_lines, "imp")
    budget_ft_lines = fine_tune_lines(os.path.join(args.dir, BUDGET_FILE))
    budget = budget_runs(tuned_ft_lines, budget_ft_lines)
    imp_longer = tagged_finetunes(budget_ft_lines, "imp", "u")
    lr_lines = fine_tune_lines(os.path.join(args.dir, FINETUNE_LR_FILE))
    ft_lrs = {start: tagged_finetunes(lr_lines, start, "lr") for start in ("k", "imp")}
    ft_lrs = {start: lrs for start, lrs in ft_lrs.items() if lrs}
    imp_tuned = tuned_runs(tuned_file, "tuned-imp", imp_starts)
    # more tuning seeds of the same starts; a seed tuned-refit.txt has is the same run again
    # (stage 6aa remade importance's K = 18 models to fine-tune them): read once
    known = tuning_seeds(tuned_file, "tuned-imp")
    for k, runs in imp_tuned_lines.items():
        imp_tuned.setdefault(k, []).extend(r for seed, r in runs if (k, seed) not in known)
    imp_runs = finetune_setting_runs(settings_file, FT_DEFAULT_SETTING, start="imp")
    # the final models of stage 6q's importance runs are session 14's default fine-tune of it
    # (its DSP runs repeat stage 6o's, which are already read)
    for k, runs in averaging_runs(averaged, "imp", "last").items():
        imp_runs.setdefault(k, []).extend(runs)
    for method, ft_runs in (
        (FT_DEFAULT_METHOD, finetune_setting_runs(settings_file, FT_DEFAULT_SETTING)),
        (IMP_FT_DEFAULT_METHOD, imp_runs),
        (FT_AVG_METHOD, averaging_runs(averaged, "k", DEFAULT_AVERAGE)),
        (IMP_FT_AVG_METHOD, averaging_runs(averaged, "imp", DEFAULT_AVERAGE)),
        (LAYER_GATES_BEST, gate_layer_runs(layers_file)),
        # stage 6r's fine-tunes (gate seeds 1-3), not stage 6s's of the seeds restarts chose
        (LAYER_GATES_FT, averaging_runs(stage_6r(fine_tune_lines(layers_file)), "ft", "best")),
        (LAYER_GATES_RESTARTS, restart_runs(gate_layer_seeds(layers_file), RESTARTS)),
        (
            LAYER_GATES_RESTARTS_FT,
            restart_runs(
                gate_layer_seeds(layers_file), RESTARTS, gate_layer_finetunes(layers_file)
            ),
        ),
        (TWO_EPOCHS_BEST, gate_layer_runs(two_epochs_file, "e2")),
        (TWO_EPOCHS_RESTARTS, restart_runs(gate_layer_seeds(two_epochs_file, "e2"), RESTARTS)),
        (
            TWO_EPOCHS_RESTARTS_FT,
            restart_runs(
                gate_layer_seeds(two_epochs_file, "e2"),
                RESTARTS,
                gate_layer_finetunes(two_epochs_file),
            ),
        ),
        (TUNED_GATES, tuned_runs(tuned_file, "tuned-gate", gate_starts)),
        (TUNED_IMP, imp_tuned),
        (TUNED_DEFAULT, dsp_tuned),
        (FAST_DEFAULT, dsp_fast),
        (FAST_DEFAULT_BEST, untuned_starts(fast_file)),
        (FAST_DEFAULT_RERUN, tuned_default_runs(rerun_file)[0]),
        (FAST_DEFAULT_FT, {k: [r["best"] for _, r in v] for k, v in dsp_fast_ft.items()}),
        (FAST_RESTARTS, fast_restarts[0]),
        (PROPORTIONAL_BEST, {k: [r["best"] for r in v] for k, v in split.items()}),
        (PROPORTIONAL, {k: [r["one"] for r in v] for k, v in split.items()}),
        (PROPORTIONAL_FT, {k: [r["ft"] for r in v if r["ft"]] for k, v in split.items()}),
        (FAST_RESTARTS_FT, fast_restarts[1]),
        (TODAY_BEST, {k: [r["best"] for r in v] for k, v in today.items()}),
        (TODAY, {k: [r["one"] for r in v] for k, v in today.items()}),
        (TODAY_FT, {k: [r["ft"] for r in v if r["ft"]] for k, v in today.items()}),
        (TODAY_IMP, today_imp[0]),
        (TODAY_IMP_FT, today_imp[1]),
        (TL_IMP, tl_imp[0]),
        (TL_IMP_FT, tl_imp[1]),
        (TUNE_LAYERS, {k: [r["one"] for r in v if r["one"]] for k, v in tune_layers.items()}),
        (TUNE_LAYERS_FT, {k: [r["ft"] for r in v if r["ft"]] for k, v in tune_layers.items()}),
        (TUNE_LR, {k: [r["one"] for r in v if r["one"]] for k, v in tune_lr.items()}),
        (TUNE_LR_FT, {k: [r["ft"] for r in v if r["ft"]] for k, v in tune_lr.items()}),
        (AUTO_KD, tagged_by_k(seeded_finetunes(distilled, "kd0.5"))),
        (AUTO_KD_HIDDEN, tagged_by_k(seeded_finetunes(distilled, "kd0.5-h1"))),
        (
            FAST_DEFAULT_KD,
            tagged_by_k(seeded_finetunes(fine_tune_lines(kd_file), "kd" + FAST_DEFAULT_KD_WEIGHT)),
        ),
        (TUNED_DEFAULT_FT, {k: [r["best"] for _, r in v] for k, v in dsp_tuned_ft.items()}),
        (
            TUNED_DEFAULT_FT_VALID,
            {k: [chosen_on_valid(r) for _, r in v] for k, v in dsp_tuned_ft.items()},
        ),
        (TUNED_IMP_FT, {k: [r["best"] for _, r in v] for k, v in imp_tuned_ft.items()}),
        (
            TUNED_IMP_FT_VALID,
            {k: [chosen_on_valid(r) for _, r in v] for k, v in imp_tuned_ft.items()},
        ),
        *(
            (
                method,
                {k: [b[n] for _, b in sorted(st.items()) if n in b] for k, st in budget.items()},
            )
            for n, method in TUNED_DEFAULT_FT_LONGER.items()
        ),
        *((m, scores_only(imp_longer.get(str(n), {}))) for n, m in TUNED_IMP_FT_LONGER.items()),
        *(
            (ft_lr_method(TUNED_DEFAULT_FT if start == "k" else TUNED_IMP_FT, lr), scores_only(b))
            for start, lrs in ft_lrs.items()
            for lr, b in sorted(lrs.items())
        ),
    ):
        for k, runs in ft_runs.items():  # the first run is the cell, the others its spread
            if not runs:
                continue
            cells[(method, k)] = runs[0]
            if len(runs) > 1:
                seeds[(method, k)] = [t for t, _ in runs[1:]]
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
    averaging = averaging_lines(averaged)
    if averaging:
        out += ["", *averaging]
    choice = choice_lines(
        {k: dsp_tuned_ft.get(k, []) + imp_tuned_ft.get(k, []) for k in (36, 18, 9)}, averaged
    )

    # dsp-pick-k's runs there are, newest first (PICK_RUNS, TUNED_PICK_RUNS)
    def picks(runs):
        return [p for p in (load(os.path.join(args.dir, d, "pick.json")) for d in runs) if p]

    # with the recipes' defaults the latest; tuned the newest and the one before it (another
    # tuning default)
    pick = (picks(PICK_RUNS) + [None])[0]
    tuned_pick, earlier_tuned_pick = (picks(TUNED_PICK_RUNS) + [None, None])[:2]
    # the newest tuned search again at other gate seeds (the same recovery and tuning)
    tuned_seeds = []
    for run, seed in TUNED_PICK_SEED_RUNS.items():
        tuned_seeds += [{"seed": seed, **p} for p in picks([run])]
    fast_seconds = one_command_seconds(fast_file)
    auto_seconds = {k: (split_seconds if split_at(k) else fast_seconds).get(k, []) for k in NAMES}
    auto_cells, auto_seeds = with_auto_split(cells, seeds)
    goals = goal_lines(
        auto_cells, auto_seeds, float(base["sacrebleu"]), pick, tuned_pick, fast_seconds,
        split_seconds, auto_seconds, today_seconds, earlier_tuned_pick, tuned_seeds,
    )  # fmt: skip
    if args.marker == "recovery":  # the recovery table: the issue-17 goals only
        goals = goals[: goals.index("")]
    parts = {f"{args.marker}-table": "\n".join(out), f"{args.marker}-goals": "\n".join(goals)}
    if args.marker == "recovery" and choice:  # the study of finetune-pruned.sh --choose
        parts["recovery-choice"] = "\n".join(choice)
    if args.marker == "recovery" and budget:  # the study of the fine-tune's length
        parts["finetune-budget"] = "\n".join(
            budget_lines(budget, float(base["sacrebleu"]), FINETUNE_LIMITS)
        )
    if args.marker == "recovery" and ft_lrs:  # the study of the fine-tune's learning rate
        parts["finetune-lr"] = "\n".join(learning_rate_lines(tuned_ft_lines, ft_lrs))
    if args.marker == "recovery" and layouts:  # stage 6ah: per-type budgets against the free one
        free: dict = {}
        for path in (fast_file, rerun_file):  # the same names in both files: read one by one
            for k, runs in runs_of(one_command_lines(path), fine_tune_lines(path)).items():
                free.setdefault(k, []).extend(runs)
        parts["layout-split"] = "\n".join(
            layout_lines({FREE: free, **layouts}, recipe_type_split())
        )
    if args.marker == "recovery" and distilled:  # stage 6ai: the split's distilled fine-tunes
        parts["split-distilled"] = "\n".join(variant_lines(distilled))
    if args.marker == "recovery" and batch:  # stage 6aj: --update-freq 2 beside labels
        parts["split-batch"] = "\n".join(variant_lines(batch, BATCH_VARIANTS))
    if args.marker == "recovery" and rebuilt:  # stage 6ak: batch size, frozen embeddings
        parts["split-rebuilt"] = "\n".join(variant_lines(rebuilt, REBUILT_VARIANTS))
    tune_dropout = tune_dropout_runs(os.path.join(args.dir, TUNE_DROPOUT_FILE))
    if args.marker == "recovery" and tune_dropout:  # stage 6an: the tuning's dropout
        parts["tune-dropout"] = "\n".join(tune_dropout_lines(tune_dropout))
    if args.marker == "recovery" and today_imp[0]:  # stage 6aq: importance at today's defaults
        old_imp_ft = ft_lrs.get("imp", {}).get(DEFAULT_FT_LR, {})
        parts["importance-today"] = "\n".join(
            importance_today_lines(
                today_imp, (imp_tuned, scores_only(old_imp_ft)), today, float(base["sacrebleu"])
            )
        )
    gate_dropout_path = os.path.join(args.dir, GATE_DROPOUT_FILE)
    gate_dropout = runs_of(one_command_lines(gate_dropout_path), fine_tune_lines(gate_dropout_path))
    if args.marker == "recovery" and gate_dropout:  # stages 6ap/6ar: the gate run at dropout 0
        parts["gate-dropout"] = "\n".join(
            paired_lines(today_by_seed, gate_dropout, ("best", "one", "ft"), ("0.2", "0"))
        )
    all_layers_path = os.path.join(args.dir, GATE_ALL_LAYERS_FILE)
    all_layers = runs_of(one_command_lines(all_layers_path), fine_tune_lines(all_layers_path))
    if args.marker == "recovery" and all_layers:  # stage 6ay: the gate run trains every layer
        parts["gate-all-layers"] = "\n".join(
            paired_lines(by_seed(tune_layers), all_layers, ("best", "one"), GATE_TRAINS)
        )
    if args.marker == "recovery" and tune_layers:  # stage 6as: the tuning of every layer
        parts["tune-layers"] = "\n".join(
            paired_lines(today_by_seed, tune_layers, ("one", "ft"), ("out_proj,fc2", "every layer"))
        )
    if args.marker == "recovery" and tune_lr:  # stage 6au: that tuning at 2e-4
        parts["tune-lr"] = "\n".join(
            paired_lines(by_seed(tune_layers), tune_lr, ("one", "ft"), ("5e-4", "2e-4"))
        )
    if args.marker == "recovery" and tl_imp[0]:  # stage 6at: importance's every-layer tuning
        parts["importance-tune-layers"] = "\n".join(
            paired_lines(
                by_seed(importance_runs(args.dir)),
                importance_runs(args.dir, TL_IMP_FILE),
                ("one", "ft"),
                ("out_proj,fc2", "every layer"),
                "tuning seed",
            )
        )
    if args.marker == "recovery":  # the README's short version (a block of its own)
        parts["recovery-summary"] = "\n".join(summary_lines(cells, base, ks))
        parts["recovery-defaults"] = "\n".join(
            defaults_lines(
                auto_cells,
                auto_seeds,
                base,
                recipe_type_split(),
                recipe_tune_layers(),
                recipe_tune_lr(),
            )  # fmt: skip
        )
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
# issue 17's limits, BLEU below unpruned by K: without weight training, and after the fine-tune
RETRAINING_FREE_LIMITS = {36: 2.0, 18: 6.0}
RETRAINING_FREE_SECONDS = 600
FINETUNE_LIMITS = {36: 0.3, 18: 1.0, 9: 2.5}


REC_BASELINES = tuple(f"{b}+rec" for b in BASELINES)
# the variant prune-pipelined.sh trains DSP gates with by default (--gate-objective distill,
# --gate-init importance)
DEFAULT_GATES = "results-sweep-impinit"
# the same gates from their own start (--gate-init none): the README's path to a fine-tune
PLAIN_START_GATES = "results-sweep-gatekdopffn"
KD_BASELINES = ("importance+rec+kd", "hard-concrete+rec+kd")


def run_values(cells: dict, seeds: dict, method: str, k: int) -> list:
    """Test sacreBLEU of every run of METHOD at K: the table's cell, then its other seeds."""
    first = [cells[(method, k)][0]] if (method, k) in cells else []
    return first + seeds.get((method, k), [])


def defaults_lines(
    cells: dict,
    seeds: dict,
    base: dict,
    type_split: str = FREE,
    tune_layers: str = "out_proj,fc2",
    tune_lr: str = "5e-4",
) -> list:
    """The README's table of what the recipes give today: DSP's one command and head
    importance + reconstruct, each without training and after the recipe's fine-tune.
    TYPE_SPLIT: prune-pipelined.sh's default --type-split, whose runs DSP's columns show
    (with proportional, once they cover every K); TUNE_LAYERS: tune-refit.sh's default
    --layers (with layers, stage 6as's runs once they cover every K); TUNE_LR: its default
    --lr (with 2e-4 and layers, stage 6au's runs once they cover every K)."""

    def newest(*methods) -> str:  # the newest default with runs at every K, else the oldest
        return next((m for m in methods if all(run_values(cells, seeds, m, k) for k in NAMES)),
                    methods[-1])  # fmt: skip

    ft_method = newest(FAST_DEFAULT_FT, ft_lr_method(TUNED_DEFAULT_FT, DEFAULT_FT_LR))
    ft_files = f"[bench/recovery/{FINETUNE_LR_FILE}](bench/recovery/{FINETUNE_LR_FILE})"
    if ft_method == FAST_DEFAULT_FT:
        ft_files = (
            f"[bench/recovery/{FAST_DEFAULT_FILE}](bench/recovery/{FAST_DEFAULT_FILE}) and "
            f"[bench/recovery/{FAST_DEFAULT_RERUN_FILE}](bench/recovery/{FAST_DEFAULT_RERUN_FILE}):"
            " the same command rerun in sessions 31-34 (the 6 gate seeds at H/8, 6 more at H/4),"
            " other gate runs than the first column's"
        )
    one, best = (
        newest(FAST_DEFAULT, TUNED_DEFAULT),
        newest(FAST_DEFAULT_BEST, f"{DEFAULT_GATES}:dsp+best"),
    )
    runs_of_dsp = "gate seeds (DSP)"
    # the split's runs once they cover every K (until then the free layout's, as newest())
    if type_split == "proportional" and newest(PROPORTIONAL, "") == PROPORTIONAL:
        one, best, ft_method = PROPORTIONAL, PROPORTIONAL_BEST, PROPORTIONAL_FT
        names = ", ".join(f"[{f}](bench/recovery/{f})" for f in map(proportional_file, (36, 18, 9)))
        ft_files = f"{names}: stage 6ah, the same gate runs as the first two columns'"
        runs_of_dsp = "gate seeds (DSP; K split among the attention types by their heads)"
    elif type_split == "auto" and newest(AUTO, "") == AUTO:  # cells of with_auto_split
        one, best, ft_method = AUTO, AUTO_BEST, AUTO_FT
        split_ks = [k for k in (36, 18, 9) if split_at(k)]
        names = ", ".join(f"[{f}](bench/recovery/{f})" for f in map(proportional_file, split_ks))
        ft_files = (
            f"{names} at {' and '.join(NAMES[k] for k in split_ks)} (stage 6ah: K split among "
            "the attention types by their heads, `--type-split auto`; the same gate runs in "
            "every DSP column) and of "
            f"[bench/recovery/{FAST_DEFAULT_FILE}](bench/recovery/{FAST_DEFAULT_FILE}) at H/2 "
            "(session 29: one top-K over all heads)"
        )
    importance_tuning = ""
    if newest(TODAY, "") == TODAY:  # today's defaults once they cover every K
        one, best, ft_method = TODAY, TODAY_BEST, TODAY_FT
        ft_files = (
            f"[bench/recovery/{TODAY_FILE}](bench/recovery/{TODAY_FILE}) at H/2 and H/8 (stage "
            "6ao) and, at H/4, stage 6ak's gate runs ([bench/recovery/"
            f"{REBUILT_FILE}](bench/recovery/{REBUILT_FILE})) tuned again at dropout 0 (stage 6an, "
            f"[bench/recovery/{TUNE_DROPOUT_FILE}](bench/recovery/{TUNE_DROPOUT_FILE})) and their "
            "fine-tunes (`t0-` lines); the same gate runs in every DSP column"
        )
        runs_of_dsp = (
            "gate seeds (DSP: today's defaults, the tuning at dropout 0, at K <= H/4 the K "
            "heads split among the attention types by their heads)"
        )
        importance_tuning = (
            " Head importance's columns: its tuning at dropout 0.1 (the default until session "
            '41; `--tune-args "--dropout 0.1"`), not measured at 0 yet.'
        )
    imp_one, imp_ft = TUNED_IMP, ft_lr_method(TUNED_IMP_FT, DEFAULT_FT_LR)
    if importance_tuning and newest(TODAY_IMP, "") and newest(TODAY_IMP_FT, ""):
        imp_one, imp_ft = TODAY_IMP, TODAY_IMP_FT
        importance_tuning = (
            " Head importance's columns: its one command at today's defaults too (its own scores, "
            f"the tuning at dropout 0; stage 6aq, [bench/recovery/{TODAY_IMP_FILE}]"
            f"(bench/recovery/{TODAY_IMP_FILE}))."
        )
    # the tuning of every layer once it is tune-refit.sh's default and covers every K
    if (
        importance_tuning
        and tune_layers == "layers"
        and newest(TUNE_LAYERS, "")
        and newest(TUNE_LAYERS_FT, "")
    ):
        one, ft_method = TUNE_LAYERS, TUNE_LAYERS_FT
        ft_files = (
            f"[bench/recovery/{TUNE_LAYERS_FILE}](bench/recovery/{TUNE_LAYERS_FILE}): stage 6as, "
            "the tuning of every transformer layer from the starts of today's gate runs (stage "
            f"6ao's at H/2 and H/8 in [bench/recovery/{TODAY_FILE}](bench/recovery/{TODAY_FILE}), "
            f"stage 6ak's at H/4 in [bench/recovery/{REBUILT_FILE}](bench/recovery/{REBUILT_FILE}))"
            ", then the recipe's fine-tune; the same gate runs in every DSP column"
        )
        runs_of_dsp = (
            "gate seeds (DSP: today's defaults, the tuning of every transformer layer at dropout "
            "0, at K <= H/4 the K heads split among the attention types by their heads)"
        )
        if newest(TL_IMP, "") and newest(TL_IMP_FT, ""):  # stage 6at's, once at every K
            imp_one, imp_ft = TL_IMP, TL_IMP_FT
            importance_tuning = (
                " Head importance's columns: its one command at today's defaults too (its own "
                "scores, the tuning of every transformer layer at dropout 0; stage 6at, "
                f"[bench/recovery/{TL_IMP_FILE}](bench/recovery/{TL_IMP_FILE}))."
            )
        else:
            importance_tuning = importance_tuning[:-1] + (
                ", with its tuning of out_proj and fc2 (the default until session 44), not "
                "measured with the tuning of every layer yet."
            )
        # and at 2e-4 once that is tune-refit.sh's default and stage 6au covers every K
        if tune_lr == "2e-4" and newest(TUNE_LR, "") and newest(TUNE_LR_FT, ""):
            one, ft_method = TUNE_LR, TUNE_LR_FT
            ft_files = (
                f"[bench/recovery/{TUNE_LR_FILE}](bench/recovery/{TUNE_LR_FILE}): stage 6au, "
                "the tuning of every transformer layer at learning rate 2e-4 from the starts of "
                f"today's gate runs (stage 6ao's at H/2 and H/8 in [bench/recovery/{TODAY_FILE}]"
                f"(bench/recovery/{TODAY_FILE}), stage 6ak's at H/4 in [bench/recovery/"
                f"{REBUILT_FILE}](bench/recovery/{REBUILT_FILE})), then the recipe's fine-tune; "
                "the same gate runs in every DSP column"
            )
            runs_of_dsp = (
                "gate seeds (DSP: today's defaults, the tuning of every transformer layer at "
                "dropout 0 and learning rate 2e-4, at K <= H/4 the K heads split among the "
                "attention types by their heads)"
            )
            importance_tuning = importance_tuning[:-1] + (
                ", at learning rate 5e-4 (tune-refit.sh's default until session 46), not "
                "measured at 2e-4 yet."
            )
    columns = (
        (one, "DSP, the one command (tuned refit)"),
        (best, "DSP, `--recovery best` (no weight training)"),
        (ft_method, "DSP, the one command + fine-tune"),
        (imp_one, "head importance, its one command (reconstruct + tuned refit)"),
        (imp_ft, "head importance, its one command + fine-tune"),
    )

    def cell(method, k) -> str:
        got = run_values(cells, seeds, method, k)
        if not got:
            return "-"
        if len(got) == 1:
            return f"{got[0]:.2f} (1 run)"
        return f"{statistics.mean(got):.2f} ({min(got):.2f}-{max(got):.2f}, {len(got)} runs)"

    lines = [
        f"Unpruned (72 heads): **{base['sacrebleu']:.2f}**. Cells: test_2016 sacreBLEU, mean "
        f"(min-max, runs) over {runs_of_dsp}, tuning seeds (importance's one command) and "
        "fine-tune seeds; the fine-tune is the recipe's (270 updates, learning rate "
        f"{DEFAULT_FT_LR}, dropout 0.1, the average of the last {DEFAULT_AVERAGE} checkpoints) of "
        "the one command's model (its runs: the lines of "
        f"{ft_files}); - not run.{importance_tuning}",
        "",
        "| heads kept | " + " | ".join(label for _, label in columns) + " |",
        "|---|" + "---|" * len(columns),
    ]
    for k in (36, 18, 9):
        lines.append(
            f"| {k} of 72 ({NAMES[k]}) | " + " | ".join(cell(m, k) for m, _ in columns) + " |"
        )
    return lines


def goal_lines(
    cells: dict,
    seeds: dict,
    unpruned: float,
    pick=None,
    tuned_pick=None,
    seconds=None,
    split_seconds=None,
    auto_seconds=None,
    today_seconds=None,
    earlier_tuned_pick=None,
    tuned_seed_picks=(),
) -> list:
    """The issue's goals, measured from the table: met, not met, or not measured yet.
    ``tuned_pick``: the newest dsp-pick-k --recovery tuned run, ``earlier_tuned_pick`` the one
    before it (another default tuning), each pick.json; ``tuned_seed_picks``: pick.json of
    searches at other gate seeds (their ``seed``), counted with ``tuned_pick`` where they
    used its recovery and tuning.
    ``seconds``: {K: [wall seconds of the one command]} (fast-default.txt); ``split_seconds``
    the same of the one command with --type-split proportional (stage 6ah)."""

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
            gap = f"{unpruned - b:.2f} below" if b <= unpruned else f"{b - unpruned:.2f} above"
            parts.append(f"{NAMES[k]}: {b:.2f}{runs}, {gap} (limit {limit})")
            failed = failed or unpruned - b > limit
        verdict = "**not met**" if failed else ("not measured yet" if missing else "met")
        return "; ".join(parts) + f" | {verdict} |"

    def values(method, k) -> list:
        return run_values(cells, seeds, method, k)

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

    def pick_goal(pick=pick) -> str:
        if not pick or "chosen_k" not in pick:
            return "not run yet | not measured yet |"
        k, total = int(pick["chosen_k"]), int(pick.get("total_heads", 72))
        removed = total - k
        recovery = pick.get("recovery", "none")
        return (f"K = {k} ({removed} of {total} heads removed, recovery {recovery}) | "
                f"{'met' if removed * 3 >= total else '**not met**'} |")  # fmt: skip

    def seeds_pick_goal(pick, others) -> str:
        """pick_goal over PICK (its seed, default 1) and the OTHERS of the same settings."""
        if not pick:
            return pick_goal(pick)
        same = ("recovery", "tune_args")
        runs = [pick] + [o for o in others if all(o.get(f) == pick.get(f) for f in same)]
        runs = [r for r in runs if r and "chosen_k" in r]
        if len(runs) < 2:
            return pick_goal(pick)
        ks = [int(r["chosen_k"]) for r in runs]
        total = int(pick.get("total_heads", 72))
        seeds = " / ".join(str(r.get("seed", 1)) for r in runs)
        removed = " / ".join(str(total - k) for k in ks)
        met = all((total - k) * 3 >= total for k in ks)
        return (f"K = {' / '.join(map(str, ks))} at gate seeds {seeds} ({removed} of {total} "
                f"heads removed, recovery {pick.get('recovery', 'none')}) | "
                f"{'met' if met else '**not met**'} |")  # fmt: skip

    def within_minutes(method, limits, timed=seconds, budget_s=RETRAINING_FREE_SECONDS) -> str:
        """within(), and every run at those K (TIMED: {K: [seconds]}) under BUDGET_S seconds."""
        bleu, verdict = within(method, limits).removesuffix(" |").rsplit(" | ", 1)
        runs = [t for k in limits for t in (timed or {}).get(k, [])]
        if not runs:
            return f"{bleu}; wall time not measured | not measured yet |"
        fast = max(runs) < budget_s
        if verdict == "met" and not fast:
            verdict = "**not met**"
        return (f"{bleu}; the one command {min(runs)}-{max(runs)} s over {len(runs)} runs "
                f"(limit {budget_s} s) | {verdict} |")  # fmt: skip

    def variant_rows(
        what: str,
        methods: tuple,
        timed: dict,
        rivals: tuple = (),
        rival_recovery: str = "reconstruct + the same tuned refit",
    ) -> list:
        """The goal rows of a variant WHAT of the one command: its METHODS (the one command,
        --recovery best, + fine-tune) within the limits (the first also in time: TIMED) and
        against head importance's one command (RIVALS: it and its fine-tune; default its
        tuning at 0.1; RIVAL_RECOVERY says what recovery the rival's one command had)."""
        one, best, ft = methods
        imp_one, imp_ft = rivals or (TUNED_IMP, ft_lr_method(TUNED_IMP_FT, DEFAULT_FT_LR))
        return [
            f"| {what}, in full: DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4, each run "
            "under 10 minutes alone on 2 cores | "
            + within_minutes(one, RETRAINING_FREE_LIMITS, timed),
            f"| {what}, `--recovery best`: DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
            + within(best, RETRAINING_FREE_LIMITS),
            f"| {what}: DSP at least as good as head importance's one command ({rival_recovery}) "
            "| " + versus(one, (imp_one,)),
            f"| {what} + the recipe's 270-update fine-tune: DSP + fine-tune within 0.3 at H/2, "
            "1.0 at H/4, 2.5 at H/8 | " + within(ft, FINETUNE_LIMITS),
            f"| {what} + fine-tune: DSP at least as good as head importance's one command + the "
            "same fine-tune | " + versus(ft, (imp_ft,)),
        ]

    # head importance at today's defaults once its one command and fine-tune cover every K
    today_imp = all(values(m, k) for m in (TODAY_IMP, TODAY_IMP_FT) for k in NAMES)
    # and with the tuning of every layer (stage 6at), the same recovery as DSP's below
    tl_imp = all(values(m, k) for m in (TL_IMP, TL_IMP_FT) for k in NAMES)

    default = f"{DEFAULT_GATES}:dsp"  # the cells of prune-pipelined.sh's default gates
    return [
        "| goal (issue 17: with recovery) | measured | met |",
        "|---|---|---|",
        "| retraining-free: DSP (default gates) + reconstruct within 2.0 BLEU of unpruned at "
        "H/2, 6.0 at H/4 | " + within(default + "+rec", RETRAINING_FREE_LIMITS),
        "| retraining-free with the recipes' default recovery: DSP (default gates, best on valid "
        "of the gate run's own output layers, which the gate run trains, or the refit) within "
        "2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(default + "+best", RETRAINING_FREE_LIMITS),
        "| retraining-free with the recipes' default since session 29, the one command in full "
        "(importance scores per sentence, gate run, both recoveries, tuned refit, the validation "
        "decodes; the tuning trains out_proj and fc2, the layers the gate run trains, for a "
        "second epoch with the gates fixed: no other weight): DSP within 2.0 BLEU of unpruned "
        "at H/2, 6.0 at H/4, each run under 10 minutes alone on 2 cores | "
        + within_minutes(FAST_DEFAULT, RETRAINING_FREE_LIMITS),
        "| retraining-free with `--recovery best` since session 29 (the tuning's start in the "
        "same runs: no weight training beyond the gate run's): DSP within 2.0 BLEU of unpruned "
        "at H/2, 6.0 at H/4 | " + within(FAST_DEFAULT_BEST, RETRAINING_FREE_LIMITS),
        "| the one command since session 29, DSP, at least as good as head importance's "
        "(reconstruct + the same tuned refit) | " + versus(FAST_DEFAULT, (TUNED_IMP,)),
        "| the one command since session 29 + the recipe's 270-update fine-tune (learning rate "
        "5e-4): DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(FAST_DEFAULT_FT, FINETUNE_LIMITS),
        *variant_rows(
            "the one command with K split among the attention types by their heads (sessions "
            "35-36, `--type-split proportional`)",
            (PROPORTIONAL, PROPORTIONAL_BEST, PROPORTIONAL_FT),
            split_seconds,
        ),
        *variant_rows(
            "the recipes' default since session 36 (`--type-split auto`: K split among the "
            "attention types by their heads where K <= H/4, one top-K over all heads above)",
            (AUTO, AUTO_BEST, AUTO_FT),
            auto_seconds,
        ),
        *variant_rows(
            "the recipes' default since session 41 (the tuning at dropout 0; `--type-split "
            "auto`; at H/4 stage 6ak's gate runs tuned again, their time the one command's with "
            "the tuning at 0.1; head importance's one command "
            + ("at today's defaults too, stage 6aq)" if today_imp else "tuned at 0.1)"),
            (TODAY, TODAY_BEST, TODAY_FT),
            today_seconds,
            (TODAY_IMP, TODAY_IMP_FT) if today_imp else (),
        ),
        *(
            variant_rows(
                "the one command with the tuning of every transformer layer (session 44, stage "
                '6as: `--tune-args "--layers layers"`, tune-refit.sh from the starts of the '
                "default's runs above; their time the one command's with the tuning of out_proj "
                "and fc2; `--recovery best` the same models as above)",
                (TUNE_LAYERS, TODAY_BEST, TUNE_LAYERS_FT),
                today_seconds,
                (TL_IMP, TL_IMP_FT) if tl_imp else (TODAY_IMP, TODAY_IMP_FT) if today_imp else (),
                "reconstruct + the same tuning of every layer, stage 6at"
                if tl_imp
                else "reconstruct + its tuning of out_proj and fc2",
            )
            if any(values(TUNE_LAYERS, k) for k in NAMES)
            else ()
        ),
        *(
            variant_rows(
                "the one command with the tuning of every transformer layer at learning rate "
                '2e-4 (session 46, stage 6au: `--tune-args "--lr 2e-4"`, tune-refit.sh from the '
                "same starts as the row above; its time the one command's with the tuning of "
                "out_proj and fc2; `--recovery best` the same models as above)",
                (TUNE_LR, TODAY_BEST, TUNE_LR_FT),
                today_seconds,
                (TL_IMP, TL_IMP_FT) if tl_imp else (),
                "reconstruct + its tuning of every layer at 5e-4, stage 6at"
                if tl_imp
                else "reconstruct + its tuning of out_proj and fc2 at dropout 0.1",
            )
            if any(values(TUNE_LR, k) for k in NAMES)
            else ()
        ),
        "| the recipes' default since session 36 + the recipe's 270-update fine-tune distilled "
        "from the unpruned model (session 37, `--teacher BASE`, KL weight 0.5): DSP + fine-tune "
        "within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | " + within(AUTO_KD, FINETUNE_LIMITS),
        "| the same with the hidden-state term as well (session 37, `--teacher BASE --train-args "
        '"--distill-hidden-weight 1"`): DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at '
        "H/8 | " + within(AUTO_KD_HIDDEN, FINETUNE_LIMITS),
        "| the distilled fine-tune the goal names (session 31: the recipe's 270 updates with "
        f"`--teacher BASE`, KL weight {FAST_DEFAULT_KD_WEIGHT}) of the one command since session "
        "29: DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(FAST_DEFAULT_KD, FINETUNE_LIMITS),
        f"| the one command with `--restarts {FAST_RESTARTS_N}` (session 31: the best of "
        f"{FAST_RESTARTS_N} gate runs on valid, then tuned) + the recipe's 270-update "
        "fine-tune: DSP + fine-tune within 2.5 at H/8 | "
        + within(FAST_RESTARTS_FT, {9: FINETUNE_LIMITS[9]}),
        "| the BLEU part of retraining-free with the recipes' default since session 23, the one "
        "command's tuned refit (it trains out_proj and fc2 for one epoch after the gate run, as "
        "the gate run does, over the goal's 10 minutes): DSP (default gates) within 2.0 BLEU of "
        "unpruned at H/2, 6.0 at H/4 | " + within(TUNED_DEFAULT, RETRAINING_FREE_LIMITS),
        "| the one command, DSP (default gates + tuned refit), at least as good as head "
        "importance's (reconstruct + the same tuned refit) | "
        + versus(TUNED_DEFAULT, (TUNED_IMP,)),
        "| retraining-free with layer distillation in the gate run (session 16, an option: "
        '`--train-args "--distill-hidden-weight 1"`, best on valid of its own output layers '
        "or the refit): DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(LAYER_GATES_BEST, RETRAINING_FREE_LIMITS),
        "| retraining-free with layer distillation and the best of 2 gate runs on valid "
        '(session 17: `--restarts 2 --train-args "--distill-hidden-weight 1"`, twice the gate '
        "training): DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(LAYER_GATES_RESTARTS, RETRAINING_FREE_LIMITS),
        "| retraining-free with layer distillation and a gate run of two epochs (session 19: "
        '`--train-args "--distill-hidden-weight 1 --max-epoch 2"`, one run, the gate training '
        "of 2 restarts): DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(TWO_EPOCHS_BEST, RETRAINING_FREE_LIMITS),
        "| retraining-free with layer distillation, two-epoch gate runs and the best of 2 on "
        "valid (`--restarts 2`, four times the gate training): DSP within 2.0 BLEU of unpruned "
        "at H/2, 6.0 at H/4 | " + within(TWO_EPOCHS_RESTARTS, RETRAINING_FREE_LIMITS),
        "| retraining-free: DSP (plain gates) + reconstruct within 2.0 BLEU of unpruned at H/2, "
        "6.0 at H/4 | " + within("dsp+rec", RETRAINING_FREE_LIMITS),
        "| retraining-free: `dsp-pick-k --tolerance 0.5` removes at least a third of the heads | "
        + pick_goal(),
        "| retraining-free, the BLEU part only, with the tuned refit (sessions 20-21: "
        '`--recovery tuned --train-args "--distill-hidden-weight 1"`; the tuning trains out_proj '
        "and fc2 for one epoch, as the gate run does, and doubles the time, over the goal's 10 "
        "minutes): DSP within 2.0 BLEU of unpruned at H/2, 6.0 at H/4 | "
        + within(TUNED_GATES, RETRAINING_FREE_LIMITS),
        "| with the tuned refit (the BLEU part only, as above): `dsp-pick-k --tolerance 0.5 "
        "--recovery tuned` removes at least a third of the heads | "
        + seeds_pick_goal(tuned_pick, tuned_seed_picks),
        *(
            [
                "| the same, the search before with the tuning of its session ("
                + (
                    f'`--tune-args "{earlier_tuned_pick["tune_args"]}"`'
                    if earlier_tuned_pick.get("tune_args")
                    else "tune-refit.sh's defaults"
                )
                + " as run then; the tuning trained out_proj and fc2 until session 44, every "
                "transformer layer since, and dsp-pick-k's tuned at tune-refit.sh's 5e-4 until "
                "session 46, at 2e-4 since) | " + pick_goal(earlier_tuned_pick)
            ]
            if earlier_tuned_pick and earlier_tuned_pick != tuned_pick
            else []
        ),
        "| distilled fine-tune: DSP + reconstruct + KD within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within("dsp+rec+kd", FINETUNE_LIMITS),
        "| 270-update fine-tune (the recipes' default until session 14: labels, dropout 0.2): DSP "
        "(default gates, default recovery: best on valid) + fine-tune within 0.3 at H/2, 1.0 at "
        "H/4, 2.5 at H/8 | " + within(default + "+best+ft", FINETUNE_LIMITS),
        "| 270-update fine-tune (session 14's default: labels, dropout 0.1, final model): DSP "
        "(default gates, default recovery: best on valid) + fine-tune within 0.3 at H/2, 1.0 at "
        "H/4, 2.5 at H/8 | " + within(FT_DEFAULT_METHOD, FINETUNE_LIMITS),
        "| 270-update fine-tune (the recipes' default since session 15: labels, dropout 0.1, "
        f"average of the last {DEFAULT_AVERAGE} checkpoints): DSP (default gates, default "
        "recovery: best on valid) + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(FT_AVG_METHOD, FINETUNE_LIMITS),
        "| 270-update fine-tune (the recipe's, dropout 0.1, average of the last "
        f"{DEFAULT_AVERAGE}) of the gates with layer distillation (one fine-tune of each gate "
        "seed's model, seeds 1-3): DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(LAYER_GATES_FT, FINETUNE_LIMITS),
        "| 270-update fine-tune (the recipe's) of the best of 2 gate runs with layer "
        "distillation (`--restarts 2`): DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at "
        "H/8 | " + within(LAYER_GATES_RESTARTS_FT, FINETUNE_LIMITS),
        "| 270-update fine-tune (the recipe's) of the best of 2 two-epoch gate runs with layer "
        "distillation: DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(TWO_EPOCHS_RESTARTS_FT, FINETUNE_LIMITS),
        "| 270-update fine-tune from the gates' own start (the README's fine-tune path for K = 36 "
        "in sessions 10-13; dropout 0.2): DSP "
        "(KL + out_proj,fc2 gates, own start: `--gate-init none --recovery reconstruct`) + "
        "reconstruct + fine-tune within 0.3 "
        "at H/2, 1.0 at H/4, 2.5 at H/8 | "
        + within(f"{PLAIN_START_GATES}:dsp+rec+ft", FINETUNE_LIMITS),
        "| DSP (default gates, default recovery: best on valid) at least as good as every "
        "baseline + reconstruct | " + versus(default + "+best", REC_BASELINES),
        "| DSP (gates with layer distillation, best on valid) at least as good as every "
        "baseline + reconstruct | " + versus(LAYER_GATES_BEST, REC_BASELINES),
        "| DSP (the best of 2 gate runs with layer distillation, best on valid) at least as "
        "good as every baseline + reconstruct | " + versus(LAYER_GATES_RESTARTS, REC_BASELINES),
        "| DSP (one two-epoch gate run with layer distillation, best on valid) at least as "
        "good as every baseline + reconstruct | " + versus(TWO_EPOCHS_BEST, REC_BASELINES),
        "| DSP (gates with layer distillation) + tuned refit at least as good as head importance "
        "+ reconstruct + the same tuned refit | " + versus(TUNED_GATES, (TUNED_IMP,)),
        "| 270-update fine-tune (the recipe's) of the one command's model since session 23 "
        "(default gates, tuned refit): DSP + fine-tune within 0.3 at H/2, 1.0 at H/4, 2.5 at "
        "H/8 | " + within(TUNED_DEFAULT_FT, FINETUNE_LIMITS),
        "| the same with `--choose valid` (session 25: the better on valid of the average of the "
        f"last {DEFAULT_AVERAGE} checkpoints and the final model): DSP + fine-tune within 0.3 at "
        "H/2, 1.0 at H/4, 2.5 at H/8 | " + within(TUNED_DEFAULT_FT_VALID, FINETUNE_LIMITS),
        *(
            f"| not the goal's budget: the same fine-tune trained on to {n} updates (`--max-update "
            f"{n}`, {n // 270} times as long, stage 6ab): DSP + fine-tune within 0.3 at H/2, 1.0 "
            "at H/4, 2.5 at H/8 | " + within(TUNED_DEFAULT_FT_LONGER[n], FINETUNE_LIMITS)
            for n in (810, 1080)
        ),
        *(
            f"| 270-update fine-tune at learning rate {m.rsplit(',lr', 1)[1]} instead of 3e-4 "
            + ("(the recipe's default since session 27, " if m.endswith(DEFAULT_FT_LR) else "(")
            + "stage 6ac): the one command + the fine-tune within 0.3 at H/2, 1.0 at H/4, "
            "2.5 at H/8 | " + within(m, FINETUNE_LIMITS)
            for m in list(LABELS)
            if m.startswith(TUNED_DEFAULT_FT + ",lr")
        ),
        *(
            f"| 270-update fine-tune at learning rate {m.rsplit(',lr', 1)[1]} (stage 6ac): DSP's "
            "one command + the fine-tune at least as good as head importance's + the same "
            "fine-tune | " + versus(m, (ft_lr_method(TUNED_IMP_FT, m.rsplit(",lr", 1)[1]),))
            for m in list(LABELS)
            if m.startswith(TUNED_DEFAULT_FT + ",lr")
        ),
        "| the one command + the recipe's fine-tune: DSP at least as good as head importance's "
        "one command (reconstruct + tuned refit) + the same fine-tune | "
        + versus(TUNED_DEFAULT_FT, (TUNED_IMP_FT,)),
        "| not the goal's budget, both trained on to 810 updates (stage 6ac): DSP at least as good "
        "as head importance's one command + the same fine-tune | "
        + versus(TUNED_DEFAULT_FT_LONGER[810], (TUNED_IMP_FT_LONGER[810],)),
        "| 270-update fine-tune of the best of 2 two-epoch gate runs: DSP + fine-tune at least "
        "as good as head importance + reconstruct + the same fine-tune | "
        + versus(TWO_EPOCHS_RESTARTS_FT, (IMP_FT_AVG_METHOD,)),
        "| 270-update fine-tune of the best of 2 gate runs with layer distillation: DSP + "
        "fine-tune at least as good as head importance + reconstruct + the same fine-tune | "
        + versus(LAYER_GATES_RESTARTS_FT, (IMP_FT_AVG_METHOD,)),
        "| 270-update fine-tune of the gates with layer distillation: DSP + fine-tune at least "
        "as good as head importance + reconstruct + the same fine-tune | "
        + versus(LAYER_GATES_FT, (IMP_FT_AVG_METHOD,)),
        "| 270-update fine-tune (session 14's default, dropout 0.1, final model): DSP (default "
        "gates, default recovery) + fine-tune at least as good as head importance + reconstruct + "
        "the same fine-tune | " + versus(FT_DEFAULT_METHOD, (IMP_FT_DEFAULT_METHOD,)),
        "| 270-update fine-tune (the recipes' default since session 15, dropout 0.1, average of "
        f"the last {DEFAULT_AVERAGE}): DSP (default gates, default recovery) + fine-tune at least "
        "as good as head importance + reconstruct + the same fine-tune | "
        + versus(FT_AVG_METHOD, (IMP_FT_AVG_METHOD,)),
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
        + within("dsp+ft", FINETUNE_LIMITS),
        "| no fine-tune: DSP at least as good as the best baseline at each K | "
        + versus("dsp", BASELINES),
        "| fine-tuned: DSP + ft at least as good as the best fine-tuned baseline | "
        + versus("dsp+ft", ("importance+ft", "hard-concrete+ft")),
        "| the default schedule at least as good as the reference schedule | "
        + versus("dsp", ("dsp-ref",)),
    ]


if __name__ == "__main__":
    sys.exit(main())
