#!/usr/bin/env bash
# End to end: prepare a corpus, train the unpruned baseline, sweep pruning methods x K,
# draw the plots. Each stage skips what is already done, so rerun it after an interruption.
#
#   reproduce.sh --corpus multi30k|iwslt14 [--work DIR] [--src-dir DIR] [--archive TGZ]
#                [--methods LIST] [--ks LIST] [--vocab-size N] [--base-updates N]
#                [--model-args "ARGS"] [--train-args "ARGS"] [--gate-args "ARGS"]
#                [--joint-args "ARGS"] [--gen-args "ARGS"] [--importance-args "ARGS"]
#                [--snapshot-interval N] [--validate-interval N] [--seed S]
#                [--recovery reconstruct|none] [--type-split auto|free|proportional]
#
# multi30k: Multi30k De->En with the cpu-small preset (36 heads); the corpus comes from
#           --src-dir or $MULTI30K_DIR (default ../shared/data/multi30k beside the repo),
#           else it is downloaded. Default K: 3,6,9,18,27.
# iwslt14:  IWSLT14 De->En with the paper's preset (transformer_iwslt_de_en, 72 heads); the
#           archive comes from --archive (offline) or is downloaded. Default K: 6,12,18,24,36,48.
# --work         output folder (default work/CORPUS): data/, baseline/, sweep/
# --methods      sweep methods (default dsp,ste,hard-concrete,importance,random; see sweep.sh)
# --base-updates baseline training length (default: the preset's)
# --model-args   fairseq-train model arguments for the baseline only (e.g. smaller dims)
# --train-args   fairseq-train arguments for every training run (baseline and gates)
# --gate-args    fairseq-train arguments for pipelined gate training only (see sweep.sh)
# --joint-args   fairseq-train arguments for joint-dsp only (e.g. --max-update 500)
# --validate-interval N|auto  pipelined runs validate every N updates, strip their best gates
#                (default auto: a tenth of the epoch)
# --gen-args     fairseq-generate arguments
# --importance-args  dsp-importance arguments (importance method)
# --recovery     reconstruct (default: a METHOD+rec row after every selection method, see
#                sweep.sh) or none (the stripped rows only)
# --type-split   how pipelined rows share K among the attention types (sweep.sh; default:
#                prune-pipelined.sh's)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

CORPUS="" WORK="" SRC_DIR=${MULTI30K_DIR:-} ARCHIVE="" METHODS=dsp,ste,hard-concrete,importance,random
KS="" VOCAB="" BASE_UPDATES="" MODEL_ARGS="" TRAIN_ARGS="" GATE_ARGS="" JOINT_ARGS="" GEN_ARGS=""
IMP_ARGS="" SNAP=0 VALIDATE=auto SEED=1 RECOVERY=reconstruct TYPE_SPLIT=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --corpus) CORPUS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --src-dir) SRC_DIR=$2; shift 2 ;;
    --archive) ARCHIVE=$2; shift 2 ;;
    --methods) METHODS=$2; shift 2 ;;
    --ks) KS=$2; shift 2 ;;
    --vocab-size) VOCAB=$2; shift 2 ;;
    --base-updates) BASE_UPDATES=$2; shift 2 ;;
    --model-args) MODEL_ARGS=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --gate-args) GATE_ARGS=$2; shift 2 ;;
    --joint-args) JOINT_ARGS=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    --importance-args) IMP_ARGS=$2; shift 2 ;;
    --snapshot-interval) SNAP=$2; shift 2 ;;
    --validate-interval) VALIDATE=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --recovery) RECOVERY=$2; shift 2 ;;
    --type-split) TYPE_SPLIT=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --corpus "$CORPUS"
need_type_split "$TYPE_SPLIT"
WORK=${WORK:-$ROOT/work/$CORPUS}
mkdir -p "$WORK"

case $CORPUS in
  multi30k)
    PRESET=cpu-small KS=${KS:-3,6,9,18,27}
    prep=(--out "$WORK/data" --vocab-size "${VOCAB:-8000}")
    [[ -n $SRC_DIR ]] && prep+=(--src-dir "$SRC_DIR")
    bash "$RECIPES/prepare-multi30k.sh" "${prep[@]}" ;;
  iwslt14)
    PRESET=iwslt KS=${KS:-6,12,18,24,36,48}
    prep=(--out "$WORK/data" --vocab-size "${VOCAB:-10000}")
    [[ -n $ARCHIVE ]] && prep+=(--archive "$ARCHIVE")
    bash "$RECIPES/prepare-iwslt14.sh" "${prep[@]}" ;;
  *) die "--corpus must be multi30k or iwslt14" ;;
esac

base=(--data "$WORK/data" --save-dir "$WORK/baseline" --preset "$PRESET" --seed "$SEED"
      --train-args "$TRAIN_ARGS $MODEL_ARGS")
[[ -n $BASE_UPDATES ]] && base+=(--max-update "$BASE_UPDATES")
bash "$RECIPES/train-baseline.sh" "${base[@]}"

bash "$RECIPES/sweep.sh" --data "$WORK/data" --base "$WORK/baseline/checkpoint_best.pt" \
  --out "$WORK/sweep" --methods "$METHODS" --ks "$KS" --preset "$PRESET" --seed "$SEED" \
  --snapshot-interval "$SNAP" --validate-interval "$VALIDATE" --train-args "$TRAIN_ARGS" \
  --gate-args "$GATE_ARGS" --joint-args "$MODEL_ARGS $JOINT_ARGS" \
  --gen-args "$GEN_ARGS" --importance-args "$IMP_ARGS" --recovery "$RECOVERY" \
  ${TYPE_SPLIT:+--type-split "$TYPE_SPLIT"}
echo "done: $WORK/sweep/results.csv and $WORK/sweep/plots/"
