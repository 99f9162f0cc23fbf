#!/usr/bin/env python3
"""Print the demo's summary: BLEU (sacrebleu, detokenized), identity, heads, params, time."""

import argparse
import os
import sys

import sacrebleu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--work", required=True)
    parser.add_argument("--ref", required=True)
    args = parser.parse_args()
    with open(args.ref, encoding="utf-8") as f:
        refs = [line.rstrip("\n") for line in f]
    hyps, times = {}, {}
    for name in ("masked", "stripped"):
        with open(os.path.join(args.work, f"hyp.{name}.en"), encoding="utf-8") as f:
            hyps[name] = [line.rstrip("\n") for line in f]
        with open(os.path.join(args.work, f"time.{name}")) as f:
            times[name] = float(f.read())
        if len(hyps[name]) != len(refs):
            sys.exit(f"{name}: {len(hyps[name])} hypotheses for {len(refs)} references")
    with open(os.path.join(args.work, "strip.txt"), encoding="utf-8") as f:
        print(f.read().rstrip())
    print()
    same = sum(a == b for a, b in zip(hyps["masked"], hyps["stripped"]))
    for name in ("masked", "stripped"):
        bleu = sacrebleu.corpus_bleu(hyps[name], [refs])
        print(
            f"{name:>9}: BLEU {bleu.score:5.2f}  decode {times[name]:6.1f} s "
            f"({len(refs) / times[name]:5.1f} sentences/s)   [{bleu.format(signature=False)}]"
        )
    print(f"identical translations: {same} / {len(refs)}")
    print(
        f"decode speed-up (wall clock, incl. start-up): {times['masked'] / times['stripped']:.2f}x"
    )
    return 0 if same == len(refs) else 1


if __name__ == "__main__":
    sys.exit(main())
