"""Heads kept per attention type by gate runs, with the validation score they were chosen by.

    python bench/head_layouts.py RUN_DIR [RUN_DIR ...] > layouts.txt

RUN_DIR is a prune-pipelined.sh save folder or one restart's ``seed-N`` folder in it: its
``pruned.pt`` (any recovery: the heads are the gates') gives the layout, its ``recovery.json``
(``--recovery best``) the validation sacreBLEU of the model the run kept. One line per run:
``PARENT/RUN: enc-self E, dec-self D, cross C; valid V`` (``valid -`` without recovery.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dsp_fairseq.checkpoint_io import load_checkpoint, model_args  # noqa: E402
from dsp_fairseq.models.head_layout import ATTENTION_TYPES, parse_head_counts  # noqa: E402


def layout_line(run_dir: str) -> str:
    """The line of one gate run (see the module docstring)."""
    args = model_args(load_checkpoint(os.path.join(run_dir, "pruned.pt")))
    counts = parse_head_counts(getattr(args, "stripped_heads", None))
    if not counts:
        raise SystemExit(f"{run_dir}/pruned.pt is not a stripped model (no --stripped-heads)")
    kept = ", ".join(f"{t} {sum(counts.get(t, []))}" for t in ATTENTION_TYPES)
    valid = "-"
    recovery = os.path.join(run_dir, "recovery.json")
    if os.path.isfile(recovery):
        with open(recovery, encoding="utf-8") as f:
            valid = f"{json.load(f)['valid_sacrebleu_chosen']:.2f}"
    path = os.path.normpath(run_dir)
    name = os.path.join(os.path.basename(os.path.dirname(path)), os.path.basename(path))
    return f"{name}: {kept}; valid {valid}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR")
    for run_dir in parser.parse_args(argv).runs:
        print(layout_line(run_dir))


if __name__ == "__main__":
    main()
