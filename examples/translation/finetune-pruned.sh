#!/usr/bin/env bash
# Fine-tune a pruned (stripped) model with its kept heads fixed: the short retraining after
# pipelined pruning. Every method's stripped model (DSP, Hard Concrete, importance, ...) is
# fine-tuned the same way, so the comparison stays fair.
#
#   finetune-pruned.sh --data DIR --pruned PRUNED.pt --save-dir DIR [--max-update N]
#                      [--preset iwslt|cpu-small] [--seed S] [--teacher BASE.pt]
#                      [--dropout P] [--lr LR] [--average-last N] [--choose average|valid]
#                      [--train-args "ARGS"]
#                      [-- FAIRSEQ-TRAIN-ARGS...]
#
# --pruned      a checkpoint written by dsp-strip (the removed heads stay removed, which is
#               the same as training the gated model with --freeze-gates, and cheaper)
# --teacher     distil from this unpruned model (criterion dsp_distillation: label-smoothed
#               CE mixed with KL(teacher || student); --train-args "--distill-weight W
#               --distill-temperature T" change the mixture); default: labels only
# --max-update  fine-tuning updates (default 270: two epochs of Multi30k at 4096 tokens)
# --preset      optimisation settings (default $PRESET or iwslt), with a constant learning
#               rate (--lr) after 20 warm-up updates (--lr-scheduler fixed); --train-args
#               override both
# --lr          the fine-tune's constant learning rate (default: the preset's, 5e-4 for
#               cpu-small, level with 3e-4 over 22 paired runs, +0.07 test / +0.12 valid for
#               DSP's one command, bench/RESULTS.md "The fine-tune's learning rate"; 3e-4 for
#               iwslt, not measured)
# --dropout     dropout of the fine-tune (default: the preset's fine-tune dropout, 0.1 for
#               cpu-small, half the 0.2 the model was trained with: the pruned model has less to
#               regularise, and 0.1 measured better on valid than 0.2 at K = 9, 18 and 36,
#               bench/RESULTS.md "The fine-tune's dropout"; the preset's training dropout, 0.3,
#               for iwslt, where it is not measured)
# --average-last  N: pruned.pt is the average of the run's last N checkpoints (one every tenth
#               of the run, so N <= 10; 1: the best checkpoint by validation loss, as fairseq
#               keeps it); default: the preset's, 3 for cpu-small (better on valid than the
#               final model on average, bench/RESULTS.md "Averaging the last checkpoints"), 1
#               for iwslt, not measured
# --choose      with --average-last N > 1: average (default) keeps the average; valid decodes
#               the validation set with the average and with the final model and keeps the
#               better (a tie keeps the average): measured level with the average, so not the
#               default (bench/RESULTS.md "Average or final model")
# Output: SAVE_DIR/pruned.pt, the fine-tuned model (the average of the last N checkpoints, also
# kept as SAVE_DIR/pruned.average.pt; with --choose valid the better on valid of it and the
# final model, pruned.final.pt, the choice and both scores in SAVE_DIR/choice.json, the decodes
# in valid-{average,final}/; with --average-last 1 checkpoint_best.pt, the lowest validation
# loss), with dsp-strip's record of the kept head indices, for head maps, without the
# optimizer's state (a third of the size): a stripped model that fairseq-generate --user-dir
# "$(dsp-user-dir)" and dsp-export-ct2 load; SAVE_DIR/train.log. An interrupted run resumes
# from checkpoint_last.pt; a finished one is skipped, or trained on from its checkpoint_last.pt
# when rerun with a larger --max-update (a smaller one is refused).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" PRUNED="" SAVE="" MAX_UPDATE=270 PRESET=${PRESET:-iwslt} SEED=1 TRAIN_ARGS="" TEACHER="" DROPOUT="" LR=""
AVERAGE_LAST="" CHOOSE=average
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --pruned) PRUNED=$2; shift 2 ;;
    --save-dir) SAVE=$2; shift 2 ;;
    --max-update) MAX_UPDATE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --teacher) TEACHER=$2; shift 2 ;;
    --dropout) DROPOUT=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --average-last) AVERAGE_LAST=$2; shift 2 ;;
    --choose) CHOOSE=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --pruned "$PRUNED"
