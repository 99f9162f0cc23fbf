"""The recipes in examples/translation/, run for real on tiny data.

* prepare-iwslt14.sh on a miniature de-en.tgz of the real layout, built here from
  Multi30k sentences: XML removal, the every-23rd-line split, cleaning, Moses
  tokenization, lowercasing, binarised output, rerun, clear errors;
* reproduce.sh on a Multi30k slice: baseline, a sweep of pipelined DSP gates at 2 K
  through prune-pipelined.sh, evaluate.sh and sweep.sh, the results table, all plots,
  and a rerun that skips every finished row (prune-importance.sh's random heads, the
  default +rec rows and fine-tunes: test_recipes_from_baseline.py);
* the text helpers' pure functions (cleaning, splitting, BLEU, results table).
"""

import csv
import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from conftest import ROOT, multi30k_dir, write_multi30k_slice

sys.path.insert(0, str(ROOT / "scripts"))
import bleu_eval  # noqa: E402
import iwslt14_text  # noqa: E402
import results_table  # noqa: E402

BIN = Path(sys.executable).parent
RECIPES = ROOT / "examples" / "translation"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
TEST_SETS = iwslt14_text.TEST_SETS
SEGS_PER_SET = 12
APOSTROPHE_DE = "Das ist Johns Idee ’und‘ so."
APOSTROPHE_EN = "It’s John's idea."


def run(*cmd, check=True, path=None):
    env = dict(os.environ, OMP_NUM_THREADS="1")
    env["PATH"] = path or f"{BIN}{os.pathsep}{os.environ['PATH']}"
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"{cmd[:2]} failed ({proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
        )
    return proc


def multi30k_lines(name, n):
    out = {}
    for lang in ("de", "en"):
        with gzip.open(multi30k_dir() / f"{name}.{lang}.gz", "rt", encoding="utf-8") as f:
            out[lang] = [next(f).strip() for _ in range(n)]
    return out


def is_png(path):
    return path.read_bytes()[:8] == PNG_MAGIC and path.stat().st_size > 1000


def is_svg(path):
    return ET.parse(path).getroot().tag.endswith("svg")


# -- a miniature IWSLT14 archive --------------------------------------------------
def well_formed_pairs(n):
    """Multi30k pairs far from the cleaning limits (6+ words, word ratio <= 1.15)."""
    lines = multi30k_lines("train", 3000)
    pairs = []
    for de, en in zip(lines["de"], lines["en"]):
        a, b = len(de.split()), len(en.split())
        if min(a, b) >= 6 and max(a, b) / min(a, b) <= 1.15 and "'" not in de + en:
            pairs.append((de, en))
        if len(pairs) == n:
            return pairs
    raise AssertionError("not enough well-formed pairs in Multi30k")


def build_iwslt_archive(path: Path, pairs):
    """de-en.tgz with the real layout; returns the train pairs cleaning should keep, in order."""
    talks, kept = 3, []
    bad = [
        ("Nein .", "No , this English side is far too long for its German side ."),  # ratio
        (" ".join(["lang"] * 200), " ".join(["long"] * 200)),  # > 175 tokens
    ]
    train = {"de": [], "en": []}
    per_talk = (len(pairs) - len(TEST_SETS) * SEGS_PER_SET) // talks
    it = iter(pairs)
    for t in range(talks):
        header = {
            lang: [
                f"<url>http://www.ted.com/talks/talk_{t}.html</url>",
                f"<keywords>talks, science, {lang}</keywords>",
                f"<speaker>Speaker {t}</speaker>",
                f"<talkid>{100 + t}</talkid>",
                f"<title>Vortrag {t} {lang}</title>",
                f"<description>TED talk {t} {lang}</description>",
            ]
            for lang in ("de", "en")
        }
        for lang in ("de", "en"):
            train[lang] += header[lang]
        kept += [(f"Vortrag {t} de", f"Vortrag {t} en"), (f"TED talk {t} de", f"TED talk {t} en")]
        for i in range(per_talk):
            de, en = next(it)
            train["de"].append(de)
            train["en"].append(en)
            kept.append((de, en))
            if i == 5 and t < len(bad):  # a pair that cleaning must drop
                train["de"].append(bad[t][0])
                train["en"].append(bad[t][1])
    files = {
        f"de-en/train.tags.de-en.{lang}": "\n".join(train[lang]) + "\n" for lang in ("de", "en")
    }
    for name in TEST_SETS:
        segs = [next(it) for _ in range(SEGS_PER_SET)]
        if name.endswith("tst2011"):
            segs[0] = (APOSTROPHE_DE, APOSTROPHE_EN)
        for j, lang in enumerate(("de", "en")):
            body = [
                '<?xml version="1.0" encoding="UTF-8"?>',
                "<mteval>",
                f'<srcset setid="{name}" srclang="{lang}">',
                '<doc docid="1" genre="lectures">',
                "<url>http://www.ted.com/talks/x.html</url>",
                "<talkid>1</talkid>",
                "<title>Ein Titel</title>",
            ]
            body += [f'<seg id="{i + 1}"> {seg[j]} </seg>' for i, seg in enumerate(segs)]
            body += ["</doc>", "</srcset>", "</mteval>"]
            files[f"de-en/{name}.de-en.{lang}.xml"] = "\n".join(body) + "\n"
    with tarfile.open(path, "w:gz") as tar:
        for name, text in files.items():
            data = text.encode("utf-8")
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return kept


