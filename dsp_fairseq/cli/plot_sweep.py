"""dsp-plot-sweep: BLEU against heads kept, one line per pruning method.

    dsp-plot-sweep --table sweep/results.csv --output sweep/plots/sweep
    dsp-plot-sweep --table sweep/results.json --baseline sweep/baseline.json \\
        --metric tok_bleu --output bleu.png

--table: the results table written by examples/translation/sweep.sh (.csv or
.json). --baseline: score JSON of the unpruned model (drawn as a dashed line;
default: baseline.json beside the table, if present). --metric: tok_bleu
(Moses-tokenized, lowercased: the paper's tables), sacrebleu (detokenized), or
both (default; one panel each). Writes OUTPUT.png and OUTPUT.svg.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="dsp-plot-sweep",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--table", required=True, help="results.csv or results.json")
    parser.add_argument("--baseline", help="score JSON of the unpruned model")
    parser.add_argument("--metric", choices=["tok_bleu", "sacrebleu", "both"], default="both")
    parser.add_argument("--title", default="")
    parser.add_argument("--output", required=True, help="output path prefix (.png/.svg added)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    from ..plots.common import PlotError, output_prefix, save_figure
    from ..plots.sweep import plot_sweep, read_table

    metrics = ["tok_bleu", "sacrebleu"] if args.metric == "both" else [args.metric]
    baseline_path = args.baseline or os.path.join(
        os.path.dirname(os.path.abspath(args.table)), "baseline.json"
    )
    if not any(os.path.isfile(p) for p in (args.table, args.table + ".json", args.table + ".csv")):
        print(
            f"dsp-plot-sweep: error: --table {args.table}: no such results table; give the "
            "results.csv or results.json that sweep.sh writes (OUT/results.csv)",
            file=sys.stderr,
        )
        return 2
    try:
        output_prefix(args.output)
        rows = read_table(args.table)
        baseline = None
        if os.path.isfile(baseline_path):
            with open(baseline_path, encoding="utf-8") as f:
                baseline = json.load(f)
        elif args.baseline:
            raise PlotError(f"--baseline {args.baseline}: no such file")
        paths = save_figure(plot_sweep(rows, metrics, baseline, args.title), args.output)
    except (PlotError, OSError, ValueError) as err:
        print(f"dsp-plot-sweep: error: {err}", file=sys.stderr)
        return 2
    print(f"{len(rows)} rows; wrote {', '.join(paths)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
