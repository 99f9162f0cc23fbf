"""bench/run_converged_bench.sh --list / --only: one stage of the converged benchmark rerun
without the hours of every other stage, and nothing outside the selected steps touched."""

import os
import subprocess

import pytest
from conftest import ROOT

SCRIPT = ROOT / "bench" / "run_converged_bench.sh"


@pytest.fixture
def fake_inputs(tmp_path):
    """A baseline and a prepared-corpus folder that pass the script's checks (--list and a
    selection that runs no real step never read them)."""
    data = tmp_path / "data"
    for sub in ("bin", "spm", "raw"):
        (data / sub).mkdir(parents=True)
    (data / "bin" / "dict.en.txt").touch()
    (data / "spm" / "spm.model").touch()
    (tmp_path / "base.pt").touch()
    return tmp_path


def bench(tmp_path, *args, path_prefix=None):
    env = dict(os.environ)
    if path_prefix:
        env["PATH"] = f"{path_prefix}:{env['PATH']}"
    cmd = ["bash", SCRIPT, "--work", tmp_path / "work", "--out", tmp_path / "out",
           "--baseline", tmp_path / "base.pt", "--data", tmp_path / "data", *args]  # fmt: skip
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)


def test_list_names_every_step_and_runs_nothing(fake_inputs):
    proc = bench(fake_inputs, "--list")
    assert proc.returncode == 0, proc.stderr
    labels = proc.stdout.split()
    # the first stage's rows, a stage in the middle, the last stages
    expected = ["rows-k18", "pick-k-refined", "split-rebuilt-fe-k18-s3", "frontier"]
    assert set(expected + ["joint-finetune"]) <= set(labels)
    # the seed a restart choice keeps is unknown until its gate runs exist
    assert "gate-layers-ft18-s?" in labels
    assert len(labels) > 300
    assert list((fake_inputs / "work").iterdir()) == []  # not even a wall_time.txt line
    assert list((fake_inputs / "out").iterdir()) == []


def test_only_selects_steps_by_comma_separated_patterns(fake_inputs):
    proc = bench(fake_inputs, "--list", "--only", "split-rebuilt-*-s2,frontier")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == [
        "split-rebuilt-one-command-k18-s2", "split-rebuilt-hb-k18-s2",
        "split-rebuilt-ft-k18-s2", "split-rebuilt-fe-k18-s2", "split-rebuilt-f2-k18-s2",
        "split-rebuilt-t0-k18-s2", "frontier",
    ]  # fmt: skip


def test_only_runs_the_selected_step_and_nothing_else(fake_inputs):
    """Every line outside the steps must survive their absence: a selection that matches no
    step runs the whole script and writes only the baseline's wall-time line; a selected step
    runs as in the full benchmark (its command, its output file, its wall-time line)."""
    proc = bench(fake_inputs, "--only", "no-such-step")
    assert proc.returncode == 0, proc.stderr
    work = fake_inputs / "work"
    assert [p.name for p in work.iterdir()] == ["wall_time.txt"]
    assert (work / "wall_time.txt").read_text().startswith("baseline ")
    assert list((fake_inputs / "out").iterdir()) == []

    # restart-choice-k9 runs python bench/restart_choice.py; a stand-in python records its call
    stub = fake_inputs / "stub"
    stub.mkdir()
    (stub / "python").write_text('#!/bin/sh\necho "python $*"\n')
    (stub / "python").chmod(0o755)
    proc = bench(fake_inputs, "--only", "restart-choice-k9", path_prefix=stub)
    assert proc.returncode == 0, proc.stderr
    table = (fake_inputs / "out" / "restart-choice.txt").read_text().split()
    assert table[1].endswith("bench/restart_choice.py")
    assert table[table.index("--group") + 1] == "3"
    assert table[-6:] == [f"{work}/fast-default-rerun/k9"] + [
        f"{work}/fast-default-rerun/k9-s{seed}" for seed in range(2, 7)
    ]
    walls = (work / "wall_time.txt").read_text().splitlines()  # a baseline line per call
    assert [line.split(":")[0] for line in walls if not line.startswith("baseline ")] == [
        "restart-choice-k9"
    ]
    assert not (fake_inputs / "out" / "restart-choice.txt.tmp").exists()
