"""dsp-strip: remove pruned attention heads from a checkpoint.

    dsp-strip --input checkpoints/checkpoint_best.pt --output checkpoints/pruned.pt

keeps the heads of the trained gate's test mask (transformer_dsp checkpoints).
Baselines choose the heads themselves and also take stock fairseq
``transformer`` checkpoints:

    dsp-strip --input CKPT --output PRUNED --importance scores.json --heads-to-keep K
    dsp-strip --input CKPT --output PRUNED --random --heads-to-keep K --seed S
    dsp-strip --input CKPT --output PRUNED --importance scores.json --heads-per-attention 2,2

(--importance: the K heads ranked most important by ``dsp-importance``;
--random: K heads drawn uniformly, the same for the same seed;
--heads-per-attention ENC,DEC instead of K: the same number of heads in every attention
of a stack, chosen by the same rule within each attention: a uniform layout, which
``dsp-export-ct2`` exports to CTranslate2 without padding.)

The result needs the plugin to load: ``fairseq-generate DATA --user-dir "$(dsp-user-dir)" --path PRUNED``
and, for a gated checkpoint, translates exactly as the masked model does, with
fewer parameters.
"""

from __future__ import annotations

import argparse
import os
import sys

from .reconstruct import add_reconstruction_options, run_reconstruction

# torch and fairseq are imported in main(), after the arguments are parsed: --help and
# a mistyped option answer at once instead of after ~3 s of imports.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-strip", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--input", required=True, help="checkpoint to prune")
    parser.add_argument("--output", required=True, help="where to write the stripped checkpoint")
    how = parser.add_mutually_exclusive_group()
    how.add_argument(
        "--importance",
        metavar="SCORES.json",
        help="keep the --heads-to-keep most important heads of this dsp-importance file",
    )
    how.add_argument(
        "--random", action="store_true", help="keep --heads-to-keep heads chosen at random"
    )
    parser.add_argument(
        "--heads-to-keep",
        type=int,
        metavar="K",
        help="with --importance/--random: number of heads to keep (all attentions together)",
    )
    parser.add_argument(
        "--heads-per-attention",
        metavar="ENC,DEC",
        help="with --importance/--random, instead of --heads-to-keep: keep ENC heads in every "
        "encoder self-attention and DEC in every decoder self- and cross-attention",
    )
    parser.add_argument("--seed", type=int, help="with --random: random seed (default: 1)")
    parser.add_argument(
        "--force", action="store_true", help="replace an existing --output (refused without it)"
    )
    parser.add_argument("--quiet", action="store_true", help="do not print the table")
    parser.add_argument(
        "--reconstruct",
        action="store_true",
        help="refit the kept heads' output projections so that each pruned attention "
        "reproduces the unpruned model on training batches (needs --data; dsp-reconstruct)",
    )
    parser.add_argument(
        "--data",
        metavar="DIR",
        help="with --reconstruct: the fairseq binaries folder the model was trained on",
    )
    parser.add_argument(
        "--unpruned",
        metavar="CKPT",
        help="with --reconstruct: the unpruned model to reproduce (default: the input with "
        "all its heads; give the base when the input's weights were trained with its gates, "
        "e.g. --train-gates-with)",
    )
    parser.add_argument(
        "--unreconstructed-output",
        metavar="PATH",
        help="with --reconstruct: also write the stripped model before the refit to PATH (its "
        "table and 'wrote PATH' printed first): both candidates of a recovery choice from one "
        "load of the model",
    )
    add_reconstruction_options(parser)
    return parser


def check_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    chosen = args.importance is not None or args.random
    layout = args.heads_per_attention is not None
    if chosen and (args.heads_to_keep is None) == (not layout):
        parser.error(
            "--importance/--random need --heads-to-keep K or --heads-per-attention ENC,DEC"
        )
    if not chosen and (args.heads_to_keep is not None or layout):
        parser.error(
            "--heads-to-keep (or --heads-per-attention) needs --importance or --random; without "
            "them the trained gate's test mask (and the budget it was trained for) decides"
        )
    if args.seed is not None and not args.random:
        parser.error("--seed is only used with --random")
    if args.reconstruct and not args.data:
        parser.error(
            "--reconstruct needs --data DIR: the fairseq binaries folder the model was trained "
            "on (its train split is the calibration data)"
        )
    if (args.data or args.unpruned or args.unreconstructed_output) and not args.reconstruct:
        parser.error(
            "--data, --unpruned and --unreconstructed-output are only used with --reconstruct"
        )
    if args.unreconstructed_output and os.path.abspath(args.unreconstructed_output) in {
        os.path.abspath(args.output),
        os.path.abspath(args.input),
    }:
        parser.error("--unreconstructed-output must differ from --input and --output")


