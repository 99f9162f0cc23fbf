"""The pruned model chosen by its validation score: the recovery (``--recovery best``) or the
gate run (``--restarts N``) of prune-pipelined.sh, the tuned or untuned model (tune-refit.sh),
or the averaged or final model of a fine-tune (finetune-pruned.sh --choose valid).

    python -m dsp_fairseq.recipes.choose_recovery --candidate reconstruct=DIR/score.json \\
        --candidate none=DIR/score.json [--output RECOVERY.json] [--kind recovery|restarts|tuning|finetune]
        [--loss reconstruct=LOSS.json --loss none=LOSS.json --metric nll]

Each candidate is a name and the ``score.json`` that ``evaluate.sh --subset valid``
wrote for its model. Prints the name of the candidate with the highest sacreBLEU (ties:
the first listed) and, with ``--output``, writes (atomically) ``{"recovery": "best",
"chosen": NAME, "valid_sacrebleu": {NAME: BLEU, ...}, "valid_sacrebleu_chosen": BLEU}``
(with ``--kind restarts``: ``"restarts": N`` in place of ``"recovery": "best"``; with ``--kind
tuning``: ``"tuning": "best"``; with ``--kind finetune``: ``"finetune": "best"``).
With ``--metric nll`` the choice is the lowest validation NLL instead, each candidate's read
from the ``--loss NAME=LOSS.json`` that ``dsp_fairseq.recipes.valid_loss`` wrote (ties: the
first listed); the file then also has ``"metric": "nll"``, ``"valid_nll_loss": {NAME: NLL,
...}`` and ``"valid_nll_loss_chosen"`` (the sacreBLEU entries stay, for the chosen model's
report). Only validation scores are meant to be given: the test set must never choose.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Dict, List, Tuple


def choose(scores: List[Tuple[str, float]]) -> str:
    """The name with the highest score; ties go to the earliest."""
    if not scores:
        raise ValueError("no candidate to choose from")
    best = max(range(len(scores)), key=lambda i: (scores[i][1], -i))
    return scores[best][0]


def read_candidates(
    specs: List[str], option: str = "--candidate", key: str = "sacrebleu"
) -> List[Tuple[str, float]]:
    """(NAME, value) of each NAME=FILE spec: FILE's number under KEY."""
    out = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise ValueError(f"{option} {spec!r}: give NAME=FILE.json")
        try:
            with open(path, encoding="utf-8") as f:
                out.append((name, float(json.load(f)[key])))
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{option} {spec}: cannot read its {key}: {err}") from err
    if len({n for n, _ in out}) != len(out):
        raise ValueError(f"{option} names must differ")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--candidate", action="append", required=True, metavar="NAME=SCORE.json")
    parser.add_argument("--output", help="write the choice and the scores here (JSON)")
    parser.add_argument(
        "--kind", choices=("recovery", "restarts", "tuning", "finetune"), default="recovery",
        help="what the candidates are: recoveries of one model, gate runs (restarts), a "
        "model and its tuned refit (tuning), or a fine-tune's averaged and final models",
    )  # fmt: skip
    parser.add_argument("--loss", action="append", default=[], metavar="NAME=LOSS.json")
    parser.add_argument(
        "--metric", choices=("bleu", "nll"), default="bleu",
        help="choose by the highest validation sacreBLEU (default) or the lowest validation "
        "NLL (--loss of every candidate)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    try:
        scores = read_candidates(args.candidate)
        losses = read_candidates(args.loss, "--loss", "valid_nll_loss")
        if args.metric == "nll" and sorted(n for n, _ in losses) != sorted(n for n, _ in scores):
            raise ValueError("--metric nll needs one --loss for every --candidate, by name")
    except ValueError as err:
        print(f"choose_recovery: error: {err}", file=sys.stderr)
        return 2
    nll: Dict[str, float] = dict(losses)
    if args.metric == "nll":
        chosen = choose([(name, -nll[name]) for name, _ in scores])
    else:
        chosen = choose(scores)
    bleu: Dict[str, float] = dict(scores)
    if args.output:
        head = {
            "recovery": {"recovery": "best"},
            "restarts": {"restarts": len(scores)},
            "tuning": {"tuning": "best"},
            "finetune": {"finetune": "best"},
        }[args.kind]
        doc = {
            **head,
            "chosen": chosen,
            "valid_sacrebleu": bleu,
            "valid_sacrebleu_chosen": bleu[chosen],
        }
        if args.metric == "nll":
            doc.update(metric="nll", valid_nll_loss=nll, valid_nll_loss_chosen=nll[chosen])
        tmp = args.output + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        os.replace(tmp, args.output)
    print(chosen)
    return 0


if __name__ == "__main__":
    sys.exit(main())