need_value --save-dir "$SAVE"
need_tool python fairseq-train
need_data "$DATA"
need_file "$PRUNED" "--pruned: a checkpoint written by dsp-strip"
CRITERION=(--criterion label_smoothed_cross_entropy)
if [[ -n $TEACHER ]]; then
  need_file "$TEACHER" "--teacher: the unpruned checkpoint to distil from"
  CRITERION=(--criterion dsp_distillation --teacher "$(cd "$(dirname "$TEACHER")" && pwd)/$(basename "$TEACHER")")
fi
[[ $MAX_UPDATE =~ ^[0-9]+$ && $MAX_UPDATE -gt 0 ]] || die "--max-update takes a positive number"
preset_args "$PRESET" optim
DROPOUT=${DROPOUT:-$(preset_finetune_dropout "$PRESET")}
[[ $DROPOUT =~ ^(0(\.[0-9]+)?|1(\.0+)?)$ ]] || die "--dropout takes a probability between 0 and 1, not '$DROPOUT'"
LR=${LR:-$(preset_finetune_lr "$PRESET")}
[[ $LR =~ ^([0-9]+\.?[0-9]*|\.[0-9]+)([eE]-?[0-9]+)?$ && ! $LR =~ ^[0.]+([eE]|$) ]] ||
  die "--lr takes a positive learning rate (e.g. 3e-4), not '$LR'"
AVERAGE_LAST=${AVERAGE_LAST:-$(preset_finetune_average "$PRESET")}
[[ $AVERAGE_LAST =~ ^[0-9]+$ && $AVERAGE_LAST -ge 1 && $AVERAGE_LAST -le 10 ]] ||
  die "--average-last takes a number of checkpoints from 1 to 10, not '$AVERAGE_LAST'"
[[ $CHOOSE == valid || $CHOOSE == average ]] || die "--choose takes valid or average, not '$CHOOSE'"
[[ $CHOOSE == average || $AVERAGE_LAST == 1 ]] ||
  need_file "$DATA/raw/valid.en" "--choose valid decodes the validation set; --choose average does not"
SAVE_EVERY=()
if (( AVERAGE_LAST > 1 )); then
  # a checkpoint every tenth of the run (fairseq writes none at an epoch's end, where
  # checkpoint_last.pt is the model, and one at the last update unless it ends an epoch: so
  # N are kept, of which N - 1 or N are older than checkpoint_last.pt)
  SAVE_EVERY=(--save-interval-updates $(( (MAX_UPDATE + 9) / 10 )) --keep-interval-updates "$AVERAGE_LAST")
fi
split_words USER_ARGS "$TRAIN_ARGS"
mkdir -p "$SAVE"

if [[ -f $SAVE/.done ]]; then
  # a finished fine-tune asked for more updates trains on from its checkpoint_last.pt (the
  # same model as one run of the larger --max-update: the learning rate is constant)
  trained=$(python -m dsp_fairseq.recipes.finetuned_checkpoint --updates "$SAVE/checkpoint_last.pt") \
    || die "cannot read the update count of $SAVE/checkpoint_last.pt (see above)"
  if (( trained > MAX_UPDATE )); then
    die "$SAVE holds a fine-tune of $trained updates, more than --max-update $MAX_UPDATE: pass --max-update $trained or more to keep it (more trains it further), or another --save-dir"
  elif (( trained < MAX_UPDATE )); then
    say "$SAVE: fine-tuned for $trained updates; training on to $MAX_UPDATE"
    rm "$SAVE/.done"
  fi
