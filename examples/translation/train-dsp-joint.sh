#!/usr/bin/env bash
# Joint DSP: train a transformer_dsp from scratch with its head gates (keep K heads),
# then strip the pruned heads.
#
#   train-dsp-joint.sh --data DIR --save-dir DIR --heads-to-keep K [--gate-type dsp]
#                      [--preset iwslt|cpu-small] [--max-update N] [--anneal-updates N]
#                      [--l0-penalty X] [--seed S] [--train-args "ARGS"] [-- FAIRSEQ-TRAIN-ARGS...]
#
# --heads-to-keep  global budget K over all gated heads (72 for iwslt, 36 for cpu-small)
# --gate-type      dsp (default), dsp-st, ste or hard-concrete
# --preset         iwslt: transformer_dsp_iwslt_de_en with the paper's settings;
#                  cpu-small: transformer_dsp_small (default $PRESET or iwslt)
# --anneal-updates temperature annealing length (default 15000 for iwslt, as the DSP
#                  reference; otherwise the joint gate schedule's 3/4 of the run, which
#                  the criterion computes from --max-update)
# --l0-penalty     weight of the gate penalty (hard-concrete), per target token
# Output: SAVE_DIR/checkpoint_last.pt (masked, with gates), SAVE_DIR/pruned.pt (stripped),
# SAVE_DIR/strip.txt, SAVE_DIR/train.log. Finished steps are skipped on a rerun.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" SAVE="" K="" GATE=dsp PRESET=${PRESET:-iwslt} MAX_UPDATE="" ANNEAL="" L0=0 SEED=1
TRAIN_ARGS=""
EXTRA=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --save-dir) SAVE=$2; shift 2 ;;
    --heads-to-keep) K=$2; shift 2 ;;
    --gate-type) GATE=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --max-update) MAX_UPDATE=$2; shift 2 ;;
    --anneal-updates) ANNEAL=$2; shift 2 ;;
    --l0-penalty) L0=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --save-dir "$SAVE"
need_value --heads-to-keep "$K"
need_tool fairseq-train dsp-strip
need_data "$DATA"
preset_args "$PRESET" dsp
split_words USER_ARGS "$TRAIN_ARGS"
# --max-update in the extra arguments wins (they come last), so report that one
MAX_UPDATE=$(last_value --max-update --max-update "${MAX_UPDATE:-$(preset_max_update "$PRESET")}" \
  "${USER_ARGS[@]}" "${EXTRA[@]}")
[[ -z $ANNEAL && $PRESET == iwslt ]] && ANNEAL=15000
ANNEAL_ARGS=()
[[ -n $ANNEAL ]] && ANNEAL_ARGS=(--anneal-updates "$ANNEAL")

mkdir -p "$SAVE"
if [[ ! -f $SAVE/.done ]]; then
  say "joint training, $GATE gates, K=$K ($PRESET preset, $MAX_UPDATE updates) -> $SAVE"
  [[ -f $SAVE/checkpoint_last.pt ]] && echo "  resuming from $SAVE/checkpoint_last.pt"
  run_train "$SAVE/train.log" "$DATA/bin" --user-dir "$PLUGIN" --task translation_dsp "${PRESET_ARGS[@]}" \
    --gate-type "$GATE" --heads-to-keep "$K" \
    --criterion dsp_label_smoothed_cross_entropy "${ANNEAL_ARGS[@]}" --l0-penalty "$L0" \
    --max-update "$MAX_UPDATE" --save-dir "$SAVE" --keep-last-epochs 3 --seed "$SEED" \
    --log-format json "${USER_ARGS[@]}" "${EXTRA[@]}"
  touch "$SAVE/.done"
fi

if [[ ! -s $SAVE/pruned.pt || ! -s $SAVE/strip.txt ]]; then
  say "strip the pruned heads -> $SAVE/pruned.pt"
  dsp-strip --input "$SAVE/checkpoint_last.pt" --output "$SAVE/pruned.pt" --force > "$SAVE/strip.txt.tmp" \
    || die "dsp-strip failed (see the message above)"
  mv "$SAVE/strip.txt.tmp" "$SAVE/strip.txt"
fi
grep -E '^(heads kept|parameters):' "$SAVE/strip.txt" | sed 's/^/  /'
echo "done: $SAVE/pruned.pt"
