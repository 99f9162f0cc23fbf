#!/usr/bin/env bash
# CTranslate2 deployment benchmark on the converged 72-head model (issue "Deploy: export pruned
# models to CTranslate2"):
#   1. pipelined DSP trained for a uniform layout (--heads-per-attention ENC,DEC), --seeds;
#   2. bench/ct2_bench.py: fairseq and CTranslate2 (float32, int8) on the unpruned model, DSP's,
#      importance's and fairseq's head choice at that layout, and global-K DSP exported with
#      zero-padded heads, timed in turns in one process; BLEU of every seed.
#
#   bash bench/run_ct2_bench.sh [--layout 4,4] [--seeds 1,2,3] [--work DIR] [--out DIR]
#                               [--converged DIR] [--baseline CKPT --data DIR]
#                               [--recovery default|none] [--stage train|all] [-- CT2_BENCH_ARGS...]
#
# --converged DIR  the converged benchmark's work folder (default work/converged)
# --baseline CKPT --data DIR  the baseline and its prepared corpus (default: the shared
#                  ../shared/data/multi30k-base72/{checkpoint.pt,data} when present, else the
#                  converged benchmark's baseline/checkpoint_best.pt and data/)
# --recovery       default (default): every pruned model with the recovery that trains no
#                  weight, the one the published table measured (DSP: prune-pipelined.sh
#                  --recovery best, the better on valid of its own weights and the refit, the
#                  recipes' default until session 23; importance's and fairseq's choices:
#                  refit by dsp-reconstruct); none: the
#                  stripped models as they are (how issue 12's table was made, then with
#                  the gate defaults of that time)
# The padded row reuses the converged benchmark's global-K DSP run if it exists, else trains
# one.
# Resumable: every finished training run and export is skipped. Run the timing stage on an
# otherwise idle machine (it times engines against each other in turns).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CONVERGED=$ROOT/work/converged
WORK=$ROOT/work/ct2-converged OUT=$ROOT/bench/ct2 LAYOUT=4,4 SEEDS=1,2,3 STAGE=all EXTRA=()
SHARED=$ROOT/../shared/data/multi30k-base72 BASE="" DATA="" RECOVERY=default
while [[ $# -gt 0 ]]; do
  case $1 in
    --layout) LAYOUT=$2; shift 2 ;;
    --seeds) SEEDS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --stage) STAGE=$2; shift 2 ;;
    --converged) CONVERGED=$2; shift 2 ;;
    --baseline) BASE=$2; shift 2 ;;
    --data) DATA=$2; shift 2 ;;
    --recovery) RECOVERY=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_ct2_bench.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done
case $RECOVERY in
  default) PIPE_RECOVERY=(--recovery best) CT2_RECOVERY=(--reconstruct) ;;
  none) PIPE_RECOVERY=(--recovery none) CT2_RECOVERY=() ;;
  *) echo "run_ct2_bench.sh: --recovery takes default or none" >&2; exit 1 ;;
esac
RECIPES=$ROOT/examples/translation
CONVERGED=$(cd "$CONVERGED" 2>/dev/null && pwd || echo "$CONVERGED")
if [[ -z $BASE && -z $DATA && -f $SHARED/checkpoint.pt && -d $SHARED/data/bin ]]; then
  BASE=$SHARED/checkpoint.pt DATA=$SHARED/data
fi
DATA=${DATA:-$CONVERGED/data} BASE=${BASE:-$CONVERGED/baseline/checkpoint_best.pt}
for f in "$DATA/bin/dict.en.txt" "$BASE"; do
  [[ -f $f ]] || { echo "run_ct2_bench.sh: $f is missing; pass --baseline CKPT --data DIR or" \
    "train the converged baseline first: bash bench/run_converged_bench.sh --stage baseline" >&2; exit 1; }
done
[[ $LAYOUT =~ ^[0-9]+,[0-9]+$ ]] || { echo "run_ct2_bench.sh: --layout takes ENC,DEC" >&2; exit 1; }
enc=${LAYOUT%,*} dec=${LAYOUT#*,}
K=$((3 * enc + 6 * dec))  # 3 encoder self-attentions, 3 decoder self- and 3 cross-attentions
mkdir -p "$WORK" "$OUT"
timed() {  # timed LABEL CMD...: run and append the wall time
  local label=$1 start=$SECONDS
  shift
  "$@"
  echo "$label: $((SECONDS - start)) s ($(date -u +%FT%TZ))" >> "$WORK/wall_time.txt"
}

# one head-importance estimate serves the DSP gates' start and the importance rows
importance=$CONVERGED/sweep/importance.json
[[ -f $importance ]] || importance=$WORK/importance.json
# (per token, and validation from the start of the gate run: the gate runs of sessions 11-28,
# which the published table measured; the recipe's defaults since session 29 differ)
IMP=(--importance-scores "$importance" --importance-args "--max-batches 20 --granularity token")
uniform=()
IFS=, read -ra seeds <<< "$SEEDS"
for seed in "${seeds[@]}"; do
  run=$WORK/dsp-uniform-${enc}x${dec}-seed$seed
  timed "dsp-uniform seed $seed" bash "$RECIPES/prune-pipelined.sh" --data "$DATA" --base "$BASE" \
    --heads-to-keep "$K" --save-dir "$run" --preset cpu-small --seed "$seed" "${PIPE_RECOVERY[@]}" "${IMP[@]}" \
    --train-args "--heads-per-attention $LAYOUT --validate-after-updates 0"
  uniform+=("$run/pruned.pt")
done
padded=$CONVERGED/sweep/runs/dsp-k$K/pruned.pt
if [[ ! -f $padded ]]; then
  timed "dsp global K=$K" bash "$RECIPES/prune-pipelined.sh" --data "$DATA" --base "$BASE" \
    --heads-to-keep "$K" --save-dir "$WORK/dsp-k$K" --preset cpu-small "${PIPE_RECOVERY[@]}" "${IMP[@]}" \
    --type-split free --train-args "--validate-after-updates 0"  # the global K the table measured
  padded=$WORK/dsp-k$K/pruned.pt
fi
[[ $STAGE == train ]] && exit 0

others=$(IFS=,; echo "${uniform[*]:1}")
imp_args=()
[[ -f $importance ]] && imp_args=(--importance "$importance")
timed ct2-bench python "$ROOT/bench/ct2_bench.py" --data "$DATA" --base "$BASE" --layout "$LAYOUT" \
  "${imp_args[@]}" --importance-args "--max-batches 20" --dsp-uniform "${uniform[0]}" \
  ${others:+--dsp-uniform-seeds "$others"} --dsp-padded "$padded" --work "$WORK/ct2" --out "$OUT" \
  "${CT2_RECOVERY[@]}" \
  "${EXTRA[@]}"
cp "$WORK/wall_time.txt" "$OUT/"
