"""Every console script: cheap to start, and a wrong input is one line that says what to do.

* importing a CLI module (and ``--help``) imports neither torch nor fairseq, while a plain
  ``import dsp_fairseq`` still registers the plugin;
* ``dsp-user-dir`` prints the plugin folder from anywhere;
* missing or wrong folders and files (``--data``, ``--model``, ``--spm``, ``--log``) and bad
  numbers give exit code 2, one ``PROG: error:`` line naming the option, no traceback and
  no file written;
* ``--data`` takes the fairseq binaries or the prepared corpus and says which it used;
* ``dsp-translate-ct2`` streams; ``dsp-export-ct2 --quiet`` is quiet; ``dsp-plot-gates``
  reads simple logs.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch
from conftest import ROOT
from inprocess import cli_ok
from robustness_helpers import BIN, run, tiny_checkpoint, tiny_corpus

SCRIPTS = dict(
    re.findall(
        r'"(dsp-[a-z0-9-]+)=(dsp_fairseq\.cli\.[a-z0-9_]+):main"', (ROOT / "setup.py").read_text()
    )
)
HEAVY = ("torch", "fairseq", "ctranslate2", "matplotlib")


def test_setup_lists_the_console_scripts():
    assert {"dsp-strip", "dsp-export-ct2", "dsp-translate-ct2", "dsp-importance", "dsp-pick-k",
            "dsp-plot-gates", "dsp-user-dir"} <= set(SCRIPTS)  # fmt: skip


@pytest.mark.parametrize("module", sorted(set(SCRIPTS.values())))
def test_a_cli_imports_no_torch_or_fairseq_before_parsing(module):
    code = f"""
import contextlib, io, sys
import {module} as cli
before = [m for m in {HEAVY!r} if m in sys.modules]
with contextlib.redirect_stdout(io.StringIO()):
    try:
        cli.main(["--help"])
    except SystemExit as e:
        assert e.code == 0, e.code
after = [m for m in {HEAVY!r} if m in sys.modules]
print(before, after)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[] []", f"{module} imported {proc.stdout.strip()}"


