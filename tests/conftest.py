import argparse
import gzip
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest
import torch
from fairseq import utils as fairseq_utils
from filelock import FileLock

ROOT = Path(__file__).resolve().parents[1]

# Import the plugin the way fairseq does (--user-dir), once per session.
fairseq_utils.import_user_module(argparse.Namespace(user_dir=str(ROOT / "dsp_fairseq")))


def multi30k_dir() -> Path:
    path = Path(os.environ.get("MULTI30K_DIR", ROOT.parent / "shared" / "data" / "multi30k"))
    if not (path / "train.de.gz").is_file():
        raise FileNotFoundError(
            f"Multi30k raw files not found in {path}; set MULTI30K_DIR to a folder holding "
            "train.{de,en}.gz, val.{de,en}.gz and test_2016_flickr.{de,en}.gz"
        )
    return path


def write_multi30k_slice(dest: Path, train: int, valid: int, test: int) -> Path:
    """Copy the first lines of each Multi30k split into ``dest`` (same gzip layout)."""
    dest.mkdir(parents=True, exist_ok=True)
    for name, n in (("train", train), ("val", valid), ("test_2016_flickr", test)):
        for lang in ("de", "en"):
            with gzip.open(multi30k_dir() / f"{name}.{lang}.gz", "rt", encoding="utf-8") as f:
                lines = [next(f) for _ in range(n)]
            with gzip.open(dest / f"{name}.{lang}.gz", "wt", encoding="utf-8") as f:
                f.writelines(lines)
    return dest


def built_once(tmp_path_factory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder NAME, made by BUILD(folder) once per test run and shared by every
    pytest-xdist worker (the others wait on a file lock while one builds it). Treat it as
    read-only: copy it to change it."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # this run's folder, above its workers' own
    path = root / name
    with FileLock(f"{path}.lock"):
        if not (path / ".built").is_file():
            shutil.rmtree(path, ignore_errors=True)
            path.mkdir()
            build(path)
            (path / ".built").touch()
    return path


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


# The modules that take longest (bench: pytest --durations), first: under pytest-xdist's
# --dist loadfile each module runs whole on one worker, so the long ones start at once and
# the short ones fill in around them (the Makefile passes --no-loadscope-reorder, else xdist
# reorders the modules by their number of tests). The two modules of recipes from a
# baseline share one (built_once): the second starts after test_recipes.py, not beside the
# first, so that it does not wait for the baseline's training.
LONGEST_FIRST = [
    "test_pick_k_and_restarts.py",
    "test_recipes.py",
    "test_recipes_from_baseline.py",
    "test_robustness_distributed.py",
    "test_ct2_export.py",
    "test_baselines.py",
    "test_cli_inputs.py",
    "test_end_to_end.py",
    "test_recovery_end_to_end.py",
    "test_ddp_gate.py",
    "test_stock_equivalence.py",
    "test_robustness_inputs.py",
    "test_readme.py",
    "test_robustness_resume.py",
    "test_robustness_precision.py",
    "test_fp16.py",
    "test_robustness_safe_loading.py",
    "test_training_paths.py",
]


def pytest_collection_modifyitems(items):
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable within a module
