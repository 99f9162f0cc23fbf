"""dsp-reconstruct: refit an already pruned (stripped) model against its unpruned base.

    dsp-reconstruct --pruned pruned.pt --base checkpoint_best.pt --data data-bin \\
        --output pruned.rec.pt

Each pruned attention's output projection (the kept heads' columns and the bias)
is refit by ridge least squares so that the pruned sublayer reproduces the
unpruned model's residual stream on --calibration-batches shuffled training
batches, attention by attention in forward order (docs/methods.md,
"Reconstruction"). No weight is trained; minutes on a CPU. The output is an
ordinary stripped checkpoint (fairseq-generate, dsp-export-ct2, fine-tuning) that
records what was done in its ``dsp_reconstruction`` entry.

``dsp-strip --reconstruct --data DIR`` does the same while stripping; this command
serves models stripped before, or by another tool's choice of heads.
"""

from __future__ import annotations

import argparse
import os
import sys

# torch and fairseq are imported after the arguments are parsed (fast --help).

DEFAULT_BATCHES = 20  # = pruning.calibrate.DEFAULT_* (kept import-free here; tested equal)
DEFAULT_RIDGE = 1e-3
DEFAULT_TARGET = "residual"
DEFAULT_REFIT_FFN = True
DEFAULT_REFIT_FC1 = False
DEFAULT_REFIT_QKV = False
DEFAULT_RIDGE_TOWARD = "zero"
DEFAULT_CACHE_MB = 1024


def add_reconstruction_options(parser: argparse.ArgumentParser) -> None:
    """Options shared by dsp-reconstruct and dsp-strip --reconstruct."""
    g = parser.add_argument_group("reconstruction")
    g.add_argument(
        "--calibration-batches",
        type=_positive_int,
        default=DEFAULT_BATCHES,
        metavar="N",
        help=f"shuffled training batches to fit on (default {DEFAULT_BATCHES}: the best measured)",
    )
    g.add_argument(
        "--calibration-cache-mb",
        type=_non_negative_float,
        default=DEFAULT_CACHE_MB,
        metavar="MB",
        help="memory for the batches' inputs to the layer being refit, kept between refit "
        "jobs so that each job runs one layer instead of the model up to it (the same "
        f"result, a fraction of the time; default {DEFAULT_CACHE_MB}); batches beyond it, "
        "and all with 0, run the model from its embeddings, in memory that does not grow "
        "with --calibration-batches",
    )
    g.add_argument(
        "--calibration-max-tokens",
        type=_positive_int,
        default=4096,
        metavar="T",
        help="tokens per calibration batch (default 4096)",
    )
    g.add_argument(
        "--ridge",
        type=_non_negative_float,
        default=DEFAULT_RIDGE,
        metavar="X",
        help=f"ridge, relative to the mean diagonal of each Gram matrix (default {DEFAULT_RIDGE:g})",
    )
    g.add_argument(
        "--ridge-toward",
        choices=("zero", "current"),
        default=DEFAULT_RIDGE_TOWARD,
        help="what the ridge shrinks each refit layer towards: zero (default) or the weights "
        "the pruned model has (the unpruned model's, or what a gate run trained)",
    )
    g.add_argument(
        "--reconstruct-target",
        choices=("residual", "output"),
        default=DEFAULT_TARGET,
        help="what each pruned attention is fit to: the unpruned residual stream after the "
        "sublayer (default, the best measured) or the unpruned sublayer output alone",
    )
    g.add_argument(
        "--refit-ffn",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_REFIT_FFN,
        help="also refit each block's FFN output layer (fc2) against the unpruned block output, "
        "after the block's attentions (default: on, the best measured; bench/RESULTS.md)",
    )
    g.add_argument(
        "--refit-fc1",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_REFIT_FC1,
        help="with --refit-ffn, first refit each FFN input layer (fc1) so that its "
        "pre-activations on the pruned model's input match the unpruned model's",
    )
    g.add_argument(
        "--refit-qkv",
        action=argparse.BooleanOptionalAction,
        default=DEFAULT_REFIT_QKV,
        help="first refit each attention's kept q/k/v projection rows to the unpruned "
        "model's rows of the same heads (needs dsp-strip's record of the kept heads)",
    )
    g.add_argument("--calibration-seed", type=int, default=1, help="batch shuffling seed")


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be >= 1")
    return value


def _non_negative_float(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} must be >= 0")
    return value


def run_reconstruction(args, pruned_state: dict, base_state: dict, prog: str):
    """Refit ``pruned_state`` with the options of ``args``; progress on stderr."""
    from ..pruning.calibrate import reconstruct_checkpoint

    def say(msg: str) -> None:
        print(f"{prog}: {msg}", file=sys.stderr, flush=True)

    say(f"reconstruction on {args.calibration_batches} training batches of {args.data}")
    return reconstruct_checkpoint(
        pruned_state,
        base_state,
        args.data,
        num_batches=args.calibration_batches,
        ridge=args.ridge,
        target=args.reconstruct_target,
        refit_ffn=args.refit_ffn,
        refit_fc1=args.refit_fc1,
        refit_qkv=args.refit_qkv,
        ridge_toward=args.ridge_toward,
        max_tokens=args.calibration_max_tokens,
        seed=args.calibration_seed,
        cache_mb=args.calibration_cache_mb,
        progress=None if getattr(args, "quiet", False) else say,
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-reconstruct",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--pruned", required=True, help="stripped checkpoint to refit")
    parser.add_argument(
        "--base",
        required=True,
        help="the unpruned checkpoint it was pruned from (stock transformer or transformer_dsp)",
    )
    parser.add_argument(
        "--data",
        required=True,
        help="fairseq binaries folder the models were trained on (or a prepared corpus "
        "folder with bin/ inside); its train split is the calibration data",
    )
    parser.add_argument("--output", required=True, help="where to write the refit checkpoint")
    parser.add_argument("--force", action="store_true", help="replace an existing --output")
    parser.add_argument("--quiet", action="store_true", help="no progress, no table")
    add_reconstruction_options(parser)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    import dsp_fairseq

    dsp_fairseq.register()
    from ..checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint_atomic
    from ..pruning.strip import raise_if_unusable_output

    try:
        raise_if_unusable_output(args.pruned, args.output)
        if os.path.abspath(args.output) == os.path.abspath(args.base):
            raise CheckpointError("--output is the --base checkpoint; choose another path")
        if os.path.lexists(args.output) and not args.force:
            raise CheckpointError(
                f"--output {args.output} exists; pass --force to replace it or choose another path"
            )
        pruned = load_checkpoint(args.pruned)
        base = load_checkpoint(args.base)
        new_state, report = run_reconstruction(args, pruned, base, "dsp-reconstruct")
        save_checkpoint_atomic(new_state, args.output, mode_like=args.pruned)
    except CheckpointError as err:
        print(f"dsp-reconstruct: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(report.table())
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
