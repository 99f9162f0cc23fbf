"""Write the model of ``finetune-pruned.sh``: its best checkpoint with the kept-head record.

    python -m dsp_fairseq.recipes.finetuned_checkpoint --best BEST.pt --source PRUNED.pt \
        --output OUT.pt

fairseq-train saves only its own keys, so a fine-tuned stripped model loses ``dsp-strip``'s
record of which original heads it kept (``dsp_kept_heads``), which head maps
(``dsp-plot-heads``, the sweep's plots) and provenance need. The record is copied from the
stripped model the fine-tune started from, after checking that both models have the same heads
per attention. The output is written atomically; an output that already carries the record
and is newer than BEST is left alone, so reruns do not touch it.
"""

from __future__ import annotations

import argparse
import os
import sys

from ..checkpoint_io import CheckpointError, load_checkpoint, model_args, save_checkpoint_atomic

RECORD = "dsp_kept_heads"


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--best", required=True, help="fine-tuned checkpoint (checkpoint_best.pt)")
    parser.add_argument("--source", required=True, help="the dsp-strip output it started from")
    parser.add_argument("--output", required=True, help="where to write the fine-tuned model")
    args = parser.parse_args(argv)
    try:
        if os.path.isfile(args.output) and os.path.getmtime(args.output) >= os.path.getmtime(
            args.best
        ):
            if isinstance(load_checkpoint(args.output).get(RECORD), dict):
                return 0
        state = with_kept_heads(load_checkpoint(args.best), load_checkpoint(args.source))
        save_checkpoint_atomic(state, args.output, mode_like=args.best)
    except (CheckpointError, OSError) as err:
        print(f"finetuned_checkpoint: error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
