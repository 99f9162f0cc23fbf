"""The recipes that start from a trained baseline, run for real on tiny data: sweep.sh's
+rec / +rec+kd rows (finetune-pruned.sh, dsp-reconstruct) and dsp-pick-k end to end.

A module of their own (with their own baseline, trained as reproduce.sh trains it in
test_recipes.py), so that pytest-xdist runs them beside test_recipes.py's sweep.
"""

import copy
import json
import os
import re
import signal
import subprocess
import time

import pytest
from conftest import write_multi30k_slice
from inprocess import call_cli, cli_ok
from test_recipes import (
    BIN,
    GATE_ARGS,
    GEN,
    N_TEST,
    RECIPES,
    TINY_MODEL,
    TRAIN,
    is_png,
    is_svg,
    run,
)


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    """A work folder with data/ and baseline/, made as reproduce.sh makes them."""
    src = write_multi30k_slice(tmp_path_factory.mktemp("m30k_raw"), 400, 30, N_TEST)
    work = tmp_path_factory.mktemp("work")
    run("bash", RECIPES / "prepare-multi30k.sh", "--out", work / "data", "--vocab-size", "300",
        "--src-dir", src)  # fmt: skip
    run("bash", RECIPES / "train-baseline.sh", "--data", work / "data", "--save-dir",
        work / "baseline", "--preset", "cpu-small", "--seed", "1", "--max-update", "30",
        "--train-args", f"{TRAIN} {TINY_MODEL}")  # fmt: skip
    return work


def test_finetune_rows_keep_the_heads_and_score_test_and_valid(baseline, tmp_path):
    """--recovery tuned adds METHOD+rec (dsp-reconstruct) and METHOD+rec+tuned (the tuned
    refit, tune-refit.sh) after every selection method; METHOD+ft fine-tunes METHOD's stripped model with its heads fixed (here after +rec:
    suffixes chain); --valid adds the validation BLEU; the fine-tuned checkpoint loads in
    fairseq-generate. (+kd, the same recipe with --teacher: test_recovery_end_to_end.py.)"""
    import torch

    from dsp_fairseq.checkpoint_io import CheckpointError, load_checkpoint, model_args
    from dsp_fairseq.recipes.finetuned_checkpoint import with_kept_heads

    work = baseline
    out = tmp_path / "sw"
    proc = run(
        "bash", RECIPES / "sweep.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--out", out, "--preset", "cpu-small",
        "--methods", "random,random+best,random+rec+ft", "--ks", "12",
        "--finetune-updates", "6", "--recovery", "tuned",
        "--valid",
        "--train-args", TRAIN, "--gen-args", GEN, "--no-plots",
    )  # fmt: skip
    assert "fine-tune" in proc.stdout and "6 updates" in proc.stdout
    rows = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    # --recovery tuned adds random+rec and random+rec+tuned after random (the default,
    # reconstruct, random+rec only); suffixes chain (+rec+ft starts from +rec)
    assert sorted(rows) == ["random", "random+best", "random+rec", "random+rec+ft",
                            "random+rec+tuned"]  # fmt: skip
    assert (out / "runs/random+rec-k12/eval-valid/score.json").stat().st_mtime <= (
        out / "runs/random+best-k12/recovery.json"
    ).stat().st_mtime  # +best ran after +rec
    # +best: the better on valid of random and random+rec, linked, its scores copied
    best = json.loads((out / "runs/random+best-k12/recovery.json").read_text())
    valid = {m: float(rows[m]["valid_sacrebleu"]) for m in ("random", "random+rec")}
    chosen = "random" if valid["random"] > valid["random+rec"] else "random+rec"
    assert best["chosen"] == {"random": "none", "random+rec": "reconstruct"}[chosen]
    for column in ("sacrebleu", "valid_sacrebleu", "params"):
        assert rows["random+best"][column] == rows[chosen][column]
    assert (out / "runs/random+best-k12/pruned.pt").resolve() == (
        out / f"runs/{chosen}-k12/pruned.pt"
    ).resolve()
    # +tuned: tune-refit.sh on random+rec's model, the better on valid kept as the row's model
    tuned = out / "runs/random+rec+tuned-k12"
    choice = json.loads((tuned / "tune.json").read_text())
    kept = (
        tuned / "run/pruned.pt"
        if choice["chosen"] == "tuned"
        else out / "runs/random+rec-k12/pruned.pt"
    )
    assert (tuned / "pruned.pt").read_bytes() == kept.read_bytes()
    assert float(rows["random+rec+tuned"]["valid_sacrebleu"]) == choice["valid_sacrebleu_chosen"]
    assert not (tuned / "eval-valid").exists()  # the row's valid score is the tuning's
    # --valid scored random+rec on valid already: its score is the tuning's start, not decoded again
    assert not (tuned / "valid-untuned").exists()
    assert choice["valid_sacrebleu"]["untuned"] == float(rows["random+rec"]["valid_sacrebleu"])
    assert f"tuned refit kept on valid if better -> {choice['chosen']}" in proc.stdout
    plain_state = load_checkpoint(rows["random"]["checkpoint"])
    rec_state = load_checkpoint(rows["random+rec"]["checkpoint"])
    assert rows["random"]["params"] == rows["random+rec"]["params"]
    assert rec_state["dsp_reconstruction"]["target"] == "residual"
    assert rec_state["dsp_kept_heads"] == plain_state["dsp_kept_heads"]
    assert "dsp_reconstruction" not in plain_state
    ft_log = (out / "runs/random+rec+ft-k12/train.log").read_text()
    distilled = [line for line in proc.stdout.splitlines() if "distilled from" in line]
    assert distilled and all("random+rec+tuned-k12" in line for line in distilled)  # +tuned's
    assert "distill_kl" not in ft_log  # +ft has no --teacher
    for r in rows.values():
        assert r["heads_kept"] == 12 and 0 <= float(r["valid_sacrebleu"]) <= 100
    assert (out / "baseline.valid.json").is_file()
    before = load_checkpoint(str(out / "runs/random+rec-k12/pruned.pt"))
    after = load_checkpoint(str(out / "runs/random+rec+ft-k12/pruned.pt"))
    assert model_args(after).stripped_heads == model_args(before).stripped_heads
    assert int(after["extra_state"]["train_iterator"]["iterations_in_epoch"]) > 0
    shapes = {k: v.shape for k, v in before["model"].items()}
    assert {k: v.shape for k, v in after["model"].items()} == shapes  # same heads, no gate
    moved = [k for k in shapes if not torch.equal(before["model"][k], after["model"][k])]
    assert any("self_attn.q_proj" in k for k in moved)  # the weights were trained
    assert (
        len((out / "runs/random+rec+ft-k12/eval/hyp.detok.en").read_text().splitlines()) == N_TEST
    )
    # the fine-tuned model keeps dsp-strip's record of the original head indices, so the
    # sweep's head maps draw it (fairseq-train alone drops the record)
    assert after["dsp_kept_heads"] == before["dsp_kept_heads"]
    from dsp_fairseq.plots import report

    cli_ok(report.main, "--sweep", out)  # in-process (its console use: test_recipes.py)
    assert (out / "plots/heads-random+rec+ft-k12.png").is_file()
    assert not list((out / "plots").glob("gates-*"))  # random heads train no gates
    with pytest.raises(CheckpointError, match="no 'dsp_kept_heads' record"):
        with_kept_heads(after, {k: v for k, v in after.items() if k != "dsp_kept_heads"})
    other = copy.deepcopy(before)
    model_args(other).stripped_heads = "enc-self=4,4,4;dec-self=4,4,4;cross=4,4,4"
    with pytest.raises(CheckpointError, match="are not the source's"):
        with_kept_heads(after, other)
    bad = run(
        "bash", RECIPES / "sweep.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--out", tmp_path / "sw2",
        "--preset", "cpu-small", "--methods", "dsp+ft", "--ks", "12", "--no-plots",
        "--gen-args", GEN, check=False,
    )  # fmt: skip
    assert bad.returncode == 1 and "list dsp before dsp+ft" in bad.stderr
    no_valid = run(
        "bash", RECIPES / "sweep.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--out", tmp_path / "sw3",
        "--methods", "random,random+best", "--ks", "12", "--no-plots", check=False,
    )  # fmt: skip
    assert (
        no_valid.returncode == 1 and "chooses on the validation set: add --valid" in no_valid.stderr
    )
    assert not (tmp_path / "sw3").exists()
    bad = run(
        "bash", RECIPES / "sweep.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--out", tmp_path / "sw4",
        "--methods", "random", "--ks", "12", "--recovery", "retrained", check=False,
    )  # fmt: skip
    assert (
        bad.returncode == 1
        and "--recovery must be reconstruct, tuned or none, not 'retrained'" in bad.stderr
    )
    assert not (tmp_path / "sw4").exists()


