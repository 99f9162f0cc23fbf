# shellcheck shell=bash
# Shared by the recipes in this folder (sourced, never run): error handling,
# checks of tools/files/folders, and the training presets.
#
# Presets (--preset NAME or PRESET=NAME):
#   iwslt      the paper's IWSLT14 De-En settings: transformer_iwslt_de_en (6+6 layers,
#              512/1024, 4 heads = 72 gated heads), shared decoder input/output
#              embeddings, Adam (0.9, 0.98), lr 5e-4, inverse_sqrt with 4000 warm-up
#              updates, dropout 0.3, weight decay 1e-4, label smoothing 0.1, 4096 tokens
#              per batch; beam 5 at test time.
#   cpu-small  Multi30k on a CPU: 3+3 layers, 256/1024, 4 heads (36 heads; the shape of
#              transformer_dsp_small), all embeddings shared, lr 1e-3, 400 warm-up
#              updates, dropout 0.2, 4096 tokens, --cpu.

RECIPES=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$RECIPES/../.." && pwd)
# fairseq's --user-dir: the installed plugin's folder (dsp-user-dir), else this checkout's.
PLUGIN=$(dsp-user-dir 2>/dev/null) || PLUGIN=$ROOT/dsp_fairseq
PRESETS="iwslt cpu-small"

die() { echo "$(basename "$0"): error: $*" >&2; exit 1; }
say() { echo "== [$(date +%H:%M:%S)] $*"; }

need_tool() {
  local t
  for t in "$@"; do
    command -v "$t" >/dev/null 2>&1 || die "'$t' not found on PATH; activate the project's virtual environment (make install; . .venv/bin/activate)"
  done
}
need_file() { [[ -f $1 ]] || die "$1: no such file${2:+ ($2)}"; }
need_dir() { [[ -d $1 ]] || die "$1: no such folder${2:+ ($2)}"; }
need_value() { [[ -n $2 ]] || die "$1 is required (see --help)"; }
# need_type_split VALUE: unset, or one of prune-pipelined.sh's --type-split values (sweep.sh and
# reproduce.sh pass it on: refused before any work)
need_type_split() {
  [[ -z $1 || $1 == auto || $1 == free || $1 == proportional ]] \
    || die "--type-split must be auto, free or proportional, not '$1'"
}

# A prepared corpus folder (output of prepare-*.sh): bin/, spm/spm.model, raw/.
need_data() {
  local data=$1 hint="run examples/translation/prepare-multi30k.sh or prepare-iwslt14.sh first"
  need_dir "$data" "$hint"
  compgen -G "$data/bin/dict.*.txt" >/dev/null || die "$data/bin has no dict.*.txt: not a prepared corpus folder; $hint"
  need_file "$data/spm/spm.model" "$hint"
}

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0; }

# recovery_args VAR MODE DATA "ARGS": dsp-strip's options for --recovery MODE (reconstruct:
# refit against the unpruned model on DATA/bin's training batches; none: nothing).
recovery_args() {
  local -n _rec=$1
  case $2 in
    reconstruct) _rec=(--reconstruct --data "$3/bin"); local more; split_words more "${4:-}"; _rec+=("${more[@]}") ;;
    none) _rec=() ;;
    *) die "--recovery must be reconstruct or none, not '$2'" ;;
  esac
}

# score_of DIR: the sacreBLEU in DIR/score.json (written by evaluate.sh), 2 decimals.
score_of() { python -c 'import json,sys; print("%.2f" % json.load(open(sys.argv[1]))["sacrebleu"])' "$1/score.json"; }

# chosen_of FILE: the candidate a choice file names (recovery.json, restarts.json, tune.json).
chosen_of() { python -c 'import json,sys; print(json.load(open(sys.argv[1]))["chosen"])' "$1"; }

# tuning_line DIR: the report line of tune-refit.sh's choice in DIR (tune.json: the choice and
# both validation scores).
tuning_line() {
  python - "$1/tune.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
s = t["valid_sacrebleu"]
print(f"recovery: tuned refit kept on valid if better -> {t['chosen']} "
      f"(valid sacreBLEU: untuned {s['untuned']:.2f}, tuned {s['tuned']:.2f})")
EOF
}

# Words of a string as an array (for --train-args / --gen-args).
split_words() { local -n _out=$1; read -r -a _out <<< "${2:-}"; }

# The last value of OPTION in an argument list (later options win in fairseq too).
last_value() {
  local opt=$1 value="" prev=""
  shift
  for a in "$@"; do [[ $prev == "$opt" ]] && value=$a; prev=$a; done
  echo "$value"
}

