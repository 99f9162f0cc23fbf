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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
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
        return 0
    if not os.path.isfile(args.model):
        sys.exit(f"error: sentencepiece model not found: {args.model} (run the preparation script first)")
    sp = spm.SentencePieceProcessor(model_file=args.model)
    tmp = args.output + ".tmp"
    with open(args.input, encoding="utf-8") as fin, open(tmp, "w", encoding="utf-8") as fout:
        for line in fin:
            fout.write(" ".join(sp.encode(line.strip(), out_type=str)) + "\n")
    os.replace(tmp, args.output)
    return 0


if __name__ == "__main__":
    sys.exit(main())
