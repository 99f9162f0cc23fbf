#!/usr/bin/env python3
"""IWSLT14 German-English text: the standard split of fairseq's prepare-iwslt14.sh.

    iwslt14_text.py extract --archive de-en.tgz --out TEXT_DIR
    iwslt14_text.py extract --orig-dir de-en/ --out TEXT_DIR
    iwslt14_text.py clean-split --tok-dir TOK --raw-dir RAW --text-dir TEXT

``extract`` reads the archive's ``train.tags.de-en.{de,en}`` (XML metadata lines
dropped, ``<title>``/``<description>`` tags removed) into ``train.{de,en}`` and
the ``<seg>`` lines of IWSLT14.TED.dev2010, IWSLT14.TEDX.dev2012 and
IWSLT14.TED.tst2010-2012 into ``test.{de,en}``, untokenized.

``clean-split`` takes the Moses-tokenized, lowercased ``TOK/train.all.{de,en}``,
drops pairs as ``clean-corpus-n.perl -ratio 1.5 ... 1 175`` does, sends every
23rd remaining pair to valid, and writes ``TOK/{train,valid}.{de,en}`` plus the
matching untokenized lines ``RAW/{train,valid,test}.{de,en}`` (references for
sacreBLEU).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
import tarfile
from typing import Dict, Iterable, List, Sequence, Tuple

from moses_text import read_lines, write_lines

LANGS = ("de", "en")
TEST_SETS = (
    "IWSLT14.TED.dev2010",
    "IWSLT14.TEDX.dev2012",
    "IWSLT14.TED.tst2010",
    "IWSLT14.TED.tst2011",
    "IWSLT14.TED.tst2012",
)
# Metadata lines of train.tags. fairseq's script drops <url>, <talkid> and
# <keywords>; the later IWSLT releases also carry these, dropped the same way.
DROP_MARKERS = ("<url>", "<talkid>", "<keywords>")
DROP_PREFIXES = ("<speaker>", "<reviewer", "<translator", "<doc", "</doc>")
KEEP_TEXT_TAGS = re.compile(r"</?(title|description)>")
SEG = re.compile(r'<seg id="?\s*\d+\s*"?\s*>\s*(.*?)\s*(</seg>\s*)?$')
VALID_EVERY = 23
MAX_WORD_CHARS = 1000


class PrepError(Exception):
    """Input that cannot be turned into the standard split; the message says why."""


def strip_train_tags(lines: Iterable[str]) -> List[str]:
    """train.tags lines without metadata lines and without title/description tags."""
    out = []
    for line in lines:
        if any(m in line for m in DROP_MARKERS) or line.lstrip().startswith(DROP_PREFIXES):
            continue
        out.append(KEEP_TEXT_TAGS.sub("", line).strip())
    return out


def seg_lines(lines: Iterable[str]) -> List[str]:
    """The text of each ``<seg id=...>`` line of an IWSLT XML file, in order."""
    out = []
    for line in lines:
        if "<seg id" not in line:
            continue
        match = SEG.search(line.strip())
        if match is None:
            raise PrepError(f"unreadable <seg> line: {line.strip()[:80]!r}")
        out.append(match.group(1).replace("\u2019", "'"))
    return out


def clean_pairs(
    src: Sequence[str], tgt: Sequence[str], min_len: int = 1, max_len: int = 175, ratio: float = 1.5
) -> List[int]:
    """Indices of the pairs ``clean-corpus-n.perl -ratio R ... MIN MAX`` keeps.

    Token counts are whitespace-separated words; a pair is dropped when either
    side is empty, shorter than ``min_len``, longer than ``max_len``, or one
    side has more than ``ratio`` times the words of the other, or a word is
    longer than 1000 characters (the Perl script's -max-word-length default).
    """
    if len(src) != len(tgt):
        raise PrepError(f"parallel files differ in length: {len(src)} vs {len(tgt)} lines")
    keep = []
    for i, (s, t) in enumerate(zip(src, tgt)):
        ns, nt = len(s.split()), len(t.split())
        if not (min_len <= ns <= max_len and min_len <= nt <= max_len):
            continue
        if ns / nt > ratio or nt / ns > ratio:
            continue
        if max(map(len, s.split() + t.split())) > MAX_WORD_CHARS:
            continue
        keep.append(i)
    return keep


def split_every(items: Sequence[str], every: int = VALID_EVERY) -> Tuple[List[str], List[str]]:
    """(train, valid): line numbers (1-based) divisible by ``every`` go to valid."""
    train = [x for i, x in enumerate(items, 1) if i % every]
    valid = [x for i, x in enumerate(items, 1) if not i % every]
    return train, valid


# -- reading the archive ---------------------------------------------------------
def _archive_reader(archive: str):
    if not os.path.isfile(archive):
        raise PrepError(f"{archive}: no such archive (expected the IWSLT14 de-en.tgz)")
    try:
        tar = tarfile.open(archive, "r:*")
        members = {os.path.basename(m.name): m for m in tar.getmembers() if m.isfile()}
    except (tarfile.TarError, OSError, EOFError) as err:
        raise PrepError(f"{archive}: not a readable tar archive ({err})") from err

    def read(name: str) -> List[str]:
        if name not in members:
            raise PrepError(f"{archive} has no file {name} (is it the IWSLT14 de-en.tgz?)")
        data = tar.extractfile(members[name]).read().decode("utf-8")
        return data.splitlines()

    return read


def _folder_reader(folder: str):
    if not os.path.isdir(folder):
        raise PrepError(f"{folder}: no such folder (expected the extracted de-en/ folder)")

    def read(name: str) -> List[str]:
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise PrepError(f"{path} not found (is {folder} the extracted IWSLT14 de-en folder?)")
        with open(path, encoding="utf-8") as f:
            return f.read().splitlines()

    return read


def extract(read) -> Dict[str, Dict[str, List[str]]]:
    """{"train"|"test": {lang: lines}} from a reader of the archive's files."""
    text: Dict[str, Dict[str, List[str]]] = {"train": {}, "test": {}}
    for lang in LANGS:
        text["train"][lang] = strip_train_tags(read(f"train.tags.de-en.{lang}"))
        text["test"][lang] = []
        for name in TEST_SETS:
            text["test"][lang] += seg_lines(read(f"{name}.de-en.{lang}.xml"))
    for split, by_lang in text.items():
        if len(by_lang["de"]) != len(by_lang["en"]):
            raise PrepError(
                f"{split}: {len(by_lang['de'])} German but {len(by_lang['en'])} English lines "
                "after removing the XML markup; the archive looks damaged"
            )
    return text


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="cmd", required=True)
    ext = sub.add_parser("extract")
    src = ext.add_mutually_exclusive_group(required=True)
    src.add_argument("--archive", help="the IWSLT14 de-en.tgz")
    src.add_argument("--orig-dir", help="the archive's extracted de-en/ folder")
    ext.add_argument("--out", required=True, help="folder for train.{de,en} and test.{de,en}")
    cs = sub.add_parser("clean-split")
    cs.add_argument("--tok-dir", required=True)
    cs.add_argument("--raw-dir", required=True)
    cs.add_argument("--text-dir", required=True)
    cs.add_argument("--min-len", type=int, default=1)
    cs.add_argument("--max-len", type=int, default=175)
    cs.add_argument("--ratio", type=float, default=1.5)
    args = parser.parse_args(argv)

    try:
        if args.cmd == "extract":
            read = _archive_reader(args.archive) if args.archive else _folder_reader(args.orig_dir)
            text = extract(read)
            for split, by_lang in text.items():
                for lang, lines in by_lang.items():
                    write_lines(os.path.join(args.out, f"{split}.{lang}"), lines)
            print(f"  train {len(text['train']['de'])} lines, test {len(text['test']['de'])} lines")
            return 0
        tok = {lang: read_lines(os.path.join(args.tok_dir, f"train.all.{lang}")) for lang in LANGS}
        raw = {lang: read_lines(os.path.join(args.text_dir, f"train.{lang}")) for lang in LANGS}
        if len(tok["de"]) != len(raw["de"]):
            raise PrepError(
                "tokenized and untokenized train files differ in length; rerun from scratch"
            )
        keep = clean_pairs(tok["de"], tok["en"], args.min_len, args.max_len, args.ratio)
        for lang in LANGS:
            for folder, lines in ((args.tok_dir, tok[lang]), (args.raw_dir, raw[lang])):
                train, valid = split_every([lines[i] for i in keep])
                write_lines(os.path.join(folder, f"train.{lang}"), train)
                write_lines(os.path.join(folder, f"valid.{lang}"), valid)
            test = read_lines(os.path.join(args.text_dir, f"test.{lang}"))
            write_lines(os.path.join(args.raw_dir, f"test.{lang}"), test)
        print(f"  cleaning kept {len(keep)} of {len(tok['de'])} pairs")
    except (PrepError, OSError) as err:
        sys.exit(f"iwslt14_text.py: error: {err}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
