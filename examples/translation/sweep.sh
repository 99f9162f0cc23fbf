#!/usr/bin/env bash
# Sweep pruning methods x heads kept (K) on one trained baseline; one results table.
#
#   sweep.sh --data DIR --base BASE.pt --out DIR [--methods LIST] [--ks LIST]
#            [--preset iwslt|cpu-small] [--seed S] [--l0-penalty X] [--snapshot-interval N]
#            [--validate-interval N] [--train-args "ARGS"] [--gate-args "ARGS"]
#            [--joint-args "ARGS"] [--gen-args "ARGS"] [--finetune-updates N] [--valid]
#            [--importance-args "ARGS"] [--recovery reconstruct|tuned|none]
#            [--reconstruct-args "ARGS"] [--tune-args "ARGS"] [--gate-objective distill|labels]
#            [--gate-init importance|none] [--restarts N] [--restart-jobs J|auto]
#            [--restart-metric bleu|nll] [--gate-epochs N] [--type-split auto|free|proportional]
#            [--no-plots]
#
# --methods  comma-separated (default dsp,ste,hard-concrete,importance,random):
#              dsp, dsp-st, ste, hard-concrete   pipelined: gates trained one epoch on the
#                                                baseline (prune-pipelined.sh, its default
#                                                "pipelined" schedule and gate objective)
#              dsp-ref                           DSP gates with the reference schedule
#                                                (prune-pipelined.sh --schedule reference)
#              importance, random                no training (prune-importance.sh)
#              importance-iter                   iterative importance (dsp-importance
#                                                --iterative, re-estimated down to K)
#              joint-dsp                         DSP trained jointly from scratch
#                                                (train-dsp-joint.sh; --joint-args)
#              METHOD+ft (e.g. dsp+ft)           METHOD's stripped model of the same K after
#                                                a short fine-tune with its kept heads fixed
#                                                (finetune-pruned.sh, --finetune-updates N,
#                                                default 270, --finetune-dropout P,
#                                                --finetune-lr LR and
#                                                --finetune-average-last N, default the
#                                                recipe's; the same for every method);
#                                                list it after METHOD
#              METHOD+rec (e.g. dsp+rec)         METHOD's stripped model refit against the
#                                                unpruned model (dsp-reconstruct, no
#                                                training; --reconstruct-args)
#              METHOD+kd                         as +ft, distilled from the unpruned model
#                                                (finetune-pruned.sh --teacher BASE)
#              METHOD+best                       the better on valid of METHOD and METHOD+rec
#                                                (needs --valid; list both before it): the
#                                                rows of prune-pipelined.sh --recovery
#                                                best (the default tunes after it)
#              METHOD+tuned                      the tuned refit of METHOD's model
#                                                (tune-refit.sh: every transformer layer
#                                                trained towards the unpruned model for one epoch,
#                                                kept if it decodes valid better; the
#                                                recipes' --recovery tuned; with --valid
#                                                its valid score is the tuning's, not
#                                                decoded again), e.g.
#                                                importance+rec+tuned, dsp+best+tuned
#              suffixes chain: dsp+rec+kd is the distilled fine-tune of dsp+rec; list a
#              row after the row it starts from
# --recovery reconstruct|tuned|none  reconstruct (default): every selection method listed
#              without a suffix also gets its METHOD+rec row (the refit: no training, a
#              minute or two per row); tuned: METHOD+rec and METHOD+rec+tuned rows (the tuned
#              refit of prune-importance.sh's default --recovery tuned; about 6 more minutes
#              per row on 2 cores; prune-pipelined.sh's one command is dsp+best+tuned, listed
#              with --valid); none: only the rows listed
# --reconstruct-args  dsp-reconstruct options for +rec rows (e.g. --calibration-batches 50)
# --tune-args  tune-refit.sh options for +tuned rows (e.g. "--dropout 0 --lr 1e-4")
# --ks       comma-separated heads to keep (default 6,12,18,24,36,48)
# --train-args  fairseq-train arguments for every training run (pipelined and joint)
# --gate-objective  what pipelined gates train on (prune-pipelined.sh --gate-objective;
#               default: distill for dsp, labels for the other gate types)
# --gate-init   where pipelined gate logits start (prune-pipelined.sh --gate-init; default:
#               importance for dsp gates on distill, from OUT/gate-init-scores.json, head
#               importance per sentence, computed once for every pipelined row; the importance
#               rows score per token, in OUT/importance.json)
# --restarts N  each pipelined row trains its gates N times (seeds S..S+N-1) and keeps the
#               run whose stripped model decodes the validation set best
#               (prune-pipelined.sh --restarts N --recovery none: the +rec and +best rows
#               then start from the chosen run); default 1
# --restart-jobs J|auto  how many of those runs train at once (prune-pipelined.sh; default auto)
# --restart-metric bleu|nll  what the restarts choose by (prune-pipelined.sh; default bleu):
#               nll keeps the run whose stripped model has the lowest validation NLL
# --gate-epochs N  epochs of gate training of every pipelined row (prune-pipelined.sh; default 1)
# --type-split auto|free|proportional  how every pipelined row shares K among the attention types
#               (prune-pipelined.sh --type-split; default: its default)
# --gate-args   fairseq-train arguments for pipelined gate training only; they override
#               the schedule (e.g. "--max-tokens 2048 --gate-lr 0.1")
# --joint-args  fairseq-train arguments for joint-dsp only (e.g. --max-update 20000)
# --gen-args    fairseq-generate arguments (e.g. --max-len-b 50)
# --importance-args  dsp-importance arguments (e.g. --max-batches 100)
# --valid       also translate and score the validation set (column valid_sacrebleu)
# --snapshot-interval N  keep gate checkpoints every N updates (gate-evolution plots)
# --validate-interval N|auto  pipelined runs validate every N updates and strip their best
#               gates (default auto: a tenth of the epoch; 0: at the end of the epoch only)
# Output: OUT/results.csv and OUT/results.json (one row per method and K: heads kept,
# parameters, sacreBLEU, tokenized BLEU), OUT/baseline.json (the unpruned model's scores),
# OUT/runs/METHOD-kK/ (checkpoints, logs, translations), OUT/plots/ (BLEU vs heads kept,
# kept-head maps, gate evolution; PNG and SVG). Rows already in the table are skipped, so
# an interrupted sweep resumes where it stopped.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/recipe-lib.sh"

