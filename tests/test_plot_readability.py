"""Plots a person reads at a glance: distinct colours for up to 14 series, legends off the
data, a title, no piled-up labels. Checked on the figures themselves (matplotlib objects),
for the sweep plot and the two committed benchmark plots, redrawn from their raw data."""

from __future__ import annotations

import json
import sys

import matplotlib.colors as mcolors
from conftest import ROOT

from dsp_fairseq.plots.common import SERIES_COLORS, plt, series_style
from dsp_fairseq.plots.sweep import plot_sweep

sys.path.insert(0, str(ROOT / "bench"))


def fourteen_method_rows():
    rows = []
    for i in range(14):
        for k in (9, 18, 36):
            rows.append({"method": f"m{i:02d}" + ("+ft" if i % 5 == 4 else ""),
                         "heads_to_keep": k, "heads_kept": k, "heads_total": 72,
                         "sacrebleu": 10 + i + k / 4, "tok_bleu": 11 + i + k / 4})  # fmt: skip
    return rows


def legend_boxes(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)  # a closed figure has lost its canvas: give it one to measure with
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = list(fig.legends) + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    return [lg.get_window_extent(r) for lg in legends], [ax.get_window_extent(r) for ax in fig.axes]


def test_the_palette_has_fourteen_distinct_colours():
    rgb = [mcolors.to_rgb(c) for c in SERIES_COLORS]
    assert len(set(rgb)) == 14
    # far apart: no two closer than 0.25 in RGB (a teal 0.24 from tab:blue was dropped)
    close = [
        (a, b)
        for i, a in enumerate(rgb)
        for b in rgb[i + 1 :]
        if sum((x - y) ** 2 for x, y in zip(a, b)) ** 0.5 < 0.25
    ]
    assert not close, close
    assert len({series_style(i)["marker"] for i in range(14)}) == 14


def test_sweep_plot_with_fourteen_methods_is_readable():
    fig = plot_sweep(fourteen_method_rows(), baseline={"sacrebleu": 40.0, "tok_bleu": 41.0})
    try:
        for ax in fig.axes:
            lines = [ln for ln in ax.get_lines() if ln.get_label().startswith("m")]
            assert len(lines) == 14
            assert len({mcolors.to_rgb(ln.get_color()) for ln in lines}) == 14
            dashed = {ln.get_label() for ln in lines if ln.get_linestyle() == "--"}
            assert dashed == {"m04+ft", "m09+ft"}
        assert fig._suptitle is not None and "heads kept" in fig._suptitle.get_text()
        assert "72-head" in fig._suptitle.get_text()
        legends, axes = legend_boxes(fig)
        assert len(legends) == 1
        assert not any(lg.overlaps(ax) for lg in legends for ax in axes)
    finally:
        plt.close(fig)


def test_frontier_plot_from_the_committed_data(tmp_path, monkeypatch):
    import frontier_bench

    result = json.loads((ROOT / "bench/converged/frontier/frontier.json").read_text())
    figs = []
    monkeypatch.setattr(frontier_bench, "plt", plt, raising=False)
    import dsp_fairseq.plots.common as common

    monkeypatch.setattr(common, "save_figure", lambda fig, output: figs.append(fig) or [])
    frontier_bench.plot(result, str(tmp_path / "frontier.png"))
    (fig,) = figs
    try:
        ax = fig.axes[0]
        # no per-point K labels any more: K is the marker, explained once in a legend
        assert not [t for t in ax.texts if t.get_text().startswith("K=")]
        legends, axes = legend_boxes(fig)
        assert len(legends) == 2 and not any(lg.overlaps(a) for lg in legends for a in axes)
        labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
        assert "K = 18 (H/4)" in labels and "dsp" in labels and "unpruned" in labels
        methods = sorted({r["method"] for r in result["rows"]})
        handles = fig.legends[0].legend_handles[: len(methods)]
        # one colour per selection method, its recoveries in that colour, told apart by style
        styles = {(mcolors.to_rgb(h.get_color()), h.get_linestyle()) for h in handles}
        assert len(styles) == len(methods)
        colour = {h.get_label(): mcolors.to_rgb(h.get_color()) for h in handles}
        selections = {m.split("+")[0] for m in methods}
        assert len(set(colour.values())) == len(selections)
        assert colour["dsp+ft"] == colour["dsp"] and colour["importance"] != colour["dsp"]
        assert [h.get_linestyle() for h in handles if h.get_label() == "dsp+ft"] == ["--"]
        title = ax.get_title()
        assert "72-head" in title and "Multi30k" in title and "sacreBLEU" in title
    finally:
        plt.close(fig)


def test_ct2_plot_from_the_committed_data(tmp_path):
    import ct2_bench

    result = json.loads((ROOT / "bench/ct2/ct2_bench.json").read_text())
    captured = []
    original = plt.Figure.savefig
    try:
        plt.Figure.savefig = lambda self, *a, **k: captured.append(self)
        ct2_bench.plot(result, str(tmp_path / "p.png"))
    finally:
        plt.Figure.savefig = original
    (fig,) = captured
    legends, axes = legend_boxes(fig)
    assert len(legends) == 2 and not any(lg.overlaps(a) for lg in legends for a in axes)
    labels = [t.get_text() for lg in fig.legends for t in lg.get_texts()]
    assert {"unpruned", "CTranslate2, int8", "fairseq, float32"} <= set(labels)
    # a model's label names its recovery (here: the recipe's choice, or the refit)
    assert any(t.startswith("DSP, uniform + ") for t in labels), labels
    title = fig._suptitle.get_text()
    assert "72-head" in title and "Multi30k" in title and "sacreBLEU" in title
    for ax in fig.axes:
        colours = {mcolors.to_rgb(ln.get_color()) for ln in ax.get_lines()}
        assert len(colours) == len({m["name"] for m in result["models"]
                                    if any(r["model"] == m["name"] and r["batch"] == 64
                                           for r in result["rows"])})  # fmt: skip


def test_pick_k_frontier_from_the_committed_data_keeps_its_legend_off_the_probes(
    tmp_path, monkeypatch
):
    """dsp-pick-k's plot of session 40's search (bench/recovery/pick-k-tuned-s40), whose BLEU
    falls from K = 36 to 45 and jumps at 52: an axes legend in a corner hid two probes."""
    import dsp_fairseq.plots.common as common
    from dsp_fairseq.cli.pick_k import plot_frontier

    result = json.loads((ROOT / "bench/recovery/pick-k-tuned-s40/pick.json").read_text())
    figs = []
    monkeypatch.setattr(common, "save_figure", lambda fig, output: figs.append(fig) or [])
    plot_frontier(result, str(tmp_path / "frontier.png"))
    (fig,) = figs
    try:
        legends, axes = legend_boxes(fig)
        assert len(legends) == 1 and not any(lg.overlaps(ax) for lg in legends for ax in axes)
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert labels == ["within 0.5 BLEU", "unpruned", "DSP", "chosen K"]
    finally:
        plt.close(fig)
