#!/usr/bin/env bash
# Multi30k (task 1) German->English: raw text -> joint sentencepiece -> fairseq binaries.
#
#   prepare-multi30k.sh [--src-dir DIR] [--out DIR] [--vocab-size N] [--max-train N]
#
# --src-dir     folder with train.{de,en}.gz, val.{de,en}.gz, test_2016_flickr.{de,en}.gz
#               (default: $MULTI30K_DIR, else ../shared/data/multi30k beside the repo if it
#               exists, else the files are downloaded from the public multi30k/dataset
#               repository)
# --out         the prepared corpus folder to write (default data/multi30k): raw/ (text),
#               spm/ (spm.model and the encoded text), bin/ (fairseq binaries); give it as
#               --data to the recipes and dsp-pick-k, and OUT/bin to fairseq-train
# --vocab-size  joint sentencepiece vocabulary size (default 8000)
# --max-train   keep only the first N training sentence pairs (default 0: all 29,000), for
#               quick experiments; valid and test are always complete
# Every step is skipped when its output already exists, so the script can be rerun.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
SRC_DIR=${MULTI30K_DIR:-}
OUT=data/multi30k
VOCAB=8000
MAX_TRAIN=0
URL=https://raw.githubusercontent.com/multi30k/dataset/master/data/task1/raw

while [[ $# -gt 0 ]]; do
  case $1 in
    --src-dir) SRC_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --vocab-size) VOCAB=$2; shift 2 ;;
    --max-train) MAX_TRAIN=$2; shift 2 ;;
    # the header comment above, without its '#' and without the code after it
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "prepare-multi30k.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

for tool in python fairseq-preprocess; do
  command -v $tool >/dev/null || { echo "error: '$tool' not found; activate the virtual environment (make install)" >&2; exit 1; }
done
if [[ -z $SRC_DIR && -d $ROOT/../shared/data/multi30k ]]; then SRC_DIR=$ROOT/../shared/data/multi30k; fi
# Fail before creating anything when the given source folder is not there.
if [[ -n $SRC_DIR && ! -d $SRC_DIR ]]; then
  echo "error: --src-dir $SRC_DIR: no such folder (expected the Multi30k raw files there; see --help)" >&2; exit 1
fi

mkdir -p "$OUT/raw" "$OUT/spm" "$OUT/bin"
declare -A NAME=([train]=train [valid]=val [test]=test_2016_flickr)

echo "[1/4] raw text -> $OUT/raw"
for split in train valid test; do
  for l in de en; do
    dst=$OUT/raw/$split.$l
    [[ -s $dst ]] && continue
    file=${NAME[$split]}.$l.gz
    if [[ -n $SRC_DIR ]]; then
      [[ -f $SRC_DIR/$file ]] || { echo "error: $SRC_DIR/$file not found (expected the Multi30k raw files there; see --help)" >&2; exit 1; }
      zcat "$SRC_DIR/$file" > "$dst.tmp"
    else
      echo "  downloading $file"
      curl -fsSL "$URL/$file" | zcat > "$dst.tmp" || { echo "error: download of $URL/$file failed; pass --src-dir for an offline copy" >&2; rm -f "$dst.tmp"; exit 1; }
    fi
    if [[ $split == train && $MAX_TRAIN -gt 0 ]]; then head -n "$MAX_TRAIN" "$dst.tmp" > "$dst"; rm "$dst.tmp"; else mv "$dst.tmp" "$dst"; fi
  done
done
wc -l "$OUT"/raw/*.de | sed 's/^/  /'

echo "[2/4] joint sentencepiece model (vocab $VOCAB)"
if [[ ! -s $OUT/spm/spm.model ]]; then
  # Text encoded by an earlier model would be reused below with a new, different
  # model: refuse rather than mix them (and delete nothing).
  stale=$(ls "$OUT"/spm/{train,valid,test}.{de,en} 2>/dev/null || true)
  if [[ -n $stale ]]; then
    echo "error: $OUT/spm/spm.model is missing but $OUT/spm holds text encoded with an earlier model;" \
      "remove $OUT/spm and $OUT/bin to prepare the data again" >&2; exit 1
  fi
  python "$ROOT/scripts/sentencepiece_prep.py" train --model-prefix "$OUT/spm/spm" --vocab-size "$VOCAB" \
    "$OUT/raw/train.de" "$OUT/raw/train.en"
fi

echo "[3/4] encode"
for split in train valid test; do
  for l in de en; do
    [[ -s $OUT/spm/$split.$l ]] || python "$ROOT/scripts/sentencepiece_prep.py" encode \
      --model "$OUT/spm/spm.model" --input "$OUT/raw/$split.$l" --output "$OUT/spm/$split.$l"
  done
done

echo "[4/4] fairseq-preprocess -> $OUT/bin"
if [[ ! -s $OUT/bin/test.de-en.en.bin ]]; then
  fairseq-preprocess --source-lang de --target-lang en --joined-dictionary \
    --trainpref "$OUT/spm/train" --validpref "$OUT/spm/valid" --testpref "$OUT/spm/test" \
    --destdir "$OUT/bin.tmp" --workers 2 > "$OUT/preprocess.log" 2>&1 \
    || { echo "error: fairseq-preprocess failed, see $OUT/preprocess.log" >&2; exit 1; }
  rm -rf "$OUT/bin" && mv "$OUT/bin.tmp" "$OUT/bin"
fi
echo "done: $OUT/bin (sentencepiece model $OUT/spm/spm.model)"
