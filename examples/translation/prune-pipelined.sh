#!/usr/bin/env bash
# Pipelined pruning: train head gates on a trained baseline for one epoch (the model frozen,
# except the output layers with the default distill objective), then strip the heads the
# best gates drop and recover the stripped model.
#
#   prune-pipelined.sh --data DIR --base BASE.pt --heads-to-keep K --save-dir DIR
#                      [--gate-type dsp|dsp-st|ste|hard-concrete] [--schedule pipelined|reference]
#                      [--preset iwslt|cpu-small] [--l0-penalty X] [--anneal-updates N]
#                      [--validate-interval N|auto] [--snapshot-interval N] [--args-file F]
#                      [--seed S] [--train-args "ARGS"] [--gate-objective distill|labels]
#                      [--recovery tuned|best|reconstruct|none] [--reconstruct-args "ARGS"]
#                      [--tune-args "ARGS"]
#                      [--gate-init importance|none] [--importance-scores FILE]
#                      [--importance-args "ARGS"] [--gen-args "ARGS"] [--restarts N]
#                      [--restart-jobs J|auto] [--restart-metric bleu|nll] [--gate-epochs N]
#                      [--type-split auto|free|proportional]
#                      [-- FAIRSEQ-TRAIN-ARGS...]
#
# --base            the trained baseline (a stock fairseq transformer or an unpruned
#                   transformer_dsp); the gated model takes its shape from it
# --gate-type       dsp (default), dsp-st, ste or hard-concrete
# --schedule        gate-training schedule (default pipelined, the best measured one):
#                     pipelined  1024-token batches, temperature 1 -> 1e-3, gate lr 0.05
#                     reference  the DSP reference code: the preset's batches (4096 tokens),
#                                temperature 0.1 -> 1e-8, gate lr 0.2
#                   --train-args (e.g. --max-tokens, --init-temperature, --gate-lr) override it
# --gate-objective  what the gates are trained on (default: distill for dsp gates, labels for
#                   the others, which were not measured with it):
#                     distill  KL(unpruned model || gated model) on the output vocabulary
#                              (--criterion dsp_distillation --teacher BASE --distill-weight 1),
#                              with the attention output projections and FFN output layers
#                              trainable beside the gates (--train-gates-with out_proj,fc2), so
#                              the gates choose heads the model can recover from (bench/RESULTS.md,
#                              "Selection that sees the recovery": +1.7 BLEU at H/4 after the refit)
#                     labels   label-smoothed CE on the references, everything but the gates
#                              frozen (the DSP paper's pipelined setting)
# --gate-init       where the gate logits start (default: importance for dsp gates trained on
#                   distill, none otherwise):
#                     importance  from head importance's scores of the base (dsp-importance on
#                                 the validation data, --gate-init-scores): the first test mask
#                                 is importance's top-K and the gates move from there; better
#                                 than none at H/4 and H/8 beyond the seed spread, level at
#                                 H/2 (bench/RESULTS.md). Scored per sentence (--granularity
#                                 sentence: one backward pass per batch, 4 s on 2 cores; per
#                                 token, 100 s, gave the same top-K at K = 9, 18 and 36 on the
#                                 converged model, bench/RESULTS.md "The one command in
#                                 under 10 minutes"); --importance-args "--granularity token"
#                                 for the per-token scores of sessions 11-28
#                     none        the gate type's own initialisation
# --importance-scores FILE  where those scores are, or are written once (default
#                   SAVE_DIR/gate-init-scores.json; sweep.sh and dsp-pick-k share one file);
#                   a file of another granularity is refused, not reused
# --importance-args  more dsp-importance arguments (e.g. --max-batches 20)
# --gate-epochs N   epochs of gate training (default 1); the temperature anneals over all of
#                   them. With layer distillation (--train-args "--distill-hidden-weight 1")
#                   two epochs measured better than one at H/4 in every seed (bench/RESULTS.md,
#                   "Two-epoch gate runs"), for twice the gate training time
# --type-split      how K is shared among the gated attention types (encoder self, decoder
#                   self, cross):
#                     free          one global top-K: the gates decide how many heads of each
#                                   type are kept (at H/4 and H/8 they may keep no encoder
#                                   self-attention head)
#                     proportional  K split in proportion to each type's heads (largest
#                                   remainders), top-k within each type (--heads-to-keep-per-type
#                                   proportional; K/3 each on a model with equal encoder and
#                                   decoder stacks)
#                     auto          proportional where K <= H/4 of the gated heads, free above
#                                   (--heads-to-keep-per-type proportional-at-small-k)
#                   default: auto for dsp gates (on the converged 72-head model, 3 gate seeds
#                   each, proportional fine-tuned level at H/4 and better at H/8, beyond the
#                   spread; free better at H/2: bench/RESULTS.md "Heads per attention type"),
#                   free for the other gate types (not measured with it). A
#                   --heads-to-keep-per-type or --heads-per-attention of --train-args (or
#                   after --) replaces it
# --anneal-updates  temperature annealing length (default: the whole run, --gate-epochs
#                   epochs; the criterion computes it from the data, batch size and world size)
# --l0-penalty      weight of the gate penalty (hard-concrete), per target token
# --validate-interval N|auto  validate under the test mask (hard top-K) every N updates and
#                   strip the gates of the best validation (checkpoint_best.pt); auto
#                   (default) = a tenth of the epoch, in the second half of the run only
#                   (--validate-after-updates; the temperature is still high before it: in
#                   6 of the 7 runs of sessions 22-24 the best validation came later, the
#                   seventh's tied a later one to the logged 3 decimals; 20-25 s saved;
#                   --train-args "--validate-after-updates 0" validates from the start, as
#                   sessions 11-28 did); 0 = only at the end of the epoch
# --snapshot-interval N  also keep a checkpoint every N updates (for dsp-plot-gates);
#                   validates at that interval too
# --args-file F     model-shape arguments computed before by
#                   python -m dsp_fairseq.recipes.pipelined_args (a sweep reuses them)
# --recovery        tuned (default since session 23): best, then the tuned refit
#                   (tune-refit.sh: every transformer layer trained towards the unpruned model
#                   for one epoch of 1024-token batches, the embeddings frozen; kept when it decodes
#                   valid better; in SAVE_DIR/tuned/, the model it started from in
#                   SAVE_DIR/pruned.untuned.pt). The best measured recovery without a full
#                   fine-tune at every K (over 3 gate seeds, bench/RESULTS.md "The one command
#                   with the tuned refit"); it adds 3-5 minutes on 2 CPU cores (one epoch
#                   of training, one validation decode), a little less than the gate run;
#                   best: strip with the gate run's own weights and with the refit below
#                   (one dsp-strip call writes both), score both on the validation set
#                   (sacreBLEU, evaluate.sh --subset valid) and keep the better (its name
#                   in SAVE_DIR/recovery.json); no weight
#                   training beyond the gate run's; the two validation decodes add a minute or
#                   two (a later call on the folder that switches between best and tuned
#                   keeps best's choice: nothing is stripped or decoded again);
#                   reconstruct: refit the kept heads' output projections and the FFN output
#                   layers against the unpruned model on training batches while stripping
#                   (dsp-strip --reconstruct, a minute or two); none: strip only
# --gen-args        more fairseq-generate arguments for --recovery best's validation decodes
# --reconstruct-args  more dsp-strip reconstruction options (e.g. --calibration-batches 50)
# --tune-args       more tune-refit.sh options for --recovery tuned (e.g. "--dropout 0 --lr 1e-4");
#                   a finished tuning in SAVE_DIR/tuned is kept: another --save-dir to retune
# --preset          optimisation settings (the learning rate only matters to the gates'
#                   Adam state: gate logits train at --gate-lr); default $PRESET or iwslt
# --restarts N      train the gates N times, with seeds S, S+1, ..., S+N-1 (--seed S), each in
#                   SAVE_DIR/seed-SEED/ with every other option of this call, and keep the run
#                   whose stripped model decodes the validation set best (its --recovery
#                   choice's score; with reconstruct or none, a validation decode of each):
#                   SAVE_DIR/restarts.json has every run's score, SAVE_DIR/pruned.pt,
#                   strip.txt and recovery.json are the chosen run's. Gate runs are seed-
#                   sensitive on a trained model; --restarts 2 with --train-args
#                   "--distill-hidden-weight 1" measured best at H/2 and H/4, behind the
#                   default at H/8 (bench/RESULTS.md "Restarts"); it chooses by the score
#                   before any fine-tune, which at H/8 kept the run that fine-tuned lowest
#                   ("H/8 after the fine-tune"). N times the work. Default 1.
# --restart-jobs J  how many of those runs train at once, the threads ($OMP_NUM_THREADS, else
#                   every core) split between them; each one's output then goes to
#                   SAVE_DIR/seed-SEED.log. auto (default): on a CPU min(N, threads), with a
#                   GPU 1. On 2 CPU cores two restarts side by side took 0.88x the wall time
#                   of one after the other (bench/RESULTS.md "Restarts side by side")
# --restart-metric  what --restarts chooses by: bleu, the validation sacreBLEU above (default),
#                   or nll, the lowest validation NLL (fairseq-validate, teacher-forced) of
#                   each run's kept model (python -m dsp_fairseq.recipes.valid_loss; in
#                   SAVE_DIR/seed-SEED/valid-loss.json, and restarts.json)
# Output: SAVE_DIR/checkpoint_{best,last}.pt (gated; with --restarts in SAVE_DIR/seed-SEED/),
# SAVE_DIR/pruned.pt (stripped),
# SAVE_DIR/strip.txt, SAVE_DIR/train.log (with --recovery tuned or best also SAVE_DIR/recovery.json
# and the candidates' scores in SAVE_DIR/valid-{none,reconstruct}/; with tuned also
# SAVE_DIR/tuned/, tune-refit.sh's folder, and SAVE_DIR/pruned.untuned.pt, the model it
# started from). Finished steps are skipped on a rerun.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" BASE="" K="" SAVE="" GATE=dsp PRESET=${PRESET:-iwslt} L0=0 ANNEAL="" SNAP=0
ARGS_FILE="" SEED=1 TRAIN_ARGS="" VALIDATE=auto SCHEDULE=pipelined RECOVERY=tuned REC_ARGS=""
TUNE_ARGS="" EPOCH_1024=""
OBJECTIVE="" GEN_ARGS="" GATE_INIT="" SCORES="" IMP_ARGS="" RESTARTS=1 JOBS=auto EPOCHS=1 METRIC=bleu
TYPE_SPLIT=""
DSP_TYPE_SPLIT=auto  # the dsp gates' default --type-split (bench/layout_split.py reads it)
EXTRA=() CALL_ARGS=("$@")
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
    --gate-objective) OBJECTIVE=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    --reconstruct-args) REC_ARGS=$2; shift 2 ;;
    --tune-args) TUNE_ARGS=$2; shift 2 ;;
    --gate-init) GATE_INIT=$2; shift 2 ;;
    --importance-scores) SCORES=$2; shift 2 ;;
    --importance-args) IMP_ARGS=$2; shift 2 ;;
    --restarts) RESTARTS=$2; shift 2 ;;
    --restart-jobs) JOBS=$2; shift 2 ;;
    --restart-metric) METRIC=$2; shift 2 ;;
    --gate-epochs) EPOCHS=$2; shift 2 ;;
    --type-split) TYPE_SPLIT=$2; shift 2 ;;
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
[[ $RESTARTS =~ ^[1-9][0-9]*$ ]] || die "--restarts takes a positive number of gate runs, not '$RESTARTS'"
[[ $JOBS == auto || $JOBS =~ ^[1-9][0-9]*$ ]] || die "--restart-jobs takes a positive number or auto, not '$JOBS'"
[[ $METRIC == bleu || $METRIC == nll ]] || die "--restart-metric must be bleu or nll, not '$METRIC'"
[[ $EPOCHS =~ ^[1-9][0-9]*$ ]] || die "--gate-epochs takes a positive number of epochs, not '$EPOCHS'"
[[ $SEED =~ ^[0-9]+$ ]] || die "--seed takes a number, not '$SEED'"
[[ -n $TYPE_SPLIT ]] || { [[ $GATE == dsp ]] && TYPE_SPLIT=$DSP_TYPE_SPLIT || TYPE_SPLIT=free; }
need_type_split "$TYPE_SPLIT"
case $RECOVERY in
  best|tuned) recovery_args RECOVER reconstruct "$DATA" "$REC_ARGS" ;;
  reconstruct|none) recovery_args RECOVER "$RECOVERY" "$DATA" "$REC_ARGS" ;;
  *) die "--recovery must be best, tuned, reconstruct or none, not '$RECOVERY'" ;;
