"""The recipes that start from a trained baseline, run for real on tiny data: sweep.sh's
+rec / +rec+kd rows (finetune-pruned.sh, dsp-reconstruct), the tuned refit and the type split.
(dsp-pick-k and the restarts: test_pick_k_and_restarts.py.)

Modules of their own (with their own baseline, trained as reproduce.sh trains it in
test_recipes.py, once for both), so that pytest-xdist runs them beside test_recipes.py's
sweep and beside each other.
"""

import copy
import json
import re
import shutil
from pathlib import Path

import pytest
from conftest import built_once, write_multi30k_slice
from inprocess import cli_ok
from test_recipes import (
    GATE_ARGS,
    GEN,
    N_TEST,
    RECIPES,
    TINY_MODEL,
    TRAIN,
    run,
)


def build_baseline(work: Path) -> None:
    """data/ and baseline/ in WORK, made as reproduce.sh makes them."""
    src = write_multi30k_slice(work / "m30k_raw", 400, 30, N_TEST)
    run("bash", RECIPES / "prepare-multi30k.sh", "--out", work / "data", "--vocab-size", "300",
        "--src-dir", src)  # fmt: skip
    run("bash", RECIPES / "train-baseline.sh", "--data", work / "data", "--save-dir",
        work / "baseline", "--preset", "cpu-small", "--seed", "1", "--max-update", "30",
        "--train-args", f"{TRAIN} {TINY_MODEL}")  # fmt: skip


def recipe_baseline(tmp_path_factory) -> Path:
    """A work folder of the calling module's own with data/ and baseline/: a copy of the one
    the modules of recipes from a baseline share, trained once per test run."""
    built = built_once(tmp_path_factory, "recipe-baseline", build_baseline)
    work = tmp_path_factory.mktemp("work")
    shutil.copytree(built, work, dirs_exist_ok=True)
    return work


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    return recipe_baseline(tmp_path_factory)


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


def test_tuned_refit_trains_the_transformer_layers_and_keeps_the_better_on_valid(
    baseline, tmp_path
):
    """The recipes' default recovery, tuned. prune-importance.sh: the reconstructed model
    (PRUNED.untuned.pt), one epoch of distillation into every transformer layer (the embeddings
    unchanged), both decoded on valid and the better copied to PRUNED.pt, the choice in
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
    # every transformer layer trains (tune-refit.sh's --layers default since session 44), the
    # embeddings stay frozen
    assert changed and all(".layers." in n for n in changed), changed
    assert {p for n in changed for p in (".q_proj.", ".fc1.", ".out_proj.", ".fc2.") if p in n} == {
        ".q_proj.", ".fc1.", ".out_proj.", ".fc2."}  # fmt: skip
    # one epoch of 1024-token batches, counted as the recipe counts it (in-process: no ~4 s
    # start-up of its own)
    positions = model_args(load_checkpoint(str(base))).max_source_positions
    epoch = pipelined_args.epoch_updates(str(work / "data/bin"), 1024, 1, positions)
    log = (tuned / "run/train.log").read_text()
    assert f"'max_update': {int(epoch)}" in log and "train_only='layers'" in log
    assert " dropout=0.0," in log  # tune-refit.sh's default (--dropout) since session 41
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

    # tune-refit.sh with other settings on the same folder tunes again (not the finished run
    # of the first settings reused); the start's valid score is not decoded again
    def tune(*more):
        return run(
            "bash", RECIPES / "tune-refit.sh", "--data", work / "data", "--pruned",
            tmp_path / "imp8.untuned.pt", "--base", base, "--save-dir", tuned, "--preset",
            "cpu-small", "--gen-args", GEN, *more,
        )  # fmt: skip

    untuned_score = (tuned / "valid-untuned/score.json").stat().st_mtime_ns
    assert "lr 5e-4" in (tuned / "tune.args").read_text()
    proc = tune("--lr", "1e-4", "--epoch-updates", "3")  # the caller's count, not counted again
    assert "the settings differ from those" in proc.stdout
    assert (
        "(3 updates)" in proc.stdout and "'max_update': 3," in (tuned / "run/train.log").read_text()
    )
    assert "'lr': [0.0001]" in (tuned / "run/train.log").read_text()
    assert "lr 1e-4" in (tuned / "tune.args").read_text()
    assert (tuned / "valid-untuned/score.json").stat().st_mtime_ns == untuned_score
    again = {p: p.stat().st_mtime_ns for p in tuned.rglob("*") if p.is_file()}
    proc = tune("--lr", "1e-4")
    assert "settings differ" not in proc.stdout
    assert {p: p.stat().st_mtime_ns for p in again} == again
    proc = prune("--recovery", "retrained", check=False)
    assert proc.returncode != 0 and "--recovery must be reconstruct, tuned or none" in proc.stderr
    # tune-refit.sh refuses a dropout that is not a probability, before any training
    proc = run(
        "bash", RECIPES / "tune-refit.sh", "--data", work / "data", "--pruned", out, "--base", base,
        "--save-dir", tmp_path / "retune", "--dropout", "1.5", check=False,
    )  # fmt: skip
    assert (
        proc.returncode != 0 and "--dropout takes a probability in [0, 1), not '1.5'" in proc.stderr
    )
    assert not (tmp_path / "retune").exists()

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