@pytest.fixture(scope="module")
def iwslt(tmp_path_factory):
    root = tmp_path_factory.mktemp("iwslt")
    kept = build_iwslt_archive(root / "de-en.tgz", well_formed_pairs(360))
    out = root / "prepared"
    proc = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--archive",
        root / "de-en.tgz",
        "--out",
        out,
        "--vocab-size",
        "300",
    )
    return root, out, kept, proc.stdout


def read(path):
    return path.read_text(encoding="utf-8").splitlines()


def test_iwslt_split_sizes_and_every_23rd_line(iwslt):
    _, out, kept, _ = iwslt
    raw_train, raw_valid = read(out / "raw/train.en"), read(out / "raw/valid.en")
    assert len(raw_train) + len(raw_valid) == len(kept)  # exactly the bad pairs dropped
    assert raw_valid == [en for _, en in kept][22::23]  # lines 23, 46, ... go to valid
    assert raw_train == [en for i, (_, en) in enumerate(kept, 1) if i % 23]
    assert read(out / "raw/train.de")[0] == kept[0][0]  # German stays aligned
    for split, n in (
        ("train", len(raw_train)),
        ("valid", len(raw_valid)),
        ("test", len(TEST_SETS) * SEGS_PER_SET),
    ):
        for lang in ("de", "en"):
            assert len(read(out / f"tok/{split}.{lang}")) == n
            assert len(read(out / f"spm/{split}.{lang}")) == n
    assert len(raw_valid) == len(kept) // 23 > 5


def test_iwslt_markup_removed_tokenized_lowercased(iwslt):
    _, out, _, _ = iwslt
    tok_train = read(out / "tok/train.en")
    text = "\n".join(tok_train + read(out / "tok/test.en") + read(out / "tok/test.de"))
    for tag in ("<url>", "url&gt;", "talkid", "keywords", "speaker", "<title>", "<seg", "&lt;"):
        assert tag not in text
    assert tok_train[0] == "vortrag 0 en"  # <title> text kept, tags gone, lowercased
    assert text == text.lower()
    # Moses tokenization with the Perl default escaping; ’ becomes ' first.
    tst2011 = 3 * SEGS_PER_SET  # dev2010, dev2012 and tst2010 come first
    assert read(out / "tok/test.en")[tst2011] == "it &apos;s john &apos;s idea ."
    assert read(out / "raw/test.en")[tst2011] == "It's John's idea."  # untokenized reference
    assert all(line.endswith(" .") for line in tok_train[10:20] if line.endswith("."))


def test_iwslt_binarised_with_joined_dictionary(iwslt):
    _, out, _, _ = iwslt
    from fairseq.data import data_utils
    from fairseq.data.dictionary import Dictionary

    assert (out / "bin/dict.de.txt").read_text() == (out / "bin/dict.en.txt").read_text()
    vocab = Dictionary.load(str(out / "bin/dict.en.txt"))
    for split in ("train", "valid", "test"):
        for lang in ("de", "en"):
            ds = data_utils.load_indexed_dataset(str(out / f"bin/{split}.de-en.{lang}"), vocab)
            assert len(ds) == len(read(out / f"raw/{split}.en"))
    assert (out / "spm/spm.model").is_file()


