"""The converged-benchmark report: rows, empty cells for missing runs, seed spread."""

import json
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import layout_split  # noqa: E402


def report_text(folder) -> str:
    """What bench/converged_report.py prints for the tables in FOLDER."""
    return subprocess.run(
        [sys.executable, ROOT / "bench/converged_report.py", "--dir", folder],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def spliced(folder, marker: str) -> str:
    """A RESULTS.md in FOLDER with MARKER's block, after converged_report.py --splice."""
    doc = folder / "RESULTS.md"
    doc.write_text(f"a\n<!-- {marker} -->\nold\n<!-- /{marker} -->\nb\n")
    splice_recovery(folder, doc)
    return doc.read_text()


def splice_recovery(folder, doc) -> None:
    """converged_report.py --marker recovery on FOLDER's results, its blocks spliced into DOC."""
    subprocess.run(
        [sys.executable, ROOT / "bench/converged_report.py", "--dir", folder, "--marker",
         "recovery", "--splice", doc], check=True, capture_output=True,
    )  # fmt: skip


def write_todays_h4_run(folder) -> None:
    """Today's H/4 run of gate seed 1 in FOLDER: stage 6an's start and tunings (test 34.0 /
    36.0 / 37.0, valid 35.0 / 37.0 / 38.0) and the fine-tune of its tuning at 0 (39.0, 40.0)."""
    model = " {} valid {} test {} loss 1.0 kl 0.1 hidden 0.05"
    (folder / "tune-dropout.txt").write_text(
        "split-k18-s1:" + model.format("start", 35.0, 34.0) + ";" + model.format("d0.1", 37.0, 36.0)
        + ";" + model.format("d0", 38.0, 37.0) + "\n"
    )  # fmt: skip
    (folder / "split-rebuilt.txt").write_text(
        "t0-k18-s1: best test 39.0 valid 40.0; last test 30.0 valid 30.0; valid loss 2.0\n"
    )


def test_the_reports_read_results_without_torch_or_fairseq():
    """The reports only read result files: importing them (and through layout_split the
    plugin's head layout, which the package defers registration for) must not pay torch's
    and fairseq's imports (~3 s per call here; the benchmark and these tests call them
    dozens of times). A plain ``import dsp_fairseq`` still registers the plugin
    (test_cli_inputs.py::test_plain_import_still_registers_the_plugin)."""
    code = (
        f"import sys; sys.path.insert(0, {str(ROOT / 'bench')!r})\n"
        "import converged_report, finetune_budget, layout_split\n"
        "print([m for m in ('torch', 'fairseq') if m in sys.modules])"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


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
        json.dumps(
            [
                {"k": 18, "layout": None, "sacrebleu": 3.41},
                {"k": 36, "layout": None, "sacrebleu": 22.75},
            ]
        )
    )
    (tmp_path / "results-sweep-seed2.json").write_text(json.dumps([row("dsp", 18, 23.09)]))
    (tmp_path / "results-sweep-seed3.json").write_text(json.dumps([row("dsp", 18, 25.09)]))
    out = report_text(tmp_path)
    lines = out.splitlines()
    assert "**40.33**" in lines[0]
    assert (
        "| pipelined DSP, plain gates (labels, frozen model) | 24.09 (24.17) | 35.00 (35.50) |  |"
        in lines
    )
    assert "| head importance, one-shot | 11.98 (12.34) |  |  |" in lines
    assert "| fairseq `_adaptive_prune_heads` | 3.41 | 22.75 |  |" in lines
    assert (
        "| pipelined DSP, plain gates (labels, frozen model) | 18 | 3 | 24.09 | 23.09-25.09 |"
        in lines
    )
    assert not any(line.startswith("| random heads") for line in lines)  # not run: no row
    goals = {line.split(" | ")[0]: line for line in lines if line.startswith("| no fine-tune")}
    within = goals["| no fine-tune: DSP within 1.0 BLEU of unpruned at H/2, 2.5 at H/4"]
    assert "H/2: 35.00, 5.33 below (limit 1.0)" in within and within.endswith("**not met** |")
    best = goals["| no fine-tune: DSP at least as good as the best baseline at each K"]
    # K = 18: the mean of 3 seeds (24.09) vs importance, a gap far beyond the seeds' range 2.00
    assert (
        "H/4: +12.11 vs head importance, one-shot, means of 3 and 1 runs, largest range 2.00: beyond it"
        in best
    )
    assert "H/2: +12.25 vs fairseq" in best and best.endswith("| met |")
    fine_tuned = next(line for line in lines if line.startswith("| fine-tuned: DSP within"))
    assert fine_tuned.endswith("not measured yet |")

    # --splice puts the table and the goals between their markers and keeps the rest
    doc = tmp_path / "doc.md"
    doc.write_text("intro\n<!-- converged-table -->\nold\n<!-- /converged-table -->\nmiddle\n"
                   "<!-- converged-goals -->\nold\n<!-- /converged-goals -->\nend\n")  # fmt: skip
    subprocess.run(
        [sys.executable, ROOT / "bench/converged_report.py", "--dir", tmp_path, "--splice", doc],
        check=True,
    )
    text = doc.read_text()
    assert "stale table" not in text and text.startswith("intro\n") and text.endswith("end\n")
    table_part = text.split("<!-- converged-table -->")[1].split("<!-- /converged-table -->")[0]
    goals_part = text.split("<!-- converged-goals -->")[1].split("<!-- /converged-goals -->")[0]
    assert "| pipelined DSP, plain gates (labels, frozen model) | 24.09 (24.17)" in table_part
    assert (
        "| goal |" not in table_part
        and "| goal (issue 17: with recovery) | measured | met |" in goals_part
    )


def _ct2_result(dsp_seeds, importance, fairseq_choice, int8_speed, identical=1000):
    """A ct2_bench.py result with the fields its report reads."""
    models = [{"name": "unpruned", "layout": "all"}]
    quality = {"fairseq/unpruned/float32": {"bleu": 40.0}}
    for i, b in enumerate(dsp_seeds):
        name = "dsp-uniform" if i == 0 else f"dsp-uniform-seed{i + 1}"
        models.append({"name": name, "layout": "4,4", **({"bleu_only": True} if i else {})})
        quality[f"ct2/{name}/float32"] = {"bleu": b}
        quality[f"ct2/{name}/int8"] = {"bleu": b - 0.2}
    quality["fairseq/dsp-uniform/float32"] = {"bleu": dsp_seeds[0]}
    for name, b in (("importance-uniform", importance), ("fairseq-uniform", fairseq_choice)):
        models.append({"name": name, "layout": "4,4"})
        quality[f"ct2/{name}/float32"] = {"bleu": b}
        quality[f"ct2/{name}/int8"] = {"bleu": b}
    rows = [
        {"engine": e, "model": m, "precision": p, "batch": 64, "threads": 2, "fixed_steps": 0,
         "sentences_per_s": s}
        for e, m, p, s in (("fairseq", "unpruned", "float32", 10.0),
                           ("ct2", "dsp-uniform", "int8", int8_speed))
    ]  # fmt: skip
    agreement = {"dsp-uniform": {"identical": identical, "of": 1000}}
    return {"models": models, "quality": quality, "rows": rows, "agreement": agreement}


def test_ct2_report_goals_and_seed_spread():
    sys.path.insert(0, str(ROOT / "bench"))
    import ct2_bench

    met = "\n".join(ct2_bench.goal_lines(_ct2_result([36.0, 35.8, 36.2], 34.0, 30.0, 35.0)))
    assert "100.0% identical, BLEU differs by 0.00: met" in met
    assert "3.50x the sentences/s of unpruned fairseq (batch 64, 2 threads), 0.20 BLEU below" in met
    assert "DSP +2.00 BLEU on the mean of 3 seeds, seed sd 0.20: met" in met
    # a gap inside the seed spread, a slow int8 engine and 98.9% agreement are not met
    not_met = "\n".join(
        ct2_bench.goal_lines(_ct2_result([35.0, 33.0, 34.4], 34.0, 30.0, 25.0, identical=989))
    )
    assert not_met.count("NOT met") == 3
    # one seed has no spread: a large gap is still no claim
    one = "\n".join(ct2_bench.goal_lines(_ct2_result([40.0], 34.0, 30.0, 35.0)))
    assert "DSP +6.00 BLEU on one seed (no spread: pass --dsp-uniform-seeds): NOT met" in one
    table = "\n".join(ct2_bench.choice_lines(_ct2_result([36.0, 35.8, 36.2], 34.0, 30.0, 35.0)))
    assert "| DSP | 36.00 ± 0.20 (sd, 3 seeds: 36.00, 35.80, 36.20) |" in table
    assert "| importance, uniform | 34.00 | 34.00 |" in table


def test_ct2_report_names_each_models_recovery(tmp_path):
    """--reconstruct: a refit checkpoint (its dsp_reconstruction entry) and a recipe's choice
    beside it (recovery.json) are named in the table; a bare stripped model gets no suffix."""
    import torch

    sys.path.insert(0, str(ROOT / "bench"))
    import ct2_bench

    refit, own, bare = tmp_path / "refit.pt", tmp_path / "run/pruned.pt", tmp_path / "bare.pt"
    own.parent.mkdir()
    torch.save({"model": {}, "dsp_reconstruction": {"target": "residual"}}, refit)
    torch.save({"model": {}}, own)
    (own.parent / "recovery.json").write_text(json.dumps({"recovery": "best", "chosen": "none"}))
    torch.save({"model": {}}, bare)
    assert ct2_bench.recovery_of(str(refit)) == "reconstruct"
    assert ct2_bench.recovery_of(str(own)) == "own weights (best on valid)"
    assert ct2_bench.recovery_of(str(bare)) == "none"
    result = _ct2_result([36.0, 35.8], 34.0, 30.0, 35.0)
    for m in result["models"]:
        m["recovery"] = {"importance-uniform": "reconstruct", "dsp-uniform": "reconstruct",
                         "dsp-uniform-seed2": "own weights (best on valid)"}.get(m["name"], "none")  # fmt: skip
    table = "\n".join(ct2_bench.choice_lines(result))
    assert "| DSP + own weights (best on valid) or reconstruct | 35.90 ± 0.14" in table
    assert "| importance, uniform + reconstruct | 34.00 |" in table
    assert "| fairseq's choice, uniform | 30.00 |" in table  # no recovery: no suffix
    assert ct2_bench.label(result, "unpruned") == "unpruned"


def test_peak_rss_of_a_worker_is_its_own_not_its_parents():
    # the parent holds ~1.5 GB; a fresh worker that only imports the helper must not report it
    ballast = bytearray(1536 * 1024 * 1024)
    ballast[::4096] = b"x" * len(ballast[::4096])  # touch every page
    out = subprocess.run(
        [sys.executable, "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
         "from bench.common import peak_rss_mb; print(peak_rss_mb())", ROOT],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    del ballast
    assert 10 < float(out) < 1000


def test_ct2_bench_script_refuses_a_missing_baseline_and_writes_nothing(tmp_path):
    def run(*extra):
        return subprocess.run(
            ["bash", ROOT / "bench/run_ct2_bench.sh", "--converged", tmp_path / "none",
             "--work", tmp_path / "work", "--out", tmp_path / "out", *extra],
            capture_output=True, text=True,
        )  # fmt: skip

    proc = run("--baseline", tmp_path / "none/checkpoint.pt", "--data", tmp_path / "none/data")
    assert proc.returncode == 1
    assert "dict.en.txt is missing; pass --baseline CKPT --data DIR" in proc.stderr
    proc = run("--recovery", "sometimes")  # checked before anything is trained or written
    assert proc.returncode == 1 and "--recovery takes default or none" in proc.stderr
    assert not (tmp_path / "work").exists() and not (tmp_path / "out").exists()


def test_converged_report_recovery_rows_and_goals(tmp_path):
    def row(method, k, test, valid=None):
        return {"method": method, "heads_to_keep": k, "sacrebleu": test, "valid_sacrebleu": valid}

    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    (tmp_path / "results.json").write_text(json.dumps([
        row("dsp+rec", 36, 38.5, 39.0), row("dsp+rec", 18, 33.0),
        row("importance+rec", 36, 38.0), row("importance+rec", 18, 34.0),
        row("dsp+rec+kd", 36, 39.8),
    ]))  # fmt: skip
    (tmp_path / "fairseq_prune.json").write_text(json.dumps([
        {"k": 36, "layout": None, "sacrebleu": 22.0},
        {"k": 36, "layout": None, "sacrebleu": 30.0, "reconstruct": True, "valid_sacrebleu": 29.0},
    ]))  # fmt: skip
    (tmp_path / "results-sweep-gatekd.json").write_text(json.dumps([row("dsp+rec", 18, 31.0)]))
    # another seed of a variant: its spread, not a replacement of its cell
    # ... and a row its first file lacks (a fine-tune) is that seed file's cell
    (tmp_path / "results-sweep-gatekd-s2.json").write_text(
        json.dumps([row("dsp+rec", 18, 32.0), row("dsp+rec+ft", 18, 37.0, 37.5)])
    )
    # runs of one K (-kK-sN): the first fills the empty K = 36 cell, the next is a seed
    for seed, test in ((1, 37.5), (2, 38.25)):
        (tmp_path / f"results-sweep-gatekd-k36-s{seed}.json").write_text(
            json.dumps([row("dsp+rec", 36, test, 38.0 + seed)])
        )
    # the distillation settings (beside the table's default 0.5, 1) and an alternating run
    (tmp_path / "results-sweep-kd18.json").write_text(
        json.dumps([row("dsp+rec+kd", 18, 35.0, 35.5)])
    )
    (tmp_path / "results-sweep-kdw1t2.json").write_text(
        json.dumps([row("dsp+rec+kd", 18, 36.0, 36.5)])
    )
    (tmp_path / "alternating").mkdir()
    (tmp_path / "alternating/k18-r3.json").write_text(json.dumps({
        "heads_to_keep": 18, "rounds": 3, "stripped_test": 20.0, "stripped_valid": 21.0,
        "rec_test": 32.5, "rec_valid": 32.75,
    }))  # fmt: skip
    (tmp_path / "results-sweep-impinit.json").write_text(
        json.dumps(
            [
                row("dsp+rec", 18, 34.0),
                row("dsp+best", 18, 34.25, 35.0),
                row("dsp+best+ft", 18, 38.0),
            ]
        )
    )
    (tmp_path / "results-sweep-impinit-s2.json").write_text(json.dumps([row("dsp+rec", 18, 35.0)]))
    # a later session's rerun of a seed (-s2b: the gate run is not bit-reproducible) adds a run
    (tmp_path / "results-sweep-impinit-k18-s2b.json").write_text(
        json.dumps([row("dsp+best+ft", 18, 39.0)])
    )
    (tmp_path / "results-sweep-gatekdopffn.json").write_text(
        json.dumps([row("dsp+rec+ft", 36, 39.5), row("dsp+rec+ft", 18, 37.5)])
    )
    (tmp_path / "results-sweep-gatekdopffn-s2.json").write_text(
        json.dumps([row("dsp+rec+ft", 36, 39.75)])
    )
    (tmp_path / "pick-k-rec").mkdir()
    (tmp_path / "pick-k-rec/pick.json").write_text(
        json.dumps({"chosen_k": 45, "total_heads": 72, "recovery": "reconstruct"})
    )
    # stage 6o's fine-tune settings: the recipe's default one (dropout 0.1) is a row and a goal;
    # another setting's lines (and a line of another format) are not read into it
    (tmp_path / "finetune-settings.txt").write_text(
        "k18-drop0.1-s2: best test 38.0 valid 39.5; last test 38.0 valid 39.5; valid loss 3.89\n"
        "k18-ref-s1: best test 30.0 valid 30.0; last test 30.0 valid 30.0\n"
        "k18-drop0.1-s1: best test 38.5 valid 39.0; last test 38.5 valid 39.0\n"
        "k9-drop0-s1: best test 20.0 valid 20.0; last test 20.0 valid 20.0\n"
        "imp18-drop0.1-s1: best test 38.75 valid 39.0; last test 38.75 valid 39.0\n"
    )
    # stage 6q: head importance's fine-tunes (their final model, "last", is the recipe's) and
    # averages of the last checkpoints; a DSP line there does not add a run to stage 6o's
    (tmp_path / "checkpoint-averaging.txt").write_text(
        "imp18-s2: best test 37.0 valid 37.0; last test 38.25 valid 38.5; valid loss 3.9\n"
        "imp18-s2: avg3 test 38.0 valid 39.0\n"
        "imp18-s2: avg5 test 37.75 valid 38.0\n"
        "k18-s1: best test 38.5 valid 39.0; last test 38.5 valid 39.0\n"
        "k18-s1: avg3 test 38.0 valid 38.0\n"
        "k18-s1: avg5 test 39.5 valid 39.5\n"
    )
    out = report_text(tmp_path)
    lines = out.splitlines()
    assert (
        "| head importance, one-shot + reconstruct + fine-tune at dropout 0.1, final model "
        "(session 14's default) | 18 | 2 | 38.50 | 38.25-38.75 |" in lines
    )
    assert "| imp18-s2 | 38.25 (38.50) | 38.00 (39.00) | 37.75 (38.00) |" in lines
    assert (
        "| mean change against the final model | | -0.38 (-0.25), valid up in 1 of 2 "
        "| +0.25 (+0.00), valid up in 1 of 2 |" in lines
    )
    same_ft = next(
        line
        for line in lines
        if "final model): DSP (default gates, default recovery) + fine-tune at" in line
    )
    assert "H/4: -0.25 vs head importance" in same_ft and "largest range 0.50: inside it" in same_ft
    assert same_ft.endswith("| **not met** |")
    # since session 15 the recipe's model is the average of the last 3 checkpoints: the avg3
    # lines are its runs, for DSP (kK-sS) and for head importance (impK-sS)
    avg_ft = next(line for line in lines if "since session 15, dropout 0.1, average" in line)
    assert "H/4: +0.00 vs head importance" in avg_ft and avg_ft.endswith("| met |")
    avg_goal = next(line for line in lines if "average of the last 3 checkpoints): DSP" in line)
    assert "H/4: 38.00, 2.00 below (limit 1.0)" in avg_goal and "H/2: not run" in avg_goal
    assert any(line.startswith("| pipelined DSP, default gates") and "fine-tune at dropout 0.1"
               in line and line.endswith("| 38.50 (39.00) |  |  |") for line in lines)  # fmt: skip
    new_default = next(
        line
        for line in lines
        if line.startswith("| 270-update fine-tune (session 14's default: labels, dropout 0.1")
    )
    assert "H/4: 38.25 (mean of 2), 1.75 below (limit 1.0)" in new_default
    assert "H/2: not run" in new_default and "H/8: not run" in new_default
    assert new_default.endswith("| **not met** |")
    assert "| pipelined DSP + reconstruct | 33.00 | 38.50 (39.00) |  |" in lines
    assert "| fairseq `_adaptive_prune_heads` |  | 22.00 |  |" in lines
    # a setting's file does not replace the table's distilled row; it gets its own table
    assert (
        "| pipelined DSP + reconstruct + distilled fine-tune | 35.00 (35.50) | 39.80 |  |" in lines
    )
    assert "| distillation weight 0.5, temperature 1 | 35.00 | 35.50 |" in lines
    assert "| distillation weight 1, temperature 2 | 36.00 | 36.50 |" in lines
    assert (
        "| pipelined DSP, gate training alternated with 2 refits + reconstruct | 32.50 (32.75) |  |  |"
        in lines
    )
    assert "| fairseq `_adaptive_prune_heads` + reconstruct |  | 30.00 (29.00) |  |" in lines
    assert (
        "| pipelined DSP, gates trained on KL to the unpruned model + reconstruct "
        "| 31.00 | 37.50 (39.00) |  |" in lines
    )
    assert (
        "| pipelined DSP, gates trained on KL to the unpruned model + reconstruct | 18 | 2 | "
        "31.50 | 31.00-32.00 |" in lines
    )
    assert (
        "| pipelined DSP, gates trained on KL to the unpruned model + reconstruct | 36 | 2 | "
        "37.88 | 37.50-38.25 |" in lines
    )
    assert (
        "| pipelined DSP, gates trained on KL to the unpruned model + reconstruct + fine-tune "
        "| 37.00 (37.50) |  |  |" in lines
    )
    goal = next(
        line
        for line in lines
        if line.startswith("| retraining-free: DSP (plain gates) + reconstruct")
    )
    assert "H/2: 38.50, 1.50 below (limit 2.0)" in goal and "H/4: 33.00, 7.00 below" in goal
    assert goal.endswith("| **not met** |")
    # the default gates' rows (results-sweep-impinit*): means over their runs
    goal = next(line for line in lines if line.startswith("| retraining-free: DSP (default gates)"))
    assert "H/4: 34.50 (mean of 2), 5.50 below (limit 6.0)" in goal and "H/2: not run" in goal
    # with the recipes' default recovery (best on valid): one run at H/4, none at H/2
    goal = next(line for line in lines if line.startswith("| retraining-free with the recipes'"))
    assert "H/4: 34.25, 5.75 below (limit 6.0)" in goal and "H/2: not run" in goal
    assert goal.endswith("| not measured yet |")
    tuned = next(line for line in lines if line.startswith("| 270-update fine-tune"))
    assert "H/4: 38.50 (mean of 2), 1.50 below (limit 1.0)" in tuned
    assert tuned.endswith("| **not met** |")
    # the earlier README's fine-tune path: the own-start gates + reconstruct + fine-tune
    path = next(
        line for line in lines if line.startswith("| 270-update fine-tune from the gates' own")
    )
    assert "H/2: 39.62 (mean of 2), 0.38 below (limit 0.3)" in path
    assert "H/4: 37.50, 2.50 below (limit 1.0)" in path and "H/8: not run" in path
    assert path.endswith("| **not met** |")
    best = next(line for line in lines if line.startswith("| DSP (default gates, default recovery"))
    assert "H/4: +0.25 vs head importance, one-shot + reconstruct" in best
    assert best.endswith("| met |")  # one run each: no seed range to beat
    assert (
        "| pipelined DSP, default gates (KL + out_proj,fc2, started from head importance) + best "
        "of own weights or reconstruct on valid | 34.25 (35.00) |  |  |" in lines
    )
    pick = next(line for line in lines if "removes at least a third" in line)
    assert "K = 45 (27 of 72 heads removed" in pick and pick.endswith("| met |")

    def pick_goal_with(run, chosen, total):  # the goal's line once RUN/pick.json is there
        (tmp_path / run).mkdir()
        (tmp_path / run / "pick.json").write_text(
            json.dumps({"chosen_k": chosen, "total_heads": total, "recovery": "best"})
        )
        lines = report_text(tmp_path).splitlines()
        return next(line for line in lines if "removes at least a third" in line)

    # dsp-pick-k with the recipes' defaults (pick-k-best) is the one the goal reads
    pick = pick_goal_with("pick-k-best", 54, 72)
    assert "K = 54 (18 of 72 heads removed, recovery best)" in pick and "**not met**" in pick
    # session 9's run (gates started from head importance) is read before session 7's
    pick = pick_goal_with("pick-k-impinit", 63, 72)
    assert "K = 63 (9 of 72 heads removed, recovery best)" in pick
    # session 22's (the grid refined one head at a time) before both; a third of a 48-head
    # model's heads: its own total, not 72
    pick = pick_goal_with("pick-k-refined", 32, 48)
    assert "K = 32 (16 of 48 heads removed, recovery best) | met |" in pick
    # session 40's (today's gates) before all of them
    pick = pick_goal_with("pick-k-s40", 50, 72)
    assert "K = 50 (22 of 72 heads removed, recovery best) | **not met** |" in pick
    # with --recovery tuned: session 40's before session 21's
    tuned = [line for line in report_text(tmp_path).splitlines() if "removes at least" in line]
    assert "not run yet" in tuned[-1]

    def tuned_goal_with(run, chosen):  # the tuned goal line once RUN has chosen CHOSEN of 72
        (tmp_path / run).mkdir()
        (tmp_path / run / "pick.json").write_text(
            json.dumps({"chosen_k": chosen, "total_heads": 72, "recovery": "tuned"})
        )
        return [ln for ln in report_text(tmp_path).splitlines() if "tuned` removes at" in ln][0]

    def earlier_tuned_goal():  # the row of the tuned search before the newest, if any
        rows = report_text(tmp_path).splitlines()
        return next((ln for ln in rows if "the search before" in ln), None)

    assert "K = 54 (18 of 72 heads removed, recovery tuned)" in tuned_goal_with("pick-k-tuned", 54)
    assert earlier_tuned_goal() is None
    tuned = tuned_goal_with("pick-k-tuned-s40", 48)
    assert "K = 48 (24 of 72 heads removed, recovery tuned) | met |" in tuned
    assert "K = 54 (18 of 72 heads removed, recovery tuned) | **not met** |" in earlier_tuned_goal()
    # session 41's (the tuning at dropout 0) before session 40's
    tuned = tuned_goal_with("pick-k-tuned-d0", 44)
    assert "K = 44 (28 of 72 heads removed, recovery tuned) | met |" in tuned
    # session 46's (the tuning of every layer) before session 41's, which keeps its row
    tuned = tuned_goal_with("pick-k-tuned-tl", 50)
    assert "K = 50 (22 of 72 heads removed, recovery tuned) | **not met** |" in tuned
    assert "K = 44 (28 of 72 heads removed, recovery tuned) | met |" in earlier_tuned_goal()
    # session 47's (pick-k's tuning at 2e-4) before session 46's
    tuned = tuned_goal_with("pick-k-tuned-lr", 40)
    assert "K = 40 (32 of 72 heads removed, recovery tuned) | met |" in tuned
    assert "K = 50 (22 of 72 heads removed, recovery tuned) | **not met** |" in earlier_tuned_goal()
    # session 48's search at gate seed 2 with the same settings: both seeds in one row, met
    # only if both are; a search with another tuning is not counted with them
    tuned = tuned_goal_with("pick-k-tuned-seed2", 50)
    assert "K = 40 / 50 at gate seeds 1 / 2 (32 / 22 of 72 heads removed" in tuned
    assert tuned.endswith("| **not met** |")
    (tmp_path / "pick-k-tuned-seed2/pick.json").write_text(
        json.dumps({"chosen_k": 45, "total_heads": 72, "recovery": "tuned", "seed": 2})
    )
    tuned = [ln for ln in report_text(tmp_path).splitlines() if "tuned` removes at" in ln][0]
    assert "K = 40 / 45 at gate seeds 1 / 2 (32 / 27 of 72 heads removed" in tuned
    assert tuned.endswith("| met |")
    (tmp_path / "pick-k-tuned-seed2/pick.json").write_text(
        json.dumps({"chosen_k": 45, "recovery": "tuned", "tune_args": "--lr 1e-3"})
    )
    tuned = [ln for ln in report_text(tmp_path).splitlines() if "tuned` removes at" in ln][0]
    assert "K = 40 (32 of 72 heads removed, recovery tuned) | met |" in tuned
    for run in ("pick-k-best", "pick-k-impinit", "pick-k-refined", "pick-k-s40", "pick-k-tuned",
                "pick-k-tuned-s40", "pick-k-tuned-d0", "pick-k-tuned-tl", "pick-k-tuned-lr",
                "pick-k-tuned-seed2"):  # fmt: skip
        (tmp_path / run / "pick.json").unlink()
        (tmp_path / run).rmdir()
    versus = next(line for line in lines if line.startswith("| DSP + reconstruct at least"))
    assert "H/4: -1.00 vs head importance, one-shot + reconstruct" in versus
    assert versus.endswith("**not met** |")
    kd = next(line for line in lines if line.startswith("| distilled fine-tune"))
    assert "H/2: 39.80, 0.20 below (limit 0.3)" in kd and "H/8: not run" in kd
    # --marker recovery: the README's short version in its own block, best per stage in bold
    doc = tmp_path / "README.md"
    doc.write_text(
        "a\n<!-- recovery-summary -->\nstale table\n<!-- /recovery-summary -->\nb\n"
        "<!-- recovery-defaults -->\n<!-- /recovery-defaults -->\n"
    )
    splice_recovery(tmp_path, doc)
    text = doc.read_text()
    assert text.startswith("a\n<!-- recovery-summary -->\n")
    # the table of what the recipes give: means (range, runs) of the default path and its rival
    # (no one command with the tuned refit run here, nor its fine-tune: tuned-default.txt's test)
    assert "| 18 of 72 (H/4) | - | 34.25 (1 run) | - | - | - |" in text
    assert "| 9 of 72 (H/8) | - | - | - | - | - |" in text
    assert "stale table" not in text and "| heads chosen by | K = 18 (H/4) |" in text
    assert (
        "| pipelined DSP, plain gates (labels, frozen model) | - / 33.00 / **35.00** | - / **38.50** / **39.80** | - / - / - |"
        in text
    )
    assert "| head importance, one-shot | - / **34.00** / - | - / 38.00 / - | - / - / - |" in text
    assert "| fairseq `_adaptive_prune_heads` | - / - / - | 22.00 / 30.00 / - | - / - / - |" in text


def test_frontier_rows_name_fairseq_layouts_and_refits(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import frontier_bench

    rows = []
    for k, layout, rec in ((36, None, False), (36, None, True), (36, "4,4", True)):
        ckpt = tmp_path / f"{k}-{layout}-{rec}.pt"
        ckpt.write_bytes(b"")
        rows.append({"k": k, "layout": layout, "reconstruct": rec, "sacrebleu": 30.0,
                     "checkpoint": str(ckpt)})  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps(rows))
    got = frontier_bench.rows_of(str(tmp_path / "results.json"), "fairseq-removal")
    # three models, three names: none of them is timed in place of another
    assert [r["method"] for r in got] == [
        "fairseq-removal", "fairseq-removal+rec", "fairseq-removal 4,4+rec"
    ]  # fmt: skip
    assert [frontier_bench.line_style(m) for m in ("dsp", "dsp+rec", "dsp+rec+kd", "dsp+ft")] == [
        "-", ":", "-.", "--"
    ]  # fmt: skip
    assert frontier_bench.line_style("dsp+best") == ":"
    assert frontier_bench.line_style("dsp+best+ft") == "--"
    # a variant's sweep: its rows renamed, and merged with an earlier run's timed rows
    sweep = [{"method": m, "heads_to_keep": 18, "sacrebleu": 33.0, "checkpoint": rows[0]["checkpoint"]}
             for m in ("dsp", "dsp+best+ft")]  # fmt: skip
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    path, name = frontier_bench.table_arg(f"dsp-default={tmp_path / 'sweep.json'}")
    assert (path, name) == (str(tmp_path / "sweep.json"), "dsp-default")
    assert frontier_bench.table_arg(str(tmp_path / "sweep.json")) == (
        str(tmp_path / "sweep.json"),
        None,
    )
    new = frontier_bench.rows_of(path, None, name)
    assert [r["method"] for r in new] == ["dsp-default", "dsp-default+best+ft"]
    kept = [
        {"method": "dsp", "k": 18, "sacrebleu": 23.8},
        {"method": "dsp-default", "k": 18, "sacrebleu": 1.0},
    ]
    merged = frontier_bench.merge_kept(kept, new)
    assert [(r["method"], r["sacrebleu"]) for r in merged] == [
        ("dsp", 23.8), ("dsp-default", 33.0), ("dsp-default+best+ft", 33.0)
    ]  # fmt: skip


def test_converged_report_gives_no_seed_spread_to_deterministic_selections(tmp_path):
    """Head importance picks the same heads for every seed: its seed folders are calibration
    samples of importance+rec, and the stripped rows they repeat get no spread row."""

    def row(method, k, test):
        return {"method": method, "heads_to_keep": k, "sacrebleu": test, "valid_sacrebleu": None}

    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    (tmp_path / "results.json").write_text(
        json.dumps([row("importance", 18, 11.0), row("importance+rec", 18, 34.0)])
    )
    (tmp_path / "results-sweep-seed2i.json").write_text(
        json.dumps([row("importance", 18, 11.0), row("importance+rec", 18, 34.5)])
    )
    out = report_text(tmp_path)
    assert "| head importance, one-shot + reconstruct | 18 | 2 | 34.25 | 34.00-34.50 |" in out
    assert "| head importance, one-shot | 18 |" not in out


def test_seqkd_corpus_reads_generate_output_in_dataset_order(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import seqkd_corpus

    gen = tmp_path / "gen.txt"
    # fairseq-generate prints sentences in batch order, with D/P lines between
    gen.write_text(
        "S-1\t▁Ein ▁Hund\nT-1\t▁A ▁dog\nH-1\t-0.3\t▁A ▁dog\nD-1\t-0.3\tA dog\n"
        "S-0\t▁Zwei ▁Männer\nH-0\t-0.2\t▁Two ▁men\nP-0\t-0.1 -0.3\n"
    )
    sources, hypotheses = seqkd_corpus.read_generate(str(gen))
    assert sources == ["▁Zwei ▁Männer", "▁Ein ▁Hund"]
    assert hypotheses == ["▁Two ▁men", "▁A ▁dog"]
    gen.write_text("S-0\t▁Zwei\nH-0\t-0.2\t▁Two\nS-2\t▁Drei\nH-2\t-0.1\t▁Three\n")  # no sentence 1
    with pytest.raises(SystemExit, match="every sentence"):
        seqkd_corpus.read_generate(str(gen))


def test_score_line_reads_best_and_last_scores(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import score_line

    for sub, bleu in (("eval-test", 30.1), ("eval-valid", 31.2), ("last-test", 29.3)):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "score.json").write_text(json.dumps({"sacrebleu": bleu}))
    with pytest.raises(FileNotFoundError):  # a missing decode is an error, not a blank
        score_line.score_line("m", str(tmp_path))
    (tmp_path / "last-valid").mkdir()
    (tmp_path / "last-valid" / "score.json").write_text(json.dumps({"sacrebleu": 32.4}))
    assert score_line.score_line("m", str(tmp_path)) == (
        "m: best test 30.1 valid 31.2; last test 29.3 valid 32.4"
    )
    # with the fine-tune's log, the lowest validation loss is appended (not the last one)
    (tmp_path / "train.log").write_text(
        '2026 | INFO | train_inner | {"loss": "3.1"}\n'
        '2026 | INFO | valid | {"epoch": 1, "valid_loss": "3.936", "valid_num_updates": "135"}\n'
        '2026 | INFO | valid | {"epoch": 2, "valid_loss": "3.892", "valid_num_updates": "270"}\n'
        '2026 | INFO | valid | {"epoch": 3, "valid_loss": "3.9", "valid_num_updates": "405"}\n'
    )
    assert score_line.score_line("m", str(tmp_path)).endswith("valid 32.4; valid loss 3.892")


def test_gate_line_reads_the_recipes_choice_and_its_test_score(tmp_path):
    sys.path.insert(0, str(ROOT / "bench"))
    import score_line

    (tmp_path / "recovery.json").write_text(json.dumps({
        "recovery": "best", "chosen": "none",
        "valid_sacrebleu": {"reconstruct": 35.67, "none": 36.1}, "valid_sacrebleu_chosen": 36.1,
    }))  # fmt: skip
    with pytest.raises(FileNotFoundError):  # no test decode yet: an error, not a blank
        score_line.gate_line("g18-s1", str(tmp_path))
    (tmp_path / "test").mkdir()
    (tmp_path / "test" / "score.json").write_text(json.dumps({"sacrebleu": 34.94}))
    line = score_line.gate_line("g18-s1", str(tmp_path))
    assert line == "g18-s1: own valid 36.1; refit valid 35.67; best none test 34.94 valid 36.1"
    import converged_report  # the report reads the line back

    (tmp_path / "gate-layer-distillation.txt").write_text(line + "\n")
    runs = converged_report.gate_layer_runs(str(tmp_path / "gate-layer-distillation.txt"))
    assert runs == {18: [(34.94, 36.1)]}


def test_converged_report_reads_the_layer_distilled_gates(tmp_path):
    """Stage 6r's lines (gates with layer distillation, gK-sS, and their fine-tunes, ftK-sS) are
    rows, spreads and goals of their own; the README's table of defaults is not theirs."""

    def row(method, k, test, valid=None):
        return {"method": method, "heads_to_keep": k, "sacrebleu": test, "valid_sacrebleu": valid}

    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    (tmp_path / "results.json").write_text(
        json.dumps([row("importance+rec", 18, 34.5), row("importance+rec", 36, 38.0)])
    )
    (tmp_path / "results-sweep-impinit.json").write_text(json.dumps([row("dsp+best", 18, 33.0)]))
    (tmp_path / "gate-layer-distillation.txt").write_text(
        "g18-s2: own valid 34.0; refit valid 35.0; best reconstruct test 35.5 valid 35.0\n"
        "g18-s1: own valid 35.1; refit valid 35.7; best reconstruct test 34.5 valid 35.7\n"
        "g36-s1: own valid 37.6; refit valid 38.7; best reconstruct test 38.0 valid 38.7\n"
        "g9-s1: own valid 31.0; refit valid 28.0; best\n"  # unfinished: not a run
        "ft18-s1: best test 39.0 valid 39.5; last test 38.5 valid 39.0; valid loss 3.9\n"
        "ft36-s1: best test 40.25 valid 41.0; last test 40.0 valid 40.5\n"
    )
    lines = report_text(tmp_path).splitlines()
    label = (
        "pipelined DSP, default gates with layer distillation in the gate run (KL + hidden states + "
        "out_proj,fc2, started from head importance) + best of own weights or reconstruct on valid"
    )
    # seed order: seed 1 is the cell, seed 2 its spread
    assert f"| {label} | 34.50 (35.70) | 38.00 (38.70) |  |" in lines
    assert f"| {label} | 18 | 2 | 35.00 | 34.50-35.50 |" in lines
    assert any(line.startswith(f"| {label} + fine-tune at dropout 0.1, average of the last 3")
               and line.endswith("| 39.00 (39.50) | 40.25 (41.00) |  |") for line in lines)  # fmt: skip
    goal = next(line for line in lines if "retraining-free with layer distillation" in line)
    assert "H/2: 38.00, 2.00 below (limit 2.0)" in goal
    assert "H/4: 35.00 (mean of 2), 5.00 below (limit 6.0)" in goal and goal.endswith("| met |")
    versus = next(line for line in lines if line.startswith("| DSP (gates with layer distillation"))
    assert "H/4: +0.50 vs head importance, one-shot + reconstruct" in versus
    assert "largest range 1.00: inside it" in versus and "H/2: +0.00" in versus
    tuned = next(line for line in lines if "of the gates with layer distillation (one" in line)
    assert "H/4: 39.00, 1.00 below (limit 1.0)" in tuned and "H/8: not run" in tuned
    assert "H/2: 40.25, 0.25 above (limit 0.3)" in tuned  # above the unpruned model
    # the README's table of what the recipes give reads the recipes' default gates, not these
    doc = tmp_path / "README.md"
    doc.write_text("<!-- recovery-defaults -->\n<!-- /recovery-defaults -->\n")
    splice_recovery(tmp_path, doc)
    assert "| 18 of 72 (H/4) | - | 33.00 (1 run) | - | - | - |" in doc.read_text()


def test_restart_rows_take_the_gate_run_the_recipe_would_keep():
    """--restarts 2 read from single gate runs: seeds 1-2, 3-4, ... each give the run with the
    better valid score (ties: the lower seed); an incomplete group is no run; with a fine-tune
    map, the chosen seed's fine-tune (none: no run)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report

    runs = {18: {1: (34.9, 35.7), 2: (33.7, 33.9), 3: (35.4, 35.3), 4: (36.0, 35.3), 5: (30.0, 31.0)},
            36: {2: (38.0, 38.0)}}  # fmt: skip
    assert converged_report.restart_runs(runs, 2) == {18: [(34.9, 35.7), (35.4, 35.3)]}
    assert converged_report.restart_runs(runs, 3) == {18: [(34.9, 35.7)]}
    assert converged_report.restart_runs(runs, 1)[18] == [runs[18][s] for s in range(1, 6)]
    finetuned = {(18, 1): (39.1, 39.7), (18, 4): (40.0, 40.0)}  # seed 3 was chosen: not there
    assert converged_report.restart_runs(runs, 2, finetuned) == {18: [(39.1, 39.7)]}


def test_converged_report_reads_the_two_epoch_gate_runs(tmp_path):
    """gate-two-epochs.txt: the "gK-sS-e2" lines are the two-epoch rows (one run, --restarts 2
    and the fine-tune of the choice, "ftK-sS"); a run of another length ("-e3") is not one."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    (tmp_path / "gate-two-epochs.txt").write_text(
        "g18-s1-e2: own valid 35.5; refit valid 34.2; best none test 35.4 valid 35.5\n"
        "g18-s2-e2: own valid 36.1; refit valid 34.9; best none test 36.3 valid 36.1\n"
        "g18-s1-e3: own valid 39.0; refit valid 34.0; best none test 39.0 valid 39.0\n"
        "ft18-s2: best test 38.9 valid 39.7; last test 39.2 valid 40.0; valid loss 3.883\n"
    )
    lines = report_text(tmp_path).splitlines()
    label = (
        "pipelined DSP, default gates with layer distillation, gate run of two epochs + best of "
        "own weights or reconstruct on valid"
    )
    assert f"| {label} | 35.40 (35.50) |  |  |" in lines
    assert f"| {label} | 18 | 2 | 35.85 | 35.40-36.30 |" in lines  # not the e3 run's 39.0
    restarts = f"{label}, the best of 2 gate runs on valid (`--restarts 2`)"
    assert f"| {restarts} | 36.30 (36.10) |  |  |" in lines  # valid chose seed 2
    assert any(line.startswith(f"| {restarts} + fine-tune") and "| 38.90 (39.70) |" in line
               for line in lines)  # fmt: skip
    goal = next(line for line in lines if "a gate run of two epochs (session 19" in line)
    assert "H/4: 35.85 (mean of 2), 4.15 below (limit 6.0)" in goal and "H/2: not run" in goal


def write_importance_rec(folder, k: int, test: float, valid: float) -> None:
    """An unpruned baseline of 40.0 and one importance+rec row at K: the start of the tuned rows."""
    (folder / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    row = {
        "method": "importance+rec",
        "heads_to_keep": k,
        "sacrebleu": test,
        "valid_sacrebleu": valid,
    }
    (folder / "results.json").write_text(json.dumps([row]))


def test_converged_report_reads_the_tuned_refit_as_recovery_tuned_keeps_it(tmp_path):
    """tuned-refit.txt's lines at tune-refit.sh's learning rate become the tuned rows, each
    run the tuned model only where it decodes valid better than its start (the gate run's
    line, or importance + reconstruct's cell), as --recovery tuned keeps it; other learning
    rates and starts not in the table are left out."""
    write_importance_rec(tmp_path, 18, 34.0, 34.5)
    (tmp_path / "gate-layer-distillation.txt").write_text(
        "g18-s1: own valid 35.0; refit valid 35.5; best reconstruct test 35.0 valid 35.5\n"
        "g18-s2: own valid 34.0; refit valid 33.0; best none test 34.0 valid 34.0\n"
        "g36-s1: own valid 38.0; refit valid 38.5; best reconstruct test 38.0 valid 38.5\n"
    )
    (tmp_path / "tuned-refit.txt").write_text(
        "# header\n"
        "tuned-imp18-lr1e-4: best test 39.0 valid 39.0; valid loss 0.3\n"  # not the default lr
        "tuned-imp18-lr5e-4: best test 36.0 valid 36.5; last test 36.0 valid 36.5; valid loss 0.6\n"
        "tuned-imp18-lr5e-4-s2: best test 35.5 valid 34.4; valid loss 0.6\n"  # worse on valid
        "tuned-imp9-lr5e-4: best test 30.0 valid 30.0; valid loss 1.1\n"  # no start in the table
        "tuned-gate18-s1-lr5e-4: best test 37.5 valid 37.0; valid loss 0.6\n"
        "tuned-gate18-s2-lr5e-4: best test 37.0 valid 36.0; valid loss 0.7\n"
        "tuned-gate36-s1-lr5e-4: best test 38.5 valid 38.5; valid loss 0.3\n"  # a tie keeps the start
    )
    lines = report_text(tmp_path).splitlines()
    gates = next(line for line in lines if "layer distillation" in line and "tuned refit" in line
                 and line.count("|") == 5)  # fmt: skip
    assert gates.endswith("+ tuned refit (out_proj,fc2 trained towards the unpruned model for "
                          "one epoch, the rest frozen; kept if better on valid: `--recovery "
                          "tuned`) | 37.50 (37.00) | 38.00 (38.50) |  |")  # fmt: skip
    imp = next(line for line in lines if line.startswith("| head importance, one-shot + "
                                                          "reconstruct + tuned refit"))  # fmt: skip
    assert imp.endswith("| 36.00 (36.50) |  |  |")
    spread = [line for line in lines if "tuned refit" in line and "| 18 | 2 |" in line]
    assert len(spread) == 2 and any(line.endswith("| 37.25 | 37.00-37.50 |") for line in spread)
    assert any(line.endswith("| 35.00 | 34.00-36.00 |") for line in spread)  # the start kept
    goal = next(line for line in lines if line.startswith("| retraining-free, the BLEU part only"))
    assert "H/2: 38.00, 2.00 below (limit 2.0); H/4: 37.25 (mean of 2), 2.75 below" in goal
    assert goal.endswith("| met |")
    versus = next(line for line in lines if line.startswith("| DSP (gates with layer "
                                                             "distillation) + tuned refit"))  # fmt: skip
    assert "H/4: +2.25 vs head importance, one-shot + reconstruct + tuned refit" in versus
    assert "largest range 2.00: beyond it" in versus and versus.endswith("| met |")
    pick = next(line for line in lines if "--recovery tuned` removes" in line)
    assert pick.endswith("| not run yet | not measured yet |")


def test_converged_report_reads_the_one_command_with_the_tuned_refit(tmp_path):
    """tuned-default.txt: each "kK-sS" line is the DSP one command's kept model (tuned or its
    untuned start, as the recipe chose on valid), each "impK-sS" line a tuning seed of head
    importance's one command, added to tuned-refit.txt's; both become the README's default
    table's columns and a goal; "ft-kK-sS[-fF]" and "ft-impK-sS" lines are fine-tunes of their
    models (fine-tune seed F), read as finetune-pruned.sh --choose valid keeps them: the final
    model where it decodes valid better than the average of the last 3, else the average."""
    write_importance_rec(tmp_path, 36, 37.0, 37.5)
    (tmp_path / "tuned-refit.txt").write_text(
        "tuned-imp36-lr5e-4: best test 38.0 valid 38.5; valid loss 0.3\n"
    )
    (tmp_path / "tuned-default.txt").write_text(
        "# header\n"
        "k36-s1: recovery best -> reconstruct; untuned test 37.0 valid 38.0; tuned test 38.5 "
        "valid 39.0; kept tuned\n"
        "k36-s2: recovery best -> none; untuned test 37.5 valid 38.2; tuned test 36.0 "
        "valid 38.1; kept untuned\n"
        "imp36-s3: untuned valid 37.5; tuned valid 38.9; kept tuned; test 39.0\n"
        # tuning seed 1 again (tuned-refit.txt's line): read once
        "imp36-s1: untuned valid 37.5; tuned valid 38.5; kept tuned; test 30.0\n"
        "ft-k36-s1: best test 39.8 valid 40.1; last test 39.5 valid 39.9; valid loss 3.9\n"
        "ft-k36-s1-f2: best test 39.0 valid 39.5; last test 39.6 valid 39.7; valid loss 3.9\n"
        "ft-imp36-s3: best test 39.2 valid 40.0; last test 39.4 valid 40.0; valid loss 3.9\n"
    )
    # the README's fine-tune columns: the recipe's default learning rate since session 27
    (tmp_path / "finetune-lr.txt").write_text(
        "ft-k36-s1-lr5e-4: best test 40.0 valid 40.3; last test 39.5 valid 39.9; valid loss 3.9\n"
        "ft-k36-s1-f2-lr5e-4: best test 39.4 valid 39.8; last test 39.5 valid 39.9; valid loss 3.9\n"
        "ft-imp36-s3-lr5e-4: best test 39.3 valid 40.0; last test 39.4 valid 40.0; valid loss 3.9\n"
        "ft-k36-s1-lr1e-3: best test 20.0 valid 20.0; last test 20.0 valid 20.0; valid loss 3.9\n"
    )
    doc = tmp_path / "README.md"
    doc.write_text("<!-- recovery-defaults -->\n<!-- /recovery-defaults -->\n"
                   "<!-- recovery-choice -->\n<!-- /recovery-choice -->\n")  # fmt: skip
    splice_recovery(tmp_path, doc)
    row = next(line for line in doc.read_text().splitlines() if line.startswith("| 36 of 72"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # the one command: 38.5 (tuned kept) and 37.5 (the untuned start kept); importance: 38.0
    # (tuned-refit.txt, better on valid than its start) and 39.0 (tuning seed 3)
    assert cells[1] == "38.00 (37.50-38.50, 2 runs)" and cells[4] == "38.50 (38.00-39.00, 2 runs)"
    assert cells[2] == "-" and len(cells) == 6
    # the recipe's fine-tunes (the averages) at its learning rate: 40.0 and 39.4; importance's
    # 39.3 (not the 3e-4 lines of tuned-default.txt, nor another rate's)
    assert cells[3] == "39.70 (39.40-40.00, 2 runs)" and cells[5] == "39.30 (1 run)"
    lines = doc.read_text().splitlines()
    assert "| ft-k36-s1 | 39.80 (40.10) | 39.50 (39.90) | 39.80 (40.10): average |" in lines
    assert "| ft-k36-s1-f2 | 39.00 (39.50) | 39.60 (39.70) | 39.60 (39.70): final |" in lines
    assert "| ft-imp36-s3 | 39.20 (40.00) | 39.40 (40.00) | 39.20 (40.00): average |" in lines
    assert ("| mean change against the average (3 runs) | | +0.17 (+0.00) | +0.20 (+0.07), the "
            "final model chosen in 1 of 3 |") in lines  # fmt: skip
    goals = report_text(tmp_path).splitlines()
    goal = next(line for line in goals if line.startswith("| the one command, DSP"))
    assert "H/2: -0.50 vs head importance, one-shot + reconstruct + tuned refit" in goal
    assert goal.endswith("| **not met** |")
    goal = next(line for line in goals if "of the one command's model since session 23" in line)
    assert "H/2: 39.40 (mean of 2), 0.60 below (limit 0.3); H/4: not run" in goal  # the averages
    # --choose valid: 39.8 (a tie keeps the average) and 39.6 (the final model)
    goal = next(line for line in goals if line.startswith("| the same with `--choose valid`"))
    assert "H/2: 39.70 (mean of 2), 0.30 below (limit 0.3); H/4: not run" in goal
    assert goal.endswith("| not measured yet |")
    goal = next(line for line in goals if line.startswith("| the one command + the recipe's"))
    assert "H/2: +0.20 vs head importance's one command" in goal
    assert "means of 2 and 1 runs, largest range 0.80: inside it" in goal and goal.endswith(
        "| met |"
    )


def test_fast_one_command_goal_needs_the_bleu_and_every_run_under_ten_minutes(tmp_path):
    """fast-default.txt (stage 6ad): tuned-default.txt's "kK-sS" lines with the one command's
    wall time at the end; the retraining-free goal of the session-29 default is met only when
    the mean BLEU is within the limits at H/2 and H/4 and every run there took under 600 s."""
    write_importance_rec(tmp_path, 36, 37.0, 37.5)
    fast = tmp_path / "fast-default.txt"

    def goal(*lines):
        fast.write_text("# header\n" + "".join(f"{line}\n" for line in lines))
        text = report_text(tmp_path)
        return next(
            g for g in text.splitlines() if "the recipes' default since session 29, the one" in g
        )

    k36 = ("k36-s{}: recovery best -> reconstruct; untuned test 37.0 valid 38.0; tuned test {} "
           "valid 39.0; kept tuned; one command {} s")  # fmt: skip
    k18 = ("k18-s{}: recovery best -> none; untuned test 35.0 valid 34.0; tuned test {} "
           "valid 37.0; kept tuned; one command {} s")  # fmt: skip
    row = goal(k36.format(1, 38.5, 540), k36.format(2, 38.1, 580), k18.format(1, 36.0, 512))
    # the unpruned 40.0: H/2 38.3 (1.70 below), H/4 36.0 (4.00 below); 512-580 s
    assert "H/2: 38.30 (mean of 2), 1.70 below (limit 2.0); H/4: 36.00, 4.00 below" in row
    assert "the one command 512-580 s over 3 runs (limit 600 s) | met |" in row
    # the tuning's starts in the same lines: --recovery best since session 29
    best = next(g for g in report_text(tmp_path).splitlines() if "`--recovery best` since" in g)
    assert "H/2: 37.00 (mean of 2), 3.00 below (limit 2.0); H/4: 35.00, 5.00 below" in best
    # one run over 10 minutes: not met, though the BLEU is
    row = goal(k36.format(1, 38.5, 540), k36.format(2, 38.1, 601), k18.format(1, 36.0, 512))
    assert "the one command 512-601 s over 3 runs (limit 600 s) | **not met** |" in row
    # in time, the BLEU short at H/2
    row = goal(k36.format(1, 37.5, 540), k18.format(1, 36.0, 512))
    assert "H/2: 37.50, 2.50 below (limit 2.0)" in row and row.endswith("| **not met** |")
    # the rows of the table: the kept models
    label = "`--recovery tuned`) (the recipes' default since session 29"
    row = next(line for line in report_text(tmp_path).splitlines() if label in line)
    assert "| 36.00 (35.00) |" not in row and "| 37.50 (39.00) |" in row
    # its "ft-kK-sG" lines: the recipe's fine-tune of gate seed G's model (its average)
    fast.write_text(
        fast.read_text()
        + "ft-k18-s1: best test 39.5 valid 39.8; last test 39.7 valid 39.9; valid loss 3.9\n"
    )
    row = next(
        g for g in report_text(tmp_path).splitlines() if "since session 29 + the recipe's" in g
    )
    assert "H/2: not run; H/4: 39.50, 0.50 below (limit 1.0); H/8: not run" in row


def test_restarts_and_distilled_finetune_rows_of_the_fast_one_command(tmp_path):
    """--restarts 3 (stage 6af): fast-default-rerun.txt's gate seeds 1-3 (session 31's rerun of
    the H/8 one commands, with their fine-tunes) make one group, the run
    with the best --recovery best score on valid kept (its tuned model, its fine-tune), then
    fast-restarts3.txt's own runs; the H/8 fine-tune goal reads their fine-tunes. The
    distilled fine-tunes (stage 6ae, "kd0.5-kK-sG" lines of fast-default-kd.txt) have their
    own row and goal."""
    write_importance_rec(tmp_path, 36, 37.0, 37.5)
    line = ("k9-s{}: recovery best -> none; untuned test 30.0 valid {}; tuned test {} valid 33.0; "
            "kept tuned; one command 540 s\n")  # fmt: skip
    ft = "ft-k9-s{}: best test {} valid 38.0; last test 37.0 valid 37.0; valid loss 4.0\n"
    (tmp_path / "fast-default-rerun.txt").write_text(
        line.format(1, 25.0, 32.0) + line.format(2, 31.0, 33.5) + line.format(3, 30.0, 34.0)
        + ft.format(1, 35.0) + ft.format(2, 38.0) + ft.format(3, 37.0)
    )  # fmt: skip
    # seed 2 decodes valid best before the tuning: its model and fine-tune are the group's
    (tmp_path / "fast-restarts3.txt").write_text(line.format(4, 31.0, 33.0) + ft.format(4, 37.0))
    text = report_text(tmp_path).splitlines()
    goal = next(g for g in text if "with `--restarts 3` (session 31" in g)
    assert "H/8: 37.50 (mean of 2), 2.50 below (limit 2.5) | met |" in goal
    row = next(g for g in text if g.startswith("| ") and "(`--restarts 3`) |" in g)
    assert row.endswith("| 33.50 (33.00) |")  # seed 2's tuned model (K = 9 is the last column)
    # the rerun's fine-tunes are the one command's at H/8, its runs a row of their own
    goal = next(g for g in text if "since session 29 + the recipe's" in g)
    assert "H/8: 36.67 (mean of 3), 3.33 below (limit 2.5)" in goal
    row = next(g for g in text if g.startswith("| ") and "rerun in sessions 31-34" in g)
    assert row.endswith("|  |  | 32.00 (33.00) |")  # gate seed 1 at H/8 only
    kd = tmp_path / "fast-default-kd.txt"
    kd.write_text(
        "kd0.5-k9-s1: best test 36.0 valid 36.5; last test 35.0 valid 35.0; valid loss 4.0\n"
        "kd0.5-k9-s2: best test 37.0 valid 37.5; last test 35.0 valid 35.0; valid loss 4.0\n"
    )
    goal = next(
        g for g in report_text(tmp_path).splitlines() if "distilled fine-tune the goal" in g
    )
    assert "H/2: not run; H/4: not run; H/8: 36.50 (mean of 2), 3.50 below (limit 2.5)" in goal


def test_finetune_budget_table_plot_and_goal(tmp_path):
    """finetune-budget.txt's "ft-kK-sG-uN" lines continue tuned-default.txt's 270-update
    fine-tunes "ft-kK-sG" (fine-tune seed 1): a row per start, the means over the starts
    measured at every budget, the first budget within the goal's limit, a figure, and the
    goals table's row for 1080 updates."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    (tmp_path / "tuned-default.txt").write_text(
        "ft-k18-s1: best test 39.0 valid 39.5; last test 39.4 valid 39.3; valid loss 3.9\n"
        "ft-k18-s2: best test 39.2 valid 39.6; last test 39.4 valid 39.3; valid loss 3.9\n"
        "ft-k18-s1-f2: best test 30.0 valid 30.0; last test 30.0 valid 30.0; valid loss 3.9\n"
        "ft-k9-s3: best test 35.0 valid 35.0; last test 35.0 valid 35.0; valid loss 4.0\n"
    )
    (tmp_path / "finetune-budget.txt").write_text(
        "ft-k18-s1-u540: best test 39.2 valid 39.7; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-s1-u1080: best test 39.6 valid 40.0; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-s2-u540: best test 39.6 valid 39.9; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-s2-u1080: best test 40.0 valid 40.1; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k9-s3-u540: best test 36.0 valid 36.0; last test 36.0 valid 36.0; valid loss 4.0\n"
    )
    out = subprocess.run(
        [sys.executable, ROOT / "bench/finetune_budget.py", "--dir", tmp_path, "--plot",
         tmp_path / "budget.png"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    lines = out.stdout.splitlines()
    assert lines[0] == "| K | gate seed | 270 updates | 540 updates | 1080 updates |"
    assert "| 18 | 1 | 39.00 (39.50) | 39.20 (39.70) | 39.60 (40.00) |" in lines
    assert "| 9 | 3 (unfinished: not in the means) | 35.00 (35.00) | 36.00 (36.00) |  |" in lines
    # K = 18: 39.1 (1.23 below), 39.4 (0.93: within the 1.0), 39.8; K = 9 has no complete start
    assert ("| 18 | 1.0 | 39.10 (39.00-39.20, 2), 1.23 below | 39.40 (39.20-39.60, 2), 0.93 below | "
            "39.80 (39.60-40.00, 2), 0.53 below | 540 updates |") in lines  # fmt: skip
    assert not any(line.startswith("| 9 | 2.5 |") for line in lines)
    for ext in ("png", "svg"):
        assert (tmp_path / f"budget.{ext}").stat().st_size > 1000
    goals = report_text(tmp_path).splitlines()
    budget_goals = [line for line in goals if line.startswith("| not the goal's budget")]
    goal = next(line for line in budget_goals if "trained on to 1080 updates" in line)
    assert "H/4: 39.80 (mean of 2), 0.53 below (limit 1.0)" in goal and "H/8: not run" in goal
    goal = next(line for line in budget_goals if "trained on to 810 updates" in line)
    assert "H/2: not run; H/4: not run; H/8: not run | not measured yet |" in goal
    text = spliced(tmp_path, "finetune-budget")
    assert (
        "old" not in text and "| 18 | 2 | 39.20 (39.60) | 39.60 (39.90) | 40.00 (40.10) |" in text
    )


def test_importance_longer_finetune_and_learning_rate_rows(tmp_path):
    """Stage 6ac: importance's fine-tunes trained on ("ft-impK-sS-uN" in finetune-budget.txt)
    get their own row and the 810-update comparison with DSP's; the fine-tune at another
    learning rate ("ft-kK-sG-lrLR" in finetune-lr.txt) gets a row with its seeds' spread and a
    goals row of its own. A line of another shape is not read as one of them."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    (tmp_path / "tuned-default.txt").write_text(
        "ft-k18-s1: best test 39.0 valid 39.5; last test 39.4 valid 39.3; valid loss 3.9\n"
        "ft-k18-s2: best test 39.2 valid 39.6; last test 39.4 valid 39.3; valid loss 3.9\n"
        "ft-imp18-s1: best test 38.6 valid 39.5; last test 38.5 valid 38.7; valid loss 3.9\n"
        "ft-k18-s1-f2: best test 38.8 valid 39.4; last test 38.5 valid 38.7; valid loss 3.9\n"
    )
    (tmp_path / "finetune-budget.txt").write_text(
        "ft-k18-s1-u810: best test 40.0 valid 40.3; last test 39.6 valid 39.9; valid loss 3.9\n"
        "ft-k18-s2-u810: best test 40.4 valid 40.4; last test 39.6 valid 39.9; valid loss 3.9\n"
        "ft-imp18-s1-u810: best test 39.5 valid 40.0; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-imp18-s2-u810: best test 39.7 valid 40.1; last test 39.0 valid 39.0; valid loss 3.9\n"
    )
    (tmp_path / "finetune-lr.txt").write_text(
        "ft-k18-s2-lr5e-4: best test 39.9 valid 40.2; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-s1-lr5e-4: best test 39.5 valid 40.0; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-lr5e-4: best test 10.0 valid 10.0; last test 10.0 valid 10.0; valid loss 3.9\n"
        "ft-k18-s1-f2-lr5e-4: best test 39.0 valid 39.9; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-k18-s2-lr1e-3: best test 39.4 valid 39.6; last test 39.0 valid 39.0; valid loss 3.9\n"
        "ft-imp18-s1-lr5e-4: best test 38.9 valid 39.8; last test 39.0 valid 39.0; valid loss 3.9\n"
    )
    text = report_text(tmp_path)
    lines = text.splitlines()
    imp = next(line for line in lines if "one command" in line and "trained on to 810" in line)
    assert imp.split(" | ")[1] == "39.50 (40.00)"  # seed 1 is the cell, seed 2 its spread
    # DSP at 5e-4: fine-tune seed 1 of gate seeds 1 and 2, then fine-tune seed 2 of gate seed 1
    assert any(
        line.startswith("| pipelined DSP")
        and line.endswith(
            "at learning rate 5e-4 (the recipe's default since session 27) | 18 | 3 | 39.47 | "
            "39.00-39.90 |"
        )
        for line in lines
    )
    lr_goal = next(
        line for line in lines if "270-update fine-tune at learning rate 5e-4 instead" in line
    )
    assert "(the recipe's default since session 27, stage 6ac)" in lr_goal
    assert "H/4: 39.47 (mean of 3), 0.86 below (limit 1.0)" in lr_goal
    assert "H/2: not run" in lr_goal and lr_goal.endswith("| not measured yet |")
    lr_versus = next(line for line in lines if "rate 5e-4 (stage 6ac): DSP's" in line)
    assert "H/4: +0.57 vs head importance's one command" in lr_versus
    assert "means of 3 and 1 runs, largest range 0.90: inside it | met |" in lr_versus
    assert any(
        "at learning rate 1e-3 instead of 3e-4 (stage 6ac): the one" in line for line in lines
    )
    lr_versus = next(line for line in lines if "rate 1e-3 (stage 6ac): DSP's" in line)
    assert lr_versus.endswith("| not run yet | not measured yet |")
    versus = next(line for line in lines if "both trained on to 810 updates" in line)
    # DSP 40.2 against importance's 39.6: +0.60, both ranges 0.4 wide: beyond them
    assert "H/4: +0.60 vs head importance's one command" in versus
    assert "means of 2 and 2 runs, largest range 0.40: beyond it | met |" in versus
    assert "10.00" not in text
    doc = tmp_path / "RESULTS.md"
    doc.write_text("a\n<!-- finetune-lr -->\nold\n<!-- /finetune-lr -->\nb\n")
    splice_recovery(tmp_path, doc)
    table = doc.read_text().splitlines()
    assert table[2] == (
        "| one command | K | seed | fine-tune seed | 3e-4 (the recipe's until session 27) | "
        "5e-4 (since) | 1e-3 |"
    )
    assert "| DSP | 18 | 1 | 1 | 39.00 (39.50) | 39.50 (40.00) |  |" in table
    assert "| DSP | 18 | 2 | 1 | 39.20 (39.60) | 39.90 (40.20) | 39.40 (39.60) |" in table
    assert "| DSP | 18 | 1 | 2 | 38.80 (39.40) | 39.00 (39.90) |  |" in table
    assert "| head importance | 18 | 1 | 1 | 38.60 (39.50) | 38.90 (39.80) |  |" in table
    # paired with the same start and fine-tune seed: +0.5, +0.7, +0.2 on test; +0.5, +0.6, +0.5
    # on valid; 1e-3: +0.2 on test, 0 on valid (not up)
    assert ("| DSP: mean change against 3e-4 | | | | | +0.47 (+0.53), test up in 3 of 3, valid "
            "in 3 | +0.20 (+0.00), test up in 1 of 1, valid in 0 |") in table  # fmt: skip
    assert ("| head importance: mean change against 3e-4 | | | | | +0.30 (+0.30), test up in 1 "
            "of 1, valid in 1 |  |") in table  # fmt: skip
    # against the default (5e-4) on the same run: 1e-3's 39.4 (39.6) against 39.9 (40.2)
    both = next(row for row in table if row.startswith("| both:"))
    assert both == ("| both: mean change against 5e-4 (the same start and fine-tune seed) "
                       "| | | | |  | -0.50 (-0.60), test up in 0 of 1, valid in 0 |")  # fmt: skip


def test_head_layouts_count_the_kept_heads_per_type_and_read_the_valid_score(tmp_path):
    """bench/head_layouts.py: a gate run's heads per attention type from its pruned.pt's
    --stripped-heads, the valid score from recovery.json; a model that is not stripped is
    refused with its path."""
    import argparse

    import torch

    from bench.head_layouts import layout_line

    run_dir = tmp_path / "k9" / "seed-2"
    run_dir.mkdir(parents=True)
    args = argparse.Namespace(stripped_heads="enc-self=0,2,0;dec-self=2,0,0;cross=0,0,5")
    torch.save({"model": {}, "args": args}, run_dir / "pruned.pt")
    assert layout_line(str(run_dir)) == "k9/seed-2: enc-self 2, dec-self 2, cross 5; valid -"
    (run_dir / "recovery.json").write_text(json.dumps({"valid_sacrebleu_chosen": 31.186}))
    assert layout_line(str(run_dir) + "/").endswith("cross 5; valid 31.19")
    torch.save({"model": {}, "args": argparse.Namespace()}, run_dir / "pruned.pt")
    with pytest.raises(SystemExit, match="seed-2/pruned.pt is not a stripped model"):
        layout_line(str(run_dir))


def test_restart_choice_reads_each_score_and_picks_per_group(tmp_path, capsys):
    """bench/restart_choice.py: each run's valid BLEU (tune.json) and NLL (valid_loss's file,
    reused while newer than its model and made for it), the fine-tuned scores of its ft line;
    per group of seeds the run each score picks (BLEU: highest, NLL: lowest)."""
    import os

    from bench.restart_choice import main

    runs, lines = [], []
    # seed: (start BLEU, start NLL, tuned BLEU, tuned NLL, fine-tuned test, valid)
    values = {1: (30.0, 2.9, 33.0, 2.7, 36.0, 36.5), 2: (29.0, 2.8, 32.0, 2.6, 37.5, 37.6),
              3: (28.0, 2.85, 32.5, 2.65, 37.2, 38.0), 4: (27.0, 3.0, 31.0, 2.8, 35.0, 35.5)}  # fmt: skip
    for seed, (b0, n0, b1, n1, test, valid) in values.items():
        run = tmp_path / ("k9" if seed == 1 else f"k9-s{seed}")
        (run / "tuned/run").mkdir(parents=True)
        doc = {"valid_sacrebleu": {"untuned": b0, "tuned": b1}}
        (run / "tuned/tune.json").write_text(json.dumps(doc))
        for name, rel, nll in (("untuned", "pruned.untuned.pt", n0),
                               ("tuned", "tuned/run/pruned.pt", n1)):  # fmt: skip
            (run / rel).write_bytes(b"model")
            made_for = {"checkpoint": os.path.realpath(run / rel), "subset": "valid"}
            cache = run / f"valid-loss-{name}.json"
            cache.write_text(json.dumps({"valid_nll_loss": nll, "made_for": made_for}))
            os.utime(cache, (os.path.getmtime(run / rel) + 1,) * 2)
        runs.append(str(run))
        kept = "untuned" if seed == 2 else "tuned"  # the one command's model: its test score
        lines += [f"k9-s{seed}: recovery best -> none; untuned test {20 + seed} valid 1; tuned "
                  f"test {30 + seed} valid 2; kept {kept}; one command 9 s",
                  f"ft-k9-s{seed}: best test {test} valid {valid}; last test 0 valid 0"]  # fmt: skip
    results = tmp_path / "results.txt"
    results.write_text("\n".join(lines) + "\n")
    main(["--data", str(tmp_path / "no-data"), "--results", str(results), "--group", "3", *runs])
    out = capsys.readouterr().out
    assert (
        "k9-s2: start valid BLEU 29.00 NLL 2.800; tuned valid BLEU 32.00 NLL 2.600; the one "
        "command test 22.00; fine-tuned test 37.50 valid 37.60" in out
    )
    assert (
        "choice k9 by valid BLEU of the start: seed 1 (36.00; 31.00); mean fine-tuned test "
        "36.00, before the fine-tune 31.00" in out
    )
    assert "choice k9 by valid NLL of the start: seed 2 (37.50; 22.00)" in out
    assert "choice k9 by valid NLL tuned: seed 2 (37.50; 22.00)" in out
    assert "seeds 1-3 by the fine-tuned valid BLEU (hindsight): seed 3 (37.20)" in out
    assert "seed 4" not in out.split("k9-s4:")[1]  # an incomplete group chooses nothing
    with pytest.raises(SystemExit, match="lacks the line k9-s5 or ft-k9-s5"):
        run = tmp_path / "k9-s5"
        run.mkdir()
        main(["--data", "x", "--results", str(results), str(run)])


def test_layout_split_table_sets_per_type_budgets_beside_the_free_layout(tmp_path):
    """Stage 6ah: layout-eE-dD-cC.txt's one command and fine-tune lines, per K, beside the
    free layout's runs of fast-default.txt and fast-default-rerun.txt (whose fine-tunes share
    names: each file's runs are read on their own); K without a per-type run has no row."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    line = ("k{}-s{}: recovery best -> none; untuned test {} valid 30.0; tuned test {} valid 33.0; "
            "kept tuned; one command 540 s\n")  # fmt: skip
    ft = "ft-k{}-s{}: best test {} valid 38.0; last test 37.0 valid 37.0; valid loss 4.0\n"
    (tmp_path / "fast-default.txt").write_text(
        line.format(18, 1, 34.0, 37.0) + ft.format(18, 1, 39.0) + line.format(36, 1, 37.0, 39.0)
    )
    (tmp_path / "fast-default-rerun.txt").write_text(
        line.format(18, 1, 35.0, 36.0) + ft.format(18, 1, 38.0)
    )
    (tmp_path / "layout-e6-d6-c6.txt").write_text(
        line.format(18, 1, 36.0, 37.5) + line.format(18, 2, 35.0, 36.5) + ft.format(18, 1, 39.5)
    )
    # not the proportional split at K = 18 (that is 6, 6, 6): a layout row, in no goal
    (tmp_path / "layout-e6-d9-c3.txt").write_text(line.format(18, 1, 30.0, 31.0))
    text = spliced(tmp_path, "layout-split")
    rows = [r for r in text.splitlines() if r.startswith("| 1") or r.startswith("| 3")]
    default = {"free": ": the default", "proportional": "", "auto": ""}[
        layout_split.recipe_type_split()
    ]
    assert rows == [
        f"| 18 | free (the gates choose){default} | 34.50 (34.00-35.00); valid 30.00; 2 runs "
        "| 36.50 (36.00-37.00); valid 33.00; 2 runs | 38.50 (38.00-39.00); valid 38.00; 2 runs |",
        f"| 18 | 6, 6, 6 (`--type-split proportional`){': the default' if not default else ''} | "
        "35.50 (35.00-36.00); valid 30.00; 2 runs | 37.00 (36.50-37.50); "
        "valid 33.00; 2 runs | 39.50; valid 38.00; 1 run |",
        "| 18 | 6, 9, 3 | 30.00; valid 30.00; 1 run | 31.00; valid 33.00; 1 run | - |",
    ]
    # the split's rows in the goals: its one command's mean and wall times, its fine-tune
    goals = spliced(tmp_path, "recovery-goals")
    split = [r for r in goals.splitlines() if r.startswith("| the one command with K split")]
    assert (
        "H/4: 37.00 (mean of 2), 3.33 below (limit 6.0); the one command 540-540 s over 2"
        in split[0]
    )
    assert "H/4: 39.50, 0.83 below (limit 1.0)" in split[3] and "fine-tune within 0.3" in split[3]


def test_distilled_finetunes_of_the_split_sit_beside_its_labels_finetune(tmp_path):
    """Stage 6ai: split-kd.txt's distilled fine-tunes ("kd0.5-kK-sS", "kd0.5-h1-kK-sS") of the
    split's models, per gate seed beside the labels fine-tune of the same model (the layout's
    own file, "ft-kK-sS"), means over the seeds with every column; their goal rows count the
    means of the recipe's models."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    ft = "{}-k18-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "layout-e6-d6-c6.txt").write_text(
        ft.format("ft", 1, 39.0, 40.0) + ft.format("ft", 2, 39.2, 40.2)
    )
    (tmp_path / "split-kd.txt").write_text(
        "# a comment line\n"
        + ft.format("kd0.5", 1, 39.1, 39.9)
        + ft.format("kd0.5-h1", 1, 39.5, 40.1)
        + ft.format("kd0.5", 2, 39.3, 40.3)
    )
    rows = [r for r in spliced(tmp_path, "split-distilled").splitlines() if r.startswith("| 18")]
    assert rows == [
        "| 18 | 1 | 39.00 (40.00) | 39.10 (39.90) | 39.50 (40.10) |",
        "| 18 | 2 | 39.20 (40.20) | 39.30 (40.30) | - |",
    ]  # one seed has every column: no mean row yet
    (tmp_path / "split-kd.txt").write_text(
        (tmp_path / "split-kd.txt").read_text() + ft.format("kd0.5-h1", 2, 39.7, 40.5)
    )
    rows = [r for r in spliced(tmp_path, "split-distilled").splitlines() if r.startswith("| 18")]
    assert rows[-1] == "| 18 | mean of 2 | 39.10 (40.10) | 39.20 (40.10) | 39.60 (40.30) |"
    goals = [r for r in spliced(tmp_path, "recovery-goals").splitlines() if "session 37" in r]
    assert len(goals) == 2
    assert "H/2: not run; H/4: 39.20 (mean of 2), 1.13 below (limit 1.0)" in goals[0]
    assert goals[0].endswith("| **not met** |")
    assert "H/4: 39.60 (mean of 2), 0.73 below (limit 1.0); H/8: not run" in goals[1]
    assert goals[1].endswith("| not measured yet |")


def test_larger_batch_finetunes_of_the_split_sit_beside_its_labels_finetune(tmp_path):
    """Stage 6aj: split-uf2.txt's fine-tunes with twice the tokens per update ("uf2-kK-sS") of
    the split's models, in a block of their own beside the labels fine-tune of the same model
    (the layout's own file), with the mean over the seeds that have both; the distilled
    block is not written without its file."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    ft = "{}-k18-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "layout-e6-d6-c6.txt").write_text(
        ft.format("ft", 1, 39.0, 40.0) + ft.format("ft", 2, 39.2, 40.2) + ft.format("ft", 3, 1, 2)
    )
    (tmp_path / "split-uf2.txt").write_text(
        ft.format("uf2", 1, 38.9, 39.4) + ft.format("uf2", 2, 39.5, 40.0)
    )
    doc = tmp_path / "RESULTS.md"
    doc.write_text("<!-- split-batch -->\nold\n<!-- /split-batch -->\n"
                   "<!-- split-distilled -->\nold\n<!-- /split-distilled -->\n")  # fmt: skip
    splice_recovery(tmp_path, doc)
    text = doc.read_text()
    rows = [r for r in text.splitlines() if r.startswith("| 18")]
    assert rows == [
        "| 18 | 1 | 39.00 (40.00) | 38.90 (39.40) |",
        "| 18 | 2 | 39.20 (40.20) | 39.50 (40.00) |",
        "| 18 | 3 | 1.00 (2.00) | - |",
        "| 18 | mean of 2 | 39.10 (40.10) | 39.20 (39.70) |",
    ]
    assert "twice the tokens per update" in text
    assert "<!-- split-distilled -->\nold\n" in text  # no split-kd.txt: left as it was


def test_the_rebuilt_models_finetune_variants_sit_beside_their_own_labels_finetune(tmp_path):
    """Stage 6ak: split-rebuilt.txt holds its own one command's models (rebuilt: gate runs
    differ between machines), their labels fine-tune ("ft-kK-sS"), the fine-tune of 540
    updates of 2048 tokens ("hb-kK-sS") and the one with frozen embeddings ("fe-kK-sS"); its
    block pairs them from that file alone, never with the layout file's labels fine-tunes of
    other models."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    ft = "{}-k18-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "layout-e6-d6-c6.txt").write_text(ft.format("ft", 1, 20.0, 20.0))
    (tmp_path / "split-rebuilt.txt").write_text(
        "k18-s1: recovery best -> none; untuned test 35.0 valid 35.2; tuned test 37.0 valid"
        " 37.3; kept tuned; one command 788 s\n"
        + ft.format("ft", 1, 39.0, 40.0) + ft.format("hb", 1, 39.4, 40.2)
        + ft.format("ft", 2, 39.2, 40.2) + ft.format("hb", 2, 39.6, 40.6)
        + ft.format("ft", 3, 38.8, 39.8) + ft.format("fe", 1, 39.1, 40.1)
        + ft.format("f2", 1, 39.3, 40.3) + ft.format("t0", 2, 39.5, 40.5)
    )  # fmt: skip
    text = spliced(tmp_path, "split-rebuilt")
    assert [r for r in text.splitlines() if r.startswith("| 18")] == [
        "| 18 | 1 | 39.00 (40.00) | 39.40 (40.20) | 39.10 (40.10) | 39.30 (40.30) | - |",
        "| 18 | 2 | 39.20 (40.20) | 39.60 (40.60) | - | - | 39.50 (40.50) |",
        "| 18 | 3 | 38.80 (39.80) | - | - | - | - |",
    ]
    assert "540 updates of 2048 tokens" in text and "embeddings frozen" in text
    assert "fine-tune seed 2" in text  # stage 6am's column: the recipe's data-order spread
    assert "tuned at dropout 0" in text  # stage 6an's: the fine-tune of the d0-tuned model


