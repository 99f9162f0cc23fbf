#!/usr/bin/env bash
# End-to-end demo: Multi30k De->En, train transformer_dsp_small keeping K = 9 of its
# 36 heads (a quarter), strip the pruned heads, decode the 2016 test set with the
# masked and the stripped model, and compare BLEU, heads, parameters and decode time.
#
#   bash scripts/demo_multi30k.sh            (or: make demo)
#
# Environment: MULTI30K_DIR (raw corpus folder; default ../shared/data/multi30k or a
# download), WORK (default work/demo), MAX_UPDATE (default 500), THREADS (default: all).
# Finished steps are skipped when the script is rerun.
set -euo pipefail
export PYTHONUNBUFFERED=1  # progress lines appear as they happen, through tee and grep
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
WORK=${WORK:-$ROOT/work/demo}
DATA=$ROOT/work/multi30k
MAX_UPDATE=${MAX_UPDATE:-500}
K=9
PLUGIN=$(dsp-user-dir)  # the installed plugin's folder, for fairseq's --user-dir
mkdir -p "$WORK"
SECONDS=0
say() { printf '\n=== [%3dm%02ds] %s\n' $((SECONDS / 60)) $((SECONDS % 60)) "$*"; }

say "1/5 data: Multi30k -> sentencepiece -> fairseq binaries"
bash "$ROOT/examples/translation/prepare-multi30k.sh" --out "$DATA" --vocab-size 6000 \
  ${MULTI30K_DIR:+--src-dir "$MULTI30K_DIR"}

say "2/5 train transformer_dsp_small, DSP gates, K=$K of 36 heads ($MAX_UPDATE updates)"
if [[ ! -f $WORK/checkpoints/.done-$MAX_UPDATE ]]; then
  fairseq-train "$DATA/bin" --user-dir "$PLUGIN" --task translation_dsp \
    --arch transformer_dsp_small --share-all-embeddings --heads-to-keep $K \
    --criterion dsp_label_smoothed_cross_entropy --label-smoothing 0.1 \
    --optimizer adam --adam-betas '(0.9, 0.98)' --lr 1e-3 --lr-scheduler inverse_sqrt \
    --warmup-updates 100 --weight-decay 1e-4 --dropout 0.2 --max-tokens 4096 \
    --max-update "$MAX_UPDATE" --save-dir "$WORK/checkpoints" --no-epoch-checkpoints \
    --required-batch-size-multiple 1 --cpu --seed 1 --log-format simple --log-interval 50 \
    --validate-interval-updates 250 --save-interval-updates 250 --keep-interval-updates 1 \
    --tensorboard-logdir "$WORK/tb" \
    2>&1 | tee "$WORK/train.log" | grep --line-buffered -E "\| (train_inner|valid|train) \||error|Error"
  touch "$WORK/checkpoints/.done-$MAX_UPDATE"
fi

say "3/5 strip the pruned heads"
dsp-strip --input "$WORK/checkpoints/checkpoint_last.pt" --output "$WORK/checkpoints/pruned.pt" --force \
  > "$WORK/strip.txt"
tail -n 2 "$WORK/strip.txt"  # the full table is in the results below

say "4/5 decode the 2016 test set (beam 5, batch 64) with both models"
for name in masked stripped; do
  ckpt=$WORK/checkpoints/checkpoint_last.pt
  [[ $name == stripped ]] && ckpt=$WORK/checkpoints/pruned.pt
  start=$(date +%s.%N)
  fairseq-generate "$DATA/bin" --user-dir "$PLUGIN" --path "$ckpt" --gen-subset test \
    --beam 5 --batch-size 64 --required-batch-size-multiple 1 --cpu --bpe sentencepiece \
    --sentencepiece-model "$DATA/spm/spm.model" \
    > "$WORK/gen.$name.txt" 2> "$WORK/gen.$name.log"
  python -c "print(round($(date +%s.%N) - $start, 2))" > "$WORK/time.$name"
  grep ^D- "$WORK/gen.$name.txt" | sort -t- -k2 -n | cut -f3 > "$WORK/hyp.$name.en"
  echo "  $name: $(wc -l < "$WORK/hyp.$name.en") sentences in $(cat "$WORK/time.$name") s"
done

say "5/5 results"
python "$ROOT/scripts/demo_report.py" --work "$WORK" --ref "$DATA/raw/test.en"
