#!/usr/bin/env bash
# Train the unpruned baseline: a stock fairseq Transformer, no gates.
#
#   train-baseline.sh --data DIR --save-dir DIR [--preset iwslt|cpu-small] [--max-update N]
#                     [--seed S] [--train-args "ARGS"] [-- FAIRSEQ-TRAIN-ARGS...]
#
# --data        prepared corpus folder (output of prepare-iwslt14.sh or prepare-multi30k.sh)
# --save-dir    checkpoint folder
# --preset      training settings, default $PRESET or iwslt (see recipe-lib.sh):
#               iwslt = transformer_iwslt_de_en with the paper's settings,
#               cpu-small = a 3+3-layer model for Multi30k on a CPU
# --max-update  training length (default 50000 for iwslt, 4000 for cpu-small)
# --train-args / arguments after --: more fairseq-train arguments; they come last, so they
#               override the preset (e.g. --max-tokens 2048 --update-freq 2).
# Output: SAVE_DIR/checkpoint_best.pt (lowest validation loss), checkpoint_last.pt and
# train.log (JSON log lines). An interrupted run resumes from checkpoint_last.pt; a finished
# one is skipped (remove SAVE_DIR/.done to train further with a larger --max-update).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" SAVE="" PRESET=${PRESET:-iwslt} MAX_UPDATE="" SEED=1 TRAIN_ARGS=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --save-dir) SAVE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --max-update) MAX_UPDATE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --save-dir "$SAVE"
need_tool fairseq-train
need_data "$DATA"
preset_args "$PRESET" base
split_words USER_ARGS "$TRAIN_ARGS"
MAX_UPDATE=${MAX_UPDATE:-$(preset_max_update "$PRESET")}

if [[ -f $SAVE/.done ]]; then
  say "baseline in $SAVE already trained (remove $SAVE/.done to train further)"
  exit 0
fi
mkdir -p "$SAVE"
say "train baseline ($PRESET preset, $MAX_UPDATE updates) -> $SAVE"
[[ -f $SAVE/checkpoint_last.pt ]] && echo "  resuming from $SAVE/checkpoint_last.pt"
# --user-dir: the plugin allowlists fairseq's pickled Namespace for torch >= 2.6, without
# which fairseq-train cannot resume from checkpoint_last.pt; the model stays a stock transformer.
run_train "$SAVE/train.log" "$DATA/bin" --user-dir "$PLUGIN" "${PRESET_ARGS[@]}" \
  --criterion label_smoothed_cross_entropy --max-update "$MAX_UPDATE" \
  --save-dir "$SAVE" --keep-last-epochs 3 --seed "$SEED" --log-format json \
  "${USER_ARGS[@]}" "${EXTRA[@]}"
need_file "$SAVE/checkpoint_best.pt" "fairseq-train finished without a best checkpoint; see $SAVE/train.log"
touch "$SAVE/.done"
echo "done: $SAVE/checkpoint_best.pt"
