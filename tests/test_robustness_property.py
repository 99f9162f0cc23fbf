"""Property test: for random architectures and budgets, stripped == masked.

Each seed draws an architecture (layer counts, heads, embedding sizes, shared
or separate embeddings, pre-/post-norm, which attentions are gated) and a
budget (one K, or one K per attention type), builds the masked model through
a real fairseq ``TranslationTask`` with a random gate state, writes it as a
fairseq checkpoint, strips it with the real path (``load_checkpoint`` ->
``strip_checkpoint`` -> ``save_checkpoint_atomic``), loads both files with
fairseq's own ``load_model_ensemble_and_task`` (what fairseq-generate uses),
then compares forward scores and beam search.
"""

from __future__ import annotations

import math

import pytest
import torch
from fairseq import checkpoint_utils
from fairseq.data import data_utils
from fairseq.sequence_generator import SequenceGenerator
from robustness_helpers import (
    checkpoint_state,
    dsp_args,
    make_dictionary,
    make_task,
    random_tokens,
)

from dsp_fairseq.checkpoint_io import load_checkpoint, save_checkpoint_atomic
from dsp_fairseq.models.head_layout import ATTENTION_TYPES
from dsp_fairseq.pruning.strip import strip_checkpoint

SEEDS = list(range(12))
GATE_TYPES = ("dsp", "dsp-st", "ste")  # all keep the exact top-K of their logits


def random_setup(seed: int):
    """(args, task, gate logits) for one seed; seeds 0-2 force the edge cases."""
    g = torch.Generator().manual_seed(1000 + seed)

    def pick(options):
        return options[int(torch.randint(len(options), (1,), generator=g))]

    shared = pick([True, False])
    enc_heads, dec_heads = pick([1, 2, 4, 8]), pick([1, 2, 4, 8])
    dims = [8, 12, 16, 24, 32]
    enc_dim = pick([d for d in dims if d % enc_heads == 0 and (not shared or d % dec_heads == 0)])
    dec_dim = enc_dim if shared else pick([d for d in dims if d % dec_heads == 0])
    gated = [t for t in ATTENTION_TYPES if pick([True, False])] or [pick(ATTENTION_TYPES)]
    enc_layers, dec_layers = pick([1, 2, 3]), pick([1, 2, 3])
    sizes = {"enc-self": enc_layers * enc_heads, "dec-self": dec_layers * dec_heads,
             "cross": dec_layers * dec_heads}  # fmt: skip
    total = sum(sizes[t] for t in gated)

    budget = {}
    if seed == 0:
        budget["heads_to_keep"] = 1
    elif seed == 1:
        budget["heads_to_keep"] = total  # nothing removed: stripping must be a no-op
    elif seed == 2 or pick([False, True]):
        # per-type budgets; seed 2 empties the first gated type entirely
        per = {t: int(torch.randint(0, sizes[t] + 1, (1,), generator=g)) for t in gated}
        if seed == 2:
            per[gated[0]] = 0
        if sum(per.values()) == 0:
            per[gated[-1]] = 1
        budget["heads_to_keep_per_type"] = ",".join(f"{t}={k}" for t, k in per.items())
    else:
        budget["heads_to_keep"] = int(torch.randint(1, total + 1, (1,), generator=g))

    args = dsp_args(
        encoder_layers=enc_layers, decoder_layers=dec_layers,
        encoder_attention_heads=enc_heads, decoder_attention_heads=dec_heads,
        encoder_embed_dim=enc_dim, decoder_embed_dim=dec_dim,
        encoder_ffn_embed_dim=pick([16, 32]), decoder_ffn_embed_dim=pick([16, 32]),
        encoder_normalize_before=pick([True, False]),
        decoder_normalize_before=pick([True, False]),
        share_all_embeddings=shared,
        share_decoder_input_output_embed=shared or pick([True, False]),
        gated_attentions=",".join(gated), gate_type=pick(GATE_TYPES), **budget,
    )  # fmt: skip
    src = make_dictionary(40)
    task = make_task(src, src if shared else make_dictionary(33, prefix="t"))
    # Half the seeds use heavily tied logits: masked model and strip must break ties alike.
    if pick([True, False]):
        logits = torch.randint(0, 3, (total,), generator=g).float()
    else:
        logits = torch.randn(total, generator=g)
    return args, task, logits


