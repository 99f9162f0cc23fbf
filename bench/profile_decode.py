#!/usr/bin/env python3
"""Where decoding time goes: torch.profiler tables of two speed-benchmark variants.

    python bench/profile_decode.py --data work/multi30k/bin \
        --checkpoint work/demo/checkpoints/checkpoint_last.pt [--k 9] [--batch 1] \
        [--variants stripped-even,fairseq-prune]

Builds the variants as bench/speed_bench.py does (same names), decodes --sentences test
sentences with beam 5 and a fixed number of steps once to warm up, then once under the
profiler, and prints the operators by self CPU time.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import speed_bench as sb  # noqa: E402

from bench.common import quiet_fairseq  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--data", required=True)
    p.add_argument("--checkpoint", required=True)
    p.add_argument("--k", type=int, default=9)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--sentences", type=int, default=4)
    p.add_argument("--fixed-steps", type=int, default=20)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--variants", default="stripped-even,fairseq-prune")
    p.add_argument("--rows", type=int, default=15)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    sb._plugin()
    quiet_fairseq()
    state, task, ds = sb.load_test_setup(args.checkpoint, args.data)
    batches = sb.make_batches(ds, args.sentences, args.batch)
    for variant in args.variants.split(","):
        model, heads = sb.build_variant(state, variant, args.k, task)
        gen = sb.make_generator(model, task, 5, args.fixed_steps)
        sb.decode_pass(gen, model, batches)
        with torch.profiler.profile() as prof:
            sb.decode_pass(gen, model, batches)
        print(f"\n== {variant}, K = {args.k}, heads {heads}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
