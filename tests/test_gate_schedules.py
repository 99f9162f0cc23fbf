"""Named gate schedules and the anneal length the criterion derives from the run."""

import argparse

import pytest

from dsp_fairseq.criterions.dsp_label_smoothed_cross_entropy import (
    DSPLabelSmoothedCrossEntropyCriterion,
)
from dsp_fairseq.gates.schedules import GATE_SCHEDULES
from dsp_fairseq.models.gate_config import build_gate
from dsp_fairseq.models.head_layout import attention_slots
from dsp_fairseq.models.transformer_dsp import transformer_dsp_small


def small_args(**overrides):
    args = argparse.Namespace(heads_to_keep=9, **overrides)
    transformer_dsp_small(args)
    return args


@pytest.mark.parametrize(
    "overrides, name, lr",
    [
        ({"train_gates_only": True}, "pipelined", 0.05),
        ({}, "joint", 0.2),
        ({"train_gates_only": True, "gate_schedule": "reference"}, "reference", 0.2),
        ({"train_gates_only": True, "gate_lr": 0.3}, "pipelined", 0.3),
    ],
)
def test_schedule_defaults_follow_the_training_mode(overrides, name, lr):
    args = small_args(**overrides)
    gate, _ = build_gate(args, attention_slots(args))
    # recorded in the args (and so in the checkpoint) as resolved
    assert args.gate_schedule == name and args.gate_lr == lr
    assert gate.schedule == GATE_SCHEDULES[name] and gate.lr == lr


def test_unknown_schedule_is_rejected():
    with pytest.raises(ValueError, match="--gate-schedule 'fast' is unknown; choose one of"):
        small_args(gate_schedule="fast")


class Dataset:
    """Stands in for a LanguagePairDataset: 37 samples, batched 4 to a batch -> 10 batches."""

    def ordered_indices(self):
        return list(range(37))

    def batch_by_size(self, indices, max_tokens, max_sentences, required_batch_size_multiple):
        self.asked = (max_tokens, max_sentences, required_batch_size_multiple)
        return [indices[i : i + 4] for i in range(0, len(indices), 4)]


class Task:
    target_dictionary = None

    def __init__(self):
        self.datasets = {"train": Dataset()}

    def max_positions(self):
        return (1024, 1024)

    def filter_indices_by_size(self, indices, dataset, max_positions, ignore_invalid_inputs):
        return indices


def criterion(**run):
    return DSPLabelSmoothedCrossEntropyCriterion(Task(), False, 0.1, **run)


@pytest.mark.parametrize(
    "run, total",
    [
        ({"max_epoch": 1}, 10),
        ({"max_epoch": 3, "distributed_world_size": 2}, 15),  # 5 batches per worker
        ({"max_epoch": 2, "distributed_world_size": 2, "update_freq": [2]}, 6),  # ceil(5/2)
        ({"max_epoch": 1, "distributed_world_size": 3}, 4),  # ceil(10/3), fairseq pads
        ({"max_epoch": 2, "max_update": 7}, 7),  # the first bound reached
        ({"max_update": 12}, 12),
    ],
)
def test_run_length_is_counted_as_fairseq_batches(run, total):
    c = criterion(max_tokens=1024, **run)
    assert c.run_length()[0] == total
    if "max_epoch" in run:  # batched at this run's --max-tokens
        assert c.task.datasets["train"].asked[0] == 1024


def test_anneal_length_is_the_schedules_share_of_the_run():
    args = small_args()  # joint: 75% of the run
    gate, _ = build_gate(args, attention_slots(args))
    c = criterion(max_update=400)
    c.resolve_schedule(gate)
    assert (c.init_temperature, c.final_temperature, c.anneal_updates) == (0.1, 1e-8, 300)
    c = criterion(max_epoch=1, init_temperature=0.5, anneal_updates=3)
    c.resolve_schedule(gate)  # explicit values win
    assert (c.init_temperature, c.final_temperature, c.anneal_updates) == (0.5, 1e-8, 3)


def test_unbounded_run_needs_an_explicit_anneal_length():
    args = small_args(train_gates_only=True)
    gate, _ = build_gate(args, attention_slots(args))
    with pytest.raises(ValueError, match="give --anneal-updates, or bound the run"):
        criterion().resolve_schedule(gate)


def test_derived_anneal_length_leaves_the_training_batches_and_numpy_rng_alone():
    """Counting an epoch's updates calls ordered_indices(), whose shuffle drew from the
    global numpy RNG outside fairseq's numpy_seed; now the run's batches and every later
    numpy draw are the same with and without the derived anneal length."""
    import numpy as np
    import torch
    from fairseq.data import LanguagePairDataset
    from robustness_helpers import make_dictionary, make_task

    from dsp_fairseq.criterions.run_length import updates_per_epoch

    d = make_dictionary(20)
    gen = torch.Generator().manual_seed(0)
    sents = [torch.randint(4, 20, (int(n),), generator=gen) for n in torch.randint(2, 9, (60,))]
    sizes = torch.tensor([len(s) for s in sents])
    dataset = LanguagePairDataset(sents, sizes, d, sents, sizes, d, shuffle=True)
    task = make_task(d)

    def batches_and_next_draw(count_updates: bool):
        np.random.seed(5)
        if count_updates:
            assert updates_per_epoch(task, dataset, (64, 64), max_tokens=40) > 1
        itr = task.get_batch_iterator(
            dataset, max_tokens=40, seed=3, max_positions=(64, 64), disable_iterator_cache=True
        )
        batches = [b["id"].tolist() for b in itr.next_epoch_itr(shuffle=True)]
        return batches, np.random.rand()

    assert batches_and_next_draw(True) == batches_and_next_draw(False)