def test_pick_k_end_to_end_strips_the_chosen_k(baseline, tmp_path):
    """dsp-pick-k with every default, one probe (K = 6); the probe is prune-pipelined.sh's
    default run, so its folder also shows that recipe's defaults: validation under the test
    mask at the automatic interval, the best gates stripped, recovery best chosen on valid.
    prune-pipelined.sh on that folder with --recovery tuned (its default) then keeps best's
    choice and tunes it (the tuning's start not decoded again), and --recovery best again
    takes the tuning's start back: neither call strips, trains gates or decodes again."""
    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args
    from dsp_fairseq.cli import pick_k
    from dsp_fairseq.pruning.strip import kept_from_gate

    work = baseline
    base = work / "baseline/checkpoint_best.pt"
    common = ["dsp-pick-k", "--data", work / "data", "--base", base, "--out", tmp_path / "pk",
              "--gate-args", f"{TRAIN} {GATE_ARGS}", "--gen-args", GEN]  # fmt: skip
    # tolerance 100 BLEU: every K passes, so bisection goes down to the smallest candidate,
    # here at once (bisection over more candidates: test_smallest_passing_bisects_...)
    proc = run(*common, "--ks", "6,12", "--tolerance", "100")
    result = json.loads((tmp_path / "pk/pick.json").read_text())
    assert result["chosen_k"] == 6 and [p["k"] for p in result["probes"]] == [6]
    assert result["total_heads"] == 36 and "probe 1 (at most 2): K = 6" in proc.stdout
    assert "| 6 |" in (tmp_path / "pk/pick.md").read_text()
    assert is_png(tmp_path / "pk/frontier.png") and is_svg(tmp_path / "pk/frontier.svg")
    probe = tmp_path / "pk/runs/dsp-k6"
    report = (probe / "strip.txt").read_text()
    assert "heads kept: 6 of 36" in report
    # the defaults: distill gates, recovery best, the probe scored by the recipe's own choice
    assert result["recovery"] == "best" and result["gate_objective"] == "distill"
    assert result["gate_init"] == "importance"
    scores = json.loads((tmp_path / "pk/gate-init-scores.json").read_text())
    assert scores["metadata"]["granularity"] == "sentence"  # the gate init's: per sentence
    assert result["gate_epochs"] == 1 and "1 epoch(s) on" in proc.stdout
    assert result["refine_step"] == 1 and "refining" not in proc.stdout  # K = 6 is the smallest
    log = (probe / "train.log").read_text()
    assert "distill_kl" in log
    # validated every N updates (--validate-interval auto: a tenth of the epoch, here 2) in
    # the second half of the epoch only, and at its end; one interval checkpoint kept
    # (--keep-interval-updates 1) besides best and last
    interval = int(re.search(r"validation every (\d+) updates", proc.stdout)[1])
    valid = [json.loads(line.split("| valid | ")[1]) for line in log.splitlines()
             if "| valid | " in line]  # fmt: skip
    updates = [int(v["valid_num_updates"]) for v in valid]
    end = updates[-1]  # the end of the one epoch
    assert f"'validate_after_updates': {end // 2}," in log
    assert f"validation every {interval} updates from update {end // 2}," in proc.stdout
    assert len(updates) >= 3 and updates == [
        u for u in range(interval, end, interval) if u >= end // 2
    ] + [end]
    assert len(list(probe.glob("checkpoint_1_*.pt"))) == 1
    # the best gates (lowest validation loss) are the ones stripped
    best = load_checkpoint(str(probe / "checkpoint_best.pt"))
    assert round(best["extra_state"]["val_loss"], 3) == min(float(v["valid_loss"]) for v in valid)
    kept = kept_from_gate(best)
    prefixes = {"enc-self": "encoder.layers.{}.self_attn", "dec-self": "decoder.layers.{}.self_attn",
                "cross": "decoder.layers.{}.encoder_attn"}  # fmt: skip
    listed = 0
    for line in report.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 3 and parts[0] in prefixes:
            heads = json.loads(line[line.index("[") :])
            assert heads == kept[prefixes[parts[0]].format(parts[1])], line
            listed += 1
    assert listed == 9
    # --recovery best: both candidates scored on valid, the better one kept, the other not
    choice = json.loads((probe / "recovery.json").read_text())
    bleu = {c: json.loads((probe / f"valid-{c}/score.json").read_text())["sacrebleu"]
            for c in ("none", "reconstruct")}  # fmt: skip
    assert choice["valid_sacrebleu"] == bleu
    assert choice["chosen"] == ("none" if bleu["none"] > bleu["reconstruct"] else "reconstruct")
    assert f"recovery: best of none and reconstruct on valid -> {choice['chosen']}" in report
    assert ("dsp_reconstruction" in load_checkpoint(str(probe / "pruned.pt"))) == (
        choice["chosen"] == "reconstruct"
    )
    assert not list(probe.glob("pruned-*.pt"))
    assert result["probes"][0]["valid_sacrebleu"] == choice["valid_sacrebleu_chosen"]
    assert not (probe / "eval-valid").exists()  # not decoded twice
    chosen = model_args(load_checkpoint(str(tmp_path / "pk/pruned.pt")))
    assert chosen.stripped_heads
    # rerun (in-process: its recipes still run as subprocesses): every probe is reused,
    # nothing retrained or decoded again
    written = {p: p.stat().st_mtime_ns for p in probe.rglob("*") if p.is_file()}
    code, _, err = call_cli(pick_k.main, *common[1:], "--ks", "6,12", "--tolerance", "100")
    assert code == 0, err[-3000:]
    assert json.loads((tmp_path / "pk/pick.json").read_text()) == result
    assert {p: p.stat().st_mtime_ns for p in written} == written

    def pipelined(*more):  # prune-pipelined.sh on the probe's finished folder
        return run(
            "bash", RECIPES / "prune-pipelined.sh", "--data", work / "data", "--base", base,
            "--heads-to-keep", "6", "--save-dir", probe, "--preset", "cpu-small",
            "--gen-args", GEN, "--importance-scores", tmp_path / "pk/gate-init-scores.json",
            "--train-args", f"{TRAIN} {GATE_ARGS}", *more,
        )  # fmt: skip

    # --recovery tuned (the recipe's default) afterwards: best's choice kept (nothing trained,
    # stripped or decoded again), the tuned refit of the model it chose on top
    kept = {p: p.stat().st_mtime_ns for p in probe.glob("valid-*/score.json")}
    gates = {p: p.stat().st_mtime_ns for p in probe.glob("checkpoint*.pt")}
    proc = pipelined("--recovery", "tuned")
    assert "strip the heads" not in proc.stdout
    assert {p: p.stat().st_mtime_ns for p in probe.glob("valid-*/score.json")} == kept
    assert {p: p.stat().st_mtime_ns for p in probe.glob("checkpoint*.pt")} == gates
    tune = json.loads((probe / "tuned/tune.json").read_text())
    # the tuning's start was decoded on valid by the recovery's choice: not decoded again
    assert not (probe / "tuned/valid-untuned").exists() and (probe / "tuned/valid-tuned").is_dir()
    assert (probe / "pruned.pt").read_bytes() == (probe / "tuned/pruned.pt").read_bytes()
    # the tuning's start is kept beside it: the model the recovery best chose (its valid score)
    untuned = load_checkpoint(str(probe / "pruned.untuned.pt"))
    assert ("dsp_reconstruction" in untuned) == (choice["chosen"] == "reconstruct")
    assert tune["valid_sacrebleu"]["untuned"] == choice["valid_sacrebleu_chosen"]
    report = (probe / "strip.txt").read_text()
    assert f"recovery: best of none and reconstruct on valid -> {choice['chosen']}" in report
    assert f"recovery: tuned refit kept on valid if better -> {tune['chosen']}" in report
    assert report.count("tuned refit") == 1 and "tuned refit" in proc.stdout
    # --recovery best again: the tuning's start is the folder's model again (nothing stripped
    # or decoded again); the tuning and its start are gone
    start_bytes = (probe / "pruned.untuned.pt").read_bytes()
    proc = pipelined("--recovery", "best")
    assert "the choice of the earlier --recovery tuned" in proc.stdout
    assert "strip the heads" not in proc.stdout and "translate valid" not in proc.stdout
    assert {p: p.stat().st_mtime_ns for p in probe.glob("valid-*/score.json")} == kept
    assert (probe / "pruned.pt").read_bytes() == start_bytes
    assert not (probe / "tuned").exists() and not (probe / "pruned.untuned.pt").exists()
    assert "tuned refit" not in (probe / "strip.txt").read_text()
    assert (probe / "recovery").read_text().strip() == "best"
    # (in-process: the refusal comes before any recipe runs, so nothing escapes the capture)
    code, _, err = call_cli(pick_k.main, *common[1:], "--ks", "6,99")
    assert code == 2 and "--ks must lie in [1, 36]" in err
    code, _, err = call_cli(pick_k.main, *common[1:], "--gate-epochs", "0")
    assert code == 2 and "--gate-epochs must be >= 1, got 0" in err
    code, _, err = call_cli(pick_k.main, *common[1:], "--refine-step", "-1")
    assert code == 2 and "--refine-step must be >= 0, got -1" in err


