"""The converged-benchmark report: rows, empty cells for missing runs, seed spread."""

import json
import subprocess
import sys

from conftest import ROOT


def test_converged_report_table(tmp_path):
    def row(method, k, test, valid=None):
        return {"method": method, "heads_to_keep": k, "sacrebleu": test, "valid_sacrebleu": valid}

    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    (tmp_path / "results.json").write_text(
        json.dumps(
            [
                row("dsp", 18, 24.09, 24.17),
                row("importance", 18, 11.98, 12.34),
                row("dsp", 36, 35.0, 35.5),
            ]
        )  # fmt: skip
    )
    (tmp_path / "fairseq_prune.json").write_text(
        json.dumps([{"k": 18, "layout": None, "sacrebleu": 3.41}])
    )
    (tmp_path / "results-sweep-seed2.json").write_text(json.dumps([row("dsp", 18, 23.09)]))
    (tmp_path / "results-sweep-seed3.json").write_text(json.dumps([row("dsp", 18, 25.09)]))
    out = subprocess.run(
        [sys.executable, ROOT / "bench/converged_report.py", "--dir", tmp_path],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    lines = out.splitlines()
    assert "**40.33**" in lines[0]
    assert "| pipelined DSP (default schedule) | 24.09 (24.17) | 35.00 (35.50) |  |" in lines
    assert "| head importance, one-shot | 11.98 (12.34) |  |  |" in lines
    assert "| fairseq `_adaptive_prune_heads` | 3.41 |  |  |" in lines
    assert "| pipelined DSP (default schedule) | 18 | 3 | 24.09 | 23.09-25.09 |" in lines
    assert not any(line.startswith("| random heads") for line in lines)  # not run: no row
