#!/usr/bin/env bash
# The tuned refit: train the transformer layers of a pruned model (every layer's attention and
# FFN weights and layer norms; the embeddings frozen) towards the unpruned model, then keep the
# tuned model only if it decodes the validation set better than the model it started from
# (bench/RESULTS.md, "A tuned refit" and "The tuned refit of every layer").
#
#   tune-refit.sh --data DIR --pruned PRUNED.pt --base BASE.pt --save-dir DIR
#                 [--preset iwslt|cpu-small] [--seed S] [--lr LR] [--epochs N]
#                 [--dropout P] [--layers NAMES] [--gen-args "ARGS"] [--train-args "ARGS"]
#                 [--untuned-score SCORE.json] [--epoch-updates N]
#
# --pruned    a stripped model, typically reconstructed (dsp-strip --reconstruct, or the
#             pruned.pt of prune-pipelined.sh / prune-importance.sh); it is never modified
# --base      the unpruned model: the teacher. The objective is the gate run's: KL(unpruned ||
#             pruned) on the output vocabulary plus the hidden-state term (criterion
#             dsp_distillation --distill-weight 1 --distill-hidden-weight 1), no labels
# --layers    the parameters that train, as transformer_dsp --train-only takes them (default
#             layers, since session 44: every transformer layer, the embeddings frozen; on the
#             converged Multi30k model, 3 gate seeds at each K, its fine-tune ended higher than
#             after out_proj,fc2, what the refit changes and the default before, in every pair
#             at H/4, bench/RESULTS.md "The tuned refit of every layer"; as fast)
# --epochs    epochs of 1024-token batches (default 1; 535 updates on Multi30k), at a constant
#             learning rate --lr (default 5e-4, the best of 1e-4 / 5e-4 / 1e-3 at H/2 on
#             Multi30k for out_proj,fc2; for every layer 2e-4 decoded better at H/2 and H/4
#             without a fine-tune and lower at H/8, but the fine-tune afterwards ended lower,
#             bench/RESULTS.md "The tuning of every layer at 2e-4": --lr 2e-4 for a model used
#             without a fine-tune); the model is the checkpoint with the lowest validation loss
# --dropout   the tuning run's dropout (default 0, since session 41: the teacher's outputs are
#             computed without dropout, and at 0.1 the tuning ended with a higher validation
#             loss than it started from near the unpruned model and lower valid BLEU at H/4;
#             bench/RESULTS.md "The tuned refit without dropout"; 0.1 before)
# --seed      the run's seed (data order)
# --gen-args  more fairseq-generate arguments for the two validation decodes
# --train-args  more fairseq-train arguments (they override the above)
# --untuned-score  evaluate.sh's score.json of --pruned on the validation set with the same
#             --gen-args, when the caller has it (prune-pipelined.sh --recovery tuned scored
#             its candidates already): used instead of decoding --pruned again
# --epoch-updates  the updates of one epoch of DATA at 1024 tokens per batch, when the caller
#             counted them already (prune-pipelined.sh): saves counting them again (a fairseq
#             start, a few seconds)
# Output: SAVE_DIR/pruned.pt (the tuned model, or a copy of --pruned when that decodes valid at
# least as well), SAVE_DIR/tune.json (the choice and both validation scores), SAVE_DIR/run/
# (finetune-pruned.sh's run), SAVE_DIR/valid-{untuned,tuned}/ (evaluate.sh), SAVE_DIR/tune.args
# (the settings). An interrupted run resumes; a finished one is skipped, unless the settings
# (--layers, --lr, --epochs, --dropout, --seed, --preset, --train-args) changed: then it tunes again.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" PRUNED="" BASE="" SAVE="" PRESET=${PRESET:-iwslt} SEED=1 LR=5e-4 EPOCHS=1 DROPOUT=0
LAYERS=layers GEN_ARGS="" TRAIN_ARGS="" UNTUNED_SCORE="" EPOCH=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --pruned) PRUNED=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --save-dir) SAVE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --lr) LR=$2; shift 2 ;;
    --epochs) EPOCHS=$2; shift 2 ;;
    --dropout) DROPOUT=$2; shift 2 ;;
    --layers) LAYERS=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --untuned-score) UNTUNED_SCORE=$2; shift 2 ;;
    --epoch-updates) EPOCH=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --pruned "$PRUNED"