esac
[[ $RECOVERY == none ]] || RECOVER+=(--unpruned "$BASE")  # the unpruned model the gates start from
[[ -n $OBJECTIVE ]] || { [[ $GATE == dsp ]] && OBJECTIVE=distill || OBJECTIVE=labels; }
case $OBJECTIVE in
  distill) OBJECTIVE_ARGS=(--criterion dsp_distillation --teacher "$BASE" --distill-weight 1.0
                           --train-gates-with out_proj,fc2) ;;
  labels) OBJECTIVE_ARGS=(--criterion dsp_label_smoothed_cross_entropy) ;;
  *) die "--gate-objective must be distill or labels, not '$OBJECTIVE'" ;;
esac
[[ -n $GATE_INIT ]] || { [[ $GATE == dsp && $OBJECTIVE == distill ]] && GATE_INIT=importance || GATE_INIT=none; }
case $GATE_INIT in
  importance) need_tool dsp-importance; SCORES=${SCORES:-$SAVE/gate-init-scores.json}
    IMP_ARGS="--granularity sentence $IMP_ARGS" ;;  # the user's --granularity comes later, wins
  none) ;;
  *) die "--gate-init must be importance or none, not '$GATE_INIT'" ;;
esac
preset_args "$PRESET" optim
case $SCHEDULE in
  pipelined) SCHEDULE_ARGS=(--max-tokens 1024) ;;  # 4x the updates of the preset's batches
  reference) SCHEDULE_ARGS=() ;;
  *) die "--schedule must be pipelined or reference, not '$SCHEDULE'" ;;
