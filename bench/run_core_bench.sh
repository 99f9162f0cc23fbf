#!/usr/bin/env bash
# Core benchmark; needs the demo's outputs (run `make demo` first).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
D=$ROOT/work/demo/checkpoints
for f in "$D/checkpoint_last.pt" "$D/pruned.pt" "$ROOT/work/multi30k/bin/dict.en.txt"; do
  [[ -f $f ]] || { echo "error: $f not found; run 'make demo' first" >&2; exit 1; }
done
python "$ROOT/bench/core_bench.py" --data "$ROOT/work/multi30k/bin" --masked "$D/checkpoint_last.pt" \
  --stripped "$D/pruned.pt" --out "$ROOT/bench/core_bench.json" | tee "$ROOT/bench/core_bench.txt"
