"""One summary line for a fine-tuned model: sacreBLEU of its best and last checkpoint.

    python bench/score_line.py NAME DIR
    python bench/score_line.py --gate NAME DIR

With --gate, DIR is a prune-pipelined.sh folder with --recovery best (its recovery.json) and
evaluate.sh's test/ of its pruned.pt: the line gives both candidates' validation scores and
the chosen one's test and validation scores.

DIR holds evaluate.sh's folders eval-test, eval-valid (the best checkpoint, pruned.pt) and
last-test, last-valid (checkpoint_last.pt), each with its score.json. When DIR also holds the
fine-tune's train.log (fairseq's JSON log), the line ends with the lowest validation loss it
reached: a less noisy signal than BLEU for comparing fine-tune settings.
"""

import json
import os
import re
import sys


def best_valid_loss(train_log: str) -> float | None:
    """The lowest "valid_loss" of fairseq-train's JSON validation lines, or None if none."""
    losses = [
        float(m.group(1))
        for line in open(train_log)
        if "| valid |" in line and (m := re.search(r'"valid_loss": "([0-9.]+)"', line))
    ]
    return min(losses) if losses else None


def score_line(name: str, folder: str) -> str:
    best_test, best_valid, last_test, last_valid = (
        json.load(open(f"{folder}/{sub}/score.json"))["sacrebleu"]
        for sub in ("eval-test", "eval-valid", "last-test", "last-valid")
    )
    line = f"{name}: best test {best_test} valid {best_valid}; last test {last_test} valid {last_valid}"
    log = f"{folder}/train.log"
    loss = best_valid_loss(log) if os.path.exists(log) else None
    return line if loss is None else f"{line}; valid loss {loss}"


def gate_line(name: str, folder: str) -> str:
    """ "NAME: own valid V; refit valid V; best CHOSEN test T valid V" of a pipelined run."""
    recovery = json.load(open(f"{folder}/recovery.json"))
    valid = recovery["valid_sacrebleu"]
    test = json.load(open(f"{folder}/test/score.json"))["sacrebleu"]
    chosen = recovery["chosen"]
    return (
        f"{name}: own valid {valid['none']}; refit valid {valid['reconstruct']}; "
        f"best {chosen} test {test} valid {valid[chosen]}"
    )


if __name__ == "__main__":
    args = sys.argv[1:]
    gate = args[:1] == ["--gate"]
    if len(args) != 2 + gate:
        sys.exit(__doc__)
    print(gate_line(*args[1:]) if gate else score_line(*args))
