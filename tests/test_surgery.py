"""Tensor surgery and gated attention against masked and stock references."""

import pytest
import torch
from fairseq.modules import MultiheadAttention

from dsp_fairseq.modules.gated_multihead_attention import GatedMultiheadAttention
from dsp_fairseq.pruning.surgery import (
    head_feature_index,
    prune_attention_weights,
    restore_columns,
    select_columns,
)


class FixedMask(torch.nn.Module):
    def __init__(self, mask):
        super().__init__()
        self.mask = mask

    def current_mask(self):
        return self.mask


def random_attention(embed, heads, cross=False, kdim=None):
    kw = (
        {"encoder_decoder_attention": True, "kdim": kdim, "vdim": kdim}
        if cross
        else {"self_attention": True}
    )
    attn = GatedMultiheadAttention(embed, heads, **kw).eval()
    with torch.no_grad():
        for p in attn.parameters():
            p.normal_(0, 0.3)
    return attn


def masked_and_stripped(embed, heads, keep, cross=False, kdim=None):
    masked = random_attention(embed, heads, cross, kdim)
    mask = torch.zeros(heads, dtype=torch.float64)
    mask[keep] = 1
    masked.attach_gate(FixedMask(mask), 0)
    stripped = random_attention(embed, heads, cross, kdim)
    stripped.load_state_dict(masked.state_dict())
    stripped.keep_heads_(torch.tensor(keep, dtype=torch.long))
    return masked, stripped


def test_head_feature_index():
    assert head_feature_index([2, 0], 3).tolist() == [6, 7, 8, 0, 1, 2]
    with pytest.raises(ValueError):
        head_feature_index([1, 1], 3)


def test_prune_weights_is_pure_and_slices_heads():
    d, h, e = 4, 3, 12
    w = {
        f"{p}.{t}": torch.randn(e, e) if t == "weight" else torch.randn(e)
        for p in ("q_proj", "k_proj", "v_proj", "out_proj")
        for t in ("weight", "bias")
    }
    before = {k: v.clone() for k, v in w.items()}
    out = prune_attention_weights(w, [2], d)
    for k in w:
        assert torch.equal(w[k], before[k])  # inputs untouched
    assert torch.equal(out["q_proj.weight"], w["q_proj.weight"][8:12])
    assert torch.equal(out["v_proj.bias"], w["v_proj.bias"][8:12])
    assert torch.equal(out["out_proj.weight"], w["out_proj.weight"][:, 8:12])
    assert torch.equal(out["out_proj.bias"], w["out_proj.bias"])
    assert h == 3


def test_restore_columns_inverts_select_columns():
    full = torch.randn(6, 4 * 3)
    keep = [3, 1]
    index = head_feature_index(keep, 3)
    kept = torch.randn(6, 6)
    new = restore_columns(full, kept, keep, 3)
    assert torch.equal(select_columns(new, index), kept)  # the kept heads' columns: the new ones
    others = head_feature_index([0, 2], 3)
    assert torch.equal(select_columns(new, others), select_columns(full, others))
    assert not torch.equal(full, new)  # pure: the input is unchanged
    assert torch.equal(restore_columns(full, select_columns(full, index), keep, 3), full)
    with pytest.raises(ValueError, match="does not fit"):
        restore_columns(full, torch.randn(6, 3), keep, 3)


@pytest.mark.parametrize("seed", range(8))
def test_stripped_attention_equals_masked_at_random_shapes(seed):
    g = torch.Generator().manual_seed(seed)
    heads = int(torch.randint(1, 9, (1,), generator=g))
    head_dim = int(torch.randint(1, 9, (1,), generator=g))
    embed = heads * head_dim
    n_keep = int(torch.randint(0, heads + 1, (1,), generator=g))
    keep = sorted(torch.randperm(heads, generator=g)[:n_keep].tolist())
    cross = bool(seed % 2)
    kdim = embed + 3 if cross else None
    masked, stripped = masked_and_stripped(embed, heads, keep, cross, kdim)
    tgt, src, bsz = 5, 7, 3
    q = torch.randn(tgt, bsz, embed, generator=g)
    kv = torch.randn(src, bsz, kdim or embed, generator=g) if cross else q
    pad = torch.zeros(bsz, kv.size(0), dtype=torch.bool)
    pad[0, -2:] = True
    a, wa = masked(q, kv, kv, key_padding_mask=pad, need_weights=True)
    b, wb = stripped(q, kv, kv, key_padding_mask=pad, need_weights=True)
    assert stripped.num_heads == len(keep)
    assert torch.allclose(a, b, atol=1e-5), (a - b).abs().max()
    if keep:
        assert torch.allclose(wa, wb, atol=1e-6)
    assert sum(p.numel() for p in stripped.parameters()) <= sum(
        p.numel() for p in masked.parameters()
    )