# preset_args PRESET KIND -> fills the array PRESET_ARGS.
# KIND: base (stock fairseq transformer), dsp (transformer_dsp, joint training),
# optim (optimisation settings only: pipelined pruning takes the shape of its base).
preset_args() {
  local preset=$1 kind=$2
  local -a optim arch
  case $preset in
    iwslt)
      optim=(--optimizer adam --adam-betas "(0.9, 0.98)" --clip-norm 0.0 --lr 5e-4
             --lr-scheduler inverse_sqrt --warmup-updates 4000 --dropout 0.3 --weight-decay 0.0001
             --max-tokens 4096 --label-smoothing 0.1 --log-interval 100)
      case $kind in
        base) arch=(--arch transformer_iwslt_de_en --share-decoder-input-output-embed) ;;
        dsp) arch=(--arch transformer_dsp_iwslt_de_en --share-decoder-input-output-embed) ;;
      esac ;;
    cpu-small)
      optim=(--optimizer adam --adam-betas "(0.9, 0.98)" --clip-norm 0.0 --lr 1e-3
             --lr-scheduler inverse_sqrt --warmup-updates 400 --dropout 0.2 --weight-decay 0.0001
             --max-tokens 4096 --label-smoothing 0.1 --log-interval 50 --cpu)
      case $kind in
        base) arch=(--arch transformer --encoder-layers 3 --decoder-layers 3
                    --encoder-embed-dim 256 --decoder-embed-dim 256
                    --encoder-ffn-embed-dim 1024 --decoder-ffn-embed-dim 1024
                    --encoder-attention-heads 4 --decoder-attention-heads 4 --share-all-embeddings) ;;
        dsp) arch=(--arch transformer_dsp_small --share-all-embeddings) ;;
      esac ;;
    *) die "unknown preset '$preset'; choose one of: $PRESETS" ;;
  esac
  PRESET_ARGS=("${arch[@]}" "${optim[@]}")
}

# Dropout of the short fine-tune of a pruned model (finetune-pruned.sh): measured on Multi30k
# (cpu-small: 0.1 beats the training dropout 0.2 on valid at K = 9, 18, 36); iwslt keeps its
# training dropout, not measured.
preset_finetune_dropout() { case $1 in iwslt) echo 0.3 ;; cpu-small) echo 0.1 ;; esac; }

# Constant learning rate of the short fine-tune (finetune-pruned.sh --lr, after 20 warm-up
# updates): measured on Multi30k (cpu-small: 5e-4 level with 3e-4 over 22 paired runs, a hair
# ahead on both test and valid, bench/RESULTS.md "The fine-tune's learning rate"; 3e-4 had
# beaten a decayed 5e-4 and a constant 1e-4); iwslt keeps 3e-4, not measured.
preset_finetune_lr() { case $1 in iwslt) echo 3e-4 ;; cpu-small) echo 5e-4 ;; esac; }

# Checkpoints averaged into the model of the short fine-tune (finetune-pruned.sh --average-last):
# measured on Multi30k (cpu-small: the last 3 of a checkpoint every tenth of the run beat the
# final model on valid on average, bench/RESULTS.md "Averaging the last checkpoints"); iwslt keeps
# the best checkpoint, not measured.
preset_finetune_average() { case $1 in iwslt) echo 1 ;; cpu-small) echo 3 ;; esac; }

# Default number of training updates per preset (baseline and joint DSP).
preset_max_update() { case $1 in iwslt) echo 50000 ;; cpu-small) echo 4000 ;; esac; }

# run_train LOG ARGS...: fairseq-train with the whole log appended to LOG (JSON lines),
# progress (validation lines) on the console; the log's tail on failure.
run_train() {
  local log=$1
  shift
  # appended, so that a resumed run keeps the log of the part before the interruption
  if ! fairseq-train "$@" >> "$log" 2>&1; then
    tail -n 25 "$log" >&2
    die "fairseq-train failed; full log: $log"
  fi
  grep -E '\| valid \|' "$log" | tail -n 1 | sed 's/^/  last validation: /' || true
}

# importance_scores BASE DATA SCORES "IMP-ARGS": head-importance scores of BASE on the
# validation data of DATA/bin, written once to SCORES (kept when already there, if computed
# at the granularity IMP-ARGS asks for: the gate init's sentence scores and the importance
# rows' token scores must not stand in for each other)
importance_scores() {
  local base=$1 data=$2 scores=$3 imp want have
  split_words imp "$4"
  want=$(last_value --granularity ${imp[@]+"${imp[@]}"})
  want=${want:-token}  # dsp-importance's default
  if [[ -s $scores ]]; then
    have=$(python -c 'import json,sys; print(json.load(open(sys.argv[1]))["metadata"].get("granularity", "token"))' "$scores" 2>/dev/null) \
      || die "$scores is not a dsp-importance scores file; remove it or name another file"
    [[ $have == "$want" ]] || die "$scores holds $have-level importance scores, this call needs $want-level ones; remove it or name another file"
    return 0
  fi
  say "head importance ($want level) of $base on the validation data -> $scores"
  mkdir -p "$(dirname "$scores")"
  dsp-importance --path "$base" --data "$data/bin" --output "$scores" ${imp[@]+"${imp[@]}"} \
    || die "dsp-importance failed (see the message above)"
}