def test_tuning_dropout_table_sets_both_tunings_beside_their_start(tmp_path):
    """Stage 6an: tune-dropout.txt's lines (start, the tuning at dropout 0.1 and at 0 of the
    same start: valid, test, validation loss terms) as one row each, the pick-k probes first,
    then the mean of the split's gate seeds; a line missing a model is left out."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))

    def model(m, valid, test, loss):
        return f" {m} valid {valid} test {test} loss {loss} kl 0.1 hidden 0.05"

    lines = [
        "split-k18-s1:" + model("start", 35.2, 34.8, 1.028) + ";" + model("d0.1", 37.26, 37.44, 0.677)
        + ";" + model("d0", 38.12, 37.37, 0.642),
        "split-k18-s2:" + model("start", 34.89, 34.45, 1.064) + ";" + model("d0.1", 37.57, 36.12, 0.684)
        + ";" + model("d0", 38.51, 37.84, 0.637),
        "pick-k54:" + model("start", 40.26, 39.9, 0.135) + ";" + model("d0.1", 39.87, 39.5, 0.171)
        + ";" + model("d0", 40.05, 39.8, 0.134),
        "pick-k45:" + model("start", 39.57, 39.0, 0.22) + ";" + model("d0", 40.03, 39.4, 0.196),
    ]  # fmt: skip
    (tmp_path / "tune-dropout.txt").write_text("# stage 6an\n" + "\n".join(lines) + "\n")
    text = spliced(tmp_path, "tune-dropout")
    rows = [r for r in text.splitlines() if r.startswith("| K = ")]
    assert rows == [
        "| K = 54, dsp-pick-k's probe (free) | 40.26 / 39.87 / 40.05 | 39.90 / 39.50 / 39.80 "
        "| 0.135 / 0.171 / 0.134 |",
        "| K = 18, split 6,6,6, gate seed 1 | 35.20 / 37.26 / 38.12 | 34.80 / 37.44 / 37.37 "
        "| 1.028 / 0.677 / 0.642 |",
        "| K = 18, split 6,6,6, gate seed 2 | 34.89 / 37.57 / 38.51 | 34.45 / 36.12 / 37.84 "
        "| 1.064 / 0.684 / 0.637 |",
        "| K = 18, split 6,6,6: mean of 2 | 35.05 / 37.41 / 38.31 | 34.62 / 36.78 / 37.61 "
        "| 1.046 / 0.681 / 0.639 |",
    ]


def test_readme_table_shows_the_recipes_type_split():
    """The README's table follows prune-pipelined.sh's default --type-split (its DSP_TYPE_SPLIT=
    line, read by layout_split.recipe_type_split): with proportional, DSP's columns are the
    stage 6ah runs of K/3 heads per type, named in the caption; with free, stage 6ad's; with
    auto, the first where K <= H/4 and the second above."""
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report as cr

    assert layout_split.recipe_type_split() in ("auto", "free", "proportional")
    assert [layout_split.proportional_layout(k) for k in (36, 18, 9, 19)] == [
        "12, 12, 12", "6, 6, 6", "3, 3, 3", "6, 6, 7"]  # fmt: skip
    cells = {(cr.PROPORTIONAL, 9): (34.0, 35.0), (cr.PROPORTIONAL_FT, 9): (38.0, 39.0),
             **{(cr.FAST_DEFAULT, k): (33.0, 34.0) for k in (36, 18, 9)}}  # fmt: skip
    seeds = {(cr.PROPORTIONAL, 9): [35.0]}
    # the split's runs at H/8 only: the free layout's table until they cover every K
    free = cr.defaults_lines(cells, seeds, {"sacrebleu": 40.33}, "free")
    assert "| 9 of 72 (H/8) | 33.00 (1 run) | - | - | - | - |" in free
    assert cr.defaults_lines(cells, seeds, {"sacrebleu": 40.33}, "proportional") == free
    cells.update({(cr.PROPORTIONAL, k): (36.0, 37.0) for k in (36, 18)})
    split = cr.defaults_lines(cells, seeds, {"sacrebleu": 40.33}, "proportional")
    assert "layout-e3-d3-c3.txt" in split[0] and "split among the attention types" in split[0]
    assert "| 9 of 72 (H/8) | 34.50 (34.00-35.00, 2 runs) | - | 38.00 (1 run) | - | - |" in split
    # auto (the dsp gates' default since session 36): the split's runs where K <= H/4, the free
    # layout's at H/2
    auto_cells, auto_seeds = cr.with_auto_split(cells, seeds)
    auto = cr.defaults_lines(auto_cells, auto_seeds, {"sacrebleu": 40.33}, "auto")
    assert "| 36 of 72 (H/2) | 33.00 (1 run) | - | - | - | - |" in auto
    assert "| 18 of 72 (H/4) | 36.00 (1 run) | - | - | - | - |" in auto
    assert "| 9 of 72 (H/8) | 34.50 (34.00-35.00, 2 runs) | - | 38.00 (1 run) | - | - |" in auto
    assert "layout-e3-d3-c3.txt" in auto[0] and "fast-default.txt) at H/2" in auto[0]
    assert [cr.split_at(k) for k in (36, 19, 18, 9)] == [False, False, True, True]


def test_readme_table_switches_to_todays_defaults_once_they_cover_every_k(tmp_path):
    """Stage 6ao's one commands at H/2 and H/8 (one-command-t0.txt) and, at H/4, stage 6an's
    tunings at dropout 0 of stage 6ak's gate runs (tune-dropout.txt's start and d0, the
    recipe keeping the tuning only where it decodes valid better; split-rebuilt.txt's "t0-"
    fine-tunes) are the README table's DSP columns once every K has runs; importance's columns
    are then said to be tuned at 0.1."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    one = ("k{}-s{}: recovery best -> none; untuned test {} valid {}; tuned test {} valid {}; "
           "kept tuned; one command {} s\n")  # fmt: skip
    ft = "ft-k{}-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "one-command-t0.txt").write_text(
        one.format(36, 1, 37.6, 38.8, 39.0, 39.7, 800) + ft.format(36, 1, 40.1, 41.0)
        + one.format(36, 2, 37.4, 38.6, 38.6, 39.3, 820)
    )  # fmt: skip
    model = " {} valid {} test {} loss 1.0 kl 0.1 hidden 0.05"
    (tmp_path / "tune-dropout.txt").write_text(
        "split-k18-s1:" + model.format("start", 35.2, 34.8) + ";" + model.format("d0.1", 37.2, 37.4)
        + ";" + model.format("d0", 38.1, 37.3) + "\n"
        # the tuning decodes valid worse than its start: the recipe keeps the start
        "split-k18-s2:" + model.format("start", 36.0, 35.0) + ";" + model.format("d0.1", 37.5, 36.1)
        + ";" + model.format("d0", 35.9, 36.6) + "\n"
    )  # fmt: skip
    (tmp_path / "split-rebuilt.txt").write_text(
        "k18-s1: recovery best -> none; untuned test 34.8 valid 35.2; tuned test 37.4 valid 37.2;"
        " kept tuned; one command 790 s\n" + ft.replace("ft-", "t0-").format(18, 1, 39.3, 40.4)
    )  # fmt: skip
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report as cr

    runs, seconds = cr.today_runs(str(tmp_path))
    assert runs[18] == [
        {"seed": 1, "best": (34.8, 35.2), "one": (37.3, 38.1), "ft": (39.3, 40.4)},
        {"seed": 2, "best": (35.0, 36.0), "one": (35.0, 36.0), "ft": None},
    ]
    assert runs[36][1] == {"seed": 2, "best": (37.4, 38.6), "one": (38.6, 39.3), "ft": None}
    assert seconds == {36: [800, 820], 18: [790]}
    readme = tmp_path / "README.md"
    readme.write_text("<!-- recovery-defaults -->\n<!-- /recovery-defaults -->\n")
    splice_recovery(tmp_path, readme)
    assert "| 36 of 72 (H/2) | 38.80 (38.60-39.00, 2 runs) |" not in readme.read_text()  # no H/8
    (tmp_path / "one-command-t0.txt").write_text(
        (tmp_path / "one-command-t0.txt").read_text() + one.format(9, 1, 32.0, 31.0, 35.0, 34.0, 700)
    )  # fmt: skip
    splice_recovery(tmp_path, readme)
    text = readme.read_text()
    rows = [r for r in text.splitlines() if r.startswith("| ") and " of 72 " in r]
    assert [r.split(" | ")[1:4] for r in rows] == [
        ["38.80 (38.60-39.00, 2 runs)", "37.50 (37.40-37.60, 2 runs)", "40.10 (1 run)"],
        ["36.15 (35.00-37.30, 2 runs)", "34.90 (34.80-35.00, 2 runs)", "39.30 (1 run)"],
        ["35.00 (1 run)", "32.00 (1 run)", "-"],
    ]
    assert "one-command-t0.txt" in text and "its tuning at dropout 0.1" in text