def load_with_fairseq(path, task):
    models, _cfg, _task = checkpoint_utils.load_model_ensemble_and_task([str(path)], task=task)
    return models[0].eval()


@pytest.mark.parametrize("seed", SEEDS)
def test_stripped_model_scores_and_beams_like_the_masked_one(seed, tmp_path):
    torch.manual_seed(seed)
    args, task, logits = random_setup(seed)
    model = task.build_model(args).eval()
    with torch.no_grad():
        for p in model.parameters():  # non-zero biases everywhere, beyond fairseq's init
            p.add_(torch.randn_like(p) * 0.1)
        model.head_gate.logits.copy_(logits)
    save_checkpoint_atomic(checkpoint_state(model, args), str(tmp_path / "masked.pt"))

    stripped_state, report = strip_checkpoint(load_checkpoint(str(tmp_path / "masked.pt")))
    save_checkpoint_atomic(stripped_state, str(tmp_path / "stripped.pt"))
    masked = load_with_fairseq(tmp_path / "masked.pt", task)
    stripped = load_with_fairseq(tmp_path / "stripped.pt", task)

    # The stripped model holds exactly the test mask's heads, and no gate.
    assert stripped.head_gate is None
    assert torch.equal(masked.head_gate.logits, logits)
    kept = masked.head_gate.test_mask()
    assert int(kept.sum()) == masked.head_gate.heads_to_keep
    gated = set(args.gated_attentions.split(","))
    n_gated = sum(
        attn.num_heads for slot, attn in stripped.attention_modules() if slot.kind in gated
    )
    assert n_gated == int(kept.sum())
    n_masked = sum(p.numel() for p in masked.parameters())
    n_stripped = sum(p.numel() for p in stripped.parameters())
    if int(kept.sum()) < kept.numel():
        assert n_stripped < n_masked and report.params_after < report.params_before
    else:
        # only the logits went, and they are model state, not parameters (translation_dsp)
        assert n_stripped == n_masked

    gen = torch.Generator().manual_seed(seed)
    src_dict, tgt_dict = task.source_dictionary, task.target_dictionary
    src, src_len = random_tokens(src_dict, 6, 9, gen)
    tgt, _ = random_tokens(tgt_dict, 6, 8, gen)
    prev = data_utils.collate_tokens(
        [row[row.ne(tgt_dict.pad())] for row in tgt], tgt_dict.pad(), tgt_dict.eos(),
        left_pad=False, move_eos_to_beginning=True,
    )  # fmt: skip
    with torch.no_grad():
        lp_masked = masked.get_normalized_probs(masked(src, src_len, prev), log_probs=True)
        lp_stripped = stripped.get_normalized_probs(stripped(src, src_len, prev), log_probs=True)
    assert torch.isfinite(lp_masked).all()
    assert (lp_masked - lp_stripped).abs().max().item() < 1e-5

    sample = {"net_input": {"src_tokens": src, "src_lengths": src_len}}
    hyps = []
    for m in (masked, stripped):
        generator = SequenceGenerator([m], tgt_dict, beam_size=4, max_len_a=0, max_len_b=12)
        hyps.append(generator.generate([m], sample))
    for sent_masked, sent_stripped in zip(*hyps):
        assert len(sent_masked) == len(sent_stripped) == 4
        for h_m, h_s in zip(sent_masked, sent_stripped):
            assert h_m["tokens"].tolist() == h_s["tokens"].tolist()
            assert math.isclose(float(h_m["score"]), float(h_s["score"]), abs_tol=1e-4)
