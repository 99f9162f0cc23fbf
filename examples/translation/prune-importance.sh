#!/usr/bin/env bash
# Prune a trained baseline without training gates: keep the K heads of highest importance
# (Michel et al. 2019: |gradient of the loss w.r.t. a head mask|, summed over the data), or
# K random heads, and strip the rest.
#
#   prune-importance.sh --data DIR --base BASE.pt --heads-to-keep K --output PRUNED.pt
#                       [--scores SCORES.json] [--importance-args "ARGS"] [--random] [--seed S]
#                       [--recovery tuned|reconstruct|none] [--reconstruct-args "ARGS"]
#                       [--tune-args "ARGS"]
#                       [--preset iwslt|cpu-small] [--gen-args "ARGS"]
#
# --scores  where the head-importance scores are (or will be) written; default
#           importance.json beside --output. They are computed once (dsp-importance on the
#           validation data) and reused for every K.
# --importance-args  more dsp-importance arguments (e.g. --max-batches 50 --granularity batch)
# --random  keep K heads drawn at random (seeded) instead.
# --recovery  tuned (default since session 23): reconstruct, then the tuned refit
#           (tune-refit.sh: every transformer layer trained towards the unpruned model for one
#           epoch, the embeddings frozen, kept when it decodes valid better; the reconstructed model stays
#           in PRUNED.untuned.pt, the run in PRUNED.tuned/): the best measured without a full
#           fine-tune, 3-5 minutes more on 2 CPU cores (bench/RESULTS.md);
#           reconstruct: refit the kept heads' output projections against the unpruned
#           model on training batches (dsp-strip --reconstruct, a minute or two, no weight
#           training); none: strip only
# --seed    the random heads' seed, and the tuned refit's (data order)
# --preset, --gen-args  the tuned refit's training preset and validation decodes' options
# --reconstruct-args  more dsp-strip reconstruction options (e.g. --calibration-batches 50)
# --tune-args  more tune-refit.sh options for --recovery tuned (e.g. "--dropout 0 --lr 1e-4")
# Output: PRUNED.pt and PRUNED.strip.txt (dsp-strip's table). Existing outputs are kept.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" BASE="" K="" OUTPUT="" SCORES="" RANDOM_HEADS=0 SEED=1 IMP_ARGS="" RECOVERY=tuned REC_ARGS=""
PRESET=${PRESET:-iwslt} GEN_ARGS="" TUNE_ARGS=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --heads-to-keep) K=$2; shift 2 ;;
    --output) OUTPUT=$2; shift 2 ;;
    --scores) SCORES=$2; shift 2 ;;
    --importance-args) IMP_ARGS=$2; shift 2 ;;
    --random) RANDOM_HEADS=1; shift ;;
    --seed) SEED=$2; shift 2 ;;
    --recovery) RECOVERY=$2; shift 2 ;;
    --reconstruct-args) REC_ARGS=$2; shift 2 ;;
    --tune-args) TUNE_ARGS=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --base "$BASE"
need_value --heads-to-keep "$K"
need_value --output "$OUTPUT"
need_tool dsp-strip
need_data "$DATA"
need_file "$BASE" "--base: the trained baseline checkpoint"
need_dir "$(dirname "$OUTPUT")" "--output's folder; create it first"
case $RECOVERY in
  tuned) recovery_args RECOVER reconstruct "$DATA" "$REC_ARGS"; need_tool fairseq-train ;;
  reconstruct|none) recovery_args RECOVER "$RECOVERY" "$DATA" "$REC_ARGS" ;;
  *) die "--recovery must be reconstruct, tuned or none, not '$RECOVERY'" ;;
esac
REPORT=${OUTPUT%.pt}.strip.txt
# with --recovery tuned the stripped model is the tuned refit's start, OUTPUT its choice
STRIPPED=$OUTPUT
[[ $RECOVERY == tuned ]] && STRIPPED=${OUTPUT%.pt}.untuned.pt
STRIPPED_REPORT=${STRIPPED%.pt}.strip.txt

if [[ -s $OUTPUT && -s $REPORT ]]; then
  say "$OUTPUT exists; kept"
  exit 0
fi
if [[ -s $STRIPPED && -s $STRIPPED_REPORT ]]; then
  say "$STRIPPED exists; kept"
elif [[ $RANDOM_HEADS == 1 ]]; then
  say "keep $K random heads (seed $SEED) of $BASE -> $OUTPUT"
  select=(--random --heads-to-keep "$K" --seed "$SEED")
else
  need_tool dsp-importance
  SCORES=${SCORES:-$(dirname "$OUTPUT")/importance.json}
  importance_scores "$BASE" "$DATA" "$SCORES" "$IMP_ARGS"
  say "keep the $K most important heads of $BASE -> $OUTPUT"
  select=(--importance "$SCORES" --heads-to-keep "$K")
fi
if [[ ! -s $STRIPPED || ! -s $STRIPPED_REPORT ]]; then
  [[ $RECOVERY == none ]] || say "reconstruct the pruned attentions on training batches of $DATA/bin"
  dsp-strip --input "$BASE" --output "$STRIPPED" "${select[@]}" "${RECOVER[@]}" --force > "$STRIPPED_REPORT.tmp" \
    || die "dsp-strip failed (see the message above)"
  mv "$STRIPPED_REPORT.tmp" "$STRIPPED_REPORT"
fi
if [[ $RECOVERY == tuned ]]; then
  tuned=${OUTPUT%.pt}.tuned
  split_words TUNE "$TUNE_ARGS"
  bash "$RECIPES/tune-refit.sh" --data "$DATA" --pruned "$STRIPPED" --base "$BASE" --save-dir "$tuned" \
    --preset "$PRESET" --seed "$SEED" --gen-args "$GEN_ARGS" ${TUNE[@]+"${TUNE[@]}"} \
    || die "the tuned refit failed (see above); a rerun resumes it"
  cp "$tuned/pruned.pt" "$OUTPUT.tmp"
  { cat "$STRIPPED_REPORT"; tuning_line "$tuned"; } > "$REPORT.tmp"
  mv "$OUTPUT.tmp" "$OUTPUT"
  mv "$REPORT.tmp" "$REPORT"
fi
grep -E '^(heads kept|parameters|recovery):' "$REPORT" | sed 's/^/  /' || true
echo "done: $OUTPUT"