def chosen_heads(args: argparse.Namespace, state: dict):
    """Kept heads for --importance/--random, or None for the gate's test mask."""
    from ..checkpoint_io import CheckpointError
    from ..importance.scores_file import ranking_for_model, read_importance
    from ..models.head_layout import heads_per_slot
    from ..pruning.selection import (
        check_heads_to_keep,
        kept_from_ranking,
        kept_from_ranking_per_attention,
        random_kept,
        random_kept_per_attention,
    )
    from ..pruning.strip import prunable_slots

    if args.importance is None and not args.random:
        return None
    slots = prunable_slots(state)
    seed = 1 if args.seed is None else args.seed
    try:
        if args.heads_per_attention is not None:
            per_slot = heads_per_slot(slots, args.heads_per_attention)
            if args.random:
                return random_kept_per_attention(slots, per_slot, seed)
            ranking = ranking_for_model(read_importance(args.importance), slots, args.importance)
            return kept_from_ranking_per_attention(slots, ranking, per_slot)
        check_heads_to_keep(args.heads_to_keep, slots)
        if args.random:
            return random_kept(slots, args.heads_to_keep, 1 if args.seed is None else args.seed)
        ranking = ranking_for_model(read_importance(args.importance), slots, args.importance)
        return kept_from_ranking(slots, ranking, args.heads_to_keep)
    except ValueError as err:
        raise CheckpointError(str(err)) from err


def output_exists(input_path: str, output_path: str) -> bool:
    """An existing file at --output that is not the input.

    A missing input, an output that is the input or a folder have their own messages later.
    """
    if not os.path.isfile(input_path) or not os.path.lexists(output_path):
        return False
    if os.path.isdir(output_path) or os.path.abspath(input_path) == os.path.abspath(output_path):
        return False
    return not (os.path.exists(output_path) and os.path.samefile(input_path, output_path))


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    check_options(parser, args)
    import dsp_fairseq

    # fairseq (~3 s to import) only where it is needed: the refit runs the models, and a
    # stock checkpoint's architecture is looked up in fairseq's registry (models.stock);
    # stripping a gated checkpoint is tensor surgery on its state
    if args.reconstruct:
        dsp_fairseq.register()
    from ..checkpoint_io import CheckpointError, load_checkpoint, save_checkpoint_atomic
    from ..pruning.strip import raise_if_unusable_output, strip_checkpoint

    try:
        raise_if_unusable_output(args.input, args.output)
        state = load_checkpoint(args.input)
        new_state, report = strip_checkpoint(state, kept=chosen_heads(args, state))
        # After the input's checks (their messages say more), before anything is written:
        # a rerun must not silently replace a pruned model (perhaps fine-tuned since).
        outputs = [("--output", args.output)]
        if args.unreconstructed_output:
            outputs.append(("--unreconstructed-output", args.unreconstructed_output))
            raise_if_unusable_output(
                args.input, args.unreconstructed_output, "--unreconstructed-output"
            )
        for option, path in outputs:
            if output_exists(args.input, path) and not args.force:
                raise CheckpointError(
                    f"{option} {path} exists; pass --force to replace it or choose another path"
                )
        rec_report = None
        if args.unreconstructed_output:
            save_checkpoint_atomic(new_state, args.unreconstructed_output, mode_like=args.input)
            if not args.quiet:
                print(report.table())
                print(f"wrote {args.unreconstructed_output}", flush=True)
        if args.reconstruct:
            teacher = state if args.unpruned is None else load_checkpoint(args.unpruned)
            new_state, rec_report = run_reconstruction(args, new_state, teacher, "dsp-strip")
        save_checkpoint_atomic(new_state, args.output, mode_like=args.input)
    except CheckpointError as err:
        print(f"dsp-strip: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(report.table())
        if rec_report is not None:
            print(rec_report.table())
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
