"""Run ``fairseq-train`` in this process and record the gate after every update.

    python robustness_dist_launcher.py OUT.json FAIRSEQ-TRAIN-ARGS...

fairseq saves checkpoints on rank 0 only, so the other ranks' gate logits are
read here instead, through torch's global optimizer step hooks (public API; no
fairseq code is patched). The translation_dsp task steps the gate's logits with
a plain ``torch.optim.Adam`` (fairseq's trainer steps ``fairseq.optim.adam.Adam``
or another fairseq class), so that optimizer is recognised by its class: before
its step the hook records the gradient the task hands it (all-reduced,
unscaled), after it the logits and Adam's step count. After the trainer's own
step it records a checksum of all trainer parameters. The record is written to
OUT.json when training ends.

Then the process group is destroyed, which fairseq's ``distributed_main`` leaves to
interpreter exit: there gloo's worker threads can still hold tensors whose release
needs the GIL, and a rank aborted now and then with "terminate called without an
active exception" (exit -6) after saving everything (pytorch/pytorch#190489).
"""

import json
import sys

import torch
from torch.optim.optimizer import (
    register_optimizer_step_post_hook,
    register_optimizer_step_pre_hook,
)

OUT = sys.argv.pop(1)
RECORD = {"before": [], "logits": [], "grads": [], "dsp_step": [], "param_checksum": None, "world_size": 1,
          "rank": 0}  # fmt: skip


def is_gate_optimizer(optimizer) -> bool:
    return type(optimizer) is torch.optim.Adam


def before_step(optimizer, *_):
    if is_gate_optimizer(optimizer):
        (p,) = optimizer.param_groups[0]["params"]
        RECORD["grads"].append(p.grad.detach().double().tolist())
        RECORD["before"].append(p.detach().double().tolist())


def after_step(optimizer, *_):
    params = [p for group in optimizer.param_groups for p in group["params"]]
    if is_gate_optimizer(optimizer):
        (p,) = params
        RECORD["logits"].append(p.detach().double().tolist())
        RECORD["dsp_step"].append(int(optimizer.state[p]["step"]))
    else:
        RECORD["param_checksum"] = sum(float(p.detach().double().abs().sum()) for p in params)
    if torch.distributed.is_initialized():
        RECORD["world_size"] = torch.distributed.get_world_size()
        RECORD["rank"] = torch.distributed.get_rank()


register_optimizer_step_pre_hook(before_step)
register_optimizer_step_post_hook(after_step)

from fairseq_cli.train import cli_main  # noqa: E402

cli_main()
with open(OUT, "w") as f:
    json.dump(RECORD, f)
if torch.distributed.is_initialized():  # every rank passed fairseq's final barrier
    torch.distributed.destroy_process_group()