def test_iwslt_rerun_skips_every_step(iwslt):
    root, out, _, _ = iwslt
    stamps = {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()}
    proc = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--archive",
        root / "de-en.tgz",
        "--out",
        out,
        "--vocab-size",
        "300",
    )
    assert "done:" in proc.stdout
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*") if p.is_file()} == stamps


def test_iwslt_clear_errors(iwslt, tmp_path):
    root, _, _, _ = iwslt
    missing = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--archive",
        tmp_path / "nope.tgz",
        "--out",
        tmp_path / "o1",
        check=False,
    )
    assert missing.returncode == 1 and "nope.tgz: no such file" in missing.stderr
    folder = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--orig-dir",
        tmp_path / "none",
        "--out",
        tmp_path / "o2",
        check=False,
    )
    assert folder.returncode == 1 and "no such folder" in folder.stderr
    # An archive without one of the test sets.
    with tarfile.open(root / "de-en.tgz") as src, tarfile.open(tmp_path / "cut.tgz", "w:gz") as dst:
        for m in src.getmembers():
            if "tst2011.de-en.en" not in m.name:
                dst.addfile(m, src.extractfile(m))
    cut = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--archive",
        tmp_path / "cut.tgz",
        "--out",
        tmp_path / "o3",
        check=False,
    )
    assert cut.returncode == 1 and "has no file IWSLT14.TED.tst2011.de-en.en.xml" in cut.stderr
    assert not (tmp_path / "o3/text/train.en").exists()  # nothing half-written
    # A required tool missing from PATH.
    notool = run(
        "bash",
        RECIPES / "prepare-iwslt14.sh",
        "--archive",
        root / "de-en.tgz",
        "--out",
        tmp_path / "o4",
        check=False,
        path="/usr/bin:/bin",
    )
    assert notool.returncode == 1 and "not found on PATH" in notool.stderr


# -- the whole chain on a Multi30k slice ---------------------------------------------
TINY_MODEL = (
    "--encoder-embed-dim 32 --decoder-embed-dim 32 "
    "--encoder-ffn-embed-dim 64 --decoder-ffn-embed-dim 64"
)
TRAIN = "--max-tokens 1500 --lr 2e-3 --warmup-updates 10 --log-interval 5"
GEN = "--max-len-a 1.2 --max-len-b 8"
GATE_ARGS = "--gate-lr 0.07 --init-temperature 0.9"
METHODS, KS = ("dsp",), (6, 12)
N_TEST = 30


@pytest.fixture(scope="module")
def multi30k_slice(tmp_path_factory):
    """Multi30k's layout (gzip files), cut to 400/30/30 pairs, read from the shared copy."""
    return write_multi30k_slice(tmp_path_factory.mktemp("m30k_raw"), 400, 30, N_TEST)


def reproduce(src, work):
    return run(
        "bash",
        RECIPES / "reproduce.sh",
        "--corpus",
        "multi30k",
        "--work",
        work,
        "--src-dir",
        src,
        "--vocab-size",
        "300",
        "--methods",
        ",".join(METHODS),
        "--ks",
        ",".join(map(str, KS)),
        "--base-updates",
        "30",
        "--model-args",
        TINY_MODEL,
        "--train-args",
        TRAIN,
        "--gen-args",
        GEN,
        "--snapshot-interval",
        "4",
        "--gate-args",
        GATE_ARGS,
        # the stripped rows only: the default +rec rows are test_recipes_from_baseline's
        "--recovery",
        "none",
    )


def test_reproduce_refuses_an_unknown_type_split_before_any_work(tmp_path):
    """reproduce.sh --type-split passes on to sweep.sh (and prune-pipelined.sh); a value they
    would refuse after the baseline's training is refused first, with nothing written."""
    bad = run("bash", RECIPES / "reproduce.sh", "--corpus", "multi30k", "--work",
              tmp_path / "w", "--type-split", "even", check=False)  # fmt: skip
    assert bad.returncode == 1 and "--type-split must be auto, free or proportional" in bad.stderr
    assert not (tmp_path / "w").exists()


