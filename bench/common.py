"""Shared bits of the benchmark scripts."""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import subprocess

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine(threads: int) -> str:
    """CPU model, core count, torch version and the thread count used."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import torch  # here, so that torch-free workers (CTranslate2) can import this module

    return f"{cpu}; {os.cpu_count()} cores; torch {torch.__version__}; {threads} threads"


def peak_rss_mb() -> float:
    """Peak resident set of this process since its exec, in MB (``VmHWM``).

    ``getrusage(RUSAGE_SELF).ru_maxrss`` would be wrong in a worker started by a benchmark:
    Linux carries the forked copy of the parent's peak across exec, so every worker reports
    at least its parent's peak.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def quiet_fairseq() -> None:
    """Keep fairseq's INFO logging out of benchmark outputs."""
    logging.getLogger().setLevel(logging.WARNING)
    for name in ("fairseq", "dsp_fairseq"):
        logging.getLogger(name).setLevel(logging.WARNING)


def layout_of(name: str, layout) -> int:
    """Heads kept in the attention ``name`` (a module name) at uniform layout ``(enc, dec)``."""
    enc, dec = layout
    return enc if name.startswith("encoder.") else dec


def fairseq_choice_at_layout(model, layout) -> dict:
    """The heads fairseq's ``_get_reserve_head_index`` (largest summed |q/k/v| weights) keeps
    in every attention of a stock model at uniform layout ``(enc, dec)``: ``enc`` heads in each
    encoder self-attention, ``dec`` in each decoder self- and cross-attention.

    Returns ``{module name: sorted head indices}``, the ``kept`` mapping of ``dsp-strip``'s
    surgery, so the same layout is compared with DSP's and importance's choices.
    """
    kept = {}
    for name, m in model.named_modules():
        if type(m).__name__ != "MultiheadAttention":
            continue
        k = layout_of(name, layout)
        spans = m._get_reserve_head_index(k) if k else []
        kept[name] = sorted(start // m.head_dim for start, _ in spans)
    return kept


def evaluate_scores(
    data: str, ckpt: str, out: str, subset: str, reuse: bool = False, quiet: bool = True
) -> dict:
    """The score.json of examples/translation/evaluate.sh (beam 5) for ``ckpt`` on
    ``subset``, written into ``out``; ``reuse``: an ``out/score.json`` already there is read
    instead of decoding again; ``quiet``: evaluate.sh's own output is dropped."""
    score = os.path.join(out, "score.json")
    if not (reuse and os.path.exists(score)):
        subprocess.run(
            ["bash", os.path.join(ROOT, "examples/translation/evaluate.sh"), "--data", data,
             "--checkpoint", ckpt, "--out", out, "--subset", subset],
            check=True, stdout=subprocess.DEVNULL if quiet else None,
        )  # fmt: skip
    with open(score) as f:
        return json.load(f)


def evaluate_sacrebleu(data: str, ckpt: str, out: str, subset: str, reuse: bool = False) -> float:
    """sacreBLEU of :func:`evaluate_scores`."""
    return evaluate_scores(data, ckpt, out, subset, reuse)["sacrebleu"]


def baseline_parser(doc: str, ks: str, base_help: str) -> argparse.ArgumentParser:
    """The options of the scripts that prune one trained baseline: --data, --base, --ks."""
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", required=True, help="prepared corpus folder (bin/, spm/, raw/)")
    p.add_argument("--base", required=True, help=base_help)
    p.add_argument("--ks", default=ks, help=f"heads to keep, comma-separated (default {ks})")
    return p


def gate_run_parser(doc: str) -> argparse.ArgumentParser:
    """The options of the scripts that time prune-pipelined.sh's gate runs on one trained
    baseline: --data, --base, --out, --heads-to-keep."""
    p = argparse.ArgumentParser(
        description=doc, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", required=True, help="prepared corpus folder (bin/, spm/, raw/)")
    p.add_argument("--base", required=True, help="the trained, unpruned checkpoint")
    p.add_argument("--out", required=True)
    p.add_argument("--heads-to-keep", type=int, default=18)
    return p


def write_report(out: str, stem: str, result: dict, lines: list) -> str:
    """OUT/STEM.json (RESULT) and OUT/STEM.md (LINES); returns the markdown text."""
    with open(os.path.join(out, f"{stem}.json"), "w", encoding="utf-8") as f:
        json.dump(result, f, indent=1)
        f.write("\n")
    text = "\n".join(lines) + "\n"
    with open(os.path.join(out, f"{stem}.md"), "w", encoding="utf-8") as f:
        f.write(text)
    return text
