"""dsp-plot-heads, dsp-plot-gates and dsp-plot-sweep on checkpoints and tables built here.

The checkpoints are real ``transformer_dsp_small`` models (tiny dimensions) with
chosen gate logits, so which heads must be marked as kept is known exactly.
"""

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import ROOT
from fairseq.data import Dictionary
from fairseq.models import ARCH_CONFIG_REGISTRY

from dsp_fairseq.cli import plot_gates, plot_heads, plot_sweep
from dsp_fairseq.models.transformer_dsp import TransformerDSPModel
from dsp_fairseq.plots.gates import gate_history, parse_json_log
from dsp_fairseq.plots.heads import combine, head_map_from_masked, head_map_from_stripped
from dsp_fairseq.plots.sweep import read_table, series_by_method
from dsp_fairseq.pruning.strip import strip_checkpoint

K = 5
H = 36  # 3 + 3 layers, 4 heads, three attention types
# Logits rising with the head index: the test mask keeps the last K heads of the
# layout, i.e. cross-attention layer 1 head 3 and all of cross layer 2.
RISING = torch.arange(H, dtype=torch.float32) / 10


def build_state(logits, num_updates=0, gate_type="dsp"):
    vocab = Dictionary()
    for word in "ein Hund läuft a dog runs".split():
        vocab.add_symbol(word)
    args = argparse.Namespace(
        arch="transformer_dsp_small",
        encoder_embed_dim=16,
        decoder_embed_dim=16,
        encoder_ffn_embed_dim=32,
        decoder_ffn_embed_dim=32,
        heads_to_keep=K,
        gate_type=gate_type,
        share_all_embeddings=True,
        max_source_positions=64,
        max_target_positions=64,
    )
    ARCH_CONFIG_REGISTRY[args.arch](args)
    task = argparse.Namespace(source_dictionary=vocab, target_dictionary=vocab)
    model = TransformerDSPModel.build_model(args, task)
    with torch.no_grad():
        model.head_gate.logits.copy_(logits)
    return {
        "args": None,
        "cfg": {"model": args},
        "model": model.state_dict(),
        "optimizer_history": [{"num_updates": num_updates, "optimizer_name": "Adam"}],
    }


@pytest.fixture(scope="module")
def ckpts(tmp_path_factory):
    folder = tmp_path_factory.mktemp("ckpts")
    masked = build_state(RISING, num_updates=30)
    torch.save(masked, folder / "checkpoint_last.pt")
    stripped, _ = strip_checkpoint(masked)
    torch.save(stripped, folder / "pruned.pt")
    # Snapshots of one run: at update 10 the first K heads lead, by 20 the last K.
    run = folder / "run"
    run.mkdir()
    for updates, logits in ((10, -RISING), (20, RISING * 0.5), (30, RISING)):
        torch.save(build_state(logits, updates), run / f"checkpoint_1_{updates}.pt")
    torch.save(stripped, run / "pruned.pt")  # no gates: skipped
    return folder


def assert_png_svg(prefix: Path):
    png, svg = prefix.with_suffix(".png"), prefix.with_suffix(".svg")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 2000
    import matplotlib.image

    assert matplotlib.image.imread(png).ndim == 3
    assert ET.parse(svg).getroot().tag.endswith("svg")


# -- kept-head map ---------------------------------------------------------------------
def expected_cross():
    kept = np.zeros((3, 4), dtype=bool)
    kept[1, 3] = True
    kept[2, :] = True
    return kept


def test_head_map_marks_the_test_mask(ckpts):
    state = torch.load(ckpts / "checkpoint_last.pt", weights_only=True)
    hmap = head_map_from_masked(state, "logits")
    assert hmap.num_kept == K and hmap.num_heads == H
    assert not hmap.kept["enc-self"].any() and not hmap.kept["dec-self"].any()
    assert (hmap.kept["cross"] == expected_cross()).all()
    assert np.allclose(hmap.values["enc-self"].ravel(), RISING[:12].numpy())
    assert np.allclose(hmap.values["cross"].ravel(), RISING[24:].numpy())

    probs = head_map_from_masked(state, "probs")
    allp = np.concatenate([v.ravel() for v in probs.values.values()])
    assert ((0 <= allp) & (allp <= 1)).all()
    assert allp.sum() == pytest.approx(K, abs=1e-6)  # every sampled mask keeps exactly K
    assert probs.values["cross"][2].min() > probs.values["enc-self"][0].max()

    stripped = head_map_from_stripped(torch.load(ckpts / "pruned.pt", weights_only=True))
    assert (stripped.kept["cross"] == expected_cross()).all()
    both = combine(hmap, stripped)
    assert both.notes == [] and both.shade_label == "gate logit"