need_value --base "$BASE"
need_value --save-dir "$SAVE"
need_tool python fairseq-train
need_data "$DATA"
need_file "$PRUNED" "--pruned: a checkpoint written by dsp-strip"
need_file "$BASE" "--base: the unpruned model to tune towards"
[[ $EPOCHS =~ ^[1-9][0-9]*$ ]] || die "--epochs takes a positive number of epochs, not '$EPOCHS'"
[[ $DROPOUT =~ ^(0|0?\.[0-9]+)$ ]] || die "--dropout takes a probability in [0, 1), not '$DROPOUT'"
[[ -n $LAYERS ]] || die "--layers names the parameters to train (e.g. out_proj,fc2)"
[[ -z $EPOCH || $EPOCH =~ ^[1-9][0-9]*$ ]] || die "--epoch-updates takes a positive number of updates, not '$EPOCH'"
[[ -z $UNTUNED_SCORE ]] || need_file "$UNTUNED_SCORE" "--untuned-score: evaluate.sh's score.json of --pruned on valid"
mkdir -p "$SAVE"

# The settings of the tuning, so that a rerun with other options tunes again instead of reusing
# (or resuming) a run made with different ones (a folder from before tune.args is reused as is)
SETTINGS=$(printf '%s\n' "layers $LAYERS" "lr $LR" "epochs $EPOCHS" "dropout $DROPOUT" \
  "seed $SEED" "preset $PRESET" "train-args $TRAIN_ARGS")
if [[ -f $SAVE/tune.args && $(< "$SAVE/tune.args") != "$SETTINGS" ]]; then
  say "tuned refit: the settings differ from those $SAVE was tuned with; tuning again"
  rm -rf "$SAVE/run" "$SAVE/valid-tuned" "$SAVE/tune.json" "$SAVE/pruned.pt" "$SAVE/tune.args"
fi
if [[ ! -s $SAVE/tune.json ]]; then
  echo "$SETTINGS" > "$SAVE/tune.args.tmp"
  mv "$SAVE/tune.args.tmp" "$SAVE/tune.args"
  epoch=$EPOCH
  [[ -n $epoch ]] || epoch=$(python -m dsp_fairseq.recipes.pipelined_args --epoch-updates --data "$DATA/bin" \
    --base "$BASE" --max-tokens 1024) || die "cannot count the updates of one epoch of $DATA/bin (see above)"
  say "tuned refit: $LAYERS of $PRUNED trained towards $BASE, $EPOCHS epoch(s) ($(( epoch * EPOCHS )) updates) -> $SAVE"
  bash "$RECIPES/finetune-pruned.sh" --data "$DATA" --pruned "$PRUNED" --save-dir "$SAVE/run" \
    --preset "$PRESET" --seed "$SEED" --teacher "$BASE" --max-update $(( epoch * EPOCHS )) \
    --dropout "$DROPOUT" --average-last 1 \
    --train-args "--train-only $LAYERS --distill-weight 1 --distill-hidden-weight 1 --max-tokens 1024 --lr $LR --warmup-updates 0 $TRAIN_ARGS" \
    || die "the tuning run failed (see above); a rerun resumes it"
  untuned=$SAVE/valid-untuned/score.json
  if [[ -n $UNTUNED_SCORE ]]; then
    rm -rf "$SAVE/valid-untuned"  # of an earlier call without --untuned-score
    untuned=$UNTUNED_SCORE
  else
    bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$PRUNED" --out "$SAVE/valid-untuned" \
      --subset valid --gen-args "$GEN_ARGS"
  fi
  bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$SAVE/run/pruned.pt" --out "$SAVE/valid-tuned" \
    --subset valid --gen-args "$GEN_ARGS"
  # the untuned model first: a tie keeps it
  chosen=$(python -m dsp_fairseq.recipes.choose_recovery --kind tuning --output "$SAVE/tune.json.tmp" \
    --candidate untuned="$untuned" --candidate tuned="$SAVE/valid-tuned/score.json") \
    || die "cannot compare the two models' validation scores (see above)"
  model=$PRUNED
  [[ $chosen == tuned ]] && model=$SAVE/run/pruned.pt
  cp "$model" "$SAVE/pruned.pt.tmp"
  mv "$SAVE/pruned.pt.tmp" "$SAVE/pruned.pt"
  mv "$SAVE/tune.json.tmp" "$SAVE/tune.json"
fi
say "$(tuning_line "$SAVE")"
echo "done: $SAVE/pruned.pt"
