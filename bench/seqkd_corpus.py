"""A prepared-corpus folder whose training split is a teacher's beam translations.

    python bench/seqkd_corpus.py --generate GEN.txt --data DIR --out DIR [--mix]

GEN.txt is ``fairseq-generate --gen-subset train`` output of the teacher without
``--post-process`` (S- and H- lines in sentencepiece pieces). OUT/bin gets the teacher's
translations binarized with DIR's dictionaries as ``train`` (sequence-level knowledge
distillation, Kim & Rush 2016), or with ``--mix`` as ``train1`` beside DIR's own ``train``
(fairseq's translation task concatenates train, train1, ...; fine-tune it with
``--upsample-primary 1``); valid/test, the dictionaries, spm/ and raw/ are links to DIR's.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys

LINE = re.compile(r"^([SH])-(\d+)\t(.*)$")


def read_generate(path: str) -> tuple[list[str], list[str]]:
    """Sources and best hypotheses of a fairseq-generate output, in dataset order."""
    src: dict[int, str] = {}
    hyp: dict[int, str] = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            m = LINE.match(line.rstrip("\n"))
            if m is None:
                continue
            i = int(m.group(2))
            if m.group(1) == "S":
                src[i] = m.group(3)
            elif i not in hyp:  # the first H line of a sentence is the best one
                hyp[i] = m.group(3).split("\t", 1)[1]
    if sorted(src) != sorted(hyp) or sorted(hyp) != list(range(len(hyp))):
        sys.exit(f"seqkd_corpus: {path} does not hold one hypothesis for every sentence 0..N-1")
    return [src[i] for i in range(len(src))], [hyp[i] for i in range(len(hyp))]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--generate", required=True)
    ap.add_argument("--data", required=True, help="the prepared corpus the teacher was trained on")
    ap.add_argument("--out", required=True)
    ap.add_argument("--mix", action="store_true", help="keep the original training split beside it")
    ap.add_argument("--src", default="de")
    ap.add_argument("--tgt", default="en")
    args = ap.parse_args()
    data, out = os.path.abspath(args.data), os.path.abspath(args.out)
    sources, hypotheses = read_generate(args.generate)
    text, tmpbin, binary = f"{out}/text", f"{out}/tmpbin", f"{out}/bin"
    os.makedirs(text, exist_ok=True)
    for lang, lines in ((args.src, sources), (args.tgt, hypotheses)):
        with open(f"{text}/train.{lang}", "w", encoding="utf-8") as f:
            f.writelines(line + "\n" for line in lines)
    shutil.rmtree(tmpbin, ignore_errors=True)
    subprocess.run(
        ["fairseq-preprocess", "--source-lang", args.src, "--target-lang", args.tgt,
         "--trainpref", f"{text}/train", "--srcdict", f"{data}/bin/dict.{args.src}.txt",
         "--tgtdict", f"{data}/bin/dict.{args.tgt}.txt", "--destdir", tmpbin, "--workers", "1"],
        check=True,
    )  # fmt: skip
    os.makedirs(binary, exist_ok=True)
    split = "train1" if args.mix else "train"
    for name in os.listdir(tmpbin):
        if name.startswith("train."):
            os.replace(f"{tmpbin}/{name}", f"{binary}/{split}{name[len('train') :]}")
    shutil.rmtree(tmpbin)
    keep = ("valid.", "test.", "dict.") + (("train.",) if args.mix else ())
    for name in os.listdir(f"{data}/bin"):
        if name.startswith(keep) and not os.path.exists(f"{binary}/{name}"):
            os.symlink(f"{data}/bin/{name}", f"{binary}/{name}")
    for sub in ("raw", "spm"):
        if not os.path.exists(f"{out}/{sub}"):
            os.symlink(f"{data}/{sub}", f"{out}/{sub}")
    print(
        f"seqkd_corpus: {len(hypotheses)} teacher translations -> {binary}/{split}", file=sys.stderr
    )


if __name__ == "__main__":
    main()
