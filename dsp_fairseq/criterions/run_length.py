"""How many updates a fairseq-train run will make, computed the way fairseq batches.

Used to anneal the gate temperature over the run when ``--anneal-updates`` is not given,
and by the pipelined recipe to pick a validation interval.
"""

from __future__ import annotations

import math
from typing import Optional, Sequence

from fairseq.data import data_utils


def updates_per_epoch(
    task,
    dataset,
    max_positions,
    max_tokens: Optional[int],
    max_sentences: Optional[int] = None,
    required_batch_size_multiple: int = 8,
    world_size: int = 1,
    update_freq: int = 1,
    skip_remainder_batch: bool = False,
) -> int:
    """Optimizer updates in one epoch of ``dataset`` on each of ``world_size`` workers.

    Mirrors ``FairseqTask.get_batch_iterator``: size-filtered indices, ``batch_by_size``,
    then fairseq's sharding (each worker gets ceil(batches / world_size), padded) and the
    grouping of ``update_freq`` batches per update. It builds no iterator, so it never
    touches the epoch iterator a running trainer has cached, and it leaves the global
    numpy RNG as it found it.
    """
    # ordered_indices() of a shuffling dataset draws a permutation from the global numpy
    # RNG; fairseq calls it under numpy_seed (which restores the RNG afterwards), and so
    # does this. The count does not depend on the seed: indices are sorted by size, and a
    # permutation only reorders samples of equal sizes.
    with data_utils.numpy_seed(1):
        indices = dataset.ordered_indices()
    if max_positions is not None:
        indices = task.filter_indices_by_size(
            indices, dataset, max_positions, ignore_invalid_inputs=True
        )
    batches = dataset.batch_by_size(
        indices,
        max_tokens=max_tokens,
        max_sentences=max_sentences,
        required_batch_size_multiple=required_batch_size_multiple,
    )
    rounding = math.floor if skip_remainder_batch else math.ceil
    per_worker = rounding(len(batches) / max(world_size, 1))
    return max(1, rounding(per_worker / max(update_freq, 1)))


def run_updates(max_update: int, max_epoch: int, epoch_updates: Optional[int]) -> Optional[int]:
    """Updates until fairseq-train stops: the first of --max-update and --max-epoch reached.

    None when neither bounds the run (both 0) or the epoch length is unknown and needed.
    """
    bounds = []
    if max_update and max_update > 0:
        bounds.append(int(max_update))
    if max_epoch and max_epoch > 0 and epoch_updates is not None:
        bounds.append(int(max_epoch) * int(epoch_updates))
    return min(bounds) if bounds else None


def first_update_freq(update_freq: Sequence[int] | int) -> int:
    """fairseq's --update-freq is a per-epoch list; the first epoch's value."""
    if isinstance(update_freq, int):
        return update_freq
    return int(list(update_freq)[0]) if len(update_freq) else 1
