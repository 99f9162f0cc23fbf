#!/usr/bin/env python3
"""Score fairseq-generate output two ways, and say which is which.

    bleu_eval.py --generate-output gen.txt --data PREPARED --output score.json

PREPARED is a folder written by prepare-multi30k.sh or prepare-iwslt14.sh. The
hypotheses are the D- lines (sentencepiece already decoded by ``--bpe
sentencepiece``), put back in corpus order.

* ``sacrebleu``: sacreBLEU's own 13a tokenization on detokenized text against
  the untokenized reference ``PREPARED/raw/SUBSET.LANG``. A corpus prepared with
  Moses tokenization and lowercasing (IWSLT14: ``PREPARED/tok/`` exists) gives
  tokenized lowercased hypotheses: they are Moses-detokenized first, and the
  score is case-insensitive (``-lc``), since such a system cannot produce case.
* ``tok_bleu``: BLEU on Moses-tokenized, lowercased text with no further
  tokenization (what multi-bleu.perl and fairseq's tokenized BLEU report, and
  what the DSP paper's tables use), against ``PREPARED/tok/SUBSET.LANG`` or, for
  an untokenized corpus (Multi30k), the raw reference tokenized the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Sequence

from moses_text import detokenize_lines, read_lines, tokenize_lines, write_lines
from sacrebleu.metrics import BLEU

SACREBLEU_LABEL = "sacreBLEU, detokenized output vs untokenized reference"
TOK_BLEU_LABEL = "tokenized BLEU (Moses-tokenized, lowercased; the paper's tables)"


class EvalError(Exception):
    pass


def hypotheses_from_generate(lines: Sequence[str]) -> List[str]:
    """The D- (detokenized) hypotheses of fairseq-generate output, in sentence-id order."""
    hyps: Dict[int, str] = {}
    for line in lines:
        if line.startswith("D-"):
            parts = line.rstrip("\n").split("\t")
            hyps[int(parts[0][2:])] = parts[2] if len(parts) > 2 else ""
    if not hyps:
        raise EvalError(
            "no D- lines in the generate output; run fairseq-generate with --bpe sentencepiece "
            "--sentencepiece-model SPM (and without --quiet)"
        )
    if sorted(hyps) != list(range(len(hyps))):
        missing = sorted(set(range(max(hyps) + 1)) - set(hyps))[:5]
        raise EvalError(
            f"generate output misses sentence ids {missing}...; run fairseq-generate with "
            "--required-batch-size-multiple 1 (fairseq drops the last N mod 8 sentences "
            "otherwise) and without --skip-invalid-size-inputs-valid-test"
        )
    return [hyps[i] for i in range(len(hyps))]


def score(
    hyps: Sequence[str], raw_refs: Sequence[str], tok_refs: Sequence[str] | None, lang: str
) -> dict:
    """Both BLEU scores of ``hyps``; ``tok_refs`` given = the corpus is tokenized+lowercased."""
    if len(hyps) != len(raw_refs):
        raise EvalError(f"{len(hyps)} hypotheses for {len(raw_refs)} references")
    tokenized = tok_refs is not None
    if tokenized:
        tok_hyps, detok_hyps = list(hyps), list(detokenize_lines(hyps, lang))
    else:
        detok_hyps = list(hyps)
        tok_hyps = list(tokenize_lines(hyps, lang))
        tok_refs = list(tokenize_lines(raw_refs, lang))
    sacre = BLEU(lowercase=tokenized)
    sacre_score = sacre.corpus_score(detok_hyps, [list(raw_refs)])
    tok = BLEU(tokenize="none", force=True)
    tok_score = tok.corpus_score(tok_hyps, [list(tok_refs)])
    return {
        "sacrebleu": round(sacre_score.score, 2),
        "sacrebleu_signature": str(sacre.get_signature()),
        "sacrebleu_label": SACREBLEU_LABEL + (" (case-insensitive)" if tokenized else ""),
        "tok_bleu": round(tok_score.score, 2),
        "tok_bleu_label": TOK_BLEU_LABEL,
        "sentences": len(hyps),
        "_detok": detok_hyps,
        "_tok": tok_hyps,
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--generate-output", required=True, help="fairseq-generate stdout")
    parser.add_argument("--data", required=True, help="prepared corpus folder (raw/, maybe tok/)")
    parser.add_argument("--subset", default="test")
    parser.add_argument("--lang", default="en", help="target language")
    parser.add_argument("--output", required=True, help="score JSON to write")
    parser.add_argument("--checkpoint", help="recorded in the JSON")
    args = parser.parse_args(argv)

    raw_path = os.path.join(args.data, "raw", f"{args.subset}.{args.lang}")
    tok_path = os.path.join(args.data, "tok", f"{args.subset}.{args.lang}")
    try:
        for path in (args.generate_output, raw_path):
            if not os.path.isfile(path):
                raise EvalError(f"{path}: no such file")
        hyps = hypotheses_from_generate(read_lines(args.generate_output))
        tok_refs = read_lines(tok_path) if os.path.isfile(tok_path) else None
        result = score(hyps, read_lines(raw_path), tok_refs, args.lang)
    except EvalError as err:
        sys.exit(f"bleu_eval.py: error: {err}")
    out_dir = os.path.dirname(os.path.abspath(args.output))
    write_lines(os.path.join(out_dir, "hyp.detok." + args.lang), result.pop("_detok"))
    write_lines(os.path.join(out_dir, "hyp.tok." + args.lang), result.pop("_tok"))
    result["checkpoint"] = args.checkpoint
    tmp = args.output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
    os.replace(tmp, args.output)
    print(
        f"  {result['sacrebleu_label']}: {result['sacrebleu']:.2f}  [{result['sacrebleu_signature']}]"
    )
    print(f"  {result['tok_bleu_label']}: {result['tok_bleu']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
