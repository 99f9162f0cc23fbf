#!/usr/bin/env bash
# Sweep pruning methods x heads kept (K) on one trained baseline; one results table.
#
#   sweep.sh --data DIR --base BASE.pt --out DIR [--methods LIST] [--ks LIST]
#            [--preset iwslt|cpu-small] [--seed S] [--l0-penalty X] [--snapshot-interval N]
#            [--validate-interval N] [--train-args "ARGS"] [--gate-args "ARGS"]
#            [--joint-args "ARGS"] [--gen-args "ARGS"]
#            [--importance-args "ARGS"] [--no-plots]
#
# --methods  comma-separated (default dsp,ste,hard-concrete,importance,random):
#              dsp, dsp-st, ste, hard-concrete   pipelined: gates trained one epoch on the
#                                                frozen baseline (prune-pipelined.sh)
#              importance, random                no training (prune-importance.sh)
#              joint-dsp                         DSP trained jointly from scratch
#                                                (train-dsp-joint.sh; --joint-args)
# --ks       comma-separated heads to keep (default 6,12,18,24,36,48)
# --train-args  fairseq-train arguments for every training run (pipelined and joint)
# --gate-args   fairseq-train arguments for pipelined gate training only (e.g.
#               "--max-tokens 1024 --init-temperature 1 --final-temperature 1e-3")
# --joint-args  fairseq-train arguments for joint-dsp only (e.g. --max-update 20000)
# --gen-args    fairseq-generate arguments (e.g. --max-len-b 50)
# --importance-args  dsp-importance arguments (e.g. --max-batches 100)
# --snapshot-interval N  keep gate checkpoints every N updates (gate-evolution plots)
# --validate-interval N  pipelined runs validate every N updates and strip their best gates
# Output: OUT/results.csv and OUT/results.json (one row per method and K: heads kept,
# parameters, sacreBLEU, tokenized BLEU), OUT/baseline.json (the unpruned model's scores),
# OUT/runs/METHOD-kK/ (checkpoints, logs, translations), OUT/plots/ (BLEU vs heads kept,
# kept-head maps, gate evolution; PNG and SVG). Rows already in the table are skipped, so
# an interrupted sweep resumes where it stopped.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" BASE="" OUT="" METHODS=dsp,ste,hard-concrete,importance,random KS=6,12,18,24,36,48
PRESET=${PRESET:-iwslt} SEED=1 L0=0.01 SNAP=0 VALIDATE=0 TRAIN_ARGS="" GATE_ARGS="" JOINT_ARGS="" GEN_ARGS="" IMP_ARGS="" PLOTS=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --data) DATA=$2; shift 2 ;;
    --base) BASE=$2; shift 2 ;;
    --out) OUT=$2; shift 2 ;;
    --methods) METHODS=$2; shift 2 ;;
    --ks) KS=$2; shift 2 ;;
    --preset) PRESET=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    --l0-penalty) L0=$2; shift 2 ;;
    --snapshot-interval) SNAP=$2; shift 2 ;;
    --validate-interval) VALIDATE=$2; shift 2 ;;
    --train-args) TRAIN_ARGS=$2; shift 2 ;;
    --gate-args) GATE_ARGS=$2; shift 2 ;;
    --joint-args) JOINT_ARGS=$2; shift 2 ;;
    --gen-args) GEN_ARGS=$2; shift 2 ;;
    --importance-args) IMP_ARGS=$2; shift 2 ;;
    --no-plots) PLOTS=0; shift ;;
    -h|--help) usage ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
need_value --data "$DATA"
need_value --base "$BASE"
need_value --out "$OUT"
need_tool python fairseq-train fairseq-generate dsp-strip
need_data "$DATA"
need_file "$BASE" "--base: the trained baseline checkpoint"
preset_args "$PRESET" optim
IFS=, read -r -a METHOD_LIST <<< "$METHODS"
IFS=, read -r -a K_LIST <<< "$KS"
[[ ${#METHOD_LIST[@]} -gt 0 && ${#K_LIST[@]} -gt 0 ]] || die "--methods and --ks must not be empty"
for k in "${K_LIST[@]}"; do [[ $k =~ ^[0-9]+$ && $k -gt 0 ]] || die "--ks: '$k' is not a positive number"; done
TABLE=$OUT/results
R="python $ROOT/scripts/results_table.py"

# Check every method before spending compute on any of them.
gates=()
for m in "${METHOD_LIST[@]}"; do
  case $m in
    dsp|dsp-st|ste|hard-concrete) gates+=("$m") ;;
    joint-dsp) ;;
    importance) need_tool dsp-importance ;;
    random) dsp-strip --help 2>/dev/null | grep -q -- --random \
              || die "method random: this dsp-strip has no --random option (pip install -e .)" ;;
    *) die "unknown method '$m'; choose from dsp, dsp-st, ste, hard-concrete, importance, random, joint-dsp" ;;
  esac
