"""One rank of a 2-process pytorch_ddp run of the translation_dsp task (gloo, CPU).

    python ddp_gate_worker.py OUT_DIR RANK PORT MODE[,MODE...]

fairseq's ``DistributedFairseqModel`` passes ``device_ids=[device_id]`` to torch's
DistributedDataParallel, which torch refuses for a CPU module, so this builds what
fairseq builds for ``--ddp-backend pytorch_ddp`` without that argument: torch's
DDP with fairseq's defaults (``broadcast_buffers`` off, 25 MB buckets), the fp16
communication hook registered the way fairseq registers it for
``--ddp-comm-hook fp16`` (MODE ``fp16-hook``), fairseq's ModuleProxyWrapper
around it, fairseq's optimizer, the task's train_step / optimizer_step in the
trainer's order (``no_sync`` on all but the last micro-batch of --update-freq 2).
MODE ``gates-only`` adds --train-gates-only. The record: per update, each
rank's raw local gate gradient and sample size, the gradient the task handed to
the gate's Adam, the logits before and after, and a checksum of the model, in
OUT_DIR/r{RANK}-{MODE}.json.
Several modes run one after another in the same process group (each with a fresh model,
optimizer and seed), so that the test pays fairseq's start-up once per rank.
"""

import json
import sys

import torch
import torch.distributed as dist
from fairseq import optim
from fairseq.models.distributed_fairseq_model import ModuleProxyWrapper
from torch.distributed.algorithms.ddp_comm_hooks import DDPCommHookType, register_ddp_comm_hook
from torch.nn.parallel import DistributedDataParallel
from train_helpers import batch, fairseq_cfg, tiny_task

OUT, RANK, PORT, MODES = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4].split(",")
UPDATES, UPDATE_FREQ, WORLD = 2, 2, 2


def main():
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{PORT}", rank=RANK,
                            world_size=WORLD)  # fmt: skip
    for mode in MODES:
        record = run_mode(mode)
        with open(f"{OUT}/r{RANK}-{mode}.json", "w") as f:
            json.dump(record, f)
    dist.destroy_process_group()


def run_mode(mode: str) -> dict:
    torch.manual_seed(1)  # the same initial model on both ranks, as fairseq seeds it
    flags = ["--heads-to-keep", "5", "--clip-norm", "0.1"]
    if mode == "gates-only":
        flags.append("--train-gates-only")
    cfg = fairseq_cfg(*flags)
    task = tiny_task()
    model = task.build_model(cfg.model)
    gate = model.head_gate
    ddp = DistributedDataParallel(model, broadcast_buffers=False, bucket_cap_mb=25)
    if mode == "fp16-hook":
        register_ddp_comm_hook(DDPCommHookType.FP16_COMPRESS, ddp)
    wrapped = ModuleProxyWrapper(ddp)
    criterion = task.build_criterion(cfg.criterion)
    optimizer = optim.build_optimizer(
        cfg.optimizer, [p for p in model.parameters() if p.requires_grad]
    )
    handed = []
    gate.optimizer.register_step_pre_hook(lambda *_: handed.append(gate.logits.grad.tolist()))
    record = {"raw": [], "sample_size": [], "handed": handed, "before": [], "after": []}
    gate.set_temperature(0.1)
    for update in range(UPDATES):
        optimizer.zero_grad()
        sample_size = 0
        for i in range(UPDATE_FREQ):
            sample = batch(task, n=6 + 3 * RANK, seed=100 * RANK + 10 * update + i)
            last = i == UPDATE_FREQ - 1
            ctx = ddp.no_sync() if not last else torch.enable_grad()
            with ctx:
                _, size, _ = task.train_step(sample, wrapped, criterion, optimizer, update)
            sample_size += size
        record["raw"].append(gate.logits.grad.tolist())
        record["sample_size"].append(sample_size)
        total = torch.tensor([float(sample_size)])
        dist.all_reduce(total)  # the trainer's aggregated sample size
        optimizer.all_reduce_grads(wrapped)
        optimizer.multiply_grads(WORLD / float(total))  # DDP averaged: the trainer's numer
        optimizer.clip_grad_norm(0.1)
        record["before"].append(gate.logits.tolist())
        task.optimizer_step(optimizer, wrapped, update)
        record["after"].append(gate.logits.tolist())
    record["checksum"] = sum(float(p.detach().double().abs().sum()) for p in model.parameters())
    return record


main()
