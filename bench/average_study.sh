#!/usr/bin/env bash
# Checkpoint averaging after a fine-tune (stage 6q of run_converged_bench.sh): average the final
# model of a finetune_and_score.sh run with the N - 1 interval checkpoints before it, for
# N = 3, 5 and 9, and score each average (sacreBLEU on valid and test_2016, beam 5).
#
#   bash bench/average_study.sh NAME SAVE_DIR PRUNED EVAL_DATA
#
# SAVE_DIR must come from a fine-tune that saved interval checkpoints (finetune_and_score.sh
# ... --train-args "--save-interval-updates 27 --keep-interval-updates 10"); PRUNED is the
# stripped model it started from. Prints one line "NAME: avgN test T valid V" per N.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
[[ $# -eq 4 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 1; }
name=$1 save=$2 pruned=$3 eval_data=$4
for n in 3 5 9; do
  python -m dsp_fairseq.recipes.finetuned_checkpoint --average-last $n --save-dir "$save" \
    --source "$pruned" --output "$save/avg$n.pt"
  for sub in valid test; do
    bash "$ROOT/examples/translation/evaluate.sh" --data "$eval_data" --checkpoint "$save/avg$n.pt" \
      --out "$save/avg$n-$sub" --subset $sub >&2
  done
  python - "$name" "$save" "$n" <<'PY'
import json, sys
name, save, n = sys.argv[1:]
bleu = {sub: json.load(open(f"{save}/avg{n}-{sub}/score.json"))["sacrebleu"] for sub in ("test", "valid")}
print(f"{name}: avg{n} test {bleu['test']} valid {bleu['valid']}")
PY
done
