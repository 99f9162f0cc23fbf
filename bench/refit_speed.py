#!/usr/bin/env python3
"""The refit with kept layer inputs against the refit that runs the model for every job.

Strips a gated checkpoint (its test mask; or takes a stripped one), then refits it against
the unpruned base with ``reconstruct_checkpoint`` (dsp-strip --reconstruct's defaults) once
with ``--calibration-cache-mb 0`` (every job runs both models from their embeddings, the
refit before session 48) and once with the default budget (each job runs its own layer
from the batches' kept inputs), alternating, in one process. Checks that both give the same
weights bit for bit and reports the wall time of each, their ratio and the memory the kept
inputs took.

    python bench/refit_speed.py --input GATED_OR_STRIPPED.pt \
        --base ../shared/data/multi30k-base72/checkpoint.pt \
        --data ../shared/data/multi30k-base72/data/bin --repeats 2 --out bench/recovery/refit-speed.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--input", required=True, help="gated checkpoint or stripped model")
    parser.add_argument("--base", required=True, help="the unpruned model")
    parser.add_argument("--data", required=True, help="fairseq binary folder (train split)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--out", required=True, help="JSON file for the result")
    args = parser.parse_args()

    import torch

    from dsp_fairseq.checkpoint_io import load_checkpoint, model_args
    from dsp_fairseq.pruning.calibrate import DEFAULT_CACHE_MB, reconstruct_checkpoint
    from dsp_fairseq.pruning.strip import strip_checkpoint

    state = load_checkpoint(args.input)
    if not getattr(model_args(state), "stripped_heads", None):
        state, _ = strip_checkpoint(state)
    base = load_checkpoint(args.base)
    seconds = {0: [], DEFAULT_CACHE_MB: []}
    models, used = {}, 0.0
    for repeat in range(args.repeats):
        for cache_mb in seconds:
            start = time.perf_counter()
            new_state, report = reconstruct_checkpoint(state, base, args.data, cache_mb=cache_mb)
            seconds[cache_mb].append(time.perf_counter() - start)
            models.setdefault(cache_mb, new_state["model"])
            used = max(used, report.layer_inputs_mb)
            print(
                f"repeat {repeat + 1}, cache {cache_mb} MB: {seconds[cache_mb][-1]:.1f} s",
                file=sys.stderr,
                flush=True,
            )
    old, new = models[0], models[DEFAULT_CACHE_MB]
    same = old.keys() == new.keys() and all(torch.equal(old[k], new[k]) for k in old)
    median = {k: statistics.median(v) for k, v in seconds.items()}
    result = {
        "input": args.input,
        "threads": torch.get_num_threads(),
        "seconds_cache_0": [round(s, 1) for s in seconds[0]],
        f"seconds_cache_{DEFAULT_CACHE_MB}": [round(s, 1) for s in seconds[DEFAULT_CACHE_MB]],
        "speedup_median": round(median[0] / median[DEFAULT_CACHE_MB], 2),
        "layer_inputs_mb": round(used, 1),
        "same_weights": same,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1)
    os.replace(args.out + ".tmp", args.out)
    print(json.dumps(result))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
