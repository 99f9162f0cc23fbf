"""A checkpoint's validation loss by ``fairseq-validate``: the label NLL, teacher-forced.

    python -m dsp_fairseq.recipes.valid_loss --data DIR/bin --checkpoint CKPT --output LOSS.json

Runs ``fairseq-validate`` (the plugin loaded, ``--log-format json``) on the validation subset
and writes its statistics (``valid_loss``, ``valid_nll_loss``: bits per target token, ...)
to LOSS.json, atomically; prints the NLL. Skipped when LOSS.json is newer than the
checkpoint and was made for the same checkpoint path and subset. ``prune-pipelined.sh
--restarts N --restart-metric nll`` chooses its gate run by this number (lower is better):
unlike a beam-search BLEU it sees every reference token's probability.
This module does not import fairseq (the recipes' helpers stay fast): fairseq runs in the
subprocess.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from typing import Dict

PLUGIN = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_STATS = re.compile(r"\| valid \| (\{.*\})")  # --log-format json's summary line


def run_validate(data: str, checkpoint: str, subset: str = "valid", max_tokens: int = 4096) -> Dict:
    """fairseq-validate's statistics of CHECKPOINT on SUBSET, as floats where they are numbers."""
    cmd = ["fairseq-validate", data, "--user-dir", PLUGIN, "--path", checkpoint,
           "--task", "translation", "--valid-subset", subset, "--max-tokens", str(max_tokens), "--log-format", "json",
           "--num-workers", "0"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True)
    found = _STATS.findall(proc.stdout + proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(
            f"fairseq-validate failed on {checkpoint} (exit {proc.returncode}):\n"
            f"{proc.stderr[-3000:]}"
        )
    stats = json.loads(found[-1])
    out = {}
    for key, value in stats.items():
        try:
            out[key] = float(value)
        except (TypeError, ValueError):
            out[key] = value
    if "valid_nll_loss" not in out and "valid_loss" in out:  # cross_entropy: loss is the NLL
        out["valid_nll_loss"] = out["valid_loss"]
    return out


def valid_loss(data: str, checkpoint: str, output: str, subset: str = "valid") -> Dict:
    """The statistics of CHECKPOINT, read from OUTPUT when it is up to date, else computed
    and written there (atomically)."""
    made_for = {"checkpoint": os.path.realpath(checkpoint), "subset": subset}
    if os.path.isfile(output) and os.path.getmtime(output) >= os.path.getmtime(checkpoint):
        try:
            with open(output, encoding="utf-8") as f:
                doc = json.load(f)
            if doc.get("made_for") == made_for and "valid_nll_loss" in doc:
                return doc
        except (OSError, ValueError):
            pass
    doc = {**run_validate(data, checkpoint, subset), "made_for": made_for}
    tmp = output + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, output)
    return doc


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", required=True, help="the binarized corpus (fairseq-validate)")
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--output", required=True, help="LOSS.json to write")
    parser.add_argument("--subset", default="valid")
    args = parser.parse_args(argv)
    if not os.path.isfile(args.checkpoint):
        print(f"valid_loss: error: no checkpoint {args.checkpoint}", file=sys.stderr)
        return 2
    try:
        doc = valid_loss(args.data, args.checkpoint, args.output, args.subset)
    except RuntimeError as err:
        print(f"valid_loss: error: {err}", file=sys.stderr)
        return 1
    print(f"{doc['valid_nll_loss']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
