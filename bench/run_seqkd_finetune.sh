#!/usr/bin/env bash
# Sequence-level distillation for the 270-update fine-tune (issue 17, session 12): is a pruned
# model recovered better by fine-tuning on the unpruned model's own beam translations of the
# training set (Kim & Rush 2016) than on the references? Three fine-tunes of each pruned model,
# the recipe's own in every other respect (finetune-pruned.sh, 270 updates, best checkpoint by
# validation loss):
#   labels  the training split as it is (the recipe's default)
#   pure    the teacher's beam-5 translations instead of the references
#   mix     both, concatenated (twice the sentences per epoch)
# and sacreBLEU (test_2016, valid) of the best and of the last checkpoint of each.
#
#   bash bench/run_seqkd_finetune.sh --pruned NAME=PRUNED.pt[,NAME=PRUNED.pt...]
#                                    [--work DIR] [--baseline CKPT --data DIR] [--modes LIST]
#                                    [--seeds LIST] [--finetune-dropout P]
#                                    [--finetune-average-last N]
#
# Default baseline and data: ../shared/data/multi30k-base72/{checkpoint.pt,data}. The teacher's
# translation of the training split (29,000 sentences, 7.5 min at 1 thread here) is made once.
# --seeds  fine-tune seeds (default 1; folders NAME-MODE, and NAME-MODE-sS for S > 1).
# --finetune-dropout  the fine-tune's dropout (default: finetune-pruned.sh's; the published
#          table, stage 6m of run_converged_bench.sh, passes 0.2, the recipe's default then)
# --finetune-average-last  checkpoints averaged into the fine-tune's model (default:
#          finetune-pruned.sh's; stage 6m passes 1, the best checkpoint, the recipe's then)
# Resumable; WORK/summary.txt holds the scores of every run in WORK (of this call and earlier ones).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=$ROOT/../shared/data/multi30k-base72
BASE=$SHARED/checkpoint.pt DATA=$SHARED/data WORK=$ROOT/work/converged/seqkd PRUNED="" MODES=labels,pure,mix SEEDS=1 FT_DROPOUT="" FT_AVERAGE=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --pruned) PRUNED=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --modes) MODES=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --finetune-dropout) FT_DROPOUT=$2; shift 2 ;;
    --finetune-average-last) FT_AVERAGE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_seqkd_finetune.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done
[[ -n $PRUNED ]] || { echo "run_seqkd_finetune.sh: --pruned NAME=PRUNED.pt is required" >&2; exit 1; }
[[ -f $BASE && -f $DATA/spm/spm.model ]] || { echo "run_seqkd_finetune.sh: no baseline $BASE or prepared corpus $DATA" >&2; exit 1; }
PLUGIN=$(dsp-user-dir)
mkdir -p "$WORK"
if [[ ! -f $WORK/gen-train.out ]]; then
  fairseq-generate "$DATA/bin" --user-dir "$PLUGIN" --path "$BASE" --gen-subset train --beam 5 \
    --batch-size 128 --required-batch-size-multiple 1 --cpu > "$WORK/gen-train.tmp" 2> "$WORK/gen-train.err"
  mv "$WORK/gen-train.tmp" "$WORK/gen-train.out"
fi
[[ -d $WORK/pure-data/bin ]] || python "$ROOT/bench/seqkd_corpus.py" --generate "$WORK/gen-train.out" --data "$DATA" --out "$WORK/pure-data"
[[ -d $WORK/mix-data/bin ]] || python "$ROOT/bench/seqkd_corpus.py" --generate "$WORK/gen-train.out" --data "$DATA" --out "$WORK/mix-data" --mix
IFS=, read -ra MODEL_LIST <<< "$PRUNED"
IFS=, read -ra MODE_LIST <<< "$MODES"
IFS=, read -ra SEED_LIST <<< "$SEEDS"
for spec in "${MODEL_LIST[@]}"; do
  name=${spec%%=*} pruned=${spec#*=}
  for mode in "${MODE_LIST[@]}"; do
    for seed in "${SEED_LIST[@]}"; do
      case $mode in
        labels) data=$DATA args=() ;;
        pure) data=$WORK/pure-data args=() ;;
        mix) data=$WORK/mix-data args=(--train-args "--upsample-primary 1") ;;
        *) echo "run_seqkd_finetune.sh: unknown mode $mode (labels, pure, mix)" >&2; exit 1 ;;
      esac
      run=$name-$mode
      [[ $seed == 1 ]] || run=$run-s$seed
      save=$WORK/ft/$run
      bash "$ROOT/bench/finetune_and_score.sh" "$run" "$save" "$DATA" --data "$data" --pruned "$pruned" \
        --seed "$seed" ${FT_DROPOUT:+--dropout "$FT_DROPOUT"} ${FT_AVERAGE:+--average-last "$FT_AVERAGE"} \
        "${args[@]}"
    done
  done
done
cat "$WORK"/ft/*/summary.line > "$WORK/summary.txt"  # every run of every call so far