DATA="" BASE="" OUT="" METHODS=dsp,ste,hard-concrete,importance,random KS=6,12,18,24,36,48
PRESET=${PRESET:-iwslt} SEED=1 L0=0.01 SNAP=0 VALIDATE=auto TRAIN_ARGS="" GATE_ARGS="" JOINT_ARGS="" GEN_ARGS="" IMP_ARGS="" PLOTS=1 FT_UPDATES=270 FT_DROPOUT="" FT_LR="" FT_AVERAGE="" VALID=0 RECOVERY=reconstruct REC_ARGS="" TUNE_ARGS=""
OBJECTIVE="" GATE_INIT="" RESTARTS=1 RESTART_JOBS=auto RESTART_METRIC=bleu GATE_EPOCHS=1 TYPE_SPLIT=""
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
    --finetune-updates) FT_UPDATES=$2; shift 2 ;;
    --finetune-dropout) FT_DROPOUT=$2; shift 2 ;;
    --finetune-lr) FT_LR=$2; shift 2 ;;
    --finetune-average-last) FT_AVERAGE=$2; shift 2 ;;
    --valid) VALID=1; shift ;;
    --recovery) RECOVERY=$2; shift 2 ;;
    --reconstruct-args) REC_ARGS=$2; shift 2 ;;
    --tune-args) TUNE_ARGS=$2; shift 2 ;;
    --gate-objective) OBJECTIVE=$2; shift 2 ;;
    --gate-init) GATE_INIT=$2; shift 2 ;;
    --restarts) RESTARTS=$2; shift 2 ;;
    --restart-jobs) RESTART_JOBS=$2; shift 2 ;;
    --restart-metric) RESTART_METRIC=$2; shift 2 ;;
    --gate-epochs) GATE_EPOCHS=$2; shift 2 ;;
    --type-split) TYPE_SPLIT=$2; shift 2 ;;
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

[[ -z $OBJECTIVE || $OBJECTIVE == distill || $OBJECTIVE == labels ]] \
  || die "--gate-objective must be distill or labels, not '$OBJECTIVE'"
