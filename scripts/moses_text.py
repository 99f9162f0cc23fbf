#!/usr/bin/env python3
"""Moses-style text processing in Python (sacremoses), as the IWSLT14 recipe needs it.

    moses_text.py tokenize --lang de IN OUT [IN OUT ...]   tokenize + lowercase
    moses_text.py detokenize --lang en IN OUT              undo tokenize (not the case)

``tokenize`` matches ``tokenizer.perl -l L | lowercase.perl`` (escaping on, as
the Perl default: ``'`` -> ``&apos;``); ``detokenize`` undoes it, escapes included.
Every output is written to a temporary file and renamed, so an interrupted run
leaves no half-written file behind.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Iterable, Iterator, List

from sacremoses import MosesDetokenizer, MosesTokenizer


def tokenize_lines(lines: Iterable[str], lang: str, lowercase: bool = True) -> Iterator[str]:
    """Moses-tokenize (with the Perl script's default escaping) and lowercase each line."""
    tok = MosesTokenizer(lang=lang)
    for line in lines:
        out = tok.tokenize(line.strip(), return_str=True, escape=True)
        yield out.lower() if lowercase else out


def detokenize_lines(lines: Iterable[str], lang: str) -> Iterator[str]:
    """Inverse of :func:`tokenize_lines` (up to case): join tokens, unescape entities."""
    detok = MosesDetokenizer(lang=lang)
    for line in lines:
        yield detok.detokenize(line.split(), unescape=True)


def read_lines(path: str) -> List[str]:
    with open(path, encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f]


def write_lines(path: str, lines: Iterable[str]) -> None:
    """Write one line per item via a temporary file renamed into place."""
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise FileNotFoundError(f"output folder {folder} does not exist")
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(line + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    tok = sub.add_parser("tokenize", help="Moses-tokenize and lowercase")
    tok.add_argument("--lang", required=True)
    tok.add_argument("--keep-case", action="store_true", help="do not lowercase")
    tok.add_argument("files", nargs="+", metavar="IN OUT")
    det = sub.add_parser("detokenize", help="Moses-detokenize")
    det.add_argument("--lang", required=True)
    det.add_argument("files", nargs=2, metavar="IN OUT")
    args = parser.parse_args(argv)

    if len(args.files) % 2:
        parser.error("give input and output files in pairs: IN OUT [IN OUT ...]")
    pairs = list(zip(args.files[0::2], args.files[1::2]))
    missing = [src for src, _ in pairs if not os.path.isfile(src)]
    if missing:
        sys.exit(f"moses_text.py: error: input not found: {', '.join(missing)}")
    for src, dst in pairs:
        lines = read_lines(src)
        if args.cmd == "tokenize":
            out = tokenize_lines(lines, args.lang, lowercase=not args.keep_case)
        else:
            out = detokenize_lines(lines, args.lang)
        try:
            write_lines(dst, out)
        except FileNotFoundError as err:
            sys.exit(f"moses_text.py: error: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
