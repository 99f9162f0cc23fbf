"""Recovery after pruning, end to end with the real CLIs on a tiny Multi30k slice:
dsp-strip --reconstruct / dsp-reconstruct, fairseq-validate, fairseq-generate, and a
distilled fine-tune (finetune-pruned.sh --teacher). dsp-strip, the refusals of
dsp-reconstruct and fairseq-validate run in-process through their entry functions
(tests/inprocess.py); dsp-reconstruct, fairseq-generate, fairseq-train and the recipe as
subprocesses."""

import json

import pytest
import torch
from conftest import ROOT
from inprocess import call_cli, cli_ok, fairseq_train, fairseq_validate
from robustness_helpers import BIN, PLUGIN, run, tiny_corpus, train_args

from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
from dsp_fairseq.cli import reconstruct as reconstruct_cli
from dsp_fairseq.cli import strip as strip_cli


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return tiny_corpus(tmp_path_factory)


@pytest.fixture(scope="module")
def base(corpus, tmp_path_factory):
    """transformer_dsp_small trained 100 updates with every head (the unpruned model)."""
    save = tmp_path_factory.mktemp("recovery-base")
    fairseq_train(train_args(corpus, save, 100, "--heads-to-keep", "36", "--lr", "5e-3"))
    return save / "checkpoint_last.pt"


def valid_loss(corpus, ckpt) -> float:
    return float(fairseq_validate([corpus, "--user-dir", PLUGIN, "--path", ckpt, "--task", "translation",
                             "--valid-subset", "valid", "--max-tokens", "2000", "--cpu"]))  # fmt: skip


def test_reconstruction_lowers_the_validation_loss(corpus, base, tmp_path):
    """dsp-strip --reconstruct: the refit lowers the validation loss, equals dsp-reconstruct's
    on the stripped model, decodes with fairseq-generate; --unreconstructed-output writes the
    plain stripped model of the same call (both candidates of --recovery best, one load)."""
    plain, rec, also = tmp_path / "plain.pt", tmp_path / "rec.pt", tmp_path / "also.pt"
    select = ["--random", "--heads-to-keep", "12", "--seed", "2"]
    plain_out, _ = cli_ok(strip_cli.main, "--input", base, "--output", plain, *select)
    out, err = cli_ok(strip_cli.main, "--input", base, "--output", rec, *select, "--reconstruct",
                      "--data", corpus, "--calibration-batches", "4", "--calibration-max-tokens", "1000",
                      "--unreconstructed-output", also)  # fmt: skip
    assert "reconstruction: target residual" in out
    # the plain model first, as a plain call writes it and reports it, then the refit's report
    head, _, refit = out.partition(f"wrote {also}\n")
    assert head + f"wrote {also}\n" == plain_out.replace(str(plain), str(also))
    assert refit.startswith(head) and refit.rstrip().endswith(f"wrote {rec}")
    a, b = load_checkpoint(str(also)), load_checkpoint(str(plain))
    assert a["dsp_kept_heads"] == b["dsp_kept_heads"] and "dsp_reconstruction" not in a
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in b["model"])
    code, _, err2 = call_cli(strip_cli.main, "--input", base, "--output", tmp_path / "x.pt", *select,
                             "--unreconstructed-output", also)  # fmt: skip
    assert code == 2 and "only used with --reconstruct" in err2
    code, _, err2 = call_cli(strip_cli.main, "--input", base, "--output", tmp_path / "x.pt", *select,
                             "--reconstruct", "--data", corpus, "--unreconstructed-output", also)  # fmt: skip
    assert code == 2 and f"--unreconstructed-output {also} exists" in err2
    assert not (tmp_path / "x.pt").exists()
    # progress on stderr: 9 attentions and 6 FFN output layers
    assert "[14/15] decoder.layers.2.encoder_attn" in err
    assert "[15/15] decoder.layers.2.fc2" in err
    state = load_checkpoint(str(rec))
    record = state["dsp_reconstruction"]
    assert record["calibration_batches"] == 4 and record["target"] == "residual"
    assert state["dsp_kept_heads"] == load_checkpoint(str(plain))["dsp_kept_heads"]
    loss_base, loss_plain, loss_rec = (valid_loss(corpus, c) for c in (base, plain, rec))
    assert loss_base < loss_rec < loss_plain
    # the same refit from the already stripped model (dsp-reconstruct) gives the same weights
    again = tmp_path / "again.pt"
    run("dsp-reconstruct", "--pruned", plain, "--base", base, "--data", corpus,
        "--output", again, "--calibration-batches", "4", "--calibration-max-tokens", "1000",
        "--quiet")  # fmt: skip
    a, b = load_checkpoint(str(again))["model"], state["model"]
    assert all(torch.allclose(a[k], b[k], atol=1e-5) for k in b)
    # decodes with fairseq-generate, one hypothesis per sentence
    out = run(BIN / "fairseq-generate", corpus, "--user-dir", PLUGIN, "--path", rec,
              "--gen-subset", "test", "--beam", "2", "--batch-size", "16",
              "--required-batch-size-multiple", "1", "--max-len-b", "20", "--cpu").stdout  # fmt: skip
    assert sum(line.startswith("H-") for line in out.splitlines()) == 40