def test_plot_heads_cli(ckpts, tmp_path, capsys):
    out = tmp_path / "heads"
    assert (
        plot_heads.main(
            [
                "--masked",
                str(ckpts / "checkpoint_last.pt"),
                "--stripped",
                str(ckpts / "pruned.pt"),
                "--output",
                str(out),
            ]
        )
        == 0
    )
    assert "heads kept: 5 of 36" in capsys.readouterr().out
    assert_png_svg(out)
    assert (
        plot_heads.main(
            [
                "--stripped",
                str(ckpts / "pruned.pt"),
                "--shade",
                "probs",
                "--output",
                str(tmp_path / "s.png"),
            ]
        )
        == 0
    )
    assert_png_svg(tmp_path / "s")


def test_plot_heads_clear_errors(ckpts, tmp_path, capsys):
    assert (
        plot_heads.main(["--masked", str(ckpts / "pruned.pt"), "--output", str(tmp_path / "x")])
        == 2
    )
    assert "is stripped" in capsys.readouterr().err
    assert (
        plot_heads.main(
            ["--stripped", str(ckpts / "checkpoint_last.pt"), "--output", str(tmp_path / "x")]
        )
        == 2
    )
    assert "no 'dsp_kept_heads' record" in capsys.readouterr().err
    assert (
        plot_heads.main(
            ["--stripped", str(ckpts / "pruned.pt"), "--output", str(tmp_path / "no" / "x")]
        )
        == 2
    )
    assert "does not exist" in capsys.readouterr().err
    assert (
        plot_heads.main(["--masked", str(tmp_path / "none.pt"), "--output", str(tmp_path / "x")])
        == 2
    )
    assert "no such checkpoint" in capsys.readouterr().err
    assert not list(tmp_path.glob("x.*"))


# -- gate evolution ----------------------------------------------------------------------
LOG = """\
2026-01-01 10:00:00 | INFO | fairseq_cli.train | {'_name': None}
2026-01-01 10:00:01 | INFO | train_inner | {"epoch": 1, "update": 0.5, "loss": "7.9", "gate_temperature": "0.01", "gate_khot_dist": "0.2", "gate_mask_sum": "5", "num_updates": "10"}
2026-01-01 10:00:02 | INFO | valid | {"epoch": 1, "valid_loss": "7.5", "valid_num_updates": "10"}
2026-01-01 10:00:03 | INFO | train_inner | {"epoch": 1, "update": 1.0, "loss": "7.1", "gate_temperature": "1e-05", "gate_khot_dist": "0", "gate_mask_sum": "5", "num_updates": "20"}
2026-01-01 10:00:04 | INFO | train | {"epoch": 1, "train_loss": "7.4", "train_num_updates": "20"}
"""


def test_gate_history_from_checkpoints(ckpts):
    hist = gate_history(sorted(str(p) for p in (ckpts / "run").glob("*.pt")))
    assert hist.updates == [10, 20, 30]
    assert hist.kept.sum(axis=1).tolist() == [K, K, K]
    assert hist.kept[0, :K].all() and hist.kept[-1, -K:].all()
    assert np.allclose(hist.logits[-1], RISING.numpy())
    assert hist.head_types.count("cross") == 12 and len(hist.skipped) == 1


def test_parse_json_log():
    series = parse_json_log(LOG.splitlines())
    assert series["gate_temperature"] == [(10, 0.01), (20, 1e-05)]
    assert series["loss"] == [(10, 7.9), (20, 7.1)]
    assert series["valid_loss"] == [(10, 7.5)]
    assert "gate_penalty" not in series


def test_plot_gates_cli(ckpts, tmp_path, capsys):
    log = tmp_path / "train.log"
    log.write_text(LOG)
    out = tmp_path / "gates"
    assert (
        plot_gates.main(
            ["--checkpoints", str(ckpts / "run"), "--log", str(log), "--output", str(out)]
        )
        == 0
    )
    assert "3 checkpoints with gates (updates 10..30)" in capsys.readouterr().out
    assert_png_svg(out)
    assert plot_gates.main(["--log", str(log), "--output", str(tmp_path / "only_log")]) == 0
    assert_png_svg(tmp_path / "only_log")
    empty = tmp_path / "empty.log"
    empty.write_text("nothing here\n")
    assert plot_gates.main(["--log", str(empty), "--output", str(tmp_path / "e")]) == 2
    assert "--log-format json" in capsys.readouterr().err  # refused, not drawn empty
    assert (
        plot_gates.main(
            ["--checkpoints", str(ckpts / "pruned.pt"), "--output", str(tmp_path / "e")]
        )
        == 2
    )
    assert "no checkpoint with head gates" in capsys.readouterr().err


