#!/usr/bin/env bash
# The uniform layout of the CTranslate2 benchmark (ENC,DEC heads in every attention; default
# 4,4 = 36 of 72) with the default recovery: pipelined DSP gates trained for the layout, and
# head importance at the layout, each stripped and then refit by dsp-reconstruct; sacreBLEU
# (test_2016 and valid) of all four with fairseq, and of the refit models with CTranslate2
# (float32, int8; translations compared with fairseq's). Speed is that of the same layout in
# bench/ct2/ (reconstruction changes weights, not shapes).
#
#   bash bench/run_layout_recovery.sh [--layout 4,4] [--seed 1] [--work DIR]
#                                     [--baseline CKPT --data DIR] [--importance FILE]
#
# Default baseline and data: ../shared/data/multi30k-base72/{checkpoint.pt,data}; importance
# scores: --importance FILE (dsp-importance's output for that baseline, e.g. the converged
# sweep's importance.json), else WORK/importance.json, computed if missing. Resumable;
# WORK/summary.txt holds the scores.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SHARED=$ROOT/../shared/data/multi30k-base72
BASE=$SHARED/checkpoint.pt DATA=$SHARED/data LAYOUT=4,4 SEED=1 WORK=$ROOT/work/converged/layout44 SCORES=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --layout) LAYOUT=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --importance) SCORES=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_layout_recovery.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done
[[ -f $BASE && -f $DATA/spm/spm.model ]] || { echo "run_layout_recovery.sh: no baseline $BASE or prepared corpus $DATA" >&2; exit 1; }
R=$ROOT/examples/translation
enc=${LAYOUT%,*} dec=${LAYOUT#*,}
K=$((3 * enc + 6 * dec))  # 3 encoder self-attentions, 3 decoder self- and 3 cross-attentions
mkdir -p "$WORK"
scores=${SCORES:-$WORK/importance.json}
[[ -z $SCORES || -f $SCORES ]] || { echo "run_layout_recovery.sh: --importance $SCORES does not exist" >&2; exit 1; }
[[ -f $scores ]] || dsp-importance --path "$BASE" --data "$DATA/bin" --max-batches 20 --output "$scores"
bash "$R/prune-pipelined.sh" --data "$DATA" --base "$BASE" --heads-to-keep "$K" --save-dir "$WORK/dsp-seed$SEED" \
  --preset cpu-small --seed "$SEED" --recovery none --importance-args "--granularity token" \
  --train-args "--heads-per-attention $LAYOUT --validate-after-updates 0"  # the gate runs of sessions 11-28
[[ -f $WORK/importance.pt ]] || dsp-strip --input "$BASE" --output "$WORK/importance.pt" \
  --importance "$scores" --heads-per-attention "$LAYOUT"
: > "$WORK/summary.txt"
for name in "dsp-seed$SEED/pruned" importance; do
  [[ -f $WORK/$name.rec.pt ]] || dsp-reconstruct --pruned "$WORK/$name.pt" --base "$BASE" \
    --data "$DATA/bin" --output "$WORK/$name.rec.pt" --quiet
  for m in "$name" "$name.rec"; do
    bash "$R/evaluate.sh" --data "$DATA" --checkpoint "$WORK/$m.pt" --out "$WORK/eval/$m"
    bash "$R/evaluate.sh" --data "$DATA" --checkpoint "$WORK/$m.pt" --out "$WORK/eval/$m/valid" --subset valid
    python -c 'import json,sys; t,v=(json.load(open(f))["sacrebleu"] for f in sys.argv[2:]); print(f"fairseq {sys.argv[1]}: test {t}, valid {v}")' \
      "$m" "$WORK/eval/$m/score.json" "$WORK/eval/$m/valid/score.json" >> "$WORK/summary.txt"
  done
  ct2=$WORK/ct2-${name//\//-}.rec
  [[ -f $ct2/model.bin ]] || dsp-export-ct2 --input "$WORK/$name.rec.pt" --output "$ct2" --data "$DATA" --quiet
  for q in float32 int8; do
    dsp-translate-ct2 --model "$ct2" --spm "$DATA/spm/spm.model" --compute-type $q --progress 0 \
      < "$DATA/raw/test.de" > "$ct2.$q.hyp.en"
    same=$(paste -d '\t' "$ct2.$q.hyp.en" "$WORK/eval/$name.rec/hyp.detok.en" | awk -F'\t' '$1 == $2' | wc -l)
    echo "CTranslate2 $q $name.rec: test $(sacrebleu -b -w 2 "$DATA/raw/test.en" < "$ct2.$q.hyp.en"), $same/$(wc -l < "$DATA/raw/test.en") translations identical to fairseq's" >> "$WORK/summary.txt"
  done
done
cat "$WORK/summary.txt"
