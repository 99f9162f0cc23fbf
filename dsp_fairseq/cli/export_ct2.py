"""dsp-export-ct2: convert a stripped (or unpruned) checkpoint into a CTranslate2 model.

    dsp-export-ct2 --input checkpoints/pruned.pt --output ct2-model [--data DATA-BIN]
                   [--quantization TYPE] [--force]

Takes a stripped checkpoint (dsp-strip), a gated transformer_dsp checkpoint (exported with
its test mask's heads), an unpruned transformer_dsp or a stock fairseq transformer. The
vocabularies come from the fairseq binaries folder (dict.SRC.txt, dict.TGT.txt): --data,
else the folder recorded in the checkpoint; --data may also be the prepared corpus folder
of the recipes (prepare-*.sh), whose bin/ is then used (and said so). CTranslate2 has one head count per stack (encoder,
decoder), so an uneven layout is padded with zero heads to each stack's widest attention
(exact, but it computes those heads); a uniform layout (--heads-per-attention when training
or stripping) is exported as it is. The layout, the padding and the cost are printed.

The model folder is written beside OUTPUT and renamed into place; an existing OUTPUT is
replaced only with --force. Translate with dsp-translate-ct2.
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings

from .data_folder import DataFolderError, binaries_folder, missing_file

# torch, fairseq and ctranslate2 are imported in main(), after the arguments are parsed.


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-export-ct2",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--input", required=True, help="checkpoint to export")
    parser.add_argument("--output", required=True, help="CTranslate2 model folder to write")
    parser.add_argument(
        "--data", help="fairseq binaries folder with dict.SRC.txt and dict.TGT.txt, or the "
        "prepared corpus folder holding it in bin/ (default: the checkpoint's)"
    )  # fmt: skip
    # No fixed choices: the installed CTranslate2 says which types it accepts (checked
    # after parsing, so that --help does not load it).
    parser.add_argument(
        "--quantization",
        metavar="TYPE",
        help="weight type of the saved model: any quantization type the installed "
        "CTranslate2 accepts, e.g. int8, int8_float16, bfloat16 (default: float32; "
        "another value is refused with CTranslate2's list)",
    )
    parser.add_argument("--force", action="store_true", help="replace an existing --output")
    parser.add_argument(
        "--quiet", action="store_true", help="print nothing but errors (no layout, no fairseq log)"
    )
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    problem = missing_file("--input", args.input, "a checkpoint (.pt) to export")
    if problem:
        print(f"dsp-export-ct2: error: {problem}", file=sys.stderr)
        return 2
    data = args.data
    if data is not None:
        try:
            data, note = binaries_folder("--data", data)
        except DataFolderError as err:
            print(f"dsp-export-ct2: error: {err}", file=sys.stderr)
            return 2
        if note and not args.quiet:
            print(f"dsp-export-ct2: {note}", file=sys.stderr)
    if args.quiet:
        # fairseq logs its dictionaries at INFO, and building an attention left with no head
        # makes torch warn about a zero-element tensor: neither helps someone who asked quiet.
        logging.getLogger("fairseq").setLevel(logging.WARNING)
        warnings.filterwarnings("ignore", message="Initializing zero-element tensors")
    import dsp_fairseq

    dsp_fairseq.register()  # the model, criterion and checkpoint types, now that args are valid

    try:
        from ..export.converter import export_checkpoint
    except ImportError as err:
        print(f"dsp-export-ct2: error: {err} (pip install ctranslate2)", file=sys.stderr)
        return 2
    from ..checkpoint_io import CheckpointError

    log = (lambda *a: None) if args.quiet else print
    try:
        converter = export_checkpoint(
            args.input, args.output, data, args.quantization, args.force, log=log
        )
    except CheckpointError as err:
        print(f"dsp-export-ct2: error: {err}", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"input: {converter.description}")
        print(converter.plan.describe())
        print(f"wrote {args.output} ({args.quantization or 'float32'} weights)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