def test_restarts_keep_the_gate_run_that_decodes_valid_best(baseline, tmp_path):
    """prune-pipelined.sh --restarts 2 with the default recovery: the same run with seeds 1 and
    2 in their own folders, side by side (--restart-jobs 2, each with its log), one importance
    file for both, each stopped at --recovery best (its own weights or the refit, the better on
    valid); the run whose model decodes valid best is copied to SAVE_DIR and tuned there, once.
    A rerun (one run at a time) trains and decodes nothing again; --restart-metric nll chooses
    by the validation NLL instead."""
    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args

    work = baseline
    out = tmp_path / "restarts"

    def prune(restarts, *more, jobs=1, check=True):
        return run(
            "bash", RECIPES / "prune-pipelined.sh", "--data", work / "data",
            "--base", work / "baseline/checkpoint_best.pt", "--heads-to-keep", "8",
            "--save-dir", out, "--preset", "cpu-small",
            "--restarts", restarts, "--restart-jobs", jobs, "--validate-interval", "0",
            "--gen-args", GEN, *more,
            "--train-args", f"{TRAIN} {GATE_ARGS} --max-update 3", check=check,
        )  # fmt: skip

    proc = prune(2, jobs=2)
    assert "2 gate runs, 2 at a time, 1 thread(s) each" in proc.stdout
    assert f"restart 2 of 2: seed 2 -> {out}/seed-2 (output: {out}/seed-2.log)" in proc.stdout
    runs = {s: out / f"seed-{s}" for s in (1, 2)}
    for s, folder in runs.items():
        assert f"'seed': {s}," in (folder / "train.log").read_text()
        assert f"done: {folder}/pruned.pt" in (out / f"seed-{s}.log").read_text()
        assert not (folder / "gate-init-scores.json").exists()  # the shared one, computed once
        # each run stops at best; only the chosen one is tuned, in SAVE_DIR
        assert (folder / "recovery").read_text().strip() == "best"
        assert not (folder / "tuned").exists()
    assert (out / "gate-init-scores.json").is_file()
    assert proc.stdout.count("head importance (sentence level) of") == 1
    bleu = {f"seed-{s}": json.loads((f / "recovery.json").read_text())["valid_sacrebleu_chosen"]
            for s, f in runs.items()}  # fmt: skip
    choice = json.loads((out / "restarts.json").read_text())
    chosen = "seed-2" if bleu["seed-2"] > bleu["seed-1"] else "seed-1"
    assert choice == {"restarts": 2, "chosen": chosen, "valid_sacrebleu": bleu,
                      "valid_sacrebleu_chosen": bleu[chosen]}  # fmt: skip
    assert (out / "pruned.untuned.pt").read_bytes() == (out / chosen / "pruned.pt").read_bytes()
    tune = json.loads((out / "tuned/tune.json").read_text())
    assert tune["valid_sacrebleu"]["untuned"] == bleu[chosen]  # scored once, not decoded again
    assert not (out / "tuned/valid-untuned").exists()
    assert (out / "pruned.pt").read_bytes() == (out / "tuned/pruned.pt").read_bytes()
    report = (out / "strip.txt").read_text()
    assert report.startswith((out / chosen / "strip.txt").read_text())
    assert f"restarts: best of 2 gate runs on valid -> {chosen}" in report
    assert report.count("tuned refit kept on valid if better") == 1
    assert model_args(load_checkpoint(str(out / "pruned.pt"))).stripped_heads
    # a rerun writes nothing but the choice, made again, the same (SAVE_DIR/pruned.pt, the
    # tuned model, is not even briefly replaced by the untuned one)
    written = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    prune(2)
    changed = [p for p in written if p.stat().st_mtime_ns != written[p]]
    assert changed == [out / "restarts.json"], changed
    assert json.loads((out / "restarts.json").read_text()) == choice
    # --restart-metric nll: the same runs (nothing trained again), chosen by fairseq-validate's
    # label NLL of each kept model on valid, the lowest (ties: the first seed); the tuning kept
    # when that is the same run, else done again for the newly chosen one
    proc = prune(2, "--restart-metric", "nll", "--recovery", "best")
    nll = {f"seed-{s}": json.loads((f / "valid-loss.json").read_text())["valid_nll_loss"]
           for s, f in runs.items()}  # fmt: skip
    by_nll = min(sorted(nll), key=nll.get)
    assert json.loads((out / "restarts.json").read_text()) == {
        "restarts": 2, "chosen": by_nll, "valid_sacrebleu": bleu,
        "valid_sacrebleu_chosen": bleu[by_nll], "metric": "nll", "valid_nll_loss": nll,
        "valid_nll_loss_chosen": nll[by_nll],
    }  # fmt: skip
    assert all(v > 0 for v in nll.values()) and "lowest validation NLL" in proc.stdout
    # --recovery best: no tuning describes the folder's model any more
    assert (out / "pruned.pt").read_bytes() == (out / by_nll / "pruned.pt").read_bytes()
    assert not (out / "tuned").exists() and not (out / "pruned.untuned.pt").exists()
    report = (out / "strip.txt").read_text()
    assert f"restarts: best of 2 gate runs on valid NLL -> {by_nll}" in report
    assert "tuned refit" not in report
    assert all((f / "checkpoint_last.pt").stat().st_mtime_ns == written[f / "checkpoint_last.pt"]
               for f in runs.values())  # fmt: skip
    # one run in the same folder afterwards: its own gates, stripped; the restarts' choice gone
    prune(1, "--recovery", "none")
    assert not (out / "restarts.json").exists() and (out / "checkpoint_last.pt").is_file()
    assert "restarts:" not in (out / "strip.txt").read_text()
    proc = prune(0, check=False)
    assert proc.returncode != 0 and "--restarts takes a positive number" in proc.stderr
    proc = prune(2, jobs=0, check=False)
    assert proc.returncode != 0 and "--restart-jobs takes a positive number or auto" in proc.stderr
    proc = prune(2, "--restart-metric", "loss", check=False)
    assert (
        proc.returncode != 0 and "--restart-metric must be bleu or nll, not 'loss'" in proc.stderr
    )


