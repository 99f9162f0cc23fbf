"""dsp-translate-ct2: translate stdin with a CTranslate2 model (dsp-export-ct2's output).

    dsp-translate-ct2 --model ct2-model --spm data/multi30k/spm/spm.model --beam 5 \\
        --batch-size 64 --threads 2 < test.de > hyp.en

Raw sentences in, raw (sentencepiece-decoded) translations out, one per line and in
order. --spm is the corpus's sentencepiece model (prepare-*.sh writes it to
DATA/spm/spm.model); with --pretokenized instead, the input is already space-separated
tokens and tokens are written. Lines are translated as they arrive, --batch-size at a
time, so a pipe gets its translations while it is still writing; a progress line goes
to stderr (every 1000 sentences, or --progress N; 0: none). The defaults follow
fairseq-generate (beam 5, length penalty 1, at most 200 output tokens).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Iterable, Iterator, List

# CTranslate2's compute types (listed here: checking them needs no ctranslate2 import).
COMPUTE_TYPES = ["default", "auto", "float32", "int8", "int8_float32", "int8_float16",
                 "int8_bfloat16", "int16", "float16", "bfloat16"]  # fmt: skip


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is too small: give a number >= 1")
    return value


def non_negative_int(text: str) -> int:
    if text.strip() == "0":
        return 0
    return positive_int(text)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dsp-translate-ct2",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="CTranslate2 model folder (dsp-export-ct2)")
    tok = p.add_mutually_exclusive_group(required=True)
    tok.add_argument("--spm", help="sentencepiece model of the corpus (DATA/spm/spm.model)")
    tok.add_argument(
        "--pretokenized",
        action="store_true",
        help="the input is space-separated sentencepiece tokens; write tokens",
    )
    p.add_argument("--beam", type=positive_int, default=5, help="beam size (default 5)")
    p.add_argument(
        "--batch-size", type=positive_int, default=64, help="sentences per batch (default 64)"
    )
    p.add_argument("--threads", type=positive_int, default=1, help="CPU threads (default 1)")
    p.add_argument(
        "--max-len", type=positive_int, default=200, help="maximum output tokens (default 200)"
    )
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument(
        "--compute-type",
        default="default",
        choices=COMPUTE_TYPES,
        help="CTranslate2 compute type (default: as saved)",
    )
    p.add_argument(
        "--progress",
        type=non_negative_int,
        default=1000,
        metavar="N",
        help="a progress line on stderr every N sentences (default 1000; 0: none)",
    )
    return p


def check_paths(args: argparse.Namespace) -> str | None:
    """The message for a --model or --spm path that cannot be right, else None."""
    if not os.path.isdir(args.model):
        what = "is a file" if os.path.exists(args.model) else "no such folder"
        return (
            f"--model {args.model}: {what}; give the CTranslate2 model folder that "
            "dsp-export-ct2 --output wrote (it holds model.bin)"
        )
    if not os.path.isfile(os.path.join(args.model, "model.bin")):
        return (
            f"--model {args.model} has no model.bin: not a CTranslate2 model folder; "
            "export one with dsp-export-ct2"
        )
    if args.spm is not None and not os.path.isfile(args.spm):
        return (
            f"--spm {args.spm}: no such file; give the corpus's sentencepiece model "
            "(prepare-*.sh writes DATA/spm/spm.model)"
        )
    return None


def batches(lines: Iterable[str], size: int) -> Iterator[List[str]]:
    """Lines in groups of ``size``; the last group may be shorter. Reads lazily, so a
    group is translated as soon as its lines have arrived."""
    batch: List[str] = []
    for line in lines:
        batch.append(line)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    message = check_paths(args)
    if message:
        print(f"dsp-translate-ct2: error: {message}", file=sys.stderr)
        return 2
    from ..export.translate import CT2Translator

    # The paths exist (checked above); what is left is a file of the wrong kind. Loading the
    # sentencepiece model on its own first lets the message name the file that is wrong.
    if args.spm is not None:
        import sentencepiece

        try:
            sentencepiece.SentencePieceProcessor(model_file=args.spm)
        except (RuntimeError, OSError) as err:
            print(
                f"dsp-translate-ct2: error: --spm {args.spm} is not a sentencepiece model "
                f"({err}); give DATA/spm/spm.model",
                file=sys.stderr,
            )
            return 2
    try:
        translator = CT2Translator(args.model, args.spm, args.threads, args.compute_type)
    except (RuntimeError, ValueError, OSError) as err:
        print(
            f"dsp-translate-ct2: error: cannot load --model {args.model}: {err} (give a folder "
            "dsp-export-ct2 wrote; on this CPU, --compute-type int8 or float32)",
            file=sys.stderr,
        )
        return 2
    done, start, next_report = 0, time.time(), args.progress
    for batch in batches(sys.stdin, args.batch_size):
        out = translator.translate(
            batch,
            beam=args.beam,
            batch_size=args.batch_size,
            max_len=args.max_len,
            length_penalty=args.length_penalty,
        )
        sys.stdout.write("".join(line + "\n" for line in out))
        sys.stdout.flush()  # the reader of a pipe gets each batch as it is done
        done += len(batch)
        if args.progress and done >= next_report:
            rate = done / max(time.time() - start, 1e-9)
            print(
                f"dsp-translate-ct2: {done} sentences ({rate:.1f}/s)", file=sys.stderr, flush=True
            )
            next_report = (done // args.progress + 1) * args.progress
    return 0


if __name__ == "__main__":
    sys.exit(main())
