#!/usr/bin/env bash
# IWSLT14 German->English, the standard split (as fairseq's prepare-iwslt14.sh):
#   train = train.tags.de-en without XML markup, Moses-tokenized, lowercased, cleaned
#           (1..175 tokens, length ratio <= 1.5), minus every 23rd pair, which goes to valid;
#   test  = IWSLT14.TED.dev2010 + IWSLT14.TEDX.dev2012 + IWSLT14.TED.tst2010..tst2012.
# About 160k / 7.3k / 6.75k pairs. Then a joint sentencepiece model and fairseq binaries
# with one joined dictionary.
#
#   prepare-iwslt14.sh [--archive de-en.tgz | --orig-dir DIR] [--out DIR] [--vocab-size N]
#
# --archive   a local copy of de-en.tgz (for machines without internet access); without
#             it (and without --orig-dir) the archive is downloaded from --url into OUT/orig/.
# --orig-dir  the archive already extracted (the folder holding train.tags.de-en.de).
# --out       output folder (default data/iwslt14): raw/ (untokenized, original case),
#             tok/ (tokenized, lowercased), spm/ (sentencepiece model + pieces), bin/.
# --vocab-size  joint sentencepiece vocabulary (default 10000).
# --url       download location (default the copy fairseq's script uses).
# Every step is skipped when its output exists, so the script can be rerun.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

OUT=data/iwslt14
VOCAB=10000
ARCHIVE=""
ORIG_DIR=""
URL=http://dl.fbaipublicfiles.com/fairseq/data/iwslt14/de-en.tgz
while [[ $# -gt 0 ]]; do
  case $1 in
    --archive) ARCHIVE=$2; shift 2 ;;
    --orig-dir) ORIG_DIR=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --vocab-size) VOCAB=$2; shift 2 ;;
    --url) URL=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
[[ -n $ARCHIVE && -n $ORIG_DIR ]] && die "give --archive or --orig-dir, not both"
need_tool python fairseq-preprocess
python -c "import sacremoses, sentencepiece" 2>/dev/null \
  || die "python packages sacremoses and sentencepiece are needed (pip install -r requirements.txt)"
[[ -z $ARCHIVE ]] || need_file "$ARCHIVE" "--archive: expected the IWSLT14 de-en.tgz"
[[ -z $ORIG_DIR ]] || need_dir "$ORIG_DIR" "--orig-dir: expected the extracted de-en folder"

mkdir -p "$OUT"/{orig,text,tok,raw,spm,bin}
S=$ROOT/scripts
done_files() { local f; for f in "$@"; do [[ -s $f ]] || return 1; done; }

say "[1/6] archive"
if [[ -z $ARCHIVE && -z $ORIG_DIR ]]; then
  ARCHIVE=$OUT/orig/de-en.tgz
  if [[ ! -s $ARCHIVE ]]; then
    need_tool curl
    echo "  downloading $URL"
    curl -fL --retry 3 -o "$ARCHIVE.tmp" "$URL" \
      || { rm -f "$ARCHIVE.tmp"; die "download of $URL failed; on an offline machine pass --archive PATH/de-en.tgz"; }
    mv "$ARCHIVE.tmp" "$ARCHIVE"
  fi
fi
echo "  ${ARCHIVE:-$ORIG_DIR}"

say "[2/6] remove XML markup -> $OUT/text"
if ! done_files "$OUT"/text/{train,test}.{de,en}; then
  if [[ -n $ARCHIVE ]]; then src=(--archive "$ARCHIVE"); else src=(--orig-dir "$ORIG_DIR"); fi
  python "$S/iwslt14_text.py" extract "${src[@]}" --out "$OUT/text"
fi

say "[3/6] Moses tokenization + lowercasing -> $OUT/tok"
for l in de en; do
  done_files "$OUT/tok/train.all.$l" "$OUT/tok/test.$l" || python "$S/moses_text.py" tokenize \
    --lang $l "$OUT/text/train.$l" "$OUT/tok/train.all.$l" "$OUT/text/test.$l" "$OUT/tok/test.$l"
done

say "[4/6] clean (1..175 tokens, ratio 1.5) and split (every 23rd pair -> valid)"
if ! done_files "$OUT"/tok/{train,valid}.{de,en} "$OUT"/raw/{train,valid,test}.{de,en}; then
  python "$S/iwslt14_text.py" clean-split --tok-dir "$OUT/tok" --raw-dir "$OUT/raw" --text-dir "$OUT/text"
fi
for split in train valid test; do echo "  $split: $(wc -l < "$OUT/tok/$split.de") pairs"; done

say "[5/6] joint sentencepiece model (vocab $VOCAB) and encoding"
if [[ ! -s $OUT/spm/spm.model ]]; then
  # Pieces encoded with an earlier model must not be mixed with a new model's.
  stale=$(ls "$OUT"/spm/{train,valid,test}.{de,en} 2>/dev/null || true)
  [[ -z $stale ]] || die "$OUT/spm/spm.model is missing but $OUT/spm holds text encoded with an earlier model; remove $OUT/spm and $OUT/bin and rerun"
  python "$S/sentencepiece_prep.py" train --model-prefix "$OUT/spm/spm" --vocab-size "$VOCAB" \
    "$OUT/tok/train.de" "$OUT/tok/train.en"
fi
for split in train valid test; do
  for l in de en; do
    [[ -s $OUT/spm/$split.$l ]] || python "$S/sentencepiece_prep.py" encode \
      --model "$OUT/spm/spm.model" --input "$OUT/tok/$split.$l" --output "$OUT/spm/$split.$l"
  done
done

say "[6/6] fairseq-preprocess --joined-dictionary -> $OUT/bin"
if [[ ! -s $OUT/bin/test.de-en.en.bin ]]; then
  rm -rf "$OUT/bin.tmp"
  fairseq-preprocess --source-lang de --target-lang en --joined-dictionary \
    --trainpref "$OUT/spm/train" --validpref "$OUT/spm/valid" --testpref "$OUT/spm/test" \
    --destdir "$OUT/bin.tmp" --workers 2 > "$OUT/preprocess.log" 2>&1 \
    || die "fairseq-preprocess failed, see $OUT/preprocess.log"
  rm -rf "$OUT/bin" && mv "$OUT/bin.tmp" "$OUT/bin"
fi
echo "done: $OUT/bin (sentencepiece model $OUT/spm/spm.model, references $OUT/raw and $OUT/tok)"