done
mkdir -p "$OUT/runs"
if [[ ${#gates[@]} -gt 0 && ! -s $OUT/pipelined.args ]]; then
  split_words USER_ARGS "$TRAIN_ARGS $GATE_ARGS"
  max_tokens=$(last_value --max-tokens "${PRESET_ARGS[@]}" "${USER_ARGS[@]}")
  update_freq=$(last_value --update-freq "${PRESET_ARGS[@]}" "${USER_ARGS[@]}")
  say "model shape of $BASE and updates per epoch"
  python -m dsp_fairseq.recipes.pipelined_args --base "$BASE" --data "$DATA/bin" \
    --max-tokens "$max_tokens" --update-freq "${update_freq:-1}" \
    --gate-type "$(IFS=,; echo "${gates[*]}")" > "$OUT/pipelined.args.tmp" \
    || die "cannot set up pipelined pruning (see above)"
  mv "$OUT/pipelined.args.tmp" "$OUT/pipelined.args"
fi

say "unpruned baseline"
bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$BASE" --out "$OUT/baseline" \
  --gen-args "$GEN_ARGS"
cp -p "$OUT/baseline/score.json" "$OUT/baseline.json"  # -p: plots stay up to date

for m in "${METHOD_LIST[@]}"; do
  for k in "${K_LIST[@]}"; do
    if $R has --table "$TABLE" --method "$m" --k "$k"; then
      say "skip $m K=$k: already in $TABLE.csv"
      continue
    fi
    row=$OUT/runs/$m-k$k
    mkdir -p "$row"
    start=$SECONDS
    say "== $m, K=$k"
    case $m in
      dsp|dsp-st|ste|hard-concrete)
        bash "$RECIPES/prune-pipelined.sh" --data "$DATA" --base "$BASE" --heads-to-keep "$k" \
          --gate-type "$m" --save-dir "$row" --preset "$PRESET" --l0-penalty "$L0" \
          --snapshot-interval "$SNAP" --validate-interval "$VALIDATE" \
          --args-file "$OUT/pipelined.args" --seed "$SEED" --train-args "$TRAIN_ARGS $GATE_ARGS"
        ckpt=$row/pruned.pt report=$row/strip.txt ;;
      joint-dsp)
        bash "$RECIPES/train-dsp-joint.sh" --data "$DATA" --heads-to-keep "$k" --save-dir "$row" \
          --preset "$PRESET" --seed "$SEED" --train-args "$TRAIN_ARGS $JOINT_ARGS"
        ckpt=$row/pruned.pt report=$row/strip.txt ;;
      importance|random)
        opts=()
        [[ $m == random ]] && opts=(--random --seed "$SEED")
        bash "$RECIPES/prune-importance.sh" --data "$DATA" --base "$BASE" --heads-to-keep "$k" \
          --output "$row/pruned.pt" --scores "$OUT/importance.json" \
          --importance-args "$IMP_ARGS" "${opts[@]}"
        ckpt=$row/pruned.pt report=$row/pruned.strip.txt ;;
    esac
    bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$ckpt" --out "$row/eval" \
      --gen-args "$GEN_ARGS"
    $R add --table "$TABLE" --method "$m" --k "$k" --score "$row/eval/score.json" \
      --strip-report "$report" --checkpoint "$ckpt" --seconds $((SECONDS - start))
  done
done

say "results: $TABLE.csv, $TABLE.json"
$R show --table "$TABLE"
if [[ $PLOTS == 1 ]]; then
  say "plots -> $OUT/plots"
  python -m dsp_fairseq.plots.report --sweep "$OUT" || die "plotting failed (see above)"
fi
