"""Every figure of a sweep folder, in one process (run by examples/translation/sweep.sh).

    python -m dsp_fairseq.plots.report --sweep SWEEP_DIR

Writes, under SWEEP_DIR/plots/ (PNG and SVG each):
  sweep           BLEU against heads kept, one line per method (results table + baseline.json)
  heads-ROW       kept-head map of each run's stripped model, shaded by its gate logits
                  when the run trained gates (those of runs/ROW/checkpoint_best.pt or
                  checkpoint_last.pt, whichever the stripped model was made from)
  gates-ROW       gate evolution of each run that trained gates (its checkpoints and train.log)
A figure newer than all its inputs is kept, so a rerun only draws what changed.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from typing import List, Optional, Sequence

from ..checkpoint_io import CheckpointError
from .common import PlotError, load_state, save_figure
from .gates import gate_history, plot_gate_history, read_json_logs
from .heads import (
    combine,
    differing_heads,
    head_map_from_masked,
    head_map_from_stripped,
    plot_head_map,
)
from .sweep import plot_sweep, read_table


def _fresh(prefix: str, inputs: Sequence[str]) -> bool:
    """Whether PREFIX.png and PREFIX.svg exist and are newer than every input."""
    outputs = [prefix + ".png", prefix + ".svg"]
    if not all(os.path.isfile(p) for p in outputs):
        return False
    newest = max((os.path.getmtime(p) for p in inputs if os.path.exists(p)), default=0)
    return min(os.path.getmtime(p) for p in outputs) >= newest


def _has_gates(path: str) -> bool:
    try:
        return "head_gate.logits" in load_state(path)["model"]
    except CheckpointError:
        return False


def run_figures(run: str, plots: str) -> List[str]:
    """Kept-head map and gate evolution of one run folder; the paths written."""
    name = os.path.basename(run.rstrip("/"))
    written: List[str] = []
    stripped = os.path.join(run, "pruned.pt")
    gated = [
        p
        for p in (os.path.join(run, "checkpoint_best.pt"), os.path.join(run, "checkpoint_last.pt"))
        if os.path.isfile(p) and _has_gates(p)
    ]
    # the gate evolution ends at the last checkpoint
    masked: Optional[str] = gated[-1] if gated else None
    prefix = os.path.join(plots, f"heads-{name}")
    inputs = [p for p in [stripped, *gated] if os.path.isfile(p)]
    if inputs and not _fresh(prefix, inputs):
        kept = (
            head_map_from_stripped(load_state(stripped), "stripped")
            if os.path.isfile(stripped)
            else None
        )
        # shade with the gates the stripped model was made from: the pipelined recipe strips
        # the best validated gates, joint training its last ones
        maps = [head_map_from_masked(load_state(p), "logits", "gates") for p in gated]
        last = maps[-1] if maps else None
        source = next((m for m in maps if kept and not differing_heads(m, kept)), last)
        hmap = combine(source, kept)
        written += save_figure(
            plot_head_map(
                hmap, f"{name}: heads kept {hmap.num_kept} of {hmap.num_heads} (circled)"
            ),
            prefix,
        )
    if masked is None:
        return written
    snapshots = sorted(glob.glob(os.path.join(run, "checkpoint_*_*.pt"))) + [masked]
    log = os.path.join(run, "train.log")
    prefix = os.path.join(plots, f"gates-{name}")
    if not _fresh(prefix, snapshots + [log]):
        series = read_json_logs([log]) if os.path.isfile(log) else None
        fig = plot_gate_history(gate_history(snapshots), series, f"{name}: gate evolution")
        written += save_figure(fig, prefix)
    return written


def sweep_figures(sweep: str) -> List[str]:
    """All figures of a sweep folder (see the module docstring); the paths written."""
    table = os.path.join(sweep, "results")
    if not any(os.path.isfile(table + ext) for ext in (".json", ".csv")):
        raise PlotError(f"{sweep}: no results table (results.json/.csv); run sweep.sh first")
    plots = os.path.join(sweep, "plots")
    os.makedirs(plots, exist_ok=True)
    written: List[str] = []
    baseline_path = os.path.join(sweep, "baseline.json")
    inputs = [table + ".json", table + ".csv", baseline_path]
    prefix = os.path.join(plots, "sweep")
    if not _fresh(prefix, inputs):
        baseline = None
        if os.path.isfile(baseline_path):
            with open(baseline_path, encoding="utf-8") as f:
                baseline = json.load(f)
        fig = plot_sweep(
            read_table(table), baseline=baseline, title=os.path.basename(os.path.abspath(sweep))
        )
        written += save_figure(fig, prefix)
    for run in sorted(glob.glob(os.path.join(sweep, "runs", "*", ""))):
        written += run_figures(run, plots)
    return written


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sweep", required=True, help="folder written by sweep.sh")
    args = parser.parse_args(argv)
    try:
        written = sweep_figures(args.sweep)
    except (PlotError, CheckpointError, ValueError) as err:
        print(f"plots: error: {err}", file=sys.stderr)
        return 2
    print(
        f"  {len(written)} files written under {os.path.join(args.sweep, 'plots')}"
        + ("" if written else " (all figures up to date)")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
