"""dsp-translate-ct2: translate stdin with a CTranslate2 model (dsp-export-ct2's output).

    dsp-translate-ct2 --model ct2-model --spm data/spm/spm.model --beam 5 \
        --batch-size 64 --threads 2 < test.de > hyp.en

Raw sentences in, raw (sentencepiece-decoded) translations out, one per line and in
order. Without --spm the input is taken as space-separated tokens and tokens are
written. The defaults follow fairseq-generate (beam 5, length penalty 1, at most 200
output tokens).
"""

from __future__ import annotations

import argparse
import sys


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dsp-translate-ct2",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--model", required=True, help="CTranslate2 model folder")
    p.add_argument("--spm", help="sentencepiece model (default: input is already tokenized)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--batch-size", type=int, default=64, help="sentences per batch")
    p.add_argument("--threads", type=int, default=1, help="CPU threads")
    p.add_argument("--max-len", type=int, default=200, help="maximum output tokens")
    p.add_argument("--length-penalty", type=float, default=1.0)
    p.add_argument(
        "--compute-type",
        default="default",
        help="CTranslate2 compute type, e.g. int8, float32 (default: as saved)",
    )
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from ..export.translate import CT2Translator

    try:
        translator = CT2Translator(args.model, args.spm, args.threads, args.compute_type)
    except (RuntimeError, ValueError, OSError) as err:
        print(f"dsp-translate-ct2: error: cannot load {args.model}: {err}", file=sys.stderr)
        return 2
    lines = sys.stdin.readlines()
    out = translator.translate(
        lines,
        beam=args.beam,
        batch_size=args.batch_size,
        max_len=args.max_len,
        length_penalty=args.length_penalty,
    )
    sys.stdout.write("".join(line + "\n" for line in out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