def test_importance_columns_switch_to_todays_defaults_once_they_cover_every_k(tmp_path):
    """Stage 6aq's runs (importance-t0.txt: head importance's one command at today's defaults,
    "impK-sS" lines, and their fine-tunes "ft-impK-sS") become the README table's importance
    columns and the goal rows' rival once both cover every K; until then the caption says the
    columns are the 0.1 tuning. RESULTS gets their block with the gap to the unpruned model."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0}))
    one = ("k{}-s1: recovery best -> none; untuned test {} valid {}; tuned test {} valid {}; "
           "kept tuned; one command 700 s\n")  # fmt: skip
    ft = "ft-{}-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "one-command-t0.txt").write_text(
        "".join(
            one.format(k, 30.0, 30.0, 38.0 - k / 10, 38.0) + ft.format(f"k{k}", 1, 39.0, 40.0)
            for k in (36, 9)
        )  # fmt: skip
    )
    write_todays_h4_run(tmp_path)
    imp = "imp{}-s{}: untuned valid {}; tuned valid {}; kept {}; test {}\n"
    lines = [
        imp.format(18, 1, 30.0, 36.0, "tuned", 35.0),
        imp.format(18, 2, 30.0, 29.0, "untuned", 31.0),  # valid: the untuned model's 30.0
        ft.format("imp18", 1, 38.0, 39.0),
        imp.format(36, 1, 35.0, 37.0, "tuned", 37.5),
        ft.format("imp36", 1, 39.5, 40.0),
        imp.format(9, 1, 25.0, 30.0, "tuned", 29.0),
    ]
    (tmp_path / "importance-t0.txt").write_text("".join(lines))
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report as cr

    one_runs, ft_runs = cr.today_importance_runs(str(tmp_path))
    assert one_runs == {18: [(35.0, 36.0), (31.0, 30.0)], 36: [(37.5, 37.0)], 9: [(29.0, 30.0)]}
    assert ft_runs == {18: [(38.0, 39.0)], 36: [(39.5, 40.0)]}
    readme = tmp_path / "README.md"
    readme.write_text("<!-- recovery-defaults -->\n<!-- /recovery-defaults -->\n")
    splice_recovery(tmp_path, readme)
    assert "its tuning at dropout 0.1" in readme.read_text()  # no fine-tune at H/8 yet
    (tmp_path / "importance-t0.txt").write_text("".join(lines) + ft.format("imp9", 1, 36.0, 37.0))
    results = tmp_path / "RESULTS.md"
    results.write_text(
        "<!-- importance-today -->\n<!-- /importance-today -->\n"
        "<!-- recovery-goals -->\n<!-- /recovery-goals -->\n"
    )
    splice_recovery(tmp_path, readme)
    splice_recovery(tmp_path, results)
    text = readme.read_text()
    rows = [r for r in text.splitlines() if r.startswith("| ") and " of 72 " in r]
    assert [r.split(" | ")[4:6] for r in rows] == [
        ["37.50 (1 run)", "39.50 (1 run) |"],
        ["33.00 (31.00-35.00, 2 runs)", "38.00 (1 run) |"],
        ["29.00 (1 run)", "36.00 (1 run) |"],
    ]
    assert "its tuning at dropout 0.1" not in text and "importance-t0.txt" in text
    block = results.read_text()
    assert (
        "| 18 (H/4) | 33.00 (31.00-35.00), valid 33.00 | 38.00 (38.00-38.00), valid 39.00 |"
        in block
    )
    assert "| 7.00 / 2.00 |" in block  # 40.0 - 33.00, 40.0 - 38.00
    assert "head importance's one command at today's defaults too, stage 6aq" in block


def test_paired_blocks_set_each_change_beside_todays_run_of_the_same_gate_seed(tmp_path):
    """Stages 6ap/6ar (gate-dropout.txt: the one command with the gate run at dropout 0) and 6as
    (tune-layers.txt: the tuning of every layer from the same starts) are paired by K and gate
    seed with today's runs (one-command-t0.txt at H/2, tune-dropout.txt + split-rebuilt.txt's
    "t0-" fine-tunes at H/4), never by line order; a run without today's pair is left out; the
    mean change row gives valid, each pair's test change and both groups' spreads."""
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    one = ("k{}-s{}: recovery best -> reconstruct; untuned test {} valid {}; tuned test {} "
           "valid {}; kept tuned; one command 700 s\n")  # fmt: skip
    ft = "ft-k{}-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "one-command-t0.txt").write_text(
        one.format(36, 1, 37.0, 38.0, 38.5, 39.5, 700) + one.format(36, 2, 37.5, 38.0, 39.0, 39.0)
        + ft.format(36, 2, 40.0, 41.0)
    )  # fmt: skip
    write_todays_h4_run(tmp_path)
    (tmp_path / "gate-dropout.txt").write_text(
        "# stage 6ar\n" + one.format(36, 2, 38.5, 38.5, 38.0, 39.5) + ft.format(36, 2, 40.5, 40.0)
        + one.format(36, 1, 38.0, 39.0, 39.5, 40.0) + one.format(36, 3, 1.0, 1.0, 1.0, 1.0)
    )  # fmt: skip
    (tmp_path / "tune-layers.txt").write_text(
        "k18-s1: start valid 35.00; tuned valid 38.50 test 37.75; kept tuned\n"
        + ft.format(18, 1, 39.5, 40.5)
        + "k18-s2: start valid 35.00; tuned valid 34.00 test 33.00; kept untuned\n"
    )  # fmt: skip
    # stage 6ay (the gate run training every layer), paired with 6as's runs: today's start
    # and the every-layer tuning of the same gate seed (k18-s2 has no tuned pair: left out)
    (tmp_path / "gate-all-layers.txt").write_text(
        one.format(18, 1, 38.0, 39.0, 38.25, 39.25) + one.format(18, 3, 1.0, 1.0, 1.0, 1.0)
    )
    results = tmp_path / "RESULTS.md"
    results.write_text(
        "<!-- gate-dropout -->\n<!-- /gate-dropout -->\n<!-- tune-layers -->\n<!-- /tune-layers -->\n"
        "<!-- recovery-goals -->\n<!-- /recovery-goals -->\n"
        "<!-- gate-all-layers -->\n<!-- /gate-all-layers -->\n"
    )
    splice_recovery(tmp_path, results)
    text = results.read_text()
    all_layers = text[text.index("<!-- gate-all-layers -->") :].splitlines()
    assert all_layers[1:5] == [
        "| K | gate seed | `--recovery best`: out_proj,fc2 / every layer "
        "| the one command: out_proj,fc2 / every layer |",
        "|---|---|---|---|",
        "| 18 | 1 | 34.00 (35.00) / 38.00 (39.00) | 37.75 (38.50) / 38.25 (39.25) |",
        "| 18 | change, mean of 1 | **+4.00** (valid +4.00; +4.00) "
        "| **+0.50** (valid +0.75; +0.50) |",
    ]
    text = text[: text.index("<!-- gate-all-layers -->")]
    rows = [r for r in text.splitlines() if r.startswith("| 36 ") or r.startswith("| 18 ")]
    assert rows == [
        "| 36 | 1 | 37.00 (38.00) / 38.00 (39.00) | 38.50 (39.50) / 39.50 (40.00) | - / - |",
        "| 36 | 2 | 37.50 (38.00) / 38.50 (38.50) | 39.00 (39.00) / 38.00 (39.50) "
        "| 40.00 (41.00) / 40.50 (40.00) |",
        "| 36 | change, mean of 2 | **+1.00** (valid +0.75; +1.00, +1.00; 37.25 (37.00-37.50) / "
        "38.25 (38.00-38.50)) | **+0.00** (valid +0.50; +1.00, -1.00; 38.75 (38.50-39.00) / "
        "38.75 (38.00-39.50)) | **+0.50** (valid -1.00; +0.50) |",
        "| 18 | 1 | 37.00 (38.00) / 37.75 (38.50) | 39.00 (40.00) / 39.50 (40.50) |",
        "| 18 | change, mean of 1 | **+0.75** (valid +0.50; +0.75) | **+0.50** (valid +0.50; +0.50) |",
    ]
    # its goal rows: the fine-tune of every-layer tuning (39.50 at H/4: 0.83 below, limit 1.0),
    # the rival named with the recovery it had
    goals = [r for r in text.splitlines() if "tuning of every transformer layer" in r]
    assert any(
        "+ the recipe's 270-update" in r and "H/4: 39.50, 0.83 below (limit 1.0)" in r
        for r in goals
    )
    assert any("(reconstruct + its tuning of out_proj and fc2)" in r for r in goals)


def test_readme_table_follows_the_tuned_refits_default_layers(tmp_path):
    """tune-refit.sh's default --layers (its LAYERS= line, paired_runs.recipe_tune_layers) picks
    the README table's DSP one command and fine-tune: with "layers", stage 6as's runs once they
    and their fine-tunes cover every K (the caption then says importance's columns kept the
    out_proj,fc2 tuning); --recovery best stays today's (the same models)."""
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report as cr
    import paired_runs

    assert paired_runs.recipe_tune_layers() in ("out_proj,fc2", "layers")
    recipe = tmp_path / "tune-refit.sh"
    recipe.write_text('#!/usr/bin/env bash\nDATA="" SEED=1\nLAYERS=layers GEN_ARGS=""\n')
    assert paired_runs.recipe_tune_layers(str(recipe)) == "layers"
    recipe.write_text("LAYER=x\n")
    with pytest.raises(ValueError, match="no LAYERS= line"):
        paired_runs.recipe_tune_layers(str(recipe))
    cells = {
        **{(m, k): (36.0, 37.0) for m in (cr.TODAY, cr.TODAY_BEST, cr.TODAY_FT) for k in (36, 18, 9)},
        **{(m, k): (30.0, 31.0) for m in (cr.TODAY_IMP, cr.TODAY_IMP_FT) for k in (36, 18, 9)},
        **{(m, k): (38.0, 39.0) for m in (cr.TUNE_LAYERS, cr.TUNE_LAYERS_FT) for k in (36, 18)},
    }  # fmt: skip
    base = {"sacrebleu": 40.33}
    old = cr.defaults_lines(cells, {}, base, "auto", "out_proj,fc2")
    assert "| 36 of 72 (H/2) | 36.00 (1 run) | 36.00 (1 run) | 36.00 (1 run) |" in old[4]
    # every layer is the default, but H/8 is missing: still today's runs
    assert cr.defaults_lines(cells, {}, base, "auto", "layers") == old
    cells.update({(m, 9): (37.0, 38.0) for m in (cr.TUNE_LAYERS, cr.TUNE_LAYERS_FT)})
    assert cr.defaults_lines(cells, {}, base, "auto", "out_proj,fc2") == old
    new = cr.defaults_lines(cells, {}, base, "auto", "layers")
    assert "| 36 of 72 (H/2) | 38.00 (1 run) | 36.00 (1 run) | 38.00 (1 run) | 30.00" in new[4]
    assert "| 9 of 72 (H/8) | 37.00 (1 run) | 36.00 (1 run) | 37.00 (1 run) | 30.00" in new[6]
    assert "tune-layers.txt" in new[0] and "not measured with the tuning of every layer" in new[0]
    # importance's columns follow stage 6at's every-layer tuning once it covers every K
    cells.update({(m, k): (33.0, 34.0) for m in (cr.TL_IMP, cr.TL_IMP_FT) for k in (36, 18)})
    assert cr.defaults_lines(cells, {}, base, "auto", "layers") == new
    cells.update({(m, 9): (32.0, 33.0) for m in (cr.TL_IMP, cr.TL_IMP_FT)})
    both = cr.defaults_lines(cells, {}, base, "auto", "layers")
    assert both[4].endswith("| 33.00 (1 run) | 33.00 (1 run) |")
    assert both[6].endswith("| 32.00 (1 run) | 32.00 (1 run) |")
    assert "importance-tl.txt" in both[0] and "not measured" not in both[0]
    # and never while DSP's columns are of the out_proj,fc2 tuning
    assert "importance-tl.txt" not in cr.defaults_lines(cells, {}, base, "auto", "out_proj,fc2")[0]
    # tune-refit.sh's default --lr (its LR= assignment) picks stage 6au's runs at 2e-4 once
    # they and their fine-tunes cover every K; importance's columns say they are of 5e-4
    assert paired_runs.recipe_tune_lr() in ("5e-4", "2e-4")
    recipe.write_text('DATA="" SEED=1 LR=2e-4 EPOCHS=1 FT_LR=9\n')
    assert paired_runs.recipe_tune_lr(str(recipe)) == "2e-4"
    cells.update({(m, k): (39.0, 40.0) for m in (cr.TUNE_LR, cr.TUNE_LR_FT) for k in (36, 18)})
    assert cr.defaults_lines(cells, {}, base, "auto", "layers", "2e-4") == both
    cells.update({(m, 9): (35.0, 36.0) for m in (cr.TUNE_LR, cr.TUNE_LR_FT)})
    assert cr.defaults_lines(cells, {}, base, "auto", "layers", "5e-4") == both
    lr = cr.defaults_lines(cells, {}, base, "auto", "layers", "2e-4")
    assert (
        lr[4]
        == "| 36 of 72 (H/2) | 39.00 (1 run) | 36.00 (1 run) | 39.00 (1 run) | 33.00 (1 run) | 33.00 (1 run) |"
    )
    assert lr[6].startswith("| 9 of 72 (H/8) | 35.00 (1 run) | 36.00 (1 run) | 35.00 (1 run) |")
    assert "tune-lr2e-4.txt" in lr[0] and "not measured at 2e-4 yet" in lr[0]