def test_richer_refit_writes_every_layer_it_refits(corpus, base, tmp_path):
    """--refit-qkv --refit-fc1: q/k/v rows, out_proj, fc1 and fc2 refit (nothing else
    changes), the loss still drops below the plain stripped model's; a checkpoint without
    dsp-strip's record of its kept heads is refused for the q/k/v refit."""
    plain, rich = tmp_path / "plain.pt", tmp_path / "rich.pt"
    cli_ok(strip_cli.main, "--input", base, "--output", plain, "--random", "--heads-to-keep", "12",
           "--seed", "2")  # fmt: skip
    calib = ["--calibration-batches", "4", "--calibration-max-tokens", "1000"]
    _, err = cli_ok(reconstruct_cli.main, "--pruned", plain, "--base", base, "--data", corpus,
                    "--output", rich, "--refit-qkv", "--refit-fc1", *calib)  # fmt: skip
    assert "decoder.layers.2.fc1" in err and "decoder.layers.2.encoder_attn.kv_proj" in err
    before, after = load_checkpoint(str(plain)), load_checkpoint(str(rich))
    record = after["dsp_reconstruction"]
    assert record["refit_qkv"] and record["refit_fc1"] and record["refit_ffn"]
    changed = {k.split(".")[-2] for k in before["model"]
               if not torch.equal(before["model"][k], after["model"][k])}  # fmt: skip
    assert changed == {"q_proj", "k_proj", "v_proj", "out_proj", "fc1", "fc2"}
    assert valid_loss(corpus, rich) < valid_loss(corpus, plain)
    del before["dsp_kept_heads"]
    save_checkpoint_atomic(before, str(tmp_path / "unrecorded.pt"))
    code, _, err = call_cli(reconstruct_cli.main, "--pruned", tmp_path / "unrecorded.pt", "--base",
                            base, "--data", corpus, "--output", tmp_path / "x.pt", "--refit-qkv",
                            *calib)  # fmt: skip
    assert code == 2 and "dsp_kept_heads" in err and not (tmp_path / "x.pt").exists()


def test_refusals(corpus, base, tmp_path):
    plain = tmp_path / "plain.pt"
    cli_ok(strip_cli.main, "--input", base, "--output", plain, "--random", "--heads-to-keep", "9")
    out = tmp_path / "out.pt"
    # a model that is not pruned
    code, _, err = call_cli(reconstruct_cli.main, "--pruned", base, "--base", base, "--data",
                            corpus, "--output", out)  # fmt: skip
    assert code == 2 and "not stripped" in err
    # no such data folder
    code, _, err = call_cli(reconstruct_cli.main, "--pruned", plain, "--base", base, "--data",
                            tmp_path / "nope", "--output", out)  # fmt: skip
    assert code == 2 and "--data" in err and "no such folder" in err
    # a data folder with other dictionaries
    other = tmp_path / "other"
    other.mkdir()
    for f in corpus.iterdir():
        (other / f.name).symlink_to(f)
    for lang in ("de", "en"):
        (other / f"dict.{lang}.txt").unlink()
        (other / f"dict.{lang}.txt").write_text("".join(f"x{i} 1\n" for i in range(50)))
    code, _, err = call_cli(reconstruct_cli.main, "--pruned", plain, "--base", base, "--data",
                            other, "--output", out)  # fmt: skip
    assert code == 2 and "do not fit" in err and "dictionaries" in err
    assert not out.exists() and not list(tmp_path.glob(".tmp-*"))


