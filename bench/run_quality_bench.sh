#!/usr/bin/env bash
# Quality benchmark (issue "Benchmarks", quality part): one unpruned small Transformer on
# Multi30k De->En, then pipelined DSP, dsp-st, STE, Hard Concrete, head importance and random
# heads at K = H/8, H/4, H/2 (4, 9, 18 of 36), plus joint DSP at K = H/4. sacreBLEU on the 2016
# test set, results table, BLEU-vs-K plot; copied to bench/quality/.
#
#   bash bench/run_quality_bench.sh [--work DIR]   (default work/quality; ~77 min here from nothing)
#   bash bench/run_quality_bench.sh --iwslt de-en.tgz [--work DIR]
#
# --iwslt ARCHIVE  the larger setting, for a machine with a GPU: IWSLT14 De->En with the
#                  paper's transformer_iwslt_de_en (72 heads, 50k baseline updates), K = 9,
#                  18, 36 and joint DSP at 18; results stay in WORK/sweep (default
#                  work/quality-iwslt14), bench/quality/ is left alone.
# Resumable: every stage and every (method, K) row that is finished is skipped on a rerun, so
# an interrupted run continues where it stopped (the baseline resumes from its last checkpoint).
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK="" ARCHIVE=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --work) WORK=$2; shift 2 ;;
    --iwslt) ARCHIVE=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_quality_bench.sh: unknown option $1 (see --help)" >&2; exit 1 ;;
  esac
done
# Gate training (pipelined, every gate type alike): 1024-token batches (4x the updates of
# one epoch at 4096), temperature 1 -> 1e-3, gate learning rate 0.05, validation under the
# test mask every 50 updates and the best gates stripped. bench/RESULTS.md explains why.
GATE_ARGS="--init-temperature 1 --final-temperature 1e-3 --gate-lr 0.05"
# its published table: every gate run chose among all heads (the default until session 36)
FREE_SPLIT=(--type-split free)
if [[ -n $ARCHIVE ]]; then
  [[ -f $ARCHIVE ]] || { echo "run_quality_bench.sh: --iwslt $ARCHIVE: no such file" >&2; exit 1; }
  WORK=${WORK:-$ROOT/work/quality-iwslt14}
  COMMON=(--corpus iwslt14 --archive "$ARCHIVE" --work "$WORK" --gate-args "$GATE_ARGS"
          --validate-interval 200)
  KS=9,18,36 JOINT_K=18 JOINT_ARGS=""
else
  WORK=${WORK:-$ROOT/work/quality}
  COMMON=(--corpus multi30k --work "$WORK" --base-updates 500 --train-args "--warmup-updates 100"
          --importance-args "--max-batches 10" --gate-args "--max-tokens 1024 $GATE_ARGS"
          --validate-interval 50)
  KS=4,9,18 JOINT_K=9 JOINT_ARGS="--max-update 500 --anneal-updates 375"
fi
start=$SECONDS
bash "$ROOT/examples/translation/reproduce.sh" "${COMMON[@]}" --ks "$KS" "${FREE_SPLIT[@]}" \
  --methods dsp,dsp-st,ste,hard-concrete,importance,random
bash "$ROOT/examples/translation/reproduce.sh" "${COMMON[@]}" --ks "$JOINT_K" --methods joint-dsp \
  --joint-args "$JOINT_ARGS"
# fairseq's own head removal (_adaptive_prune_heads: the same number of heads in every
# attention, by weight magnitude) on the same baseline, at the K that are multiples of the
# number of attentions (9 here, 18 for IWSLT)
python "$ROOT/bench/fairseq_prune_quality.py" --data "$WORK/data" \
  --base "$WORK/baseline/checkpoint_best.pt" --ks "$( [[ -n $ARCHIVE ]] && echo 18,36 || echo 9,18)" \
  --out "$WORK/fairseq-prune"
echo "quality benchmark: $(( (SECONDS - start) / 60 )) min $(( (SECONDS - start) % 60 )) s this run" \
  | tee "$WORK/sweep/wall_time.txt"
[[ -z $ARCHIVE ]] || exit 0
mkdir -p "$ROOT/bench/quality/plots"
cp "$WORK/sweep/results.csv" "$WORK/sweep/results.json" "$WORK/sweep/baseline.json" \
  "$WORK/sweep/wall_time.txt" "$ROOT/bench/quality/"
cp "$WORK/fairseq-prune/results.json" "$ROOT/bench/quality/fairseq_prune.json"
# BLEU versus K, and the kept-head maps and DSP's gate evolution at K = H/4 (all plots, also
# as SVG, stay in WORK/sweep/plots/)
cp "$WORK"/sweep/plots/{sweep,heads-*-k9,gates-dsp-k9}.png "$ROOT/bench/quality/plots/"
echo "copied the table and plots to bench/quality/"