def test_zero_heads_adds_only_the_output_bias():
    _, stripped = masked_and_stripped(8, 2, [])
    x = torch.randn(4, 2, 8)
    out, _ = stripped(x, x, x, need_weights=False)
    assert torch.allclose(out, stripped.out_proj.bias.expand_as(out))


@pytest.mark.parametrize("need_weights", [False, True])
def test_unmasked_attention_matches_fairseq(need_weights):
    ours = random_attention(16, 4)
    ref = MultiheadAttention(16, 4, self_attention=True).eval()
    ref.load_state_dict(ours.state_dict())
    x = torch.randn(6, 3, 16)
    causal = torch.triu(torch.full((6, 6), float("-inf")), 1)
    pad = torch.zeros(3, 6, dtype=torch.bool)
    pad[1, -1] = True
    a, wa = ours(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=need_weights)
    b, wb = ref(x, x, x, key_padding_mask=pad, attn_mask=causal, need_weights=need_weights)
    assert torch.allclose(a, b, atol=1e-5)
    if need_weights:
        assert torch.allclose(wa, wb, atol=1e-6)


def _incremental(attn, steps, enc, enc_pad, beam):
    attn.set_beam_size(beam)
    state, outs = {}, []
    for x in steps:
        out, w = attn(
            x,
            enc,
            enc,
            key_padding_mask=enc_pad,
            incremental_state=state,
            static_kv=True,
            need_weights=True,
            need_head_weights=True,
        )
        outs.append(out)
        new_order = torch.arange(x.size(1)).flip(0).view(-1, beam).flip(1).reshape(-1)
        attn.reorder_incremental_state(state, new_order)
    return torch.cat(outs), w


def test_cross_attention_incremental_with_beams_matches_fairseq():
    beam, bsz, src, embed = 3, 2, 5, 16
    ours = random_attention(embed, 4, cross=True, kdim=embed)
    ref = MultiheadAttention(
        embed, 4, kdim=embed, vdim=embed, encoder_decoder_attention=True
    ).eval()
    ref.load_state_dict(ours.state_dict())
    enc = torch.randn(src, bsz, embed).repeat_interleave(beam, dim=1)
    enc_pad = torch.zeros(bsz * beam, src, dtype=torch.bool)
    enc_pad[:beam, 0] = True
    steps = [torch.randn(1, bsz * beam, embed) for _ in range(3)]
    a, wa = _incremental(ours, steps, enc, enc_pad, beam)
    b, wb = _incremental(ref, steps, enc, enc_pad, beam)
    assert torch.allclose(a, b, atol=1e-5)
    assert torch.allclose(wa, wb, atol=1e-6)


def test_self_attention_incremental_matches_full_causal():
    attn = random_attention(16, 4)
    x = torch.randn(5, 2, 16)
    causal = torch.triu(torch.full((5, 5), float("-inf")), 1)
    full, _ = attn(x, x, x, attn_mask=causal, need_weights=False)
    state, outs = {}, []
    for t in range(5):
        xt = x[t : t + 1]
        out, _ = attn(xt, xt, xt, incremental_state=state, need_weights=False)
        outs.append(out)
    assert torch.allclose(torch.cat(outs), full, atol=1e-5)


@pytest.mark.parametrize("cross", [False, True])
def test_strip_equals_fairseqs_own_head_removal(cross):
    """keep_heads_ on the heads fairseq's _adaptive_prune_heads keeps gives its outputs."""
    ours = random_attention(16, 4, cross=cross, kdim=16 if cross else None)
    kw = {"encoder_decoder_attention": True, "kdim": 16, "vdim": 16} if cross else {}
    ref = MultiheadAttention(16, 4, self_attention=not cross, **kw).eval()
    ref.load_state_dict(ours.state_dict())
    spans = ref._get_reserve_head_index(2)
    keep = sorted(start // ref.head_dim for start, _ in spans)
    ref._adaptive_prune_heads(spans)
    ref._set_skip_embed_dim_check()
    ours.keep_heads_(torch.tensor(keep))
    assert ours.num_heads == ref.num_heads == 2
    x, mem = torch.randn(5, 3, 16), torch.randn(7, 3, 16)
    pad = torch.zeros(3, 7 if cross else 5, dtype=torch.bool)
    pad[1, -2:] = True
    kv = mem if cross else x
    a, _ = ours(x, kv, kv, key_padding_mask=pad, need_weights=False)
    b, _ = ref(x, kv, kv, key_padding_mask=pad, need_weights=False)
    assert torch.allclose(a, b, atol=1e-5)