def test_plain_import_still_registers_the_plugin():
    # The deferral is for dsp_fairseq.cli only: `import dsp_fairseq` (scripts, the hub
    # interface, --user-dir) must register the model and criterion as before.
    code = (
        "import dsp_fairseq\n"
        "from fairseq.models import ARCH_MODEL_REGISTRY\n"
        "from fairseq.criterions import CRITERION_REGISTRY\n"
        "print('transformer_dsp_small' in ARCH_MODEL_REGISTRY,"
        " 'dsp_label_smoothed_cross_entropy' in CRITERION_REGISTRY)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "True"]


def test_a_deferring_module_registers_where_fairseq_is_loaded_already():
    # Deferral saves fairseq's import and nothing else: after `import fairseq`, importing the
    # head layout (or a tool) first registers the plugin, so that fairseq's --user-dir, which
    # skips a package already in sys.modules, finds transformer_dsp; fairseq's own loader
    # then takes the plugin's architecture.
    code = (
        "import fairseq.models, fairseq.options\n"
        "import dsp_fairseq.models.head_layout\n"
        "parser = fairseq.options.get_training_parser()\n"
        "args = fairseq.options.parse_args_and_arch(parser, ['/tmp', '--user-dir',"
        " __import__('os').path.dirname(dsp_fairseq.__file__), '--arch', 'transformer_dsp_small',"
        " '--task', 'translation_dsp'])\n"
        "print(args.arch, 'transformer_dsp_small' in fairseq.models.ARCH_MODEL_REGISTRY)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.split() == ["transformer_dsp_small", "True"]


def test_recipe_helpers_run_without_importing_fairseq(pruned, tmp_path):
    """The recipes call their helpers (``python -m dsp_fairseq.recipes.*``) several times per
    row: choosing a recovery reads JSON only, reading a checkpoint's arguments needs torch,
    sweep.sh's figures (``python -m dsp_fairseq.plots.report``) torch and matplotlib, and
    none pays fairseq's import (the package defers registration for them, as for the
    CLIs); the answers are the helpers' usual ones."""
    score = tmp_path / "score.json"
    score.write_text('{"sacrebleu": 12.5}')
    sweep = tmp_path / "sweep"  # a table of one row without a model: the BLEU figure only
    sweep.mkdir()
    row = {"method": "random", "heads_to_keep": 12, "heads_kept": 12, "heads_total": 36,
           "params": 100, "params_unpruned": 200, "sacrebleu": 10.0, "tok_bleu": 10.0}  # fmt: skip
    (sweep / "results.json").write_text(json.dumps([row]))
    helpers = {
        "recipes.choose_recovery": (["--candidate", f"none={score}"], "[]"),
        "recipes.pipelined_args": (["--base", str(pruned), "--stripped-ok"], "['torch']"),
        # sweep.sh's figures read checkpoints with torch alone
        "plots.report": (["--sweep", str(sweep)], "['torch']"),
    }
    for helper, (argv, heavy) in helpers.items():
        code = f"""
import runpy, sys
sys.argv = [{helper!r}, *{argv!r}]
try:
    runpy.run_module("dsp_fairseq.{helper}", run_name="__main__")
except SystemExit as e:
    assert not e.code, e.code
print([m for m in ("torch", "fairseq") if m in sys.modules])
"""
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
        lines = proc.stdout.strip().splitlines()
        assert lines[-1] == heavy, f"{helper} imported {lines[-1]}"
        if helper == "recipes.choose_recovery":
            assert lines[0] == "none", lines
        else:
            expected = {"recipes.pipelined_args": "--arch", "plots.report": "2 files written"}
            assert expected[helper] in lines[0], lines


def test_stripping_a_gated_checkpoint_needs_no_fairseq(tmp_path, tmp_path_factory):
    """dsp-strip on a gated checkpoint (the recipes' common call) is tensor surgery on its
    state: it does not pay fairseq's import (~3 s), and writes what the plugin's
    strip_checkpoint gives in this process, where fairseq and the plugin are loaded."""
    from dsp_fairseq.checkpoint_io import load_checkpoint
    from dsp_fairseq.pruning.strip import strip_checkpoint

    gated = tiny_checkpoint(tmp_path_factory)
    out = tmp_path / "pruned.pt"
    code = f"""
import sys
from dsp_fairseq.cli import strip
assert strip.main(["--input", {str(gated)!r}, "--output", {str(out)!r}, "--quiet"]) == 0
print([m for m in ("torch", "fairseq") if m in sys.modules])
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "['torch']"
    expected, _ = strip_checkpoint(load_checkpoint(str(gated)))
    written = load_checkpoint(str(out))
    assert written["model"].keys() == expected["model"].keys()
    assert all(torch.equal(written["model"][k], v) for k, v in expected["model"].items())
    assert written["dsp_kept_heads"] == expected["dsp_kept_heads"]


def test_the_plugins_architectures_are_the_ones_it_registers():
    """models.stock.DSP_ARCHS (known without fairseq's registry, so that a plain strip need
    not import fairseq) names exactly the architectures fairseq registers for the plugin's
    model."""
    from fairseq.models import ARCH_MODEL_REGISTRY

    from dsp_fairseq.models.stock import DSP_ARCHS
    from dsp_fairseq.models.transformer_dsp import TransformerDSPModel

    registered = {a for a, cls in ARCH_MODEL_REGISTRY.items() if cls is TransformerDSPModel}
    assert set(DSP_ARCHS) == registered


def test_dsp_user_dir_prints_the_plugin_folder_from_anywhere(tmp_path):
    proc = subprocess.run([str(BIN / "dsp-user-dir")], capture_output=True, text=True, cwd=tmp_path)
    folder = Path(proc.stdout.strip())
    assert proc.returncode == 0 and folder.is_absolute()
    assert (folder / "__init__.py").is_file() and folder.name == "dsp_fairseq"
    assert folder.resolve() == (ROOT / "dsp_fairseq").resolve()


def one_line_error(proc, prog: str, *needles: str) -> str:
    """Exit code 2, exactly one stderr line ``PROG: error: ...`` holding every needle."""
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    errors = [line for line in lines if line.startswith(f"{prog}: error:")]
    assert len(errors) == 1, proc.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]
    return errors[0]


# -- fixtures: the tiny corpus (prepared corpus folder), a stripped model, its export -----


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return tiny_corpus(tmp_path_factory).parent  # the prepared corpus: bin/, spm/, raw/


@pytest.fixture(scope="module")
def pruned(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cli-pruned") / "pruned.pt"
    run(BIN / "dsp-strip", "--input", tiny_checkpoint(tmp_path_factory), "--output", out,
        "--quiet")  # fmt: skip
    return out


@pytest.fixture(scope="module")
def exported(corpus, pruned, tmp_path_factory):
    """(the CTranslate2 model folder, the export's output) of an export given the prepared
    corpus folder as --data, which stands for its bin/."""
    out = tmp_path_factory.mktemp("cli-ct2") / "model"
    proc = run(BIN / "dsp-export-ct2", "--input", pruned, "--output", out, "--data", corpus)
    return out, proc


@pytest.fixture(scope="module")
def ct2_model(exported) -> Path:
    return exported[0]


# -- --data: one rule --------------------------------------------------------------------


def test_export_takes_the_prepared_corpus_and_says_so(exported, corpus):
    model, proc = exported
    assert f"--data {corpus} is a prepared corpus folder; using its fairseq binaries" in proc.stderr
    assert (model / "model.bin").is_file() and "wrote" in proc.stdout
    vocab = json.loads((model / "shared_vocabulary.json").read_text())
    assert len(vocab) == len((corpus / "bin" / "dict.de.txt").read_text().splitlines()) + 4


@pytest.mark.parametrize("kind", ["missing", "file", "no-dictionaries"])
def test_export_refuses_a_wrong_data_folder(kind, corpus, pruned, tmp_path):
    data = {"missing": tmp_path / "nope", "file": pruned, "no-dictionaries": corpus / "spm"}[kind]
    proc = run(BIN / "dsp-export-ct2", "--input", pruned, "--output", tmp_path / "m",
               "--data", data, check=False)  # fmt: skip
    line = one_line_error(proc, "dsp-export-ct2", f"--data {data}", "dict.SRC.txt", "bin/")
    assert "checkpoint's own" not in line
    assert not (tmp_path / "m").exists() and not list(tmp_path.glob(".m.tmp-*"))


def test_export_quiet_prints_nothing(exported, corpus, pruned, tmp_path):
    proc = run(BIN / "dsp-export-ct2", "--input", pruned, "--output", tmp_path / "m",
               "--data", corpus, "--quiet")  # fmt: skip
    assert proc.stdout == "" and proc.stderr == "", proc.stderr
    assert (tmp_path / "m" / "model.bin").is_file()
    # the control: the same export without --quiet talks, on stdout and stderr
    assert exported[1].stdout and "INFO" in exported[1].stderr


@pytest.mark.parametrize("kind", ["missing", "no-dictionaries"])
def test_importance_refuses_a_wrong_data_folder(kind, corpus, pruned, tmp_path):
    data = {"missing": tmp_path / "nope", "no-dictionaries": corpus / "raw"}[kind]
    out = tmp_path / "scores.json"
    proc = run(BIN / "dsp-importance", "--path", pruned, "--data", data, "--output", out,
               check=False)  # fmt: skip
    one_line_error(proc, "dsp-importance", f"--data {data}", "dict.SRC.txt")
    assert not out.exists() and proc.stdout == ""


def test_importance_refuses_to_overwrite_without_force(corpus, pruned, tmp_path):
    out = tmp_path / "scores.json"
    out.write_text("keep me")
    cmd = [BIN / "dsp-importance", "--path", pruned, "--data", corpus, "--output", out,
           "--max-batches", "1"]  # fmt: skip
    one_line_error(run(*cmd, check=False), "dsp-importance", f"--output {out}", "--force")
    assert out.read_text() == "keep me"
    from dsp_fairseq.cli import importance

    cli_ok(importance.main, *cmd[1:], "--force")  # (in-process: the refusal is the subject)
    assert json.loads(out.read_text())["method"] == "michel2019"


def test_pick_k_refuses_a_folder_that_is_not_a_prepared_corpus(corpus, pruned, tmp_path):
    out = tmp_path / "pick"
    alone = tmp_path / "binaries"  # fairseq binaries outside a prepared corpus
    alone.mkdir()
    (alone / "dict.de.txt").write_text((corpus / "bin" / "dict.de.txt").read_text())
    for data, needle in ((tmp_path / "nope", "no such folder"), (corpus / "spm", "spm/spm.model"),
                         (alone, "prepare-multi30k.sh")):  # fmt: skip
        proc = run(BIN / "dsp-pick-k", "--data", data, "--base", pruned, "--out", out,
                   check=False)  # fmt: skip
        one_line_error(proc, "dsp-pick-k", f"--data {data}", needle)
    assert not out.exists()


def test_a_failed_pick_k_leaves_no_empty_runs_folder(corpus, tmp_path_factory, tmp_path):
    # Given the binaries folder (accepted: it stands for its corpus); the unpruned model's
    # evaluation fails on a bad generate option, before any probe.
    out = tmp_path / "pick"
    proc = run(BIN / "dsp-pick-k", "--data", corpus / "bin", "--base",
               tiny_checkpoint(tmp_path_factory), "--out", out, "--gen-args=--no-such-option",
               check=False)  # fmt: skip
    assert "is the bin/ of a prepared corpus; using the corpus" in proc.stderr
    one_line_error(proc, "dsp-pick-k", "evaluate.sh failed")
    assert not (out / "runs").exists()


# -- dsp-translate-ct2 ---------------------------------------------------------------------


def translate(*argv, stdin="ein Hund .\n"):
    return subprocess.run([str(BIN / "dsp-translate-ct2"), *map(str, argv)], input=stdin,
                          capture_output=True, text=True, timeout=120)  # fmt: skip


def test_translate_needs_spm_or_pretokenized(ct2_model):
    proc = translate("--model", ct2_model)
    assert proc.returncode == 2 and "--spm" in proc.stderr and "--pretokenized" in proc.stderr
    assert proc.stdout == ""


@pytest.mark.parametrize(
    "option, value, needle",
    [
        ("--beam", "0", "--beam: 0 is too small"),
        ("--batch-size", "-3", "--batch-size: -3 is too small"),
        ("--threads", "two", "--threads: 'two' is not a whole number"),
        ("--max-len", "0", "--max-len: 0 is too small"),
    ],
)
def test_translate_refuses_bad_numbers(ct2_model, corpus, option, value, needle):
    proc = translate("--model", ct2_model, "--spm", corpus / "spm/spm.model", option, value)
    one_line_error(proc, "dsp-translate-ct2", needle)
    assert proc.stdout == ""


def test_translate_names_the_wrong_path(ct2_model, corpus, tmp_path):
    spm = corpus / "spm/spm.model"
    cases = [
        (("--model", tmp_path / "nope", "--spm", spm), f"--model {tmp_path / 'nope'}: no such folder"),
        (("--model", corpus, "--spm", spm), "has no model.bin"),
        (("--model", ct2_model, "--spm", tmp_path / "x.model"), f"--spm {tmp_path / 'x.model'}: no such file"),
        (("--model", ct2_model, "--spm", corpus / "raw/test.de"), "is not a sentencepiece model"),
    ]  # fmt: skip
    for argv, needle in cases:
        proc = translate(*argv)
        one_line_error(proc, "dsp-translate-ct2", needle)
        assert proc.stdout == ""


def test_translate_streams_batches_as_lines_arrive(ct2_model, corpus):
    """The first batch is translated and written while stdin is still open."""
    lines = (corpus / "raw" / "test.de").read_text(encoding="utf-8").splitlines()[:5]
    proc = subprocess.Popen(
        [str(BIN / "dsp-translate-ct2"), "--model", str(ct2_model), "--spm",
         str(corpus / "spm/spm.model"), "--batch-size", "2", "--max-len", "5", "--progress", "2"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    got = []
    reader = threading.Thread(target=lambda: got.extend([proc.stdout.readline() for _ in range(2)]))
    try:
        proc.stdin.write("\n".join(lines[:2]) + "\n")
        proc.stdin.flush()
        reader.start()
        reader.join(timeout=60)
        assert not reader.is_alive(), "no translation came back before stdin was closed"
        assert len(got) == 2 and all(line.endswith("\n") for line in got)
        proc.stdin.write("\n".join(lines[2:]) + "\n")
        proc.stdin.close()
        rest, err = proc.stdout.read(), proc.stderr.read()
        assert proc.wait(timeout=60) == 0, err
    finally:
        proc.kill()
    assert len(rest.splitlines()) == 3  # one translation per line, in order, none lost
    assert "dsp-translate-ct2: 2 sentences" in err and "dsp-translate-ct2: 4 sentences" in err
    # Whole-input translation gives the same lines (batching changes nothing).
    whole = translate("--model", ct2_model, "--spm", corpus / "spm/spm.model", "--max-len", "5",
                      stdin="\n".join(lines) + "\n")  # fmt: skip
    assert whole.stdout == "".join(got) + rest


# -- dsp-plot-gates ------------------------------------------------------------------------

# Four lines of a real `fairseq-train --log-format simple` run of this plugin (the demo's).
SIMPLE_LOG = """\
2026-12-01 09:39:14 | INFO | train_inner | epoch 001:      5 / 21 loss=9.13, nll_loss=9.129, gate_temperature=0.0199526, gate_khot_dist=0.0469, gate_mask_sum=5, ppl=559.71, wps=305.9, ups=0.5, wpb=573.4, bsz=20.8, num_updates=5, lr=0.001, gnorm=1.294, train_wall=10, wall=10
2026-12-01 09:39:24 | INFO | train_inner | epoch 001:     10 / 21 loss=8.737, nll_loss=8.696, gate_temperature=0.00266073, gate_khot_dist=0.0038, gate_mask_sum=5, ppl=414.8, wps=296, ups=0.49, wpb=605.2, bsz=16, num_updates=10, lr=0.002, gnorm=1.291, train_wall=10, wall=20
2026-12-01 09:39:26 | INFO | valid | epoch 001 | valid on 'valid' subset | loss 8.159 | nll_loss 8.064 | ppl 267.53 | wps 815.1 | wpb 436.3 | bsz 13.3 | num_updates 10
2026-12-01 09:39:27 | INFO | train | epoch 001 | loss 8.786 | nll_loss 8.752 | gate_temperature 0.0011885 | gate_khot_dist 0 | gate_mask_sum 5 | ppl 431.16 | num_updates 12 | wall 22
"""


def test_plot_gates_reads_a_simple_log(tmp_path):
    from dsp_fairseq.plots.gates import parse_simple_log

    series = parse_simple_log(SIMPLE_LOG.splitlines())
    assert series["gate_temperature"] == [(5, 0.0199526), (10, 0.00266073)]
    assert series["gate_khot_dist"] == [(5, 0.0469), (10, 0.0038)]
    assert series["loss"] == [(5, 9.13), (10, 8.737)] and series["valid_loss"] == [(10, 8.159)]
    log = tmp_path / "train.log"
    log.write_text(SIMPLE_LOG)
    proc = run(BIN / "dsp-plot-gates", "--log", log, "--output", tmp_path / "gates")
    assert (tmp_path / "gates.png").stat().st_size > 0 and "wrote" in proc.stdout


def test_plot_gates_refuses_a_log_it_cannot_read(tmp_path):
    log = tmp_path / "preprocess.log"
    log.write_text("2026-12-01 | INFO | fairseq_cli.preprocess | [de] Dictionary: 304 types\n")
    proc = run(BIN / "dsp-plot-gates", "--log", log, "--output", tmp_path / "gates", check=False)
    one_line_error(proc, "dsp-plot-gates", f"--log {log}", "--log-format json")
    missing = run(BIN / "dsp-plot-gates", "--log", tmp_path / "nope.log", "--output",
                  tmp_path / "gates", check=False)  # fmt: skip
    one_line_error(missing, "dsp-plot-gates", "--log", "no such log file")
    assert not list(tmp_path.glob("gates.*"))


# -- the recipes' --help -------------------------------------------------------------------

RECIPES = sorted(
    p for p in (ROOT / "examples/translation").glob("*.sh") if p.name != "recipe-lib.sh"
)


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda p: p.name)
def test_recipe_help_is_text_not_source(recipe):
    proc = run("bash", recipe, "--help")
    lines = proc.stdout.splitlines()
    assert len(lines) >= 5 and recipe.name in proc.stdout
    assert not [line for line in lines if line.startswith("#")], proc.stdout
    assert "set -euo" not in proc.stdout
    # every option the recipe parses is explained in its help
    parsed = set(re.findall(r"^\s+(--[a-z0-9-]+)\)", recipe.read_text(), flags=re.M))
    assert parsed and not {o for o in parsed if o not in proc.stdout}, parsed


# -- missing files name their option -------------------------------------------------------


def test_a_missing_checkpoint_or_table_names_its_option(tmp_path):
    nope = tmp_path / "nope.pt"
    cases = [
        ("dsp-export-ct2", ["--input", nope, "--output", tmp_path / "m"], "--input"),
        ("dsp-importance", ["--path", nope, "--data", tmp_path, "--output", tmp_path / "s.json"],
         "--path"),
        ("dsp-plot-heads", ["--masked", nope, "--output", tmp_path / "h"], "--masked"),
        ("dsp-plot-heads", ["--stripped", tmp_path, "--output", tmp_path / "h"], "--stripped"),
        ("dsp-plot-gates", ["--checkpoints", nope, "--output", tmp_path / "g"], "--checkpoints"),
        ("dsp-plot-sweep", ["--table", nope, "--output", tmp_path / "s"], "--table"),
    ]  # fmt: skip
    for prog, argv, option in cases:
        proc = run(BIN / prog, *argv, check=False)
        line = one_line_error(proc, prog, option)
        assert "give" in line, line  # and what to give instead
    assert sorted(p.name for p in tmp_path.iterdir()) == []
