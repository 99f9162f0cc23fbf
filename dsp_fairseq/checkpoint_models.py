"""Models and tasks built from checkpoint states, for the tools that run a model on data.

One place for what ``dsp-importance``, reconstruction (``dsp-strip --reconstruct``,
``dsp-reconstruct``) and the distillation teacher all do: set up the checkpoint's own
fairseq task on a given data folder, and build its model as ``transformer_dsp`` with a
strict load, turning fairseq's errors into messages that say what to give.
"""

from __future__ import annotations

import argparse

import torch

from .checkpoint_io import CheckpointError, model_args
from .models.stock import dsp_model_args


def task_config(state: dict, data: str):
    """The checkpoint's task config with its data folder replaced by ``data``."""
    from omegaconf import OmegaConf

    cfg = state.get("cfg")
    task = cfg.get("task") if isinstance(cfg, dict) else None
    if task is None and state.get("args") is not None:
        from fairseq.dataclass.utils import convert_namespace_to_omegaconf

        task = convert_namespace_to_omegaconf(state["args"]).task
    if task is None:
        raise CheckpointError("checkpoint has no task configuration (cfg.task)")
    if isinstance(task, argparse.Namespace):
        task = vars(task)
    task = OmegaConf.create(OmegaConf.to_container(task) if OmegaConf.is_config(task) else task)
    task.data = data
    return task


def setup_task(state: dict, data: str, option: str = "--data"):
    """``(task, binaries folder)``: the checkpoint's fairseq task on ``data``.

    ``data`` is a fairseq binaries folder or a prepared corpus folder holding one in
    ``bin/`` (:mod:`dsp_fairseq.cli.data_folder`'s rule).
    """
    from fairseq import tasks

    from .cli.data_folder import DataFolderError, binaries_folder

    try:
        data, _ = binaries_folder(option, data)
    except DataFolderError as err:
        raise CheckpointError(str(err)) from err
    try:
        return tasks.setup_task(task_config(state, data)), data
    except Exception as err:  # fairseq raises bare Exceptions for unusable data folders
        raise CheckpointError(
            f"{option} {data}: cannot set up the checkpoint's task on it: {err}"
        ) from err


def model_from_state(state: dict, task, what: str) -> torch.nn.Module:
    """``state``'s model built as ``transformer_dsp`` on ``task``'s dictionaries (strict load).

    ``what`` names the checkpoint in the error message (a path or an option).
    """
    args = dsp_model_args(model_args(state))
    model = task.build_model(args)
    try:
        model.load_state_dict(state["model"], strict=True, model_cfg=args)
    except RuntimeError as err:
        raise CheckpointError(
            f"{what}: its weights do not fit the model built from its config and the "
            f"dictionaries of {task.cfg.data} (the data it was trained on?): "
            f"{str(err).splitlines()[0]}"
        ) from err
    return model


def batch_epochs(task, model, subset: str, max_tokens: int, *, seed: int = 1,
                 shuffle: bool = False, error: str = "--data"):  # fmt: skip
    """``(epoch, dataset)``: ``epoch()`` is a fresh iterator over ``subset``'s batches.

    fairseq's own batching (``task.get_batch_iterator``: its length filter, its order, its
    shuffle under ``seed``), so the same batches come back on every call. A missing split
    is a :class:`CheckpointError` that starts with ``error``.
    """
    from fairseq import utils

    try:
        task.load_dataset(subset, combine=False, epoch=1)
    except FileNotFoundError as err:
        raise CheckpointError(f"{error}: {err}") from err
    dataset = task.dataset(subset)
    max_positions = utils.resolve_max_positions(task.max_positions(), model.max_positions())

    def epoch():
        return task.get_batch_iterator(
            dataset=dataset,
            max_tokens=max_tokens,
            max_positions=max_positions,
            ignore_invalid_inputs=True,
            seed=seed,
            num_workers=0,
            disable_iterator_cache=True,
        ).next_epoch_itr(shuffle=shuffle)

    return epoch, dataset
