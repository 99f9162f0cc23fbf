"""In-process fairseq training pieces for tests that drive fairseq's own optimizers.

fairseq's trainer cannot run --fp16 on a CPU (its overflow branch calls
``.cuda()``), so the fp16/clipping/optimizer tests build fairseq's real config
from command-line flags, fairseq's real optimizer wrappers and a real
translation task, and run the trainer's update sequence themselves
(:func:`update`, the order of ``fairseq.trainer.Trainer.train_step``).
"""

from __future__ import annotations

import torch
from fairseq import options
from fairseq.data import LanguagePairDataset
from fairseq.dataclass.utils import convert_namespace_to_omegaconf
from robustness_helpers import PLUGIN, make_dictionary

# 1+1 layers, 4 heads: 12 gated heads.
TINY_ARCH = ["--encoder-layers", "1", "--decoder-layers", "1",
             "--encoder-attention-heads", "4", "--decoder-attention-heads", "4",
             "--encoder-embed-dim", "16", "--decoder-embed-dim", "16",
             "--encoder-ffn-embed-dim", "32", "--decoder-ffn-embed-dim", "32",
             "--max-source-positions", "64", "--max-target-positions", "64",
             "--dropout", "0", "--share-all-embeddings"]  # fmt: skip


def fairseq_cfg(*flags: str, arch: str = "transformer_dsp"):
    """fairseq's config for ``fairseq-train DATA --arch ARCH FLAGS`` (parsed, not run)."""
    parser = options.get_training_parser()
    args = options.parse_args_and_arch(
        parser,
        ["unused-data-dir", "--user-dir", str(PLUGIN), "--arch", arch, "--optimizer", "adam",
         "--lr", "1e-3", "--criterion", "label_smoothed_cross_entropy", *TINY_ARCH, *flags],
    )  # fmt: skip
    return convert_namespace_to_omegaconf(args)


def tiny_task(n_words: int = 24):
    """The translation_dsp task (it trains the gate) over an in-memory dictionary."""
    from dsp_fairseq.tasks.translation_dsp import TranslationDSPConfig, TranslationDSPTask

    d = make_dictionary(n_words)
    return TranslationDSPTask(TranslationDSPConfig(), d, d)


def batch(task, n: int = 8, max_len: int = 7, seed: int = 0) -> dict:
    """A real fairseq translation batch (LanguagePairDataset.collater) of random sentences."""
    gen = torch.Generator().manual_seed(seed)
    d = task.source_dictionary

    def sentence():
        length = int(torch.randint(2, max_len + 1, (1,), generator=gen))
        words = torch.randint(d.nspecial, len(d), (length,), generator=gen)
        return torch.cat([words, torch.tensor([d.eos()])])

    src = [sentence() for _ in range(n)]
    tgt = [sentence() for _ in range(n)]
    ds = LanguagePairDataset(
        src, torch.tensor([len(s) for s in src]), d, tgt, torch.tensor([len(t) for t in tgt]), d
    )
    return ds.collater([ds[i] for i in range(n)])


def update(task, model, criterion, optimizer, samples, update_num: int, clip_norm: float = 0.0):
    """One fairseq update (Trainer.train_step's order); returns the grad norm, or None on overflow."""
    optimizer.zero_grad()
    sample_size = 0
    for sample in samples:
        _, size, _ = task.train_step(sample, model, criterion, optimizer, update_num)
        sample_size += size
    optimizer.all_reduce_grads(model)
    optimizer.multiply_grads(1.0 / float(sample_size))
    try:
        grad_norm = optimizer.clip_grad_norm(clip_norm)
        task.optimizer_step(optimizer, model=model, update_num=update_num)
    except OverflowError:  # fp16: fairseq skips the update and lowers the loss scale
        optimizer.zero_grad()
        return None
    model.set_num_updates(update_num + 1)
    return grad_norm


def master_copy(optimizer, param):
    """The parameter the optimizer actually steps for ``param`` (fp16: its fp32 master)."""
    fp16_params = getattr(optimizer, "fp16_params", None)
    if fp16_params is None:
        return param
    index = [id(p) for p in fp16_params].index(id(param))
    return optimizer.fp32_params[index]
