#!/usr/bin/env bash
# Pipelined pruning: train only head gates on a trained baseline for one epoch (the model
# itself stays frozen), then strip the heads the best gates drop.
#
#   prune-pipelined.sh --data DIR --base BASE.pt --heads-to-keep K --save-dir DIR
#                      [--gate-type dsp|dsp-st|ste|hard-concrete] [--schedule pipelined|reference]
#                      [--preset iwslt|cpu-small] [--l0-penalty X] [--anneal-updates N]
#                      [--validate-interval N|auto] [--snapshot-interval N] [--args-file F]
#                      [--seed S] [--train-args "ARGS"] [--recovery reconstruct|none]
#                      [--reconstruct-args "ARGS"] [-- FAIRSEQ-TRAIN-ARGS...]
#
# --base            the trained baseline (a stock fairseq transformer or an unpruned
#                   transformer_dsp); the gated model takes its shape from it
# --gate-type       dsp (default), dsp-st, ste or hard-concrete
# --schedule        gate-training schedule (default pipelined, the best measured one):
#                     pipelined  1024-token batches, temperature 1 -> 1e-3, gate lr 0.05
#                     reference  the DSP reference code: the preset's batches (4096 tokens),
#                                temperature 0.1 -> 1e-8, gate lr 0.2
#                   --train-args (e.g. --max-tokens, --init-temperature, --gate-lr) override it
# --anneal-updates  temperature annealing length (default: the whole run, one epoch; the
#                   criterion computes it from the data, batch size and world size)
# --l0-penalty      weight of the gate penalty (hard-concrete), per target token
# --validate-interval N|auto  validate under the test mask (hard top-K) every N updates and
#                   strip the gates of the best validation (checkpoint_best.pt); auto
#                   (default) = a tenth of the epoch; 0 = only at the end of the epoch
# --snapshot-interval N  also keep a checkpoint every N updates (for dsp-plot-gates);
#                   validates at that interval too
# --args-file F     model-shape arguments computed before by
#                   python -m dsp_fairseq.recipes.pipelined_args (a sweep reuses them)
# --recovery        reconstruct (default, the best measured without training): refit the
#                   kept heads' output projections against the unpruned model on training
#                   batches while stripping (dsp-strip --reconstruct, a minute or two);
#                   none: strip only
# --reconstruct-args  more dsp-strip reconstruction options (e.g. --calibration-batches 50)
# --preset          optimisation settings (the learning rate only matters to the gates'
#                   Adam state: gate logits train at --gate-lr); default $PRESET or iwslt
# Output: SAVE_DIR/checkpoint_{best,last}.pt (gated), SAVE_DIR/pruned.pt (stripped),
# SAVE_DIR/strip.txt, SAVE_DIR/train.log. Finished steps are skipped on a rerun.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" BASE="" K="" SAVE="" GATE=dsp PRESET=${PRESET:-iwslt} L0=0 ANNEAL="" SNAP=0
ARGS_FILE="" SEED=1 TRAIN_ARGS="" VALIDATE=auto SCHEDULE=pipelined RECOVERY=reconstruct REC_ARGS=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --heads-to-keep) K=$2; shift 2 ;;
    --save-dir) SAVE=$2; shift 2 ;;
    --gate-type) GATE=$2; shift 2 ;;
    --schedule) SCHEDULE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --l0-penalty) L0=$2; shift 2 ;;
    --anneal-updates) ANNEAL=$2; shift 2 ;;
    --snapshot-interval) SNAP=$2; shift 2 ;;
    --validate-interval) VALIDATE=$2; shift 2 ;;
    --args-file) ARGS_FILE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --recovery) RECOVERY=$2; shift 2 ;;
    --reconstruct-args) REC_ARGS=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --base "$BASE"
need_value --heads-to-keep "$K"
need_value --save-dir "$SAVE"
need_tool python fairseq-train dsp-strip
need_data "$DATA"
need_file "$BASE" "--base: the trained baseline checkpoint"
[[ -z $ARGS_FILE ]] || need_file "$ARGS_FILE" "--args-file"
recovery_args RECOVER "$RECOVERY" "$DATA" "$REC_ARGS"
[[ $RECOVERY == reconstruct ]] && RECOVER+=(--unpruned "$BASE")  # the frozen model itself
preset_args "$PRESET" optim
case $SCHEDULE in
  pipelined) SCHEDULE_ARGS=(--max-tokens 1024) ;;  # 4x the updates of the preset's batches
  reference) SCHEDULE_ARGS=() ;;
  *) die "--schedule must be pipelined or reference, not '$SCHEDULE'" ;;
