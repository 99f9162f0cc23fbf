"""dsp-pick-k end to end and prune-pipelined.sh's restarts, run for real on tiny data from
the trained baseline of test_recipes_from_baseline.py (a module of their own, so that
pytest-xdist runs them beside that one's)."""

import json
import os
import re
import signal
import subprocess
import time

import pytest
from inprocess import call_cli
from test_recipes import BIN, GATE_ARGS, GEN, RECIPES, TRAIN, is_png, is_svg, run
from test_recipes_from_baseline import recipe_baseline


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return recipe_baseline(tmp_path_factory)


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
    # stripped or decoded again), the tuned refit of the model it chose on top, with the
    # options of --tune-args (its dropout: 0 by default)
    kept = {p: p.stat().st_mtime_ns for p in probe.glob("valid-*/score.json")}
    gates = {p: p.stat().st_mtime_ns for p in probe.glob("checkpoint*.pt")}
    proc = pipelined("--recovery", "tuned", "--tune-args", "--dropout 0.2 --lr 2e-4")
    tune_log = (probe / "tuned/run/train.log").read_text()
    assert " dropout=0.2," in tune_log and "'lr': [0.0002]" in tune_log
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


def test_pick_k_table_says_where_bleu_falls_as_k_grows():
    """The bisection assumes BLEU does not fall as K grows; session 40's search with the
    tuned refit (bench/recovery/pick-k-tuned-s40) broke that below K = 45. pick.md says
    where, so a reader knows a skipped K below the chosen one may pass too."""
    from conftest import ROOT

    from dsp_fairseq.cli.pick_k import falls_with_k, table_markdown

    result = json.loads((ROOT / "bench/recovery/pick-k-tuned-s40/pick.json").read_text())
    assert falls_with_k(result["probes"]) == [(36, 45), (49, 51)]
    text = table_markdown(result)
    assert "BLEU falls as K grows between K = 36 -> 45 (39.76 -> 39.57), 49 -> 51" in text
    assert "(probe it with --ks)" in text
    rising = [{"k": k, "valid_sacrebleu": 30.0 + k / 10, "delta": 0.0, "within": k > 40}
              for k in (54, 36, 45)]  # fmt: skip
    assert falls_with_k(rising) == []
    assert "falls" not in table_markdown({**result, "probes": rising})
    # the tuning's options (--tune-args) are named beside the recovery
    assert "recovery tuned." in text
    assert "recovery tuned (--dropout 0)." in table_markdown({**result, "tune_args": "--dropout 0"})
    # and the gate seed, when not the default 1 (pick.json records it since session 48)
    assert "gate seed" not in text and "gate seed" not in table_markdown({**result, "seed": 1})
    assert "recovery tuned, gate seed 2." in table_markdown({**result, "seed": 2})


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
    """dsp-pick-k --restarts 3 --restart-metric nll (and --tune-args, by default --lr 2e-4): each probe is
    prune-pipelined.sh with these options, scored by the valid sacreBLEU its restarts' choice recorded; pick.json and
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
        "--restart-metric", "nll", "--type-split", "proportional", "--tune-args", "--dropout 0",
        "--recovery", "tuned", "--seed", "2",
    )  # fmt: skip
    assert code == 0, err[-3000:]
    assert [name for name, _ in calls] == ["prune-pipelined.sh"] * 2
    for _, args in calls:
        assert args[args.index("--seed") + 1] == "2"
        assert args[args.index("--restarts") + 1] == "3"
        assert args[args.index("--tune-args") + 1] == "--dropout 0"
        assert args[args.index("--restart-metric") + 1] == "nll"
        assert args[args.index("--type-split") + 1] == "proportional"
    result = json.loads((out / "pick.json").read_text())
    assert result["restarts"] == 3 and result["restart_metric"] == "nll"
    assert result["type_split"] == "proportional" and result["tune_args"] == "--dropout 0"
    assert result["chosen_k"] == 12 and [p["valid_sacrebleu"] for p in result["probes"]] == [36, 42]
    assert "best of 3 gate runs by valid NLL, gate seed 2." in (out / "pick.md").read_text()
    assert result["seed"] == 2
    assert (out / "pruned.pt").read_text() == f"the model of {out / 'runs/dsp-k12'}"
    # without --tune-args, --recovery tuned tunes at 2e-4 (the probes are scored without a
    # fine-tune); with the default --recovery best no tuning is recorded
    for recovery, tune_args in (("tuned", "--lr 2e-4"), ("best", "")):
        calls.clear()
        code, _, err = call_cli(
            pick_k.main, "--data", baseline / "data", "--base",
            baseline / "baseline/checkpoint_best.pt", "--out", tmp_path / recovery, "--ks", "6",
            "--tolerance", "100", "--recovery", recovery,
        )  # fmt: skip
        assert code == 0, err[-3000:]
        ((_, args),) = calls
        assert args[args.index("--tune-args") + 1] == "--lr 2e-4"
        assert json.loads((tmp_path / recovery / "pick.json").read_text())["tune_args"] == tune_args
    code, _, err = call_cli(pick_k.main, "--data", baseline / "data", "--base", "x.pt", "--out",
                            out, "--restart-metric", "loss")  # fmt: skip
    assert code == 2 and "invalid choice: 'loss'" in err