[[ -z $GATE_INIT || $GATE_INIT == importance || $GATE_INIT == none ]] \
  || die "--gate-init must be importance or none, not '$GATE_INIT'"
[[ $RESTARTS =~ ^[1-9][0-9]*$ ]] || die "--restarts takes a positive number of gate runs, not '$RESTARTS'"
[[ $GATE_EPOCHS =~ ^[1-9][0-9]*$ ]] || die "--gate-epochs takes a positive number of epochs, not '$GATE_EPOCHS'"
need_type_split "$TYPE_SPLIT"
[[ $RESTART_JOBS == auto || $RESTART_JOBS =~ ^[1-9][0-9]*$ ]] \
  || die "--restart-jobs takes a positive number or auto, not '$RESTART_JOBS'"
[[ $RESTART_METRIC == bleu || $RESTART_METRIC == nll ]] \
  || die "--restart-metric must be bleu or nll, not '$RESTART_METRIC'"
[[ $RECOVERY =~ ^(reconstruct|tuned|none)$ ]] || die "--recovery must be reconstruct, tuned or none, not '$RECOVERY'"
if [[ $RECOVERY != none ]]; then  # METHOD+rec (and METHOD+rec+tuned) after every plain selection method
  added=(+rec)
  [[ $RECOVERY == tuned ]] && added+=(+rec+tuned)
  with_rec=()
  for m in "${METHOD_LIST[@]}"; do
    with_rec+=("$m")
    [[ $m != *+* && $m != joint-dsp ]] || continue
    for a in "${added[@]}"; do
      [[ " ${METHOD_LIST[*]} " == *" $m$a "* ]] || with_rec+=("$m$a")
    done
  done
  METHOD_LIST=("${with_rec[@]}")
fi
# Check every method before spending compute on any of them.
gates=() listed=()
for m in "${METHOD_LIST[@]}"; do
  base_method=${m%%+*} suffixes=${m#"${m%%+*}"}
  [[ $suffixes =~ ^(\+(ft|kd|rec|best|tuned))*$ ]] || die "method '$m': unknown suffix; METHOD may be followed by +rec, +best, +tuned, +ft, +kd (chained, e.g. dsp+rec+kd)"
  [[ $m != *+best* || $VALID == 1 ]] || die "method $m chooses on the validation set: add --valid"
  if [[ -n $suffixes ]]; then  # its start: listed before it, or already in OUT (a resumed sweep)
    src=${m%+*}
    starts=("$src")
    [[ $m == *+best ]] && starts+=("$src+rec")  # it chooses between the two
    for s in "${starts[@]}"; do
      if [[ " ${listed[*]} " != *" $s "* ]]; then
        for k in "${K_LIST[@]}"; do
          [[ -f $OUT/runs/$s-k$k/pruned.pt ]] || die "method $m starts from $s's model: list $s before $m"
        done
      fi
    done
    listed+=("$m")
    continue
  fi
  listed+=("$m")
  case $base_method in
    dsp|dsp-ref|dsp-st|ste|hard-concrete) gates+=("$m") ;;
    joint-dsp) ;;
    importance|importance-iter) need_tool dsp-importance ;;
    random) dsp-strip --help 2>/dev/null | grep -q -- --random \
              || die "method random: this dsp-strip has no --random option (pip install -e .)" ;;
    *) die "unknown method '$m'; choose from dsp, dsp-ref, dsp-st, ste, hard-concrete, importance, importance-iter, random, joint-dsp, each optionally followed by +rec, +best, +tuned, +ft or +kd" ;;
  esac
