#!/usr/bin/env python3
"""Train a joint sentencepiece model and encode parallel text into pieces.

sentencepiece_prep.py train --model-prefix OUT/spm --vocab-size 8000 FILE...
sentencepiece_prep.py encode --model OUT/spm.model --input IN --output OUT
"""

import argparse
import os
import sys

import sentencepiece as spm


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    train = sub.add_parser("train")
    train.add_argument("--model-prefix", required=True)
    train.add_argument("--vocab-size", type=int, default=8000)
    train.add_argument("files", nargs="+")
    enc = sub.add_parser("encode")
    enc.add_argument("--model", required=True)
    enc.add_argument("--input", required=True)
    enc.add_argument("--output", required=True)
    args = parser.parse_args(argv)

    if args.cmd == "train":
        missing = [f for f in args.files if not os.path.isfile(f)]
        if missing:
            sys.exit(f"error: sentencepiece training input not found: {', '.join(missing)}")
        folder = os.path.dirname(os.path.abspath(args.model_prefix))
        if not os.path.isdir(folder):
            sys.exit(f"error: --model-prefix {args.model_prefix}: folder {folder} does not exist")
        try:
            spm.SentencePieceTrainer.train(
                input=",".join(args.files),
                model_prefix=args.model_prefix,
                vocab_size=args.vocab_size,
                character_coverage=1.0,
                model_type="unigram",
                input_sentence_size=2_000_000,
                shuffle_input_sentence=True,
                minloglevel=2,
            )
        except RuntimeError as err:  # e.g. "Vocabulary size too high (8000) ... <= 1188"
            sys.exit(f"error: sentencepiece training failed: {err}")
        return 0
    if not os.path.isfile(args.model):
        sys.exit(
            f"error: sentencepiece model not found: {args.model} (run the preparation script first)"
        )
    if not os.path.isfile(args.input):
        sys.exit(f"error: input text not found: {args.input}")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        sys.exit(f"error: --output {args.output}: folder {folder} does not exist")
    try:
        sp = spm.SentencePieceProcessor(model_file=args.model)
    except (RuntimeError, OSError) as err:  # empty or corrupt model file
        sys.exit(f"error: {args.model} is not a usable sentencepiece model: {err}")
    tmp = args.output + ".tmp"
    try:
        with open(args.input, encoding="utf-8") as fin, open(tmp, "w", encoding="utf-8") as fout:
            for line in fin:
                fout.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n")
        os.replace(tmp, args.output)
    finally:
        if os.path.exists(tmp):  # only after a failure: never leave half an output
            os.unlink(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
