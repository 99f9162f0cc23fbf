"""Run ``fairseq-train`` in this process and record the gate after every update.

    python robustness_dist_launcher.py OUT.json FAIRSEQ-TRAIN-ARGS...

fairseq saves checkpoints on rank 0 only, so the other ranks' gate logits are
read here instead: a global optimizer step post-hook (public torch API; no
fairseq code is patched) copies every tagged gate parameter after each
``optimizer.step()``, i.e. after the all-reduce and the gate's own Adam step,
together with its Adam step count and a checksum of all parameters. The
record is written to OUT.json when training ends.
"""

import json
import sys

import torch
from torch.optim.optimizer import register_optimizer_step_post_hook

OUT = sys.argv.pop(1)
RECORD = {"logits": [], "dsp_step": [], "param_checksum": None, "world_size": 1, "rank": 0}


def after_step(optimizer, *_):
    from dsp_fairseq.optim.gate_optimizer import gate_lr_of  # imported by --user-dir by now

    params = [p for group in optimizer.param_groups for p in group["params"]]
    for p in params:
        if gate_lr_of(p) is not None:
            RECORD["logits"].append(p.detach().double().tolist())
            RECORD["dsp_step"].append(int(optimizer.state[p].get("dsp_step", 0)))
    RECORD["param_checksum"] = sum(float(p.detach().double().abs().sum()) for p in params)
    if torch.distributed.is_initialized():
        RECORD["world_size"] = torch.distributed.get_world_size()
        RECORD["rank"] = torch.distributed.get_rank()


register_optimizer_step_post_hook(after_step)

from fairseq_cli.train import cli_main  # noqa: E402

cli_main()
with open(OUT, "w") as f:
    json.dump(RECORD, f)
