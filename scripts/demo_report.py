#!/usr/bin/env python3
"""Print the demo's summary: BLEU (sacrebleu, detokenized), identity, heads, params, time."""

import argparse
import os
import re
import sys

import sacrebleu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--ref", required=True)
    args = parser.parse_args()
    with open(args.ref, encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f]
    hyps, times, gen = {}, {}, {}
    for name in ("masked", "stripped"):
        with open(os.path.join(args.work, f"hyp.{name}.en"), encoding="utf-8") as f:
            hyps[name] = [line.rstrip("\n") for line in f]
        with open(os.path.join(args.work, f"time.{name}")) as f:
            times[name] = float(f.read())
        # fairseq-generate's own timing of the decoding loop (no start-up, no loading)
        with open(os.path.join(args.work, f"gen.{name}.log"), encoding="utf-8") as f:
            match = re.search(
                r"Translated ([\d,]+) sentences \(([\d,]+) tokens\) in ([\d.]+)s", f.read()
            )
        if not match:
            sys.exit(f"{name}: no 'Translated ... sentences' line in gen.{name}.log")
        gen[name] = (int(match[2].replace(",", "")), float(match[3]))
        if len(hyps[name]) != len(refs):
            sys.exit(f"{name}: {len(hyps[name])} hypotheses for {len(refs)} references")
    with open(os.path.join(args.work, "strip.txt"), encoding="utf-8") as f:
        print(f.read().rstrip())
    print()
    same = sum(a == b for a, b in zip(hyps["masked"], hyps["stripped"]))
    for name in ("masked", "stripped"):
        bleu = sacrebleu.corpus_bleu(hyps[name], [refs])
        tokens, seconds = gen[name]
        print(
            f"{name:>9}: BLEU {bleu.score:5.2f}  decoding {seconds:5.1f} s "
            f"({len(refs) / seconds:5.1f} sentences/s, {1000 * seconds / tokens:.2f} ms/token); "
            f"fairseq-generate wall clock {times[name]:5.1f} s   [{bleu.format(signature=False)}]"
        )
    print(f"identical translations: {same} / {len(refs)}")
    speedup = gen["masked"][1] / gen["stripped"][1]
    wall = times["masked"] / times["stripped"]
    print(f"decode speed-up: {speedup:.2f}x (decoding loop), {wall:.2f}x (whole command)")
    return 0 if same == len(refs) else 1


if __name__ == "__main__":
    sys.exit(main())
