"""Write the model of ``finetune-pruned.sh``: its best checkpoint (or the average of its last
checkpoints) with the kept-head record.

    python -m dsp_fairseq.recipes.finetuned_checkpoint --best BEST.pt --source PRUNED.pt \
        --output OUT.pt
    python -m dsp_fairseq.recipes.finetuned_checkpoint --average-last N --save-dir DIR \
        --source PRUNED.pt --output OUT.pt
    python -m dsp_fairseq.recipes.finetuned_checkpoint --updates CHECKPOINT.pt  # its update count

fairseq-train saves only its own keys, so a fine-tuned stripped model loses ``dsp-strip``'s
record of which original heads it kept (``dsp_kept_heads``), which head maps
(``dsp-plot-heads``, the sweep's plots) and provenance need. The record is copied from the
stripped model the fine-tune started from, after checking that both models have the same heads
per attention. The optimizer's state is left out (the model is for decoding and further
fine-tuning, which restarts the optimizer) and tied weights stay one tensor, so the file holds
the model once. The output is written atomically; an output that already carries the record
and is newer than its inputs is left alone, so reruns do not touch it.

``--average-last N`` averages the parameters of a fine-tune's final model
(``checkpoint_last.pt``) with the N - 1 interval checkpoints (``checkpoint_EPOCH_UPDATES.pt``,
from ``--save-interval-updates``) saved before it, as fairseq's
``scripts/average_checkpoints.py`` does (not installed with the fairseq package). The last
checkpoints of a fine-tune at a constant learning rate, averaged, are a cheap stand-in for
annealing it.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from typing import Dict, List, Sequence

import torch

from ..checkpoint_io import CheckpointError, load_checkpoint, model_args, save_checkpoint_atomic

RECORD = "dsp_kept_heads"
_INTERVAL_CHECKPOINT = re.compile(r"checkpoint_\d+_(\d+)\.pt$")


def with_kept_heads(best: dict, source: dict) -> dict:
    """BEST's state with SOURCE's record of kept heads; refuse models of different layouts."""
    record = source.get(RECORD)
    if not isinstance(record, dict):
        raise CheckpointError(
            "the source has no 'dsp_kept_heads' record: it is not a checkpoint written by dsp-strip"
        )
    ours = getattr(model_args(best), "stripped_heads", None)
    theirs = getattr(model_args(source), "stripped_heads", None)
    if ours != theirs:
        raise CheckpointError(
            f"the fine-tuned model's heads ({ours}) are not the source's ({theirs}): "
            "was it fine-tuned from this stripped model?"
        )
    return {**best, RECORD: record}


def average_models(states: Sequence[dict]) -> dict:
    """The last state with its ``model`` replaced by the mean of all states' models.

    Every state must hold the same parameter names and shapes (checkpoints of one fine-tune);
    floating-point tensors are averaged in float64 and cast back, others must agree.
    """
    if not states:
        raise CheckpointError("nothing to average: no checkpoint given")
    models: List[Dict[str, torch.Tensor]] = [state["model"] for state in states]
    first = models[0]
    for i, model in enumerate(models[1:], start=2):
        if model.keys() != first.keys():
            raise CheckpointError(
                f"checkpoint {i} has other parameters than checkpoint 1: "
                "average checkpoints of one fine-tune only"
            )
        for name, tensor in model.items():
            if tensor.shape != first[name].shape:
                raise CheckpointError(
                    f"{name}: shape {tuple(tensor.shape)} in checkpoint {i}, "
                    f"{tuple(first[name].shape)} in checkpoint 1: not the same model"
                )
    ties = [tied_to(model) for model in models]
    averaged = {}
    for name, tensor in first.items():
        source = ties[0][name]
        if source != name and all(tie[name] == source for tie in ties):
            # a tied weight (shared embeddings): one tensor, saved once, as fairseq saves it
            averaged[name] = averaged[source]
        elif tensor.is_floating_point():
            total = sum(model[name].double() for model in models)
            averaged[name] = (total / len(models)).to(tensor.dtype)
        else:
            if any(not torch.equal(model[name], tensor) for model in models):
                raise CheckpointError(
                    f"{name}: a non-float tensor that differs between checkpoints"
                )
            averaged[name] = tensor.clone()
    return {**states[-1], "model": averaged}


def tied_to(model: Dict[str, torch.Tensor]) -> Dict[str, str]:
    """Each parameter's name mapped to the first name that is the same tensor (the same
    storage, offset, shape and strides: weights tied by ``--share-all-embeddings``), or to
    itself."""
    first: Dict[tuple, str] = {}
    ties = {}
    for name, tensor in model.items():
        key = (
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
        )
        ties[name] = first.setdefault(key, name)
    return ties


def deployable(state: dict) -> dict:
    """STATE without the optimizer's moments: the fine-tuned model is for decoding and for
    further fine-tuning, which restarts the optimizer (as dsp-strip's output does); they
    would make the file about three times larger."""
    return {k: v for k, v in state.items() if k != "last_optimizer_state"}


def num_updates(state: dict) -> int:
    """The update count a fairseq checkpoint was saved at."""
    try:
        return int(state["optimizer_history"][-1]["num_updates"])
    except (KeyError, IndexError, TypeError, ValueError):
        raise CheckpointError("not a fairseq-train checkpoint: no optimizer history") from None


def last_checkpoints(save_dir: str, n: int) -> List[str]:
    """``checkpoint_last.pt`` of SAVE_DIR and the N - 1 interval checkpoints saved before it,
    oldest first. Refuses when the folder holds fewer than N distinct checkpoints."""
    if n < 1:
        raise CheckpointError(f"--average-last takes a positive number of checkpoints, not {n}")
    last = os.path.join(save_dir, "checkpoint_last.pt")
    final_update = num_updates(load_checkpoint(last))
    intervals = []
    for name in os.listdir(save_dir):
        match = _INTERVAL_CHECKPOINT.fullmatch(name)
        # an interval checkpoint at the final update is the same model as checkpoint_last.pt
        if match and int(match.group(1)) < final_update:
            intervals.append((int(match.group(1)), os.path.join(save_dir, name)))
    if len(intervals) < n - 1:
        raise CheckpointError(
            f"{save_dir}: {len(intervals) + 1} checkpoints to average, {n} asked for; "
            "fine-tune with --save-interval-updates and --keep-interval-updates of at least "
            f"{n - 1} (finetune-pruned.sh --average-last does)"
        )
    ordered = [path for _, path in sorted(intervals)]
    return ordered[len(ordered) - (n - 1) :] + [last]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    inputs = parser.add_mutually_exclusive_group(required=True)
    inputs.add_argument("--best", help="fine-tuned checkpoint (checkpoint_best.pt)")
    inputs.add_argument(
        "--average-last",
        type=int,
        metavar="N",
        help="average checkpoint_last.pt of --save-dir with the N - 1 interval checkpoints before it",
    )
    inputs.add_argument(
        "--updates",
        metavar="CHECKPOINT",
        help="print the number of updates a fairseq-train checkpoint was saved at, and stop",
    )
    parser.add_argument("--save-dir", help="the fine-tune's folder (with --average-last)")
    parser.add_argument("--source", help="the dsp-strip output it started from")
    parser.add_argument("--output", help="where to write the fine-tuned model")
    args = parser.parse_args(argv)
    if args.updates is None and not (args.source and args.output):
        parser.error("--best and --average-last need --source and --output")
    if args.average_last is not None and not args.save_dir:
        parser.error("--average-last needs --save-dir")
    try:
        if args.updates is not None:
            print(num_updates(load_checkpoint(args.updates)))
            return 0
        if args.average_last is not None:
            paths = last_checkpoints(args.save_dir, args.average_last)
        else:
            paths = [args.best]
        inputs_exist = all(os.path.isfile(path) for path in paths)
        if (
            inputs_exist
            and os.path.isfile(args.output)
            and os.path.getmtime(args.output) >= max(os.path.getmtime(path) for path in paths)
        ):
            if isinstance(load_checkpoint(args.output).get(RECORD), dict):
                return 0
        states = [load_checkpoint(path) for path in paths]
        fine_tuned = average_models(states) if len(states) > 1 else states[0]
        state = with_kept_heads(deployable(fine_tuned), load_checkpoint(args.source))
        save_checkpoint_atomic(state, args.output, mode_like=paths[-1])
    except (CheckpointError, OSError) as err:
        print(f"finetuned_checkpoint: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
