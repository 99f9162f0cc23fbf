"""dsp-plot-heads: which attention heads a checkpoint keeps (layers x heads per attention type).

    dsp-plot-heads --masked checkpoints/checkpoint_last.pt --output heads
    dsp-plot-heads --stripped checkpoints/pruned.pt --output heads.png
    dsp-plot-heads --masked M.pt --stripped S.pt --shade probs --output heads

Kept heads are circled. With --masked the cells are shaded by the gate logits
(--shade logits) or by the probability that a training mask keeps the head
(--shade probs, mean of sampled masks); with only --stripped they are shaded
kept/pruned. Writes OUTPUT.png and OUTPUT.svg.
"""

from __future__ import annotations

import argparse
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-plot-heads",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--masked", help="transformer_dsp checkpoint with gates")
    parser.add_argument("--stripped", help="checkpoint written by dsp-strip")
    parser.add_argument("--shade", choices=["logits", "probs"], default="logits")
    parser.add_argument("--title", help="figure title (default: heads kept of total)")
    parser.add_argument("--output", required=True, help="output path prefix (.png/.svg added)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.masked and not args.stripped:
        parser.error("give --masked CHECKPOINT, --stripped CHECKPOINT, or both")
    from .data_folder import missing_file

    for option, path in (("--masked", args.masked), ("--stripped", args.stripped)):
        problem = path and missing_file(option, path, "a checkpoint file (.pt)")
        if problem:
            print(f"dsp-plot-heads: error: {problem}", file=sys.stderr)
            return 2
    from ..checkpoint_io import CheckpointError
    from ..plots.common import PlotError, load_state, output_prefix, save_figure
    from ..plots.heads import combine, head_map_from_masked, head_map_from_stripped, plot_head_map

    try:
        output_prefix(args.output)
        masked = stripped = None
        if args.masked:
            masked = head_map_from_masked(
                load_state(args.masked), args.shade, os.path.basename(args.masked)
            )
        if args.stripped:
            stripped = head_map_from_stripped(
                load_state(args.stripped), os.path.basename(args.stripped)
            )
        hmap = combine(masked, stripped)
        paths = save_figure(plot_head_map(hmap, args.title), args.output)
    except (PlotError, CheckpointError, ValueError) as err:
        print(f"dsp-plot-heads: error: {err}", file=sys.stderr)
        return 2
    print(f"heads kept: {hmap.num_kept} of {hmap.num_heads}; wrote {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
