"""dsp-plot-gates: how the head gates evolve over training.

    dsp-plot-gates --checkpoints checkpoints/ --output gates
    dsp-plot-gates --log checkpoints/train.log --output gates.png
    dsp-plot-gates --checkpoints ck/checkpoint_1_100.pt ck/checkpoint_1_200.pt --log train.log \\
        --output gates

--checkpoints: folders (every *.pt in them) and/or files of one run, e.g. written
with --save-interval-updates N --keep-interval-updates -1; checkpoints without
gates (a stripped pruned.pt) are skipped. Plots every head's logit against the
update (solid: kept at the end) and the kept set per checkpoint.
--log: fairseq-train output (--log-format json or simple, e.g. the recipes' train.log
or `fairseq-train ... 2>&1 | tee train.log`); plots the gate metrics (temperature,
distance from K-hot, mask sum, penalty) and the loss. A log with none of them (tqdm
format, or not a training log) is refused rather than drawn with panels missing.
Writes OUTPUT.png and OUTPUT.svg.
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-plot-gates",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--checkpoints",
        nargs="+",
        default=[],
        metavar="PATH",
        help="checkpoint files and/or folders of one run",
    )
    parser.add_argument(
        "--log",
        nargs="+",
        default=[],
        metavar="FILE",
        help="fairseq-train log(s), --log-format json or simple",
    )
    parser.add_argument("--title", default="")
    parser.add_argument("--output", required=True, help="output path prefix (.png/.svg added)")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not args.checkpoints and not args.log:
        parser.error("give --checkpoints and/or --log")
    from ..checkpoint_io import CheckpointError
    from ..plots.common import PlotError, output_prefix, save_figure
    from ..plots.gates import checkpoint_paths, gate_history, plot_gate_history, read_logs

    try:
        output_prefix(args.output)
        hist = gate_history(checkpoint_paths(args.checkpoints)) if args.checkpoints else None
        series = read_logs(args.log, strict=True) if args.log else None
        paths = save_figure(plot_gate_history(hist, series, args.title), args.output)
    except (PlotError, CheckpointError, ValueError) as err:
        print(f"dsp-plot-gates: error: {err}", file=sys.stderr)
        return 2
    if hist is not None:
        print(
            f"{len(hist.updates)} checkpoints with gates (updates {hist.updates[0]}.."
            f"{hist.updates[-1]})"
            + (f"; skipped {', '.join(hist.skipped)}" if hist.skipped else "")
        )
    print(f"wrote {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