def kept_per_type(strip_report: str) -> dict:
    """{attention type: [heads kept per layer]} of dsp-strip's table."""
    kept = {}
    for kind, kept_of in re.findall(
        r"^(enc-self|dec-self|cross)\s+\d+\s+(\d+)/\d+", strip_report, re.M
    ):
        kept.setdefault(kind, []).append(int(kept_of))
    return kept


def test_type_split_shares_k_among_the_attention_types_unless_the_user_sets_a_layout(
    baseline, tmp_path
):
    """prune-pipelined.sh's default for dsp gates, --type-split auto: at K <= H/4 the gate
    run's K is split among the attention types by their heads (--heads-to-keep-per-type
    proportional-at-small-k; 12 heads each here, so K = 8 gives 2 / 3 / 3, the remainders' ties
    to cross, then dec-self), and the stripped model keeps exactly that many of each. A layout of the user's own in --train-args
    (--heads-per-attention) replaces the split, which would otherwise contradict it; another
    value is refused before anything runs."""
    from dsp_fairseq.models.head_layout import proportional_split

    def prune(out, k, split, *train, check=True):
        return run(
            "bash", RECIPES / "prune-pipelined.sh", "--data", baseline / "data",
            "--base", baseline / "baseline/checkpoint_best.pt", "--heads-to-keep", k,
            "--save-dir", out, "--preset", "cpu-small", "--recovery", "none",
            "--gate-init", "none", "--validate-interval", "0", *split,
            "--train-args", f"{TRAIN} {GATE_ARGS} --max-update 2 {' '.join(train)}", check=check,
        )  # fmt: skip

    proc = prune(tmp_path / "prop", 8, ())
    assert "split among the attention types: auto, proportional at K <= H/4" in proc.stdout
    kept = kept_per_type((tmp_path / "prop/strip.txt").read_text())
    assert {kind: sum(v) for kind, v in kept.items()} == {"enc-self": 2, "dec-self": 3, "cross": 3}
    assert proportional_split(8, {"enc-self": 12, "dec-self": 12, "cross": 12}) == {
        "enc-self": 2, "dec-self": 3, "cross": 3}  # fmt: skip
    log = (tmp_path / "prop/train.log").read_text()
    assert "heads_to_keep_per_type='proportional-at-small-k'" in log

    proc = prune(
        tmp_path / "own", 9, ("--type-split", "proportional"), "--heads-per-attention", "1,1"
    )
    assert "split among the attention types: of --train-args" in proc.stdout
    kept = kept_per_type((tmp_path / "own/strip.txt").read_text())
    assert kept == {"enc-self": [1, 1, 1], "dec-self": [1, 1, 1], "cross": [1, 1, 1]}

    proc = prune(tmp_path / "bad", 8, ("--type-split", "even"), check=False)
    assert (
        proc.returncode == 1
        and "--type-split must be auto, free or proportional, not 'even'" in proc.stderr
    )
    assert not (tmp_path / "bad").exists()