# -- BLEU against heads kept ---------------------------------------------------------------
def write_table(folder: Path):
    sys.path.insert(0, str(ROOT / "scripts"))
    import results_table

    rows = []
    for method, base in (("dsp", 30.0), ("random", 20.0)):
        for k in (6, 12, 24):
            score = {"sacrebleu": base + k / 2, "tok_bleu": base + k, "sacrebleu_signature": "s"}
            rows.append(results_table.make_row(method, k, score, f"heads kept: {k} of 72"))
    results_table.write_rows(str(folder / "results"), rows)
    (folder / "baseline.json").write_text(json.dumps({"sacrebleu": 40.0, "tok_bleu": 50.0}))


def test_sweep_series(tmp_path):
    write_table(tmp_path)
    rows = read_table(str(tmp_path / "results.csv"))
    series = series_by_method(rows, "tok_bleu")
    assert series == {"dsp": [(6, 36), (12, 42), (24, 54)], "random": [(6, 26), (12, 32), (24, 44)]}
    assert read_table(str(tmp_path / "results")) == json.loads(
        (tmp_path / "results.json").read_text()
    )


def test_plot_sweep_cli(tmp_path, capsys):
    write_table(tmp_path)
    out = tmp_path / "sweep"
    assert plot_sweep.main(["--table", str(tmp_path / "results.csv"), "--output", str(out)]) == 0
    assert "6 rows" in capsys.readouterr().out
    assert_png_svg(out)
    assert (
        plot_sweep.main(
            [
                "--table",
                str(tmp_path / "results.json"),
                "--metric",
                "tok_bleu",
                "--output",
                str(tmp_path / "tok.svg"),
            ]
        )
        == 0
    )
    assert_png_svg(tmp_path / "tok")
    assert (
        plot_sweep.main(["--table", str(tmp_path / "none.csv"), "--output", str(tmp_path / "x")])
        == 2
    )
    assert "no such results table" in capsys.readouterr().err
    (tmp_path / "bad.csv").write_text("a,b\n1,2\n")
    assert (
        plot_sweep.main(["--table", str(tmp_path / "bad.csv"), "--output", str(tmp_path / "x")])
        == 2
    )
    assert "not a results table" in capsys.readouterr().err


def test_console_scripts_are_installed():
    for name in ("dsp-plot-heads", "dsp-plot-gates", "dsp-plot-sweep"):
        exe = Path(sys.executable).parent / name
        assert exe.is_file(), f"{name} missing: reinstall the plugin (pip install --no-deps -e .)"
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "dsp-plot-sweep"), "--help"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0 and "BLEU against heads kept" in proc.stdout


def test_run_head_map_shades_with_the_gates_the_model_was_stripped_from(tmp_path, monkeypatch):
    """A pipelined run strips its best gates, not its last: the map must use those (no
    'heads differ' note); without a match it falls back to the last gates and says so."""
    from dsp_fairseq.plots import report

    best = build_state(RISING, num_updates=20)
    torch.save(best, tmp_path / "checkpoint_best.pt")
    torch.save(build_state(-RISING, num_updates=30), tmp_path / "checkpoint_last.pt")
    torch.save(strip_checkpoint(best)[0], tmp_path / "pruned.pt")
    drawn = []
    monkeypatch.setattr(report, "plot_head_map", lambda hmap, title: drawn.append(hmap) or None)
    monkeypatch.setattr(report, "save_figure", lambda fig, prefix: [prefix])
    monkeypatch.setattr(report, "plot_gate_history", lambda *a: None)
    report.run_figures(str(tmp_path), str(tmp_path))
    assert drawn[0].notes == [] and drawn[0].kept["cross"].tolist() == expected_cross().tolist()
    (tmp_path / "checkpoint_best.pt").unlink()
    report.run_figures(str(tmp_path), str(tmp_path))
    assert any("heads differ" in n for n in drawn[1].notes)