esac
split_words USER_ARGS "$TRAIN_ARGS"
ALL_USER=("${USER_ARGS[@]}" "${EXTRA[@]}")
TRAIN_ALL=("${PRESET_ARGS[@]}" "${SCHEDULE_ARGS[@]}" "${ALL_USER[@]}")
mkdir -p "$SAVE"

if [[ ! -f $SAVE/.done ]]; then
  if [[ -z $ARGS_FILE ]]; then
    ARGS_FILE=$SAVE/pipelined.args
    python -m dsp_fairseq.recipes.pipelined_args --base "$BASE" --gate-type "$GATE" \
      > "$ARGS_FILE.tmp" || die "cannot set up pipelined pruning of $BASE (see above)"
    mv "$ARGS_FILE.tmp" "$ARGS_FILE"
  fi
  mapfile -t SHAPE < "$ARGS_FILE"
  [[ -n $ANNEAL ]] && SHAPE+=(--anneal-updates "$ANNEAL")
  if [[ $VALIDATE == auto ]]; then
    max_tokens=$(last_value --max-tokens "${TRAIN_ALL[@]}")
    update_freq=$(last_value --update-freq "${TRAIN_ALL[@]}")
    epoch=$(python -m dsp_fairseq.recipes.pipelined_args --epoch-updates --data "$DATA/bin" \
      --base "$BASE" --max-tokens "$max_tokens" --update-freq "${update_freq:-1}") \
      || die "cannot count the updates of one epoch of $DATA/bin (see above)"
    VALIDATE=$(( (epoch + 9) / 10 ))
  fi
  [[ $SNAP =~ ^[0-9]+$ && $VALIDATE =~ ^[0-9]+$ ]] \
    || die "--snapshot-interval and --validate-interval take a number of updates"
  # fairseq validates (and updates checkpoint_best.pt) whenever it saves an interval checkpoint.
  snap=()
  if [[ $SNAP -gt 0 ]]; then
    snap=(--save-interval-updates "$SNAP" --keep-interval-updates -1)
  elif [[ $VALIDATE -gt 0 ]]; then
    snap=(--save-interval-updates "$VALIDATE" --keep-interval-updates 1)
  fi
  say "pipelined pruning: $GATE gates, K=$K, $SCHEDULE schedule, validation every ${VALIDATE} updates, one epoch on frozen $BASE -> $SAVE"
  [[ -f $SAVE/checkpoint_last.pt ]] && echo "  resuming from $SAVE/checkpoint_last.pt"
  run_train "$SAVE/train.log" "$DATA/bin" --user-dir "$PLUGIN" --task translation_dsp "${PRESET_ARGS[@]}" \
    "${SCHEDULE_ARGS[@]}" "${SHAPE[@]}" --finetune-from-model "$BASE" --train-gates-only \
    --gate-type "$GATE" --gate-schedule "$SCHEDULE" --heads-to-keep "$K" \
    --criterion dsp_label_smoothed_cross_entropy --l0-penalty "$L0" --max-epoch 1 --max-update 0 \
    --save-dir "$SAVE" --no-epoch-checkpoints "${snap[@]}" --seed "$SEED" --log-format json \
    "${ALL_USER[@]}"
  touch "$SAVE/.done"
fi

if [[ ! -s $SAVE/pruned.pt || ! -s $SAVE/strip.txt || $(cat "$SAVE/recovery" 2>/dev/null) != "$RECOVERY" ]]; then
  say "strip the heads dropped by the best gates (checkpoint_best.pt) -> $SAVE/pruned.pt (recovery: $RECOVERY)"
  dsp-strip --input "$SAVE/checkpoint_best.pt" --output "$SAVE/pruned.pt" "${RECOVER[@]}" --force > "$SAVE/strip.txt.tmp" \
    || die "dsp-strip failed (see the message above)"
  mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
  echo "$RECOVERY" > "$SAVE/recovery"
fi
grep -E '^(heads kept|parameters):' "$SAVE/strip.txt" | sed 's/^/  /'
echo "done: $SAVE/pruned.pt"