def test_tuning_learning_rate_block_pairs_each_run_with_the_default_tuning_of_its_start(tmp_path):
    """Stage 6au (tune-lr2e-4.txt: the tuning of every layer at 2e-4) is paired with stage
    6as's tuning of the same start (tune-layers.txt, K and gate seed), fine-tunes included; a
    run whose start 6as did not tune is left out."""
    ft = "ft-k{}-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    tuned = "k{}-s{}: start valid 38.00; tuned valid {} test {}; kept tuned\n"
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    (tmp_path / "tune-layers.txt").write_text(
        tuned.format(36, 2, 39.0, 38.5) + tuned.format(36, 1, 38.75, 38.25)
        + ft.format(36, 1, 40.25, 41.0) + ft.format(36, 2, 40.0, 41.0)
    )  # fmt: skip
    (tmp_path / "tune-lr2e-4.txt").write_text(
        "# 6au\n" + tuned.format(36, 1, 39.5, 39.0) + ft.format(36, 1, 40.75, 41.5)
        + tuned.format(36, 2, 39.25, 38.0) + tuned.format(36, 3, 1.0, 1.0)
    )  # fmt: skip
    results = tmp_path / "RESULTS.md"
    results.write_text("<!-- tune-lr -->\n<!-- /tune-lr -->\n")
    splice_recovery(tmp_path, results)
    lines = results.read_text().splitlines()
    assert lines[1] == "| K | gate seed | the one command: 5e-4 / 2e-4 | + fine-tune: 5e-4 / 2e-4 |"
    assert lines[3:] == [
        "| 36 | 1 | 38.25 (38.75) / 39.00 (39.50) | 40.25 (41.00) / 40.75 (41.50) |",
        "| 36 | 2 | 38.50 (39.00) / 38.00 (39.25) | 40.00 (41.00) / - |",
        "| 36 | change, mean of 2 | **+0.12** (valid +0.50; +0.75, -0.50; 38.38 (38.25-38.50) / "
        "38.50 (38.00-39.00)) | **+0.50** (valid +0.50; +0.50) |",
        "<!-- /tune-lr -->",
    ]


