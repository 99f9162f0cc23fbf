"""Which pre-fine-tune score picks the gate run that fine-tunes best (`--restarts`' choice).

    python bench/restart_choice.py --data DATA/bin --results OUT/NAME.txt --group 3 \\
        WORK/NAME/k9 WORK/NAME/k9-s2 ... > restart-choice.txt

Each RUN_DIR is a save folder of the README's one command (prune-pipelined.sh --recovery
tuned) whose model was fine-tuned by the recipe (a line ``ft-kK-sG: best test T valid V``
in --results, G the run's gate seed). For every run, the scores a choice could read before
the fine-tune: the validation sacreBLEU of the tuning's start (``pruned.untuned.pt``: what
``--restarts`` compares today) and of the tuned model (``tuned/tune.json``), and the
validation NLL of both (``python -m dsp_fairseq.recipes.valid_loss``: fairseq-validate's
teacher-forced label NLL in bits per token, cached in RUN_DIR/valid-loss-{untuned,tuned}.json). Then, for consecutive groups of --group
gate seeds, the run each score would choose, with that run's fine-tuned test sacreBLEU and
the test sacreBLEU of the model the one command kept (before the fine-tune). The
test set only reports; every choice reads validation scores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from dsp_fairseq.recipes.valid_loss import valid_loss  # noqa: E402

# name, what it reads, higher is better
SCORES = (
    ("valid BLEU of the start", "bleu_untuned", True),
    ("valid NLL of the start", "nll_untuned", False),
    ("valid BLEU tuned", "bleu_tuned", True),
    ("valid NLL tuned", "nll_tuned", False),
)


def read_results(results: str) -> dict:
    """{(K, gate seed): {"ft": (test, valid), "test": T}}: the fine-tune's best model (the
    ``ft-kK-sG: best test T valid V`` line) and the test score of the model the one command
    kept (its ``kK-sG: ...; tuned test T valid V; kept tuned|untuned`` line)."""
    out: dict = {}
    with open(results, encoding="utf-8") as f:
        for line in f:
            m = re.match(r"ft-k(\d+)-s(\d+): best test ([\d.]+) valid ([\d.]+)", line)
            if m:
                out.setdefault((int(m[1]), int(m[2])), {})["ft"] = (float(m[3]), float(m[4]))
            m = re.match(r"k(\d+)-s(\d+): .*; kept (tuned|untuned)", line)
            if m:
                test = re.search(rf"(?:^|; ){m[3]} test ([\d.]+)", line)
                out.setdefault((int(m[1]), int(m[2])), {})["test"] = float(test[1])
    return out


def run_scores(data: str, run_dir: str) -> dict:
    """The pre-fine-tune scores of one run (see the module docstring)."""
    with open(os.path.join(run_dir, "tuned", "tune.json"), encoding="utf-8") as f:
        bleu = json.load(f)["valid_sacrebleu"]
    models = {"untuned": "pruned.untuned.pt", "tuned": os.path.join("tuned", "run", "pruned.pt")}
    scores = {f"bleu_{m}": float(bleu[m]) for m in models}
    for m, rel in models.items():
        cache = os.path.join(run_dir, f"valid-loss-{m}.json")
        scores[f"nll_{m}"] = valid_loss(data, os.path.join(run_dir, rel), cache)["valid_nll_loss"]
    return scores


def run_key(run_dir: str) -> tuple:
    m = re.fullmatch(r"k(\d+)(?:-s(\d+))?", os.path.basename(os.path.normpath(run_dir)))
    if not m:
        raise SystemExit(f"{run_dir}: not a one command's folder (kK or kK-sG)")
    return int(m[1]), int(m[2] or 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", required=True, help="the binarized corpus (fairseq-validate)")
    parser.add_argument("--results", required=True, help="the file with the ft-kK-sG lines")
    parser.add_argument("--group", type=int, default=3, help="gate seeds per --restarts group")
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR")
    args = parser.parse_args(argv)
    results = read_results(args.results)
    rows = []
    for run_dir in args.runs:
        key = run_key(run_dir)
        found = results.get(key, {})
        if "ft" not in found or "test" not in found:
            raise SystemExit(
                f"{args.results} lacks the line k{key[0]}-s{key[1]} or ft-k{key[0]}-s{key[1]}"
            )
        s = run_scores(args.data, run_dir)
        rows.append((key, s, found))
        print(
            f"k{key[0]}-s{key[1]}: start valid BLEU {s['bleu_untuned']:.2f} NLL "
            f"{s['nll_untuned']:.3f}; tuned valid BLEU {s['bleu_tuned']:.2f} NLL "
            f"{s['nll_tuned']:.3f}; the one command test {found['test']:.2f}; fine-tuned test "
            f"{found['ft'][0]:.2f} valid {found['ft'][1]:.2f}"
        )
        sys.stdout.flush()
    rows.sort(key=lambda r: r[0])
    for k in sorted({key[0] for key, _, _ in rows}):
        at_k = [r for r in rows if r[0][0] == k]
        groups = [at_k[i : i + args.group] for i in range(0, len(at_k), args.group)]
        groups = [g for g in groups if len(g) == args.group]
        for name, field, higher in SCORES:
            picks = [(max if higher else min)(g, key=lambda r: r[1][field]) for g in groups]
            if picks:
                cells = ", ".join(
                    f"seed {r[0][1]} ({r[2]['ft'][0]:.2f}; {r[2]['test']:.2f})" for r in picks
                )
                print(
                    f"choice k{k} by {name}: {cells}; mean fine-tuned test "
                    f"{statistics.mean(r[2]['ft'][0] for r in picks):.2f}, before the fine-tune "
                    f"{statistics.mean(r[2]['test'] for r in picks):.2f}"
                )
        for g in groups:
            seeds = "-".join(str(g[i][0][1]) for i in (0, -1))
            best = max(g, key=lambda r: r[2]["ft"][1])
            print(
                f"choice k{k} seeds {seeds} by the fine-tuned valid BLEU (hindsight): seed "
                f"{best[0][1]} ({best[2]['ft'][0]:.2f}); the group's mean fine-tuned test "
                f"{statistics.mean(r[2]['ft'][0] for r in g):.2f}"
            )


if __name__ == "__main__":
    main()