def test_distilled_finetune_recipe(corpus, base, tmp_path):
    plain = tmp_path / "plain.pt"
    cli_ok(strip_cli.main, "--input", base, "--output", plain, "--random", "--heads-to-keep", "12")
    data = corpus.parent
    save = tmp_path / "ft"
    bad = run("bash", ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned",
              plain, "--save-dir", save, "--preset", "cpu-small", "--dropout", "1.5", check=False)  # fmt: skip
    assert bad.returncode == 1 and "--dropout takes a probability" in bad.stderr
    assert not save.exists()  # refused before anything was written
    bad = run("bash", ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned",
              plain, "--save-dir", save, "--preset", "cpu-small", "--lr", "0", check=False)  # fmt: skip
    assert bad.returncode == 1 and "--lr takes a positive learning rate" in bad.stderr
    assert not save.exists()
    run("bash", ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned", plain,
        "--save-dir", save, "--max-update", "6", "--preset", "cpu-small", "--teacher", base,
        "--choose", "valid", "--train-args", "--max-tokens 1000 --num-workers 0 "
        "--validate-interval-updates 3 --distill-hidden-weight 0.5", timeout=900)  # fmt: skip
    logs = [json.loads(line.split("|", 3)[-1]) for line in (save / "train.log").read_text().splitlines()
            if "| train |" in line or "| train_inner |" in line]  # fmt: skip
    assert logs and all(any(k.endswith("distill_kl") for k in log) for log in logs)
    # the hidden-state term through fairseq-train (its optimizer, its logging): positive, finite
    hidden = [float(v) for log in logs for k, v in log.items() if k.endswith("distill_hidden")]
    assert len(hidden) == len(logs) and all(0 < h < 1e3 for h in hidden)
    # the preset's fine-tune dropout (0.1 for cpu-small), not its training dropout (0.2)
    assert " dropout=0.1," in (save / "train.log").read_text()  # fairseq's logged model config
    # and the preset's fine-tune learning rate, constant after the warm-up
    assert " lr=[0.0005]," in (save / "train.log").read_text()
    assert (save / "pruned.pt").is_file()
    # the preset's --average-last 3: pruned.average.pt is the mean of the final model and the two
    # checkpoints fairseq saved before it (a checkpoint every update here: a tenth of 6, rounded up)
    final = load_checkpoint(str(save / "checkpoint_last.pt"))
    final_update = final["optimizer_history"][-1]["num_updates"]
    saved = sorted((int(p.stem.split("_")[-1]), p) for p in save.glob("checkpoint_*_*.pt"))
    older = [p for update, p in saved if update < final_update][-2:]
    assert final_update == 6 and len(older) == 2
    models = [load_checkpoint(str(p))["model"] for p in older] + [final["model"]]
    averaged = load_checkpoint(str(save / "pruned.average.pt"))
    assert "dsp_kept_heads" in averaged
    # the model only: no optimizer state, so a smaller file than fairseq's checkpoint
    assert "last_optimizer_state" not in averaged and "last_optimizer_state" in final
    assert (save / "pruned.average.pt").stat().st_size < (
        save / "checkpoint_last.pt"
    ).stat().st_size
    moved = 0
    for name, tensor in averaged["model"].items():
        if tensor.is_floating_point():
            torch.testing.assert_close(tensor, sum(m[name] for m in models) / 3)
            moved += not torch.equal(tensor, final["model"][name])
    assert moved  # not the final model itself
    last = load_checkpoint(str(save / "pruned.final.pt"))
    assert "dsp_kept_heads" in last
    assert all(torch.equal(t, final["model"][n]) for n, t in last["model"].items())
    # --choose valid: pruned.pt is the better of the two on valid, a tie the average
    valid = {c: json.loads((save / f"valid-{c}/score.json").read_text())["sacrebleu"]
             for c in ("average", "final")}  # fmt: skip
    choice = json.loads((save / "choice.json").read_text())
    expected = "final" if valid["final"] > valid["average"] else "average"
    assert choice["chosen"] == expected and choice["valid_sacrebleu"] == valid
    kept = load_checkpoint(str(save / "pruned.pt"))
    source = averaged if expected == "average" else last
    assert all(torch.equal(t, source["model"][n]) for n, t in kept["model"].items())
    assert kept["dsp_kept_heads"] == averaged["dsp_kept_heads"]
    assert 0 < valid_loss(corpus, save / "pruned.pt") < 20  # fairseq loads and scores it
    # a rerun trains nothing and leaves pruned.pt alone; the default (--choose average) makes
    # it the average
    stamp = (save / "pruned.pt").stat().st_mtime_ns
    again = [ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned", plain,
             "--save-dir", save, "--max-update", "6", "--preset", "cpu-small"]  # fmt: skip
    run("bash", *again, "--choose", "valid")
    assert (save / "pruned.pt").stat().st_mtime_ns == stamp
    run("bash", *again)
    assert (save / "pruned.pt").read_bytes() == (save / "pruned.average.pt").read_bytes()
    assert not (save / "choice.json").exists()
    bad = run("bash", *again, "--choose", "best", check=False)
    assert bad.returncode == 1 and "--choose takes valid or average, not 'best'" in bad.stderr
    bad = run("bash", ROOT / "examples/translation/finetune-pruned.sh", "--data", data, "--pruned",
              plain, "--save-dir", tmp_path / "ft2", "--preset", "cpu-small", "--average-last", "11",
              check=False)  # fmt: skip
    assert (
        bad.returncode == 1
        and "--average-last takes a number of checkpoints from 1 to 10" in bad.stderr
    )