def test_importance_tuning_block_pairs_by_tuning_seed_and_the_goals_name_the_same_recovery(
    tmp_path,
):
    """Stage 6at (importance-tl.txt: head importance's one command with the tuning of every
    layer) is paired with stage 6aq's run of the same K and tuning seed (importance-t0.txt),
    fine-tunes included; once it covers every K the goal rows of DSP's every-layer tuning
    compare with it, "the same tuning of every layer"."""
    imp = "imp{}-s{}: untuned valid 30.00; tuned valid {}; kept tuned; test {}\n"
    ft = "ft-imp{}-s{}: best test {} valid {}; last test 30.0 valid 30.0; valid loss 2.0\n"
    (tmp_path / "baseline.json").write_text(json.dumps({"sacrebleu": 40.33}))
    (tmp_path / "importance-t0.txt").write_text(
        "# 6aq\n" + imp.format(36, 1, 39.0, 38.0) + ft.format(36, 1, 40.0, 41.0)
        + imp.format(36, 2, 39.5, 38.5) + ft.format(36, 2, 40.5, 41.0)
    )  # fmt: skip
    (tmp_path / "importance-tl.txt").write_text(
        imp.format(36, 2, 39.0, 39.5) + imp.format(36, 1, 40.0, 38.25) + ft.format(36, 1, 40.5, 42.0)
        + imp.format(36, 3, 1.0, 1.0) + imp.format(18, 1, 37.0, 36.0) + ft.format(18, 1, 38.0, 39.0)
        + imp.format(9, 1, 33.0, 32.0) + ft.format(9, 1, 35.0, 36.0)
    )  # fmt: skip
    (tmp_path / "tune-layers.txt").write_text(
        "k36-s1: start valid 35.00; tuned valid 38.50 test 39.00; kept tuned\n"
        "ft-k36-s1: best test 41.0 valid 41.5; last test 30.0 valid 30.0; valid loss 2.0\n"
    )
    results = tmp_path / "RESULTS.md"
    results.write_text(
        "<!-- importance-tune-layers -->\n<!-- /importance-tune-layers -->\n"
        "<!-- recovery-goals -->\n<!-- /recovery-goals -->\n"
    )
    splice_recovery(tmp_path, results)
    lines = results.read_text().splitlines()
    assert lines[1].startswith("| K | tuning seed | the one command: out_proj,fc2 / every layer")
    assert lines[3:6] == [
        "| 36 | 1 | 38.00 (39.00) / 38.25 (40.00) | 40.00 (41.00) / 40.50 (42.00) |",
        "| 36 | 2 | 38.50 (39.50) / 39.50 (39.00) | 40.50 (41.00) / - |",
        "| 36 | change, mean of 2 | **+0.62** (valid +0.25; +0.25, +1.00; 38.25 (38.00-38.50) / "
        "38.88 (38.25-39.50)) | **+0.50** (valid +1.00; +0.50) |",
    ]
    sys.path.insert(0, str(ROOT / "bench"))
    import converged_report as cr

    one, fts = cr.today_importance_runs(str(tmp_path), cr.TL_IMP_FILE)
    assert one[36] == [(38.25, 40.0), (39.5, 39.0), (1.0, 1.0)] and fts[36] == [(40.5, 42.0)]
    # DSP's every-layer tuning (39.00; its fine-tune 41.00) against 6at's mean at H/2
    # (38.25, 39.50, 1.00: 26.25; fine-tune 40.50), named with the same recovery
    goals = [r for r in lines if "tuning of every transformer layer (session 44" in r]
    rival = "(reconstruct + the same tuning of every layer, stage 6at) | H/2: +12.75 vs "
    assert any(rival in r for r in goals), goals
    assert any("the same fine-tune | H/2: +0.50 vs " in r for r in goals), goals