esac
split_words USER_ARGS "$TRAIN_ARGS"
ALL_USER=("${USER_ARGS[@]}" "${EXTRA[@]}")
# the split as a per-type budget, unless the user's fairseq arguments set their own layout
SPLIT_ARGS=()
if [[ " ${ALL_USER[*]} " == *" --heads-to-keep-per-type"* || " ${ALL_USER[*]} " == *" --heads-per-attention"* ]]; then
  TYPE_SPLIT="of --train-args"
elif [[ $TYPE_SPLIT == proportional ]]; then
  SPLIT_ARGS=(--heads-to-keep-per-type proportional)
elif [[ $TYPE_SPLIT == auto ]]; then
  SPLIT_ARGS=(--heads-to-keep-per-type proportional-at-small-k)
  TYPE_SPLIT="auto, proportional at K <= H/4"
fi
TRAIN_ALL=("${PRESET_ARGS[@]}" "${SCHEDULE_ARGS[@]}" "${ALL_USER[@]}")
mkdir -p "$SAVE"

# --recovery tuned: the tuned refit of SAVE_DIR/pruned.pt (tune-refit.sh, in SAVE_DIR/tuned),
# put in its place when it decodes valid better; the model it started from stays as
# SAVE_DIR/pruned.untuned.pt (as prune-importance.sh keeps PRUNED.untuned.pt); a rerun copies
# and notes it only once. tune_chosen [RUN]: RUN is the folder under SAVE_DIR whose valid-*/
# scored the model (a restart's), so that the tuning does not decode it again.
tune_chosen() {
  [[ $RECOVERY == tuned ]] || return 0
  local scored tune
  split_words tune "$TUNE_ARGS"
  scored=$SAVE${1:+/$1}/valid-$(chosen_of "$SAVE/recovery.json")/score.json
  if [[ ! -f $SAVE/pruned.untuned.pt ]]; then
    rm -rf "$SAVE/tuned"  # a tuning without its start is another model's
    cp "$SAVE/pruned.pt" "$SAVE/pruned.untuned.pt.tmp"
    mv "$SAVE/pruned.untuned.pt.tmp" "$SAVE/pruned.untuned.pt"
  fi
  bash "$RECIPES/tune-refit.sh" --data "$DATA" --pruned "$SAVE/pruned.untuned.pt" --base "$BASE" \
    --save-dir "$SAVE/tuned" --preset "$PRESET" --seed "$SEED" --gen-args "$GEN_ARGS" \
    --untuned-score "$scored" ${EPOCH_1024:+--epoch-updates "$EPOCH_1024"} ${tune[@]+"${tune[@]}"} || die "the tuned refit failed (see above); a rerun resumes it"
  if ! cmp -s "$SAVE/tuned/pruned.pt" "$SAVE/pruned.pt"; then
    cp "$SAVE/tuned/pruned.pt" "$SAVE/pruned.pt.tmp"
    mv "$SAVE/pruned.pt.tmp" "$SAVE/pruned.pt"
  fi
  # the report's tuning line, replaced when a tuning with other settings chose differently
  local line
  line=$(tuning_line "$SAVE/tuned")
  if ! grep -qxF "$line" "$SAVE/strip.txt"; then
    { grep -v '^recovery: tuned refit' "$SAVE/strip.txt" || true; echo "$line"; } > "$SAVE/strip.txt.tmp"
    mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
  fi
}