def test_finetune_trains_on_to_a_larger_max_update(corpus, base, tmp_path):
    """A finished fine-tune rerun with a larger --max-update trains on from checkpoint_last.pt
    and gives the model of one run of that length (constant learning rate); a smaller one is
    refused and changes nothing."""
    plain = tmp_path / "plain.pt"
    cli_ok(strip_cli.main, "--input", base, "--output", plain, "--random", "--heads-to-keep", "12")
    recipe = [ROOT / "examples/translation/finetune-pruned.sh", "--data", corpus.parent, "--pruned",
              plain, "--preset", "cpu-small", "--train-args", "--max-tokens 1000 --num-workers 0"]  # fmt: skip
    once, twice = tmp_path / "once", tmp_path / "twice"
    run("bash", *recipe, "--save-dir", once, "--max-update", "6", timeout=900)
    run("bash", *recipe, "--save-dir", twice, "--max-update", "3", timeout=900)
    first = load_checkpoint(str(twice / "pruned.pt"))["model"]
    out = run("bash", *recipe, "--save-dir", twice, "--max-update", "6", timeout=900).stdout
    assert "fine-tuned for 3 updates; training on to 6" in out and "resuming from" in out
    assert (
        load_checkpoint(str(twice / "checkpoint_last.pt"))["optimizer_history"][-1]["num_updates"]
        == 6
    )
    a, b = (load_checkpoint(str(d / "pruned.pt")) for d in (once, twice))
    assert b["dsp_kept_heads"] == a["dsp_kept_heads"]
    assert a["model"].keys() == b["model"].keys()
    for name, tensor in a["model"].items():
        torch.testing.assert_close(b["model"][name], tensor, rtol=1e-5, atol=1e-6)
    assert any(not torch.equal(first[n], t) for n, t in b["model"].items())  # it did train on
    stamp = (twice / "pruned.pt").stat().st_mtime_ns
    bad = run("bash", *recipe, "--save-dir", twice, "--max-update", "4", check=False)
    assert bad.returncode == 1
    assert "holds a fine-tune of 6 updates, more than --max-update 4" in bad.stderr
    assert (twice / "pruned.pt").stat().st_mtime_ns == stamp and (twice / ".done").exists()
    # the same length again: skipped
    again = run("bash", *recipe, "--save-dir", twice, "--max-update", "6").stdout
    assert "training on" not in again and (twice / "pruned.pt").stat().st_mtime_ns == stamp