done
mkdir -p "$OUT/runs"
if [[ ${#gates[@]} -gt 0 && ! -s $OUT/pipelined.args ]]; then
  say "model shape of $BASE"
  python -m dsp_fairseq.recipes.pipelined_args --base "$BASE" \
    --gate-type "$(IFS=,; echo "${gates[*]}" | sed 's/dsp-ref/dsp/g')" > "$OUT/pipelined.args.tmp" \
    || die "cannot set up pipelined pruning (see above)"
  mv "$OUT/pipelined.args.tmp" "$OUT/pipelined.args"
fi

say "unpruned baseline"
bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$BASE" --out "$OUT/baseline" \
  --gen-args "$GEN_ARGS"
cp -p "$OUT/baseline/score.json" "$OUT/baseline.json"  # -p: plots stay up to date
if [[ $VALID == 1 ]]; then
  bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$BASE" --out "$OUT/baseline/valid" \
    --subset valid --gen-args "$GEN_ARGS"
  cp -p "$OUT/baseline/valid/score.json" "$OUT/baseline.valid.json"
fi

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
      *+ft|*+kd|*+rec|*+best|*+tuned)
        src=${m%+*} op=${m##*+}
        source_ckpt=$OUT/runs/$src-k$k/pruned.pt
        need_file "$source_ckpt" "method $m starts from $src's model: list $src before $m"
        report=$OUT/runs/${src%%+*}-k$k/strip.txt
        [[ -f $report ]] || report=$OUT/runs/${src%%+*}-k$k/pruned.strip.txt
        if [[ $op == best ]]; then
          # the better on valid of SRC and SRC+rec (prune-pipelined.sh --recovery best): a
          # link to its model and a copy of its scores, nothing decoded again
          [[ $VALID == 1 ]] || die "method $m chooses on the validation set: add --valid"
          for cand in "$src" "$src+rec"; do
            need_file "$OUT/runs/$cand-k$k/eval-valid/score.json" \
              "method $m chooses between $src and $src+rec: list both before it"
          done
          chosen=$(python -m dsp_fairseq.recipes.choose_recovery --output "$row/recovery.json" \
            --candidate reconstruct="$OUT/runs/$src+rec-k$k/eval-valid/score.json" \
            --candidate none="$OUT/runs/$src-k$k/eval-valid/score.json") \
            || die "cannot compare the validation scores of $src and $src+rec"
          from=$src
          [[ $chosen == reconstruct ]] && from=$src+rec
          say "  $m: $from (valid sacreBLEU: $src $(score_of "$OUT/runs/$src-k$k/eval-valid"), $src+rec $(score_of "$OUT/runs/$src+rec-k$k/eval-valid"))"
          ln -sfn "../$from-k$k/pruned.pt" "$row/pruned.pt"
          rm -rf "$row/eval" "$row/eval-valid"
          cp -rp "$OUT/runs/$from-k$k/eval" "$OUT/runs/$from-k$k/eval-valid" "$row/"
        elif [[ $op == rec ]]; then
          split_words REC "$REC_ARGS"
          dsp-reconstruct --pruned "$source_ckpt" --base "$BASE" --data "$DATA/bin" \
            --output "$row/pruned.pt" --force "${REC[@]}" > "$row/reconstruct.txt" \
            || die "dsp-reconstruct failed (see the message above)"
          tail -n 1 "$row/reconstruct.txt" | sed 's/^/  /'
        elif [[ $op == tuned ]]; then
          # tune-refit.sh writes ROW/pruned.pt: the tuned model, or a copy of its start; with
          # --valid the start's row has its validation score already, so it is not decoded again
          untuned=()
          start_valid=$OUT/runs/$src-k$k/eval-valid/score.json
          [[ $VALID == 1 && -s $start_valid && $start_valid -nt $source_ckpt ]] \
            && untuned=(--untuned-score "$start_valid")
          split_words TUNE "$TUNE_ARGS"
          bash "$RECIPES/tune-refit.sh" --data "$DATA" --pruned "$source_ckpt" --base "$BASE" \
            --save-dir "$row" --preset "$PRESET" --seed "$SEED" --gen-args "$GEN_ARGS" "${untuned[@]}" \
            ${TUNE[@]+"${TUNE[@]}"} \
            || die "the tuned refit of $src failed (see above); a rerun resumes it"
          say "  $(tuning_line "$row")"
        else
          teacher=()
          [[ $op == kd ]] && teacher=(--teacher "$BASE")
          bash "$RECIPES/finetune-pruned.sh" --data "$DATA" --pruned "$source_ckpt" \
            --save-dir "$row" --max-update "$FT_UPDATES" --preset "$PRESET" --seed "$SEED" \
            "${teacher[@]}" ${FT_DROPOUT:+--dropout "$FT_DROPOUT"} ${FT_LR:+--lr "$FT_LR"} \
            ${FT_AVERAGE:+--average-last "$FT_AVERAGE"} --train-args "$TRAIN_ARGS"
        fi
        ckpt=$row/pruned.pt ;;
      dsp|dsp-ref|dsp-st|ste|hard-concrete)
        gate=$m schedule=pipelined
        [[ $m == dsp-ref ]] && gate=dsp schedule=reference
        bash "$RECIPES/prune-pipelined.sh" --data "$DATA" --base "$BASE" --heads-to-keep "$k" --recovery none \
          --gate-type "$gate" --schedule "$schedule" --save-dir "$row" --preset "$PRESET" --l0-penalty "$L0" \
          --snapshot-interval "$SNAP" --validate-interval "$VALIDATE" \
          --args-file "$OUT/pipelined.args" --seed "$SEED" --train-args "$TRAIN_ARGS $GATE_ARGS" \
          ${OBJECTIVE:+--gate-objective "$OBJECTIVE"} ${GATE_INIT:+--gate-init "$GATE_INIT"} \
          --importance-scores "$OUT/gate-init-scores.json" --importance-args "$IMP_ARGS" \
          --restarts "$RESTARTS" --restart-jobs "$RESTART_JOBS" --restart-metric "$RESTART_METRIC" \
          --gen-args "$GEN_ARGS" --gate-epochs "$GATE_EPOCHS" ${TYPE_SPLIT:+--type-split "$TYPE_SPLIT"}
        ckpt=$row/pruned.pt report=$row/strip.txt ;;
      joint-dsp)
        bash "$RECIPES/train-dsp-joint.sh" --data "$DATA" --heads-to-keep "$k" --save-dir "$row" \
          --preset "$PRESET" --seed "$SEED" --train-args "$TRAIN_ARGS $JOINT_ARGS"
        ckpt=$row/pruned.pt report=$row/strip.txt ;;
      importance|importance-iter|random)
        opts=() scores=$OUT/importance.json imp=$IMP_ARGS
        [[ $m == random ]] && opts=(--random --seed "$SEED")
        # iterative importance: its own scores per K (heads masked step by step down to K);
        # the Ks share one estimate cache, so their common steps are estimated once
        [[ $m == importance-iter ]] && scores=$row/importance.json \
          imp="$IMP_ARGS --iterative --heads-to-keep $k --cache-dir $OUT/importance-iter-estimates"
        bash "$RECIPES/prune-importance.sh" --data "$DATA" --base "$BASE" --heads-to-keep "$k" \
          --output "$row/pruned.pt" --scores "$scores" --importance-args "$imp" --recovery none "${opts[@]}"
        ckpt=$row/pruned.pt report=$row/pruned.strip.txt ;;
    esac
    bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$ckpt" --out "$row/eval" \
      --gen-args "$GEN_ARGS"
    valid=()
    if [[ $VALID == 1 && $m == *+tuned ]]; then
      # the tuning scored the model it kept on valid already (its start: --untuned-score or
      # ROW/valid-untuned): that score, not a decode again
      valid_score=$row/valid-tuned/score.json
      if [[ $(chosen_of "$row/tune.json") == untuned ]]; then
        valid_score=$row/valid-untuned/score.json
        [[ -s $valid_score ]] || valid_score=$start_valid
      fi
      valid=(--valid-score "$valid_score")
    elif [[ $VALID == 1 ]]; then
      bash "$RECIPES/evaluate.sh" --data "$DATA" --checkpoint "$ckpt" --out "$row/eval-valid" \
        --subset valid --gen-args "$GEN_ARGS"
      valid=(--valid-score "$row/eval-valid/score.json")
    fi
    $R add --table "$TABLE" --method "$m" --k "$k" --score "$row/eval/score.json" \
      "${valid[@]}" --strip-report "$report" --checkpoint "$ckpt" --seconds $((SECONDS - start))
  done
done

say "results: $TABLE.csv, $TABLE.json"
$R show --table "$TABLE"
if [[ $PLOTS == 1 ]]; then
  say "plots -> $OUT/plots"
  python -m dsp_fairseq.plots.report --sweep "$OUT" || die "plotting failed (see above)"
fi