def test_sweep_restarts_reach_every_pipelined_row(baseline, tmp_path):
    """sweep.sh --restarts 2 --gate-epochs 2 --restart-metric nll: the dsp row is
    prune-pipelined.sh's restarts (two gate runs of two epochs each, the temperature annealed
    over both, the stripped model with the lower validation NLL kept, the row's model). Its
    +rec row is left out (--recovery none): it refits the row's model, whatever made it
    (test_finetune_rows_keep_the_heads_and_score_test_and_valid)."""
    work, out = baseline, tmp_path / "sw"

    def sweep(out, *more, check=True):
        return run(
            "bash", RECIPES / "sweep.sh", "--data", work / "data",
            "--base", work / "baseline/checkpoint_best.pt", "--out", out, "--preset", "cpu-small",
            "--methods", "dsp", "--ks", "8", "--gate-init", "none", "--validate-interval", "0",
            "--gen-args", GEN, "--no-plots", "--restart-jobs", "1", "--recovery", "none",
            "--train-args", f"{TRAIN} {GATE_ARGS}", *more, check=check,
        )  # fmt: skip

    proc = sweep(out, "--restarts", "2", "--gate-epochs", "2", "--restart-metric", "nll")
    row = out / "runs/dsp-k8"
    choice = json.loads((row / "restarts.json").read_text())
    assert sorted(choice["valid_sacrebleu"]) == ["seed-1", "seed-2"]
    # --restart-metric reaches prune-pipelined.sh: the run with the lower validation NLL kept
    nll = choice["valid_nll_loss"]
    assert choice["metric"] == "nll" and choice["chosen"] == min(sorted(nll), key=nll.get)
    assert (row / "pruned.pt").read_bytes() == (row / choice["chosen"] / "pruned.pt").read_bytes()
    assert (
        f"best of 2 gate runs on valid NLL -> {choice['chosen']}" in (row / "strip.txt").read_text()
    )
    rows = {r["method"]: r for r in json.loads((out / "results.json").read_text())}
    assert sorted(rows) == ["dsp"] and "2 gate runs" in proc.stdout
    log = (row / "seed-1/train.log").read_text()
    assert "| end of epoch 2 " in log and "| end of epoch 3 " not in log
    assert "of the run's" in log and "--max-epoch 2 x" in log  # annealed over both epochs
    for bad, needle in [(("--restarts", "0"), "--restarts takes a positive number of gate runs"),
                        (("--restart-jobs", "x"), "--restart-jobs takes a positive number or auto"),
                        (("--restart-metric", "loss"), "--restart-metric must be bleu or nll"),
                        (("--gate-epochs", "0"), "--gate-epochs takes a positive number of epochs"),
                        (("--type-split", "even"), "--type-split must be auto, free or proportional")]:  # fmt: skip
        proc = sweep(tmp_path / "sw2", *bad, check=False)
        assert proc.returncode == 1 and needle in proc.stderr and not (tmp_path / "sw2").exists()


