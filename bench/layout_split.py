"""The heads shared among the attention types by a per-type budget: the table of stage 6ah.

Stage 6ah of bench/run_converged_bench.sh runs the README's one command with the gate run held
to a per-type budget (``--train-args "--heads-to-keep-per-type enc-self=E,dec-self=D,cross=C"``),
then the recipe's fine-tune, in files ``layout-eE-dD-cC.txt`` (the one command's lines
"kK-sS: ... untuned test T valid V; tuned test T valid V; kept ..." and the fine-tune's
"ft-kK-sS: best test T valid V; ..."). The table sets each layout beside the free layout
(the gates choose among all heads: stage 6ad's runs of the same command, fast-default.txt and
fast-default-rerun.txt) at the same K: test_2016 sacreBLEU, mean (min-max), and the mean on
valid, of ``--recovery best`` (the tuning's start), the one command and its fine-tune.
``bench/converged_report.py --splice`` puts it between ``<!-- layout-split -->`` markers.
"""

from __future__ import annotations

import glob
import os
import re
import statistics
from typing import Dict, List, Optional, Tuple

FILE_PATTERN = "layout-e*-d*-c*.txt"
FREE = "free"  # the default: the gates choose among all heads
Score = Tuple[float, float]  # (test, valid)


def layout_of(path: str) -> str:
    """``layout-e6-d9-c3.txt`` -> ``"6, 9, 3"``."""
    m = re.fullmatch(r"layout-e([0-9]+)-d([0-9]+)-c([0-9]+)\.txt", os.path.basename(path))
    if not m:
        raise ValueError(f"{path}: not a layout-eE-dD-cC.txt file")
    return ", ".join(m.groups())


def layout_files(directory: str) -> List[str]:
    return sorted(glob.glob(os.path.join(directory, FILE_PATTERN)))


def runs_of(one_command: list, finetunes: dict) -> Dict[int, List[dict]]:
    """{K: [{"best": .., "one": .., "ft": .. or None}, ...]} from one_command_lines (K, S,
    untuned, kept) and fine_tune_lines of the same file (the recipe's model, "ft-kK-sS")."""
    runs: Dict[int, List[dict]] = {}
    for k, seed, untuned, kept in one_command:
        ft = finetunes.get(f"ft-k{k}-s{seed}", {}).get("best")
        runs.setdefault(k, []).append({"best": untuned, "one": kept, "ft": ft})
    return runs


def cell(scores: List[Optional[Score]]) -> str:
    got = [s for s in scores if s is not None]
    if not got:
        return "-"
    tests = [t for t, _ in got]
    valid = statistics.mean(v for _, v in got)
    spread = f" ({min(tests):.2f}-{max(tests):.2f})" if len(got) > 1 else ""
    return f"{statistics.mean(tests):.2f}{spread}; valid {valid:.2f}; {len(got)} run{'s' * (len(got) > 1)}"


def layout_lines(layouts: Dict[str, Dict[int, List[dict]]]) -> List[str]:
    """The table: per K, the free layout first, then each per-type layout measured there."""
    lines = [
        "| K | heads kept: enc self, dec self, cross | `--recovery best` | the one command "
        "(tuned refit) | + fine-tune |",
        "|---|---|---|---|---|",
    ]
    ks = sorted({k for n, runs in layouts.items() if n != FREE for k in runs}, reverse=True)
    for k in ks:
        names = [FREE] + sorted(n for n in layouts if n != FREE)
        for name in names:
            runs = layouts.get(name, {}).get(k, [])
            if not runs:
                continue
            label = "free (the gates choose: the default)" if name == FREE else name
            cells = [cell([r[c] for r in runs]) for c in ("best", "one", "ft")]
            lines.append(f"| {k} | {label} | " + " | ".join(cells) + " |")
    return lines
