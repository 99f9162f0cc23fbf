#!/usr/bin/env bash
# Experiment for the H/4 fine-tune gap of the converged table: instead of pipelined DSP
# (gates on the frozen model) followed by a fine-tune with the heads fixed, train DSP's gates
# and the weights together, starting from the converged baseline (the paper's "joint" mode,
# started from a trained model as it does for BERT), then strip.
#
#   bash bench/dsp_joint_finetune.sh [--converged DIR] [--ks 18] [--updates 405] [--seed 1]
#
# --converged  the work folder of run_converged_bench.sh (default work/converged): its
#              data/, baseline/checkpoint_best.pt and sweep/pipelined.args are used
# --updates    training updates at 4096 tokens (default 405: three epochs; the pipelined
#              gate epoch at 1024 tokens plus the 270-update fine-tune cost about the same)
# The gate schedule is `joint` (t 0.1 -> 1e-8 over the first 75% of the run, gate lr 0.2);
# the weights train with the fine-tune's constant lr 3e-4. Every row: the checkpoint with the
# best validation loss (under the test mask) is stripped and scored on test and valid like
# the table's rows. Output: WORK/joint-finetune/k<K>-seed<S>/, a summary in
# bench/converged/joint-finetune/results.md (+ .json); wall times in its wall_time.txt.
# Resumable: a finished row is skipped, an interrupted one resumes from checkpoint_last.pt.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$ROOT/examples/translation/recipe-lib.sh"
WORK=$ROOT/work/converged KS=18 UPDATES=405 SEED=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --converged) WORK=$2; shift 2 ;;
    --ks) KS=$2; shift 2 ;;
    --updates) UPDATES=$2; shift 2 ;;
    --seed) SEED=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
  esac
done
BASE=$WORK/baseline/checkpoint_best.pt
need_tool fairseq-train dsp-strip
need_file "$BASE" "run bench/run_converged_bench.sh --stage baseline first"
need_file "$WORK/sweep/pipelined.args" "run bench/run_converged_bench.sh first (its table stage writes it)"
need_data "$WORK/data"
OUT=$ROOT/bench/converged/joint-finetune
mkdir -p "$OUT"
preset_args cpu-small optim
mapfile -t SHAPE < "$WORK/sweep/pipelined.args"
IFS=, read -ra K_LIST <<< "$KS"
for k in "${K_LIST[@]}"; do
  row=$WORK/joint-finetune/k$k-seed$SEED
  mkdir -p "$row"
  start=$SECONDS
  if [[ ! -f $row/.done ]]; then
    say "DSP gates and weights together from $BASE, K=$k, $UPDATES updates -> $row"
    run_train "$row/train.log" "$WORK/data/bin" --user-dir "$PLUGIN" --task translation_dsp "${PRESET_ARGS[@]}" \
      --lr-scheduler fixed --warmup-updates 20 --lr 3e-4 "${SHAPE[@]}" --finetune-from-model "$BASE" \
      --gate-type dsp --gate-schedule joint --heads-to-keep "$k" \
      --criterion dsp_label_smoothed_cross_entropy --max-update "$UPDATES" --save-dir "$row" \
      --no-epoch-checkpoints --seed "$SEED" --log-format json
    touch "$row/.done"
  fi
  if [[ ! -s $row/pruned.pt || ! -s $row/strip.txt ]]; then
    dsp-strip --input "$row/checkpoint_best.pt" --output "$row/pruned.pt" --force > "$row/strip.txt.tmp"
    mv "$row/strip.txt.tmp" "$row/strip.txt"
  fi
  bash "$RECIPES/evaluate.sh" --data "$WORK/data" --checkpoint "$row/pruned.pt" --out "$row/eval"
  bash "$RECIPES/evaluate.sh" --data "$WORK/data" --checkpoint "$row/pruned.pt" --out "$row/eval-valid" \
    --subset valid
  echo "k$k-seed$SEED: $((SECONDS - start)) s ($(date -u +%FT%TZ))" >> "$OUT/wall_time.txt"
done
python - "$WORK/joint-finetune" "$OUT" "$UPDATES" <<'EOF'
import glob, json, os, sys
rows = []
for d in sorted(glob.glob(os.path.join(sys.argv[1], "k*-seed*"))):
    if not os.path.exists(os.path.join(d, "eval-valid", "score.json")):
        continue
    score = lambda sub: json.load(open(os.path.join(d, sub, "score.json")))["sacrebleu"]
    layout = [ln.split()[:3] for ln in open(os.path.join(d, "strip.txt")) if ln.split()[:1] and ln.split()[0] in ("enc-self", "dec-self", "cross")]
    kept = {}
    for kind, _, frac in layout:
        kept[kind] = kept.get(kind, 0) + int(frac.split("/")[0])
    k, seed = os.path.basename(d)[1:].split("-seed")
    rows.append({"k": int(k), "seed": int(seed), "test": score("eval"), "valid": score("eval-valid"), "kept": kept})
json.dump(rows, open(os.path.join(sys.argv[2], "results.json"), "w"), indent=1)
with open(os.path.join(sys.argv[2], "results.md"), "w") as f:
    f.write(f"DSP gates and weights trained together from the converged baseline, {sys.argv[3]} updates "
            "(bench/dsp_joint_finetune.sh). sacreBLEU, beam 5.\n\n"
            "| K | seed | test | valid | heads kept (enc-self / dec-self / cross) |\n|---:|---:|---:|---:|---|\n")
    for r in rows:
        kept = " / ".join(str(r["kept"].get(t, 0)) for t in ("enc-self", "dec-self", "cross"))
        f.write(f"| {r['k']} | {r['seed']} | {r['test']:.2f} | {r['valid']:.2f} | {kept} |\n")
print(open(os.path.join(sys.argv[2], "results.md")).read())
EOF