def test_interrupted_side_by_side_restarts_stop_their_gate_runs(baseline, tmp_path):
    """Background jobs of a script ignore Ctrl-C, so prune-pipelined.sh --restart-jobs 2 stops
    its gate runs itself when it is interrupted, and says so: nothing trains on behind it."""
    work, out = baseline, tmp_path / "stopped"
    cmd = [
        "bash", RECIPES / "prune-pipelined.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--heads-to-keep", "8",
        "--save-dir", out, "--preset", "cpu-small", "--recovery", "none", "--gate-init", "none",
        "--restarts", "2", "--restart-jobs", "2", "--validate-interval", "0",
        "--train-args", f"{TRAIN} {GATE_ARGS} --max-epoch 100000",
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}")

    def interruptible():
        # as in a terminal: a test run started in the background (`cmd &`, nohup) inherits
        # SIGINT ignored, and bash cannot trap a signal ignored on entry
        signal.signal(signal.SIGINT, signal.SIG_DFL)

    # its own process group, so that a failure below leaves nothing training behind
    proc = subprocess.Popen([str(c) for c in cmd], env=env, text=True, preexec_fn=interruptible,
                            start_new_session=True, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)  # fmt: skip
    try:
        deadline = time.time() + 240
        logs = [out / f"seed-{s}/train.log" for s in (1, 2)]
        while not all(log.is_file() and "num_updates" in log.read_text() for log in logs):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(1)
        proc.send_signal(signal.SIGINT)
        # a hang guard, not a speed check: under load the gate runs take a while to stop
        _, err = proc.communicate(timeout=240)
        assert proc.returncode != 0 and "interrupted: the gate runs were stopped" in err
        time.sleep(2)
        ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert str(out) not in ps, [line for line in ps.splitlines() if str(out) in line]
    finally:  # checked above; this only cleans up after a failure
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_tuned_refit_trains_only_the_refit_layers_and_keeps_the_better_on_valid(baseline, tmp_path):
    """The recipes' default recovery, tuned. prune-importance.sh: the reconstructed model
    (PRUNED.untuned.pt), one epoch of distillation into out_proj and fc2 alone (every other
    tensor unchanged), both decoded on valid and the better copied to PRUNED.pt, the choice in
    its report; a rerun writes nothing. prune-pipelined.sh tunes the recovery it chose the same
    way (test_pick_k_end_to_end_strips_the_chosen_k, on its probe's folder; with --restarts:
    test_restarts_keep_the_gate_run_that_decodes_valid_best)."""
    import torch

    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args
    from dsp_fairseq.recipes import pipelined_args

    work, out = baseline, tmp_path / "imp8.pt"
    base = work / "baseline/checkpoint_best.pt"

    def prune(*more, check=True):
        return run(
            "bash", RECIPES / "prune-importance.sh", "--data", work / "data", "--base", base,
            "--heads-to-keep", "8", "--output", out, "--preset", "cpu-small", "--gen-args", GEN,
            "--importance-args", "--max-batches 2", *more, check=check,
        )  # fmt: skip

    proc = prune()  # the default: --recovery tuned
    tuned = tmp_path / "imp8.tuned"
    start, run_model = (
        load_checkpoint(str(tmp_path / "imp8.untuned.pt")),
        load_checkpoint(str(tuned / "run/pruned.pt")),
    )
    assert model_args(start).stripped_heads == model_args(run_model).stripped_heads
    changed = {
        name for name, t in start["model"].items() if not torch.equal(t, run_model["model"][name])
    }
    assert changed and all(".out_proj." in n or ".fc2." in n for n in changed), changed
    assert any(".out_proj." in n for n in changed) and any(".fc2." in n for n in changed)
    # one epoch of 1024-token batches, counted as the recipe counts it (in-process: no ~4 s
    # start-up of its own)
    positions = model_args(load_checkpoint(str(base))).max_source_positions
    epoch = pipelined_args.epoch_updates(str(work / "data/bin"), 1024, 1, positions)
    log = (tuned / "run/train.log").read_text()
    assert f"'max_update': {int(epoch)}" in log and "train_only='out_proj,fc2'" in log
    bleu = {c: json.loads((tuned / f"valid-{c}/score.json").read_text())["sacrebleu"]
            for c in ("untuned", "tuned")}  # fmt: skip
    chosen = "tuned" if bleu["tuned"] > bleu["untuned"] else "untuned"
    assert json.loads((tuned / "tune.json").read_text()) == {
        "tuning": "best", "chosen": chosen, "valid_sacrebleu": bleu,
        "valid_sacrebleu_chosen": bleu[chosen],
    }  # fmt: skip
    src = tuned / "run/pruned.pt" if chosen == "tuned" else tmp_path / "imp8.untuned.pt"
    assert out.read_bytes() == src.read_bytes()
    report = (tmp_path / "imp8.strip.txt").read_text()
    assert report.startswith((tmp_path / "imp8.untuned.strip.txt").read_text())
    assert f"recovery: tuned refit kept on valid if better -> {chosen}" in report
    assert f"recovery: tuned refit kept on valid if better -> {chosen}" in proc.stdout
    written = {p: p.stat().st_mtime_ns for p in tmp_path.rglob("*") if p.is_file()}
    prune("--recovery", "tuned")
    assert [p for p in written if p.stat().st_mtime_ns != written[p]] == []
    proc = prune("--recovery", "retrained", check=False)
    assert proc.returncode != 0 and "--recovery must be reconstruct, tuned or none" in proc.stderr

    # prune-pipelined.sh's gate init scores per sentence: importance's per-token file (written
    # above) is refused, not reused, and nothing is trained
    save = tmp_path / "pipelined"
    proc = run(
        "bash", RECIPES / "prune-pipelined.sh", "--data", work / "data", "--base", base,
        "--heads-to-keep", "8", "--save-dir", save, "--preset", "cpu-small", "--gen-args", GEN,
        "--importance-scores", tmp_path / "importance.json", "--train-args", TRAIN, check=False,
    )  # fmt: skip
    assert proc.returncode != 0 and not (save / "checkpoint_last.pt").exists()
    assert "holds token-level importance scores, this call needs sentence-level ones" in proc.stderr


