"""Shared pieces of the robustness tests (tests/test_robustness_*.py).

* ``run`` / ``train_cmd``: the real command-line tools on a tiny corpus, one
  thread each (the test machines have two shared cores);
* ``tiny_corpus`` / ``tiny_checkpoint``: built once per pytest session, whichever
  test module asks first;
* in-process models: real fairseq ``TranslationTask`` objects holding
  in-memory dictionaries (no data files), and checkpoint dicts laid out like
  the ones ``fairseq-train`` writes.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import List, Optional

import torch
from conftest import ROOT, write_multi30k_slice
from fairseq.data import Dictionary
from fairseq.tasks.translation import TranslationConfig, TranslationTask
from inprocess import fairseq_train

BIN = Path(sys.executable).parent
PLUGIN = ROOT / "dsp_fairseq"
TINY = ["--encoder-embed-dim", "32", "--decoder-embed-dim", "32",
        "--encoder-ffn-embed-dim", "64", "--decoder-ffn-embed-dim", "64"]  # fmt: skip
K = 5  # heads kept of transformer_dsp_small's 36


def run(*cmd, check=True, env=None, timeout=300) -> subprocess.CompletedProcess:
    """Run a command with the venv's tools first on PATH and one OpenMP thread."""
    full_env = dict(os.environ, PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", OMP_NUM_THREADS="1")
    full_env.update(env or {})
    proc = subprocess.run(
        [str(c) for c in cmd], capture_output=True, text=True, env=full_env, timeout=timeout
    )
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{cmd[0]} failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        )
    return proc


def train_cmd(data, save_dir, updates: int, *extra, user_dir=True) -> List[str]:
    """A tiny transformer_dsp_small fairseq-train command (21 batches per epoch)."""
    return [
        str(BIN / "fairseq-train"),
        *train_args(data, save_dir, updates, *extra, user_dir=user_dir),
    ]


def train_args(data, save_dir, updates: int, *extra, user_dir=True) -> List[str]:
    """train_cmd's arguments, without the program (for ``inprocess.fairseq_train``)."""
    return [
        str(data),
        *(["--user-dir", str(PLUGIN), "--task", "translation_dsp"] if user_dir else []),
        "--arch", "transformer_dsp_small", *TINY, "--share-all-embeddings",
        "--optimizer", "adam", "--lr", "2e-3", "--lr-scheduler", "inverse_sqrt",
        "--warmup-updates", "10", "--max-tokens", "1000", "--max-update", str(updates),
        "--save-dir", str(save_dir), "--no-epoch-checkpoints", "--cpu", "--seed", "3",
        "--log-format", "simple", "--log-interval", "5", "--dropout", "0.1",
        "--heads-to-keep", str(K), "--criterion", "dsp_label_smoothed_cross_entropy",
        "--label-smoothing", "0.1", "--anneal-updates", "40", "--num-workers", "0",
        *map(str, extra),
    ]  # fmt: skip


def _cached(tmp_path_factory, name: str) -> Path:
    return tmp_path_factory.getbasetemp() / name


def tiny_corpus(tmp_path_factory) -> Path:
    """Binarised Multi30k slice (400/40/40 lines) through prepare-multi30k.sh; returns bin/."""
    out = _cached(tmp_path_factory, "robustness-corpus")
    if not (out / "m30k" / "bin" / "test.de-en.en.bin").is_file():
        raw = write_multi30k_slice(out / "raw", 400, 40, 40)
        run("bash", ROOT / "examples/translation/prepare-multi30k.sh", "--src-dir", raw,
            "--out", out / "m30k", "--vocab-size", "300")  # fmt: skip
    return out / "m30k" / "bin"


def tiny_checkpoint(tmp_path_factory) -> Path:
    """A masked transformer_dsp checkpoint after 4 real fairseq-train updates (in-process)."""
    save = _cached(tmp_path_factory, "robustness-ckpt")
    ckpt = save / "checkpoint_last.pt"
    if not ckpt.is_file():
        fairseq_train(train_args(tiny_corpus(tmp_path_factory), save, 4))
    return ckpt


# -- in-process models ---------------------------------------------------------


def make_dictionary(n_words: int, prefix: str = "w") -> Dictionary:
    d = Dictionary()
    for i in range(n_words):
        d.add_symbol(f"{prefix}{i}")
    d.finalize(padding_factor=1)
    return d


def make_task(src: Dictionary, tgt: Optional[Dictionary] = None) -> TranslationTask:
    """A real fairseq translation task over in-memory dictionaries (no data files)."""
    return TranslationTask(TranslationConfig(), src, tgt if tgt is not None else src)


def dsp_args(**kw) -> argparse.Namespace:
    """Model arguments as fairseq-train stores them (architecture defaults filled in)."""
    args = argparse.Namespace(
        arch="transformer_dsp", dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        max_source_positions=64, max_target_positions=64,
    )  # fmt: skip
    for key, value in kw.items():
        setattr(args, key, value)
    return args


def checkpoint_state(model, args: argparse.Namespace, num_updates: int = 0) -> dict:
    """A dict with the keys and layout of a fairseq-train checkpoint."""
    return {
        "args": None,
        "cfg": {"model": args, "common": {"user_dir": str(PLUGIN)}},
        "model": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "criterion": {},
        "optimizer_history": [
            {
                "criterion_name": "DSPLabelSmoothedCrossEntropyCriterion",
                "optimizer_name": "FairseqAdam",
                "lr_scheduler_state": {"best": None},
                "num_updates": num_updates,
            }
        ],
        "task_state": {},
        "extra_state": {"epoch": 1, "train_iterator": {"epoch": 1}, "previous_training_time": 0},
        "last_optimizer_state": {"state": {}, "param_groups": []},
    }


def random_tokens(dictionary: Dictionary, n: int, max_len: int, gen: torch.Generator):
    """``n`` random sentences (ending in EOS), left-padded as fairseq's translation batches."""
    from fairseq.data import data_utils

    sentences = []
    for _ in range(n):
        length = int(torch.randint(2, max_len + 1, (1,), generator=gen))
        words = torch.randint(dictionary.nspecial, len(dictionary), (length,), generator=gen)
        sentences.append(torch.cat([words, torch.tensor([dictionary.eos()])]))
    tokens = data_utils.collate_tokens(sentences, dictionary.pad(), dictionary.eos(), left_pad=True)
    lengths = torch.tensor([s.numel() for s in sentences])
    return tokens, lengths