if [[ $RESTARTS -gt 1 ]]; then
  # This call once per seed, each in its own folder (each resumes and skips on its own), all
  # sharing one importance file; then the run that decodes the validation set best.
  # the chosen run is tuned once, here: the runs stop at best (also when tuned is the default)
  own=(--recovery "${RECOVERY/tuned/best}")
  for (( i = 0; i < ${#CALL_ARGS[@]}; i += 2 )); do
    [[ ${CALL_ARGS[i]} == -- ]] && break
    case ${CALL_ARGS[i]} in
      --restarts|--restart-jobs|--restart-metric|--seed|--save-dir|--importance-scores|--recovery) ;;
      *) own+=("${CALL_ARGS[i]}" "${CALL_ARGS[i + 1]}") ;;
    esac
  done
  # the importance scores once, before the runs that share them start
  [[ $GATE_INIT == importance ]] && importance_scores "$BASE" "$DATA" "$SCORES" "$IMP_ARGS"
  threads=${OMP_NUM_THREADS:-$(nproc)}
  if [[ $JOBS == auto ]]; then
    JOBS=1
    if [[ " ${TRAIN_ALL[*]} " == *" --cpu "* ]] \
        || ! python -c 'import sys, torch; sys.exit(not torch.cuda.is_available())' 2>/dev/null; then
      JOBS=$(( RESTARTS < threads ? RESTARTS : threads ))
      (( JOBS >= 1 )) || JOBS=1
    fi
  fi
  (( JOBS <= RESTARTS )) || JOBS=$RESTARTS
  per_run=$(( threads / JOBS )); (( per_run >= 1 )) || per_run=1
  restart() {  # restart SEED: this call's gate run with that seed, in SAVE_DIR/seed-SEED
    bash "$RECIPES/prune-pipelined.sh" "${own[@]}" --restarts 1 --seed "$1" --save-dir "$SAVE/seed-$1" \
      ${SCORES:+--importance-scores "$SCORES"} ${EXTRA[@]+-- "${EXTRA[@]}"}
  }
  if (( JOBS == 1 )); then
    for (( s = SEED; s < SEED + RESTARTS; s++ )); do
      say "restart $(( s - SEED + 1 )) of $RESTARTS: seed $s -> $SAVE/seed-$s"
      restart "$s" || die "the gate run of seed $s failed (see above)"
    done
  else
    # Background jobs of a script ignore Ctrl-C: the trap stops them (and what they started).
    kill_tree() { local c; for c in $(pgrep -P "$1"); do kill_tree "$c"; done; kill "$1" 2>/dev/null || true; }
    pids=() failed=()
    trap 'for p in "${pids[@]}"; do kill_tree "$p"; done; die "interrupted: the gate runs were stopped (a rerun resumes them)"' INT TERM
    collect() {  # collect SEED: wait for that run, note a failure
      wait "${pids[$1 - SEED]}" || failed+=("$1")
    }
    say "restarts: $RESTARTS gate runs, $JOBS at a time, $per_run thread(s) each"
    for (( s = SEED; s < SEED + RESTARTS; s++ )); do
      (( s - SEED < JOBS )) || collect $(( s - JOBS ))
      say "restart $(( s - SEED + 1 )) of $RESTARTS: seed $s -> $SAVE/seed-$s (output: $SAVE/seed-$s.log)"
      mkdir -p "$SAVE/seed-$s"
      OMP_NUM_THREADS=$per_run MKL_NUM_THREADS=$per_run restart "$s" > "$SAVE/seed-$s.log" 2>&1 &
      pids+=($!)
    done
    for (( s = SEED + RESTARTS - JOBS; s < SEED + RESTARTS; s++ )); do (( s < SEED )) || collect "$s"; done
    trap - INT TERM
    for s in "${failed[@]}"; do
      tail -n 20 "$SAVE/seed-$s.log" >&2
      die "the gate run of seed $s failed (the end of $SAVE/seed-$s.log above)"
    done
  fi
  candidates=() scores=()
  for (( s = SEED; s < SEED + RESTARTS; s++ )); do
    run_dir=$SAVE/seed-$s
    if [[ $RECOVERY == best || $RECOVERY == tuned ]]; then
      chosen=$(chosen_of "$run_dir/recovery.json")
      score_dir=$run_dir/valid-$chosen
    else
      score_dir=$run_dir/valid
      bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$run_dir/pruned.pt" \
        --out "$score_dir" --subset valid --gen-args "$GEN_ARGS"
    fi
    candidates+=(--candidate "seed-$s=$score_dir/score.json")
    if [[ $METRIC == nll ]]; then
      nll=$(python -m dsp_fairseq.recipes.valid_loss --data "$DATA/bin" \
        --checkpoint "$run_dir/pruned.pt" --output "$run_dir/valid-loss.json") \
        || die "cannot compute the validation NLL of $run_dir/pruned.pt (see above)"
      candidates+=(--loss "seed-$s=$run_dir/valid-loss.json")
      scores+=("seed-$s $nll")
    else
      scores+=("seed-$s $(score_of "$score_dir")")
    fi
  done
  chosen=$(python -m dsp_fairseq.recipes.choose_recovery --kind restarts --metric "$METRIC" \
    --output "$SAVE/restarts.json" "${candidates[@]}") \
    || die "cannot compare the restarts' validation scores (see above)"
  listed=$(IFS=,; echo "${scores[*]}" | sed 's/,/, /g')
  by=""  # the report's words for the metric
  if [[ $METRIC == nll ]]; then
    by=" NLL"
    say "restarts: $chosen has the lowest validation NLL (bits per token: $listed)"
  else
    say "restarts: $chosen decodes the validation set best (valid sacreBLEU: $listed)"
  fi
  # a tuning of another run's model (an earlier call chose another) is not this one's, nor
  # is any tuning when this call stops before it
  if [[ $RECOVERY != tuned ]] || ! cmp -s "$SAVE/$chosen/pruned.pt" "$SAVE/pruned.untuned.pt"; then
    rm -rf "$SAVE/pruned.untuned.pt" "$SAVE/tuned"
  fi
  # the chosen run's model and reports, copied (a rerun that chooses the same leaves them be,
  # the tuning of the chosen model included: SAVE_DIR/pruned.pt is never briefly the untuned one)
  if [[ ! -f $SAVE/pruned.untuned.pt ]] && ! cmp -s "$SAVE/$chosen/pruned.pt" "$SAVE/pruned.pt"; then
    cp "$SAVE/$chosen/pruned.pt" "$SAVE/pruned.pt.tmp"
    mv "$SAVE/pruned.pt.tmp" "$SAVE/pruned.pt"
  fi
  {
    cat "$SAVE/$chosen/strip.txt"
    echo "restarts: best of $RESTARTS gate runs on valid$by -> $chosen"
    if [[ -f $SAVE/pruned.untuned.pt && -s $SAVE/tuned/tune.json ]]; then tuning_line "$SAVE/tuned"; fi
  } > "$SAVE/strip.txt.tmp"
  cmp -s "$SAVE/strip.txt.tmp" "$SAVE/strip.txt" && rm "$SAVE/strip.txt.tmp" || mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
  for f in recovery recovery.json; do
    if [[ -f $SAVE/$chosen/$f ]]; then
      cmp -s "$SAVE/$chosen/$f" "$SAVE/$f" || cp "$SAVE/$chosen/$f" "$SAVE/$f"
    else
      rm -f "$SAVE/$f"
    fi
  done
  tune_chosen "$chosen"
  grep -E '^(heads kept|parameters|recovery|restarts):' "$SAVE/strip.txt" | sed 's/^/  /'
  echo "done: $SAVE/pruned.pt"
  exit 0
fi
rm -f "$SAVE/restarts.json"  # of an earlier call with --restarts: this folder holds one run now

if [[ ! -f $SAVE/.done ]]; then
  if [[ -z $ARGS_FILE ]]; then
    ARGS_FILE=$SAVE/pipelined.args
    python -m dsp_fairseq.recipes.pipelined_args --base "$BASE" --gate-type "$GATE" \
      > "$ARGS_FILE.tmp" || die "cannot set up pipelined pruning of $BASE (see above)"
    mv "$ARGS_FILE.tmp" "$ARGS_FILE"
  fi
  mapfile -t SHAPE < "$ARGS_FILE"
  [[ -n $ANNEAL ]] && SHAPE+=(--anneal-updates "$ANNEAL")
  AFTER=()
  if [[ $VALIDATE == auto ]]; then
    max_tokens=$(last_value --max-tokens "${TRAIN_ALL[@]}")
    update_freq=$(last_value --update-freq "${TRAIN_ALL[@]}")
    epoch=$(python -m dsp_fairseq.recipes.pipelined_args --epoch-updates --data "$DATA/bin" \
      --base "$BASE" --max-tokens "$max_tokens" --update-freq "${update_freq:-1}") \
      || die "cannot count the updates of one epoch of $DATA/bin (see above)"
    VALIDATE=$(( (epoch + 9) / 10 ))
    # the tuning's batches are these (1024 tokens, one per update): it need not count them again
    [[ $max_tokens == 1024 && ${update_freq:-1} == 1 ]] && EPOCH_1024=$epoch
    # not in the first half of the run (before the user's arguments: theirs win)
    [[ $SNAP -gt 0 ]] || AFTER=(--validate-after-updates $(( EPOCHS * epoch / 2 )))
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
  INIT_ARGS=()
  if [[ $GATE_INIT == importance ]]; then
    importance_scores "$BASE" "$DATA" "$SCORES" "$IMP_ARGS"  # the gates' starting logits
    INIT_ARGS=(--gate-init-scores "$SCORES")
  fi
  # the first validated update as fairseq will read it (the user's --validate-after-updates wins)
  after=$(last_value --validate-after-updates ${AFTER[@]+"${AFTER[@]}"} "${TRAIN_ALL[@]}")
  [[ ${after:-0} == 0 ]] && after=""
  say "pipelined pruning: $GATE gates trained on $OBJECTIVE, started from $GATE_INIT, K=$K (split among the attention types: $TYPE_SPLIT), $SCHEDULE schedule, validation every ${VALIDATE} updates${after:+ from update $after}, $EPOCHS epoch(s) on $BASE -> $SAVE"
  [[ -f $SAVE/checkpoint_last.pt ]] && echo "  resuming from $SAVE/checkpoint_last.pt"
  run_train "$SAVE/train.log" "$DATA/bin" --user-dir "$PLUGIN" --task translation_dsp "${PRESET_ARGS[@]}" \
    "${SCHEDULE_ARGS[@]}" "${SHAPE[@]}" --finetune-from-model "$BASE" --train-gates-only \
    --gate-type "$GATE" --gate-schedule "$SCHEDULE" --heads-to-keep "$K" ${SPLIT_ARGS[@]+"${SPLIT_ARGS[@]}"} \
    "${OBJECTIVE_ARGS[@]}" "${INIT_ARGS[@]}" --l0-penalty "$L0" --max-epoch "$EPOCHS" --max-update 0 \
    --save-dir "$SAVE" --no-epoch-checkpoints "${snap[@]}" ${AFTER[@]+"${AFTER[@]}"} --seed "$SEED" \
    --log-format json "${ALL_USER[@]}"
  # of older gates (or of an earlier call's restarts): stripped again below
  rm -f "$SAVE"/pruned-{none,reconstruct}.pt "$SAVE"/strip-{none,reconstruct}.txt "$SAVE/recovery"
  rm -rf "$SAVE/tuned" "$SAVE/pruned.untuned.pt"
  touch "$SAVE/.done"
fi

# strip_gates OUT REPORT DSP-STRIP-ARGS...: the heads the best gates keep, stripped from
# checkpoint_best.pt into OUT (report in REPORT); skipped when both are there.
strip_gates() {
  local out=$1 report=$2
  shift 2
  [[ -s $out && -s $report ]] && return 0
  dsp-strip --input "$SAVE/checkpoint_best.pt" --output "$out" "$@" --force > "$report.tmp" \
    || die "dsp-strip failed (see the message above)"
  mv "$report.tmp" "$report"
}

# tuned is best plus the tuning: a call switching between the two keeps best's choice (no
# strip or validation decode again); to best, the tuning's start is the folder's model again
before=$(cat "$SAVE/recovery" 2>/dev/null || true)
if [[ -s $SAVE/pruned.pt && -s $SAVE/strip.txt && -s $SAVE/recovery.json ]] \
    && [[ $before == tuned && $RECOVERY == best || $before == best && $RECOVERY == tuned ]]; then
  if [[ $RECOVERY == best ]]; then
    say "recovery best: the choice of the earlier --recovery tuned, without its tuning"
    [[ -f $SAVE/pruned.untuned.pt ]] && mv "$SAVE/pruned.untuned.pt" "$SAVE/pruned.pt"
    grep -v '^recovery: tuned refit' "$SAVE/strip.txt" > "$SAVE/strip.txt.tmp" || true
    mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
    rm -rf "$SAVE/tuned"
  fi
  echo "$RECOVERY" > "$SAVE/recovery"
fi
if [[ ! -s $SAVE/pruned.pt || ! -s $SAVE/strip.txt || $(cat "$SAVE/recovery" 2>/dev/null) != "$RECOVERY" ]]; then
  rm -f "$SAVE/recovery" "$SAVE/recovery.json"
  rm -rf "$SAVE/tuned" "$SAVE/pruned.untuned.pt"  # tuned from another recovery's model
  if [[ $RECOVERY == best || $RECOVERY == tuned ]]; then
    # Both candidates from one dsp-strip call (its report: the plain model's table and 'wrote'
    # line, then the refit's), each scored on the validation set; the test set is never used
    # to choose.
    if [[ ! -s $SAVE/pruned-none.pt || ! -s $SAVE/strip-none.txt \
          || ! -s $SAVE/pruned-reconstruct.pt || ! -s $SAVE/strip-reconstruct.txt ]]; then
      say "strip the heads dropped by the best gates (checkpoint_best.pt) -> $SAVE/pruned-none.pt, and refit -> $SAVE/pruned-reconstruct.pt"
      strip_gates "$SAVE/pruned-reconstruct.pt" "$SAVE/strip-both.txt" "${RECOVER[@]}" \
        --unreconstructed-output "$SAVE/pruned-none.pt"
      awk '{ print } /^wrote / { exit }' "$SAVE/strip-both.txt" > "$SAVE/strip-none.txt"
      awk 'done { print } !done && /^wrote / { done = 1 }' "$SAVE/strip-both.txt" > "$SAVE/strip-reconstruct.txt"
      rm "$SAVE/strip-both.txt"
    fi
    for cand in none reconstruct; do
      bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$SAVE/pruned-$cand.pt" \
        --out "$SAVE/valid-$cand" --subset valid --gen-args "$GEN_ARGS"
    done
    chosen=$(python -m dsp_fairseq.recipes.choose_recovery --output "$SAVE/recovery.json" \
      --candidate reconstruct="$SAVE/valid-reconstruct/score.json" \
      --candidate none="$SAVE/valid-none/score.json") \
      || die "cannot compare the two candidates' validation scores (see above)"
    say "recovery best: $chosen (valid sacreBLEU: none $(score_of "$SAVE/valid-none"), reconstruct $(score_of "$SAVE/valid-reconstruct"))"
    cp "$SAVE/strip-$chosen.txt" "$SAVE/strip.txt.tmp"
    echo "recovery: best of none and reconstruct on valid -> $chosen" >> "$SAVE/strip.txt.tmp"
    mv "$SAVE/pruned-$chosen.pt" "$SAVE/pruned.pt"
    mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
    rm -f "$SAVE"/pruned-{none,reconstruct}.pt  # the other candidate (its scores stay)
  else
    say "strip the heads dropped by the best gates (checkpoint_best.pt) -> $SAVE/pruned.pt (recovery: $RECOVERY)"
    rm -f "$SAVE/strip.txt"
    strip_gates "$SAVE/pruned.pt" "$SAVE/strip.txt" "${RECOVER[@]}"
  fi
  echo "$RECOVERY" > "$SAVE/recovery"
fi
tune_chosen
grep -E '^(heads kept|parameters|recovery):' "$SAVE/strip.txt" | sed 's/^/  /'
echo "done: $SAVE/pruned.pt"