# Quick tests last: pytest-xdist hands this worker its next module when two tests of this
# one are left, and that module then waits behind them.
def test_smallest_passing_bisects_the_candidates():
    from dsp_fairseq.cli.pick_k import default_candidates, smallest_passing

    asked = []

    def at_least(threshold):
        def passes(k):
            asked.append(k)
            return k >= threshold

        return passes

    ks = default_candidates(72)
    assert ks == [9, 18, 27, 36, 45, 54, 63]
    for threshold, expected in [(1, 9), (20, 27), (63, 63), (64, None), (36, 36)]:
        asked.clear()
        assert smallest_passing(ks, at_least(threshold)) == expected
        assert len(asked) <= 3 and len(set(asked)) == len(asked)  # log2(8) probes, no repeats


def test_search_refines_between_the_last_failing_and_the_first_passing_candidate():
    """dsp-pick-k's default --refine-step 1: after the H/8 grid, the K between its last
    failing and first passing candidate are bisected, so the answer is the exact smallest
    passing K; no probe repeats, none leaves the candidates' range."""
    from dsp_fairseq.cli.pick_k import default_candidates, search

    ks = default_candidates(72)
    fine = list(range(46, 54))  # the grid's 45 fails and 54 passes
    for threshold, step, expected, finer in [
        (48, 1, 48, fine),
        (48, 3, 48, [48, 51]),
        (49, 3, 51, [48, 51]),
        (48, 0, 54, []),  # the grid only
        (54, 1, 54, fine),  # 46..53 all fail: the grid's answer stands
        (5, 1, 9, []),  # the smallest candidate passes: nothing below the range
        (70, 1, None, []),  # nothing passes: nothing above it
    ]:
        asked, refined = [], []

        def passes(k, asked=asked, threshold=threshold):
            asked.append(k)
            return k >= threshold

        assert search(ks, passes, step, refined.append) == expected, (threshold, step)
        assert refined == ([finer] if finer else [])
        assert len(asked) <= 3 + len(finer).bit_length() and len(set(asked)) == len(asked)
        assert all(ks[0] <= k <= ks[-1] for k in asked)