@pytest.fixture(scope="module")
def sweep(multi30k_slice, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    proc = reproduce(multi30k_slice, work)
    return work, proc.stdout


def test_sweep_table_has_every_row_with_bleu(sweep):
    work, _ = sweep
    with open(work / "sweep/results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows == [
        {k: "" if v is None else str(v) for k, v in r.items()}
        for r in json.loads((work / "sweep/results.json").read_text())
    ]
    assert sorted((r["method"], int(r["heads_to_keep"])) for r in rows) == [
        (m, k) for m in sorted(METHODS) for k in KS
    ]
    for r in rows:
        assert 0.0 <= float(r["sacrebleu"]) <= 100.0 and 0.0 <= float(r["tok_bleu"]) <= 100.0
        assert "tok:13a" in r["sacrebleu_signature"]
        assert int(r["heads_kept"]) == int(r["heads_to_keep"]) and int(r["heads_total"]) == 36
        assert int(r["params"]) < int(r["params_unpruned"])
        assert Path(r["checkpoint"]).is_file()
    base = json.loads((work / "sweep/baseline.json").read_text())
    assert "tokenized BLEU" in base["tok_bleu_label"] and "sacreBLEU" in base["sacrebleu_label"]
    hyps = read(work / "sweep/runs/dsp-k6/eval/hyp.detok.en")
    assert len(hyps) == N_TEST


def test_sweep_pipelined_run_trained_only_gates_for_one_epoch(sweep):
    work, _ = sweep
    log = (work / "sweep/runs/dsp-k12/train.log").read_text()
    assert "loading pretrained model" in log and "gate_temperature" in log
    args = (work / "sweep/pipelined.args").read_text().split()
    assert args[:2] == ["--arch", "transformer_dsp"] and "--anneal-updates" not in args
    # The criterion anneals over the whole epoch, which it counted itself: the run's last
    # update is the number it logged (--gate-args set t0 = 0.9; the schedule's t_end = 1e-3).
    anneal = re.search(
        r"gate temperature 0\.9 -> 0\.001 over (\d+) updates \(100% of the run's (\d+) "
        r"updates, --max-epoch 1 x (\d+) updates per epoch",
        log,
    )
    assert anneal, "no anneal-length line in the gate-training log"
    epoch = [
        json.loads(line.split("| train | ")[1]) for line in log.splitlines() if "| train | " in line
    ]
    assert int(anneal[1]) == int(anneal[2]) == int(anneal[3]) == int(epoch[-1]["train_num_updates"])
    assert (work / "sweep/runs/dsp-k12/checkpoint_1_4.pt").is_file()  # --snapshot-interval
    assert "heads kept: 12 of 36" in (work / "sweep/runs/dsp-k12/strip.txt").read_text()


def test_dsp_gates_train_on_kl_to_the_base_with_the_output_layers(sweep):
    """The default gate objective for dsp (prune-pipelined.sh --gate-objective distill): the
    KL term against the unpruned model is logged, the attention output projections and FFN
    output layers moved, every other weight is the base's, bit for bit."""
    import torch

    from dsp_fairseq.checkpoint_io import load_checkpoint

    work, _ = sweep
    log = (work / "sweep/runs/dsp-k12/train.log").read_text()
    assert "distill_kl" in log and "train_gates_with='out_proj,fc2'" in log
    # started from head importance's scores per sentence: the sweep's one file for its gate runs,
    # apart from the per-token scores of importance rows (OUT/importance.json: none in this sweep)
    scores = work / "sweep/gate-init-scores.json"
    assert f"gate_init_scores='{scores}'" in log and scores.is_file()
    assert json.loads(scores.read_text())["metadata"]["granularity"] == "sentence"
    assert not (work / "sweep/importance.json").exists()
    base = load_checkpoint(str(work / "baseline/checkpoint_best.pt"))["model"]
    gated = load_checkpoint(str(work / "sweep/runs/dsp-k12/checkpoint_last.pt"))["model"]
    moved = {k for k, v in base.items() if not torch.equal(v, gated[k])}
    assert moved and all(("out_proj" in k or "fc2" in k) for k in moved), sorted(moved)[:5]
    assert any("out_proj" in k for k in moved) and any("fc2" in k for k in moved)


def test_gate_args_reach_gate_training_only(sweep):
    work, _ = sweep
    gates = (work / "sweep/runs/dsp-k12/train.log").read_text()
    base = (work / "baseline/train.log").read_text()
    assert "gate_lr=0.07" in gates and "'init_temperature': 0.9" in gates
    assert "gate_lr" not in base and "init_temperature" not in base


def test_labels_objective_trains_the_gates_alone(sweep, tmp_path):
    """--gate-objective labels: label-smoothed CE, no teacher, every weight the base's."""
    import torch

    from dsp_fairseq.checkpoint_io import load_checkpoint

    work, _ = sweep
    out = tmp_path / "labels"
    run(
        "bash", RECIPES / "prune-pipelined.sh", "--data", work / "data",
        "--base", work / "baseline/checkpoint_best.pt", "--heads-to-keep", "5",
        "--save-dir", out, "--preset", "cpu-small", "--gate-objective", "labels",
        "--recovery", "none", "--validate-interval", "0",
        "--train-args", f"{TRAIN} --max-update 4",
    )  # fmt: skip
    log = (out / "train.log").read_text()
    assert "distill_kl" not in log and "'_name': 'dsp_label_smoothed_cross_entropy'" in log
    assert "gate_init_scores=None" in log and not (out / "gate-init-scores.json").exists()
    base = load_checkpoint(str(work / "baseline/checkpoint_best.pt"))["model"]
    gated = load_checkpoint(str(out / "checkpoint_last.pt"))["model"]
    assert all(torch.equal(v, gated[k]) for k, v in base.items())
    assert not (out / "recovery.json").exists()


def test_sweep_plots_are_valid_png_and_svg(sweep):
    work, _ = sweep
    plots = work / "sweep/plots"
    names = ["sweep", "gates-dsp-k6", "gates-dsp-k12"] + [
        f"heads-{m}-k{k}" for m in METHODS for k in KS
    ]
    for name in names:
        assert is_png(plots / f"{name}.png"), name
        assert is_svg(plots / f"{name}.svg"), name
    assert not list(plots.glob("*.tmp"))


def test_sweep_rerun_skips_finished_rows(sweep, multi30k_slice):
    work, _ = sweep
    table = (work / "sweep/results.csv").read_bytes()
    logs = {p: p.stat().st_mtime_ns for p in (work / "sweep/runs").rglob("*.log")}
    plot = (work / "sweep/plots/sweep.png").stat().st_mtime_ns
    out = reproduce(multi30k_slice, work).stdout
    for m in METHODS:
        for k in KS:
            assert f"skip {m} K={k}: already in" in out
    assert "already trained" in out and "pipelined pruning" not in out
    assert (work / "sweep/results.csv").read_bytes() == table
    assert {p: p.stat().st_mtime_ns for p in logs} == logs
    assert (work / "sweep/plots/sweep.png").stat().st_mtime_ns == plot


# A stand-in for fairseq-generate (evaluate.sh's cache tests): it records its arguments and
# prints the reference as the hypotheses, and the two configuration values evaluate.sh reads
# from fairseq-generate's log, in the log's format.
RECORDING_GENERATE = r"""#!/usr/bin/env bash
printf '%s\n' "$*" >> "$(dirname "$0")/calls"
subset=test beam=5 prev=""
for a in "$@"; do
  [[ $prev == --gen-subset ]] && subset=$a
  [[ $prev == --beam ]] && beam=$a
  prev=$a
done
echo "{'beam': $beam, 'gen_subset': '$subset', }" >&2
awk '{ printf "D-%d\t-0.5\t%s\n", NR - 1, $0 }' "$(dirname "$1")/raw/$subset.en"
"""


def test_evaluate_decodes_again_when_the_call_changes(sweep, tmp_path):
    """evaluate.sh reuses a score only when the same checkpoint (by its real path, not older
    than the score) was decoded with the same subset, beam and --gen-args. The decode whose
    log the legacy check reads is real; the others go to a recording stand-in (evaluate.sh's
    real decodes are the sweep's; every call's arguments are checked here)."""
    work, _ = sweep
    ckpt, other = (work / f"sweep/runs/dsp-k{k}/pruned.pt" for k in KS)
    out = tmp_path / "eval"
    stand_in = tmp_path / "stand-in"
    stand_in.mkdir()
    (stand_in / "fairseq-generate").write_text(RECORDING_GENERATE)
    (stand_in / "fairseq-generate").chmod(0o755)

    def evaluate(checkpoint, *args, real=False):
        path = None if real else f"{stand_in}{os.pathsep}{BIN}{os.pathsep}{os.environ['PATH']}"
        return run("bash", RECIPES / "evaluate.sh", "--data", work / "data", "--checkpoint",
                   checkpoint, "--out", out, "--gen-args", GEN, *args, path=path).stdout  # fmt: skip

    assert "translate test" in evaluate(ckpt)
    assert "up to date" in evaluate(ckpt)
    assert "translate test" in evaluate(ckpt, "--beam", "1")  # another beam
    assert "up to date" in evaluate(ckpt, "--beam", "1")
    link = tmp_path / "link.pt"
    link.symlink_to(ckpt)
    assert "up to date" in evaluate(link, "--beam", "1")  # the same model
    assert "translate test" in evaluate(other, "--beam", "1")  # older than the score, not its model
    assert json.loads((out / "score.json").read_text())["checkpoint"] == str(other)
    assert "translate valid" in evaluate(other, "--beam", "1", "--subset", "valid", real=True)
    # a score from before decode.args existed: reused for its own checkpoint, beam and subset
    # (the last two read from fairseq-generate's logged configuration) only
    (out / "decode.args").unlink()
    assert "up to date" in evaluate(other, "--beam", "1", "--subset", "valid")
    assert not (out / "decode.args").exists()  # its --gen-args are not known
    assert "translate valid" in evaluate(other, "--subset", "valid")  # beam 5, not 1
    (out / "decode.args").unlink()
    assert "translate test" in evaluate(other)  # the subset
    (out / "decode.args").unlink()
    assert "translate test" in evaluate(ckpt)
    assert (out / "decode.args").read_text().splitlines()[1:] == [
        "subset test",
        "beam 5",
        f"gen-args {GEN}",
    ]
    # what reached the stand-in: each decode's model, subset, beam and --gen-args
    calls = (stand_in / "calls").read_text().splitlines()
    expected = [(ckpt, "test", 5), (ckpt, "test", 1), (other, "test", 1), (other, "valid", 5),
                (other, "test", 5), (ckpt, "test", 5)]  # fmt: skip
    assert len(calls) == len(expected)
    for call, (model, subset, beam) in zip(calls, expected):
        assert f"--path {model} --gen-subset {subset} --beam {beam} " in call and GEN in call


def test_recipes_fail_clearly_on_missing_inputs(tmp_path, sweep):
    work, _ = sweep
    data = work / "data"
    no_data = run(
        "bash",
        RECIPES / "train-baseline.sh",
        "--data",
        tmp_path / "none",
        "--save-dir",
        tmp_path / "s",
        check=False,
    )
    assert no_data.returncode == 1 and "no such folder" in no_data.stderr
    no_base = run(
        "bash",
        RECIPES / "prune-pipelined.sh",
        "--data",
        data,
        "--base",
        tmp_path / "base.pt",
        "--heads-to-keep",
        "4",
        "--save-dir",
        tmp_path / "p",
        check=False,
    )
    assert no_base.returncode == 1 and "base.pt: no such file" in no_base.stderr
    bad_method = run(
        "bash",
        RECIPES / "sweep.sh",
        "--data",
        data,
        "--base",
        work / "baseline/checkpoint_best.pt",
        "--out",
        tmp_path / "sw",
        "--methods",
        "dsp,magic",
        check=False,
    )
    assert bad_method.returncode == 1 and "unknown method 'magic'" in bad_method.stderr
    bad_objective = run(
        "bash", RECIPES / "sweep.sh", "--data", data, "--base", work / "baseline/checkpoint_best.pt",
        "--out", tmp_path / "sw", "--methods", "dsp", "--gate-objective", "magic", check=False,
    )  # fmt: skip
    assert bad_objective.returncode == 1
    assert "--gate-objective must be distill or labels, not 'magic'" in bad_objective.stderr
    no_k = run(
        "bash", RECIPES / "train-dsp-joint.sh", "--data", data, "--save-dir", tmp_path, check=False
    )
    assert no_k.returncode == 1 and "--heads-to-keep is required" in no_k.stderr
    for option, value, needle in [
        ("--gate-objective", "magic", "--gate-objective must be distill or labels"),
        ("--recovery", "magic", "--recovery must be best, tuned, reconstruct or none"),
        ("--gate-init", "magic", "--gate-init must be importance or none"),
    ]:
        bad = run(
            "bash", RECIPES / "prune-pipelined.sh", "--data", data,
            "--base", work / "baseline/checkpoint_best.pt", "--heads-to-keep", "4",
            "--save-dir", tmp_path / "p2", option, value, check=False,
        )  # fmt: skip
        assert bad.returncode == 1 and needle in bad.stderr, bad.stderr
        assert not (tmp_path / "p2").exists()  # refused before anything was written


def test_frontier_bench_times_every_stripped_row(sweep, tmp_path):
    work, _ = sweep
    run(
        sys.executable, ROOT / "bench/frontier_bench.py", "--data", work / "data/bin",
        "--base", work / "baseline/checkpoint_best.pt", "--table", work / "sweep/results.json",
        "--out", tmp_path / "f", "--sentences", "8", "--batch", "4", "--fixed-steps", "3",
        "--reps", "1", "--threads", "1",
    )  # fmt: skip
    result = json.loads((tmp_path / "f/frontier.json").read_text())
    assert sorted((r["method"], r["k"]) for r in result["rows"]) == [
        (m, k) for m in sorted(METHODS) for k in KS
    ]  # every row of the sweep table
    base = json.loads((work / "sweep/baseline.json").read_text())
    assert result["unpruned"]["sacrebleu"] == base["sacrebleu"]
    for r in result["rows"]:
        assert r["speedup_fixed"] > 0 and r["speedup_free"] > 0
    params = {(r["method"], r["k"]): r["parameters"] for r in result["rows"]}
    assert params[("dsp", 6)] < params[("dsp", 12)]  # fewer heads, fewer weights
    assert is_png(tmp_path / "f/frontier.png") and is_svg(tmp_path / "f/frontier.svg")


# -- pure helpers (last: pytest-xdist hands this worker its next module when two tests of
# this one are left, and that module then waits behind them) ------------------------
def test_clean_pairs_matches_clean_corpus_rules():
    src = ["a b c", "", "a " * 176, "a b", "a b c d", "x"]
    tgt = ["a b c", "a", "b", "a b c d", "a b c d e f g", "y"]
    # kept: equal; dropped: empty side, > 175 tokens; ratio 2/4 = 2 > 1.5 dropped,
    # 4/7 = 1.75 dropped; 1/1 kept
    assert iwslt14_text.clean_pairs(src, tgt) == [0, 5]
    assert iwslt14_text.clean_pairs(["a b"], ["a b c"], ratio=1.5) == [0]  # 1.5 itself passes
    assert iwslt14_text.split_every(list(range(1, 50))) == (
        [i for i in range(1, 50) if i % 23],
        [23, 46],
    )


def test_seg_and_tag_stripping():
    assert iwslt14_text.seg_lines(
        ['<seg id="7"> Hallo  Welt </seg>', "<doc>", "<seg id=8>x</seg>"]
    ) == ["Hallo  Welt", "x"]
    assert iwslt14_text.strip_train_tags(
        ["<url>u</url>", "<talkid>3</talkid>", " <title>T</title>", "text", "<reviewer href='x'>"]
    ) == ["T", "text"]


def test_bleu_eval_scores_and_labels():
    refs = ["The cat sat on the mat.", "It's a dog, isn't it?"]
    # Untokenized corpus: perfect hypotheses score 100 both ways.
    perfect = bleu_eval.score(refs, refs, None, "en")
    assert perfect["sacrebleu"] == 100.0 and perfect["tok_bleu"] == 100.0
    assert "case:mixed" in perfect["sacrebleu_signature"]
    # Tokenized lowercased corpus: hypotheses are tokenized; sacreBLEU detokenizes and
    # ignores case; tokenized BLEU compares tokens as they are.
    tok = ["the cat sat on the mat .", "it &apos;s a dog , isn &apos;t it ?"]
    scored = bleu_eval.score(tok, refs, tok, "en")
    assert scored["sacrebleu"] == 100.0 and scored["tok_bleu"] == 100.0
    assert (
        "case:lc" in scored["sacrebleu_signature"]
        and "(case-insensitive)" in scored["sacrebleu_label"]
    )
    assert scored["_detok"][1] == "it's a dog, isn't it?"
    worse = bleu_eval.score(["the cat sat on a mat .", tok[1]], refs, tok, "en")
    assert 0 < worse["tok_bleu"] < 100
    out = ["S-1\tx", "D-1\t-0.5\tsecond", "H-0\t-1\tfirst", "D-0\t-1\tfirst"]
    assert bleu_eval.hypotheses_from_generate(out) == ["first", "second"]
    with pytest.raises(bleu_eval.EvalError, match="misses sentence ids"):
        bleu_eval.hypotheses_from_generate(["D-1\t0\tx"])
    with pytest.raises(bleu_eval.EvalError, match="2 references"):
        bleu_eval.score(["a"], refs, None, "en")


def test_choose_recovery_takes_the_best_validation_score(tmp_path):
    from dsp_fairseq.recipes import choose_recovery

    def score(name, bleu):
        (tmp_path / name).write_text(json.dumps({"sacrebleu": bleu}))
        return f"{name}={tmp_path / name}"

    assert choose_recovery.choose([("reconstruct", 30.0), ("none", 30.0)]) == "reconstruct"
    assert choose_recovery.choose([("reconstruct", 30.0), ("none", 30.5)]) == "none"
    out = tmp_path / "choice.json"
    code = choose_recovery.main(
        ["--candidate", score("reconstruct", 31.25), "--candidate", score("none", 33.5),
         "--output", str(out)]
    )  # fmt: skip
    assert code == 0
    assert json.loads(out.read_text()) == {
        "recovery": "best", "chosen": "none", "valid_sacrebleu": {"reconstruct": 31.25,
        "none": 33.5}, "valid_sacrebleu_chosen": 33.5,
    }  # fmt: skip
    assert choose_recovery.main(["--candidate", "none"]) == 2  # not NAME=FILE
    assert choose_recovery.main(["--candidate", f"none={tmp_path / 'absent.json'}"]) == 2

    # --metric nll: the lowest validation NLL wins, against the higher sacreBLEU
    def loss(name, nll):
        (tmp_path / f"{name}.loss").write_text(json.dumps({"valid_nll_loss": nll}))
        return f"{name}={tmp_path / name}.loss"

    runs = ["--candidate", score("seed-1", 30.0), "--candidate", score("seed-2", 29.0)]
    losses = ["--loss", loss("seed-1", 2.9), "--loss", loss("seed-2", 2.8)]
    code = choose_recovery.main(
        [*runs, *losses, "--metric", "nll", "--kind", "restarts", "--output", str(out)]
    )
    assert code == 0 and json.loads(out.read_text()) == {
        "restarts": 2, "chosen": "seed-2", "valid_sacrebleu": {"seed-1": 30.0, "seed-2": 29.0},
        "valid_sacrebleu_chosen": 29.0, "metric": "nll",
        "valid_nll_loss": {"seed-1": 2.9, "seed-2": 2.8}, "valid_nll_loss_chosen": 2.8,
    }  # fmt: skip
    assert choose_recovery.main([*runs, *losses, "--kind", "restarts", "--output", str(out)]) == 0
    assert json.loads(out.read_text())["chosen"] == "seed-1"  # the default metric: sacreBLEU
    # a candidate without its loss, or a loss file without an NLL, is refused
    assert choose_recovery.main([*runs, *losses[:2], "--metric", "nll"]) == 2
    assert choose_recovery.main([*runs, "--loss", score("seed-1", 1.0), *losses[2:],
                                 "--metric", "nll"]) == 2  # fmt: skip


def test_results_table_resumes(tmp_path):
    prefix = str(tmp_path / "results")
    score = {"sacrebleu": 1.5, "tok_bleu": 2.5, "sacrebleu_signature": "sig"}
    report = "heads kept: 6 of 36\nparameters: 77,222 -> 45,746 (59.2%)\n"
    assert results_table.read_rows(prefix) == []
    rows = [results_table.make_row("dsp", 6, score, report, "x.pt", 3.0)]
    results_table.write_rows(prefix, rows)
    back = results_table.read_rows(prefix)
    assert results_table.has_row(back, "dsp", 6) and not results_table.has_row(back, "dsp", 12)
    assert back[0]["heads_kept"] == 6 and back[0]["params"] == 45746
    with open(prefix + ".csv", newline="") as f:
        assert list(csv.DictReader(f))[0]["params_unpruned"] == "77222"
    (tmp_path / "s.json").write_text(json.dumps(score))
    cli = [sys.executable, ROOT / "scripts/results_table.py"]
    assert run(*cli, "has", "--table", prefix, "--method", "dsp", "--k", "6").returncode == 0
    assert (
        run(*cli, "has", "--table", prefix, "--method", "ste", "--k", "6", check=False).returncode
        == 1
    )
    run(
        *cli,
        "add",
        "--table",
        prefix,
        "--method",
        "ste",
        "--k",
        "6",
        "--score",
        tmp_path / "s.json",
    )
    assert len(results_table.read_rows(prefix)) == 2