fi
if [[ ! -f $SAVE/.done ]]; then
  python -m dsp_fairseq.recipes.pipelined_args --base "$PRUNED" --stripped-ok \
    > "$SAVE/model.args.tmp" || die "cannot fine-tune $PRUNED (see above)"
  mv "$SAVE/model.args.tmp" "$SAVE/model.args"
  mapfile -t SHAPE < "$SAVE/model.args"
  say "fine-tune $PRUNED with its kept heads fixed, $MAX_UPDATE updates${TEACHER:+, distilled from $TEACHER} -> $SAVE"
  [[ -f $SAVE/checkpoint_last.pt ]] && echo "  resuming from $SAVE/checkpoint_last.pt"
  run_train "$SAVE/train.log" "$DATA/bin" --user-dir "$PLUGIN" --task translation_dsp "${PRESET_ARGS[@]}" \
    --lr-scheduler fixed --warmup-updates 20 --lr "$LR" --dropout "$DROPOUT" "${SHAPE[@]}" --finetune-from-model "$PRUNED" \
    "${CRITERION[@]}" --max-update "$MAX_UPDATE" --save-dir "$SAVE" \
    --no-epoch-checkpoints "${SAVE_EVERY[@]}" --seed "$SEED" --log-format json "${USER_ARGS[@]}" "${EXTRA[@]}"
  need_file "$SAVE/checkpoint_best.pt" "fairseq-train finished without a best checkpoint; see $SAVE/train.log"
  touch "$SAVE/.done"
fi
# checkpoint_best.pt (or the average of the last checkpoints) plus dsp-strip's record of the
# original head indices kept (fairseq-train drops it; head maps need it); left alone when
# already written
finetuned() { python -m dsp_fairseq.recipes.finetuned_checkpoint "$@" --source "$PRUNED" \
  || die "cannot write the fine-tuned model (see above)"; }
if (( AVERAGE_LAST == 1 )); then
  finetuned --best "$SAVE/checkpoint_best.pt" --output "$SAVE/pruned.pt"
else
  finetuned --average-last "$AVERAGE_LAST" --save-dir "$SAVE" --output "$SAVE/pruned.average.pt"
  chosen=average
  if [[ $CHOOSE == valid ]]; then
    finetuned --best "$SAVE/checkpoint_last.pt" --output "$SAVE/pruned.final.pt"
    for cand in average final; do
      bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$SAVE/pruned.$cand.pt" \
        --out "$SAVE/valid-$cand" --subset valid
    done
    # the average first: a tie keeps it
    chosen=$(python -m dsp_fairseq.recipes.choose_recovery --kind finetune --output "$SAVE/choice.json" \
      --candidate average="$SAVE/valid-average/score.json" --candidate final="$SAVE/valid-final/score.json") \
      || die "cannot compare the two models' validation scores (see above)"
    say "fine-tuned model: the better on valid of the average of the last $AVERAGE_LAST checkpoints and the final model -> $chosen (valid sacreBLEU: average $(score_of "$SAVE/valid-average"), final $(score_of "$SAVE/valid-final"))"
  else
    rm -f "$SAVE/choice.json"
  fi
  # rewritten only when it changes (a rerun, or another --choose), so that scores of
  # SAVE_DIR/pruned.pt stay up to date
  if [[ ! -f $SAVE/pruned.pt ]] || ! cmp -s "$SAVE/pruned.$chosen.pt" "$SAVE/pruned.pt"; then
    # a hard link where the file system allows: the same model, stored once
    ln -f "$SAVE/pruned.$chosen.pt" "$SAVE/pruned.pt.tmp" 2>/dev/null || cp "$SAVE/pruned.$chosen.pt" "$SAVE/pruned.pt.tmp"
    mv "$SAVE/pruned.pt.tmp" "$SAVE/pruned.pt"
  fi
fi
echo "done: $SAVE/pruned.pt"