def test_pick_k_reads_the_score_the_recipe_chose_by(tmp_path):
    """A probe's valid score is the one prune-pipelined.sh chose by: with --recovery tuned the
    tuned refit's choice, then the restarts' choice (--restarts), else --recovery best's; with
    none of them, None (pick-k decodes valid)."""
    from dsp_fairseq.cli.pick_k import chosen_valid_bleu

    def write(name, bleu):
        (tmp_path / name).write_text(json.dumps({"valid_sacrebleu_chosen": bleu}))

    assert chosen_valid_bleu(str(tmp_path), "best") is None
    write("recovery.json", 31.5)
    assert chosen_valid_bleu(str(tmp_path), "best") == 31.5
    assert chosen_valid_bleu(str(tmp_path), "reconstruct") is None  # a stale file is not read
    write("restarts.json", 33.25)
    assert chosen_valid_bleu(str(tmp_path), "best") == 33.25
    assert chosen_valid_bleu(str(tmp_path), "none") == 33.25
    assert chosen_valid_bleu(str(tmp_path), "tuned") == 33.25  # not tuned yet
    (tmp_path / "tuned").mkdir()
    write("tuned/tune.json", 34.5)  # --recovery tuned: the tuned refit's choice comes last
    assert chosen_valid_bleu(str(tmp_path), "tuned") == 34.5
    assert chosen_valid_bleu(str(tmp_path), "best") == 33.25


def test_pick_k_passes_the_restart_options_to_every_probe(baseline, tmp_path, monkeypatch):
    """dsp-pick-k --restarts 3 --restart-metric nll: each probe is prune-pipelined.sh with
    both options, scored by the valid sacreBLEU its restarts' choice recorded; pick.json and
    pick.md say how the runs were chosen. (The recipes are replaced by a recorder: the
    restarts themselves run in test_restarts_keep_the_gate_run_that_decodes_valid_best.)"""
    from dsp_fairseq.cli import pick_k

    calls = []

    def recipe(name, *args):
        calls.append((name, [str(a) for a in args]))
        row = args[args.index("--save-dir") + 1]
        os.makedirs(row, exist_ok=True)
        with open(os.path.join(row, "pruned.pt"), "w") as f:
            f.write(f"the model of {row}")
        with open(os.path.join(row, "restarts.json"), "w") as f:
            json.dump(
                {"valid_sacrebleu_chosen": 30.0 + int(args[args.index("--heads-to-keep") + 1])}, f
            )

    monkeypatch.setattr(pick_k, "run_recipe", recipe)
    monkeypatch.setattr(pick_k, "valid_bleu", lambda *a: 40.0)
    out = tmp_path / "pk"
    code, stdout, err = call_cli(
        pick_k.main, "--data", baseline / "data", "--base", baseline / "baseline/checkpoint_best.pt",
        "--out", out, "--ks", "6,12", "--tolerance", "3", "--refine-step", "0", "--restarts", "3",
        "--restart-metric", "nll", "--type-split", "proportional",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert [name for name, _ in calls] == ["prune-pipelined.sh"] * 2
    for _, args in calls:
        assert args[args.index("--restarts") + 1] == "3"
        assert args[args.index("--restart-metric") + 1] == "nll"
        assert args[args.index("--type-split") + 1] == "proportional"
    result = json.loads((out / "pick.json").read_text())
    assert result["restarts"] == 3 and result["restart_metric"] == "nll"
    assert result["type_split"] == "proportional"
    assert result["chosen_k"] == 12 and [p["valid_sacrebleu"] for p in result["probes"]] == [36, 42]
    assert "best of 3 gate runs by valid NLL" in (out / "pick.md").read_text()
    assert (out / "pruned.pt").read_text() == f"the model of {out / 'runs/dsp-k12'}"
    code, _, err = call_cli(pick_k.main, "--data", baseline / "data", "--base", "x.pt", "--out",
                            out, "--restart-metric", "loss")  # fmt: skip
    assert code == 2 and "invalid choice: 'loss'" in err
