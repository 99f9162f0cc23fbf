#!/usr/bin/env bash
# Fine-tune a pruned model with the recipe and score its best and last checkpoint (sacreBLEU on
# valid and test_2016, beam 5): the unit of the fine-tune studies (stages 6m and 6n).
#
#   bash bench/finetune_and_score.sh NAME SAVE_DIR EVAL_DATA [FINETUNE-PRUNED ARGS...]
#
# The arguments after EVAL_DATA go to finetune-pruned.sh (--data, --pruned, --seed, ...);
# EVAL_DATA is the prepared corpus decoded for the scores. Prints NAME's line of
# bench/score_line.py and keeps it in SAVE_DIR/summary.line. Resumable like finetune-pruned.sh.
# The fine-tune keeps the average of its last checkpoints (--choose average, the recipe's
# default, unless the arguments say otherwise): the line scores it ("best") and the final model
# ("last") on valid and test, so --choose valid (the better of the two on valid) is read off it.
# It trains at learning rate 3e-4 unless the arguments pass --lr: the rate of every stage that
# used it up to session 27, so that they repeat their lines (the recipe's default for cpu-small
# is 5e-4 since then: bench/RESULTS.md "The fine-tune's learning rate").
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
R=$ROOT/examples/translation
[[ $# -ge 3 ]] || { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 1; }
name=$1 save=$2 eval_data=$3
shift 3
bash "$R/finetune-pruned.sh" --save-dir "$save" --preset cpu-small --choose average --lr 3e-4 "$@"
for sub in valid test; do
  bash "$R/evaluate.sh" --data "$eval_data" --checkpoint "$save/pruned.pt" --out "$save/eval-$sub" --subset $sub
  bash "$R/evaluate.sh" --data "$eval_data" --checkpoint "$save/checkpoint_last.pt" --out "$save/last-$sub" --subset $sub
done
python "$ROOT/bench/score_line.py" "$name" "$save" | tee "$save/summary.line"
