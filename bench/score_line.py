"""One summary line for a fine-tuned model: sacreBLEU of its best and last checkpoint.

    python bench/score_line.py NAME DIR

DIR holds evaluate.sh's folders eval-test, eval-valid (the best checkpoint, pruned.pt) and
last-test, last-valid (checkpoint_last.pt), each with its score.json.
"""

import json
import sys


def score_line(name: str, folder: str) -> str:
    best_test, best_valid, last_test, last_valid = (
        json.load(open(f"{folder}/{sub}/score.json"))["sacrebleu"]
        for sub in ("eval-test", "eval-valid", "last-test", "last-valid")
    )
    return f"{name}: best test {best_test} valid {best_valid}; last test {last_test} valid {last_valid}"


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    print(score_line(*sys.argv[1:]))
