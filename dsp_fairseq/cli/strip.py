"""dsp-strip: remove pruned attention heads from a transformer_dsp checkpoint.

    dsp-strip --input checkpoints/checkpoint_best.pt --output checkpoints/pruned.pt

The result loads with ``fairseq-generate DATA --user-dir dsp_fairseq --path PRUNED``
and translates exactly as the masked model does, with fewer parameters.
"""

from __future__ import annotations

import argparse
import sys

from ..checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint_atomic
from ..pruning.strip import raise_if_unusable_output, strip_checkpoint


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-strip", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--input", required=True, help="masked transformer_dsp checkpoint")
    parser.add_argument("--output", required=True, help="where to write the stripped checkpoint")
    parser.add_argument("--quiet", action="store_true", help="do not print the table")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import dsp_fairseq  # noqa: F401  (registers the model with fairseq)

    try:
        raise_if_unusable_output(args.input, args.output)
        state = load_checkpoint(args.input)
        new_state, report = strip_checkpoint(state)
        save_checkpoint_atomic(new_state, args.output)
    except CheckpointError as err:
        print(f"dsp-strip: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(report.table())
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
