#!/usr/bin/env bash
# Translate a test set with a checkpoint (masked, stripped or a stock baseline) and score it
# with sacreBLEU on detokenized output and with the tokenized BLEU of the paper's tables.
#
#   evaluate.sh --data DIR --checkpoint CKPT --out DIR [--subset test] [--beam 5]
#               [--gen-args "ARGS"]
#
# --data    prepared corpus folder (bin/, spm/spm.model, raw/ and, for IWSLT14, tok/)
# --out     folder for gen.txt (fairseq-generate output), hyp.detok.en, hyp.tok.en and
#           score.json: {"sacrebleu": ..., "tok_bleu": ..., labels, sacreBLEU signature}
# --gen-args  more fairseq-generate arguments (e.g. --max-len-b 50 --batch-size 32 --cpu)
# Skipped when OUT/score.json is newer than the checkpoint and was made by the same call
# (checkpoint, subset, beam, --gen-args: recorded in OUT/decode.args); any change decodes again.
# (A folder scored before decode.args existed is reused for the same checkpoint, beam and
# subset, read from fairseq-generate's logged configuration in OUT/gen.log.)
# --required-batch-size-multiple 1: with fairseq's default (8) batching drops the last
# (N mod 8) sentences of the test set (fairseq issues #5036, #5351).
#
# sacreBLEU: the D- lines (sentencepiece decoded; for a Moses-tokenized lowercased corpus
# also Moses-detokenized) against the untokenized reference raw/SUBSET.en (case-insensitive
# for a lowercased corpus). Tokenized BLEU: Moses-tokenized lowercased hypotheses against
# the Moses-tokenized lowercased reference, no further tokenization (multi-bleu.perl).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" CKPT="" OUT="" SUBSET=test BEAM=5 GEN_ARGS=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --checkpoint) CKPT=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --subset) SUBSET=$2; shift 2 ;;
    --beam) BEAM=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --checkpoint "$CKPT"
need_value --out "$OUT"
need_tool python fairseq-generate
need_data "$DATA"
need_file "$CKPT" "--checkpoint"
need_file "$DATA/raw/$SUBSET.en" "the untokenized reference"
split_words USER_ARGS "$GEN_ARGS"
mkdir -p "$OUT"

# what the decode depends on besides the checkpoint's contents (its mtime covers those)
# (the checkpoint's real path: a sweep's +best row links to the model it chose, and its copied
# scores stay valid)
real_path() { python -c 'import os,sys; print(os.path.realpath(sys.argv[1]))' "$1"; }
SETTINGS=$(printf '%s\n' "checkpoint $(real_path "$CKPT")" "subset $SUBSET" "beam $BEAM" "gen-args $GEN_ARGS")
up_to_date() {
  [[ -s $OUT/score.json && $OUT/score.json -nt $CKPT ]] || return 1
  if [[ -f $OUT/decode.args ]]; then
    [[ $(< "$OUT/decode.args") == "$SETTINGS" ]]
  else  # scored before decode.args existed: the same checkpoint, and the beam and subset in
    # the configuration fairseq-generate logged (its --gen-args cannot be told apart)
    python - "$OUT/score.json" "$CKPT" "$OUT/gen.log" "$BEAM" "$SUBSET" <<'EOF'
import json, os, sys
score, ckpt, log, beam, subset = sys.argv[1:]
scored = json.load(open(score)).get("checkpoint") or ""
config = open(log, encoding="utf-8", errors="replace").read() if os.path.isfile(log) else ""
sys.exit(not (os.path.realpath(scored) == os.path.realpath(ckpt)
              and f"'beam': {beam}," in config and f"'gen_subset': '{subset}'," in config))
EOF
  fi
}
if up_to_date; then
  say "$OUT/score.json is up to date"
else
  rm -f "$OUT/decode.args"
  say "translate $SUBSET with $CKPT (beam $BEAM)"
  if ! fairseq-generate "$DATA/bin" --user-dir "$PLUGIN" --path "$CKPT" --gen-subset "$SUBSET" \
      --beam "$BEAM" --batch-size 128 --required-batch-size-multiple 1 --bpe sentencepiece \
      --sentencepiece-model "$DATA/spm/spm.model" "${USER_ARGS[@]}" \
      > "$OUT/gen.txt.tmp" 2> "$OUT/gen.log"; then
    tail -n 15 "$OUT/gen.log" >&2
    die "fairseq-generate failed; full log: $OUT/gen.log"
  fi
  mv "$OUT/gen.txt.tmp" "$OUT/gen.txt"
  python "$ROOT/scripts/bleu_eval.py" --generate-output "$OUT/gen.txt" --data "$DATA" \
    --subset "$SUBSET" --output "$OUT/score.json" --checkpoint "$CKPT" > /dev/null \
    || die "scoring failed (see the message above)"
  echo "$SETTINGS" > "$OUT/decode.args"
fi
python - "$OUT/score.json" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"  {s['sacrebleu_label']}: {s['sacrebleu']:.2f}  [{s['sacrebleu_signature']}]")
print(f"  {s['tok_bleu_label']}: {s['tok_bleu']:.2f}")
EOF
