"""fairseq ``MultiheadAttention`` whose heads can be masked and removed.

Two things differ from the parent class:

* a per-head mask (from a :class:`~dsp_fairseq.gates.HeadGate`) scales each
  head's output before the output projection (equivalently, its attention
  probabilities), and
* the number of heads may be smaller than ``embed_dim // head_dim`` once
  heads have been stripped, down to zero (then the sublayer only adds the
  output projection's bias).

``forward`` keeps the parent's signature, incremental-state layout
``(batch, heads, time, head_dim)`` and beam-size trick for cross-attention,
so fairseq's ``reorder_incremental_state`` and ``set_beam_size`` are
inherited unchanged. Attention itself runs in torch's fused
``scaled_dot_product_attention`` unless attention weights are requested.
"""

from __future__ import annotations

from typing import Dict, Optional, Tuple

import torch
import torch.nn.functional as F
from fairseq.modules import MultiheadAttention
from torch import Tensor, nn

from ..pruning.surgery import prune_attention_projections

IncrementalState = Optional[Dict[str, Dict[str, Optional[Tensor]]]]


class GatedMultiheadAttention(MultiheadAttention):
    """Multi-head attention with an optional head mask and prunable heads."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.bias_k is not None or self.add_zero_attn or self.use_xformers:
            raise ValueError(
                "transformer_dsp does not support add_bias_kv, add_zero_attn or xformers attention"
            )
        self._mask_source = None
        self._mask_slice = slice(0, 0)
        # The gate's whole mask handed in by the layer for one call (activation
        # checkpointing: the mask must be an input of the checkpointed layer).
        self._given_mask: Optional[Tensor] = None

    # -- configuration -----------------------------------------------------
    def attach_gate(self, gate: nn.Module, start: int) -> None:
        """Read this module's head mask from ``gate.current_mask()[start:start+H]``.

        The gate is stored outside ``_modules`` so that its logits are owned by
        the model once, not once per attention in the state dict.
        """
        object.__setattr__(self, "_mask_source", gate)
        self._mask_slice = slice(start, start + self.num_heads)

    def detach_gate(self) -> None:
        object.__setattr__(self, "_mask_source", None)

    def keep_heads_(self, keep: Tensor) -> None:
        """Remove every head not listed in ``keep`` (sorted head indices), in place."""
        new = prune_attention_projections(
            {n: getattr(self, n) for n in ("q_proj", "k_proj", "v_proj", "out_proj")},
            keep,
            self.head_dim,
        )
        for name, linear in new.items():
            setattr(self, name, linear)
        self.num_heads = int(keep.numel())
        # fairseq's own fast path checks embed_dim == heads * head_dim; we never use it.
        self.skip_embed_dim_check = True

    @property
    def gate(self) -> Optional[nn.Module]:
        """The gate this attention reads its mask from (None: ungated)."""
        return self._mask_source

    def give_mask(self, mask: Optional[Tensor]) -> None:
        """Use ``mask`` (the gate's whole mask) instead of asking the gate; None: ask again."""
        object.__setattr__(self, "_given_mask", mask)

    def head_mask(self) -> Optional[Tensor]:
        if self._mask_source is None:
            return None
        mask = (
            self._given_mask if self._given_mask is not None else self._mask_source.current_mask()
        )
        return mask[self._mask_slice]

    # -- forward -----------------------------------------------------------
    def forward(
        self,
        query: Tensor,
        key: Optional[Tensor],
        value: Optional[Tensor],
        key_padding_mask: Optional[Tensor] = None,
        incremental_state: IncrementalState = None,
        need_weights: bool = True,
        static_kv: bool = False,
        attn_mask: Optional[Tensor] = None,
        before_softmax: bool = False,
        need_head_weights: bool = False,
    ) -> Tuple[Tensor, Optional[Tensor]]:
        if before_softmax:
            raise NotImplementedError("before_softmax is not supported by transformer_dsp")
        need_weights = need_weights or need_head_weights
        tgt_len, bsz, _ = query.size()
        if self.num_heads == 0:
            return self._no_heads_forward(query, need_weights, need_head_weights, key)

        saved_state = None
        if incremental_state is not None:
            saved_state = self._get_input_buffer(incremental_state)

        q = self.q_proj(query)
        k = v = None
        kv_bsz = bsz
        if self.encoder_decoder_attention:
            if not (saved_state is not None and "prev_key" in saved_state and static_kv):
                assert key is not None
                if self.beam_size > 1 and bsz == key.size(1):
                    # All beams of a sentence share its encoder states: project
                    # them once per sentence, as fairseq's own attention does.
                    key = key.view(key.size(0), -1, self.beam_size, key.size(2))[:, :, 0]
                    if key_padding_mask is not None:
                        key_padding_mask = key_padding_mask.view(
                            -1, self.beam_size, key_padding_mask.size(1)
                        )[:, 0]
                k, v = self.k_proj(key), self.v_proj(key)
        else:
            assert key is not None and value is not None
            k, v = self.k_proj(key), self.v_proj(value)

        # (time, batch, H*d) -> (batch, H, time, d)
        q = q.view(tgt_len, bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
        if k is not None:
            kv_bsz = k.size(1)
            k = k.view(-1, kv_bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)
            v = v.view(-1, kv_bsz, self.num_heads, self.head_dim).permute(1, 2, 0, 3)

        if saved_state is not None:
            k, v, key_padding_mask, kv_bsz = self._use_saved_state(
                saved_state, k, v, key_padding_mask, static_kv
            )
            self._set_input_buffer(incremental_state, saved_state)

        src_len = k.size(2)
        beams = bsz // kv_bsz
        if beams > 1:
            # Fold the beams into the query length: (kv_bsz, H, beams*tgt, d).
            q = (
                q.reshape(kv_bsz, beams, self.num_heads, tgt_len, self.head_dim)
                .transpose(1, 2)
                .reshape(kv_bsz, self.num_heads, beams * tgt_len, self.head_dim)
            )
        mask = self._combined_mask(attn_mask, key_padding_mask, kv_bsz, src_len, q.dtype)
        dropout_p = (
            self.dropout_module.p
            if (self.training or self.dropout_module.apply_during_inference)
            else 0.0
        )

        weights = None
        if need_weights:
            scores = torch.matmul(q * self.scaling, k.transpose(-1, -2))
            if mask is not None:
                scores = scores + mask
            probs_float = torch.softmax(scores, dim=-1, dtype=torch.float32)
            probs = F.dropout(probs_float.type_as(q), p=dropout_p, training=dropout_p > 0)
            out = torch.matmul(probs, v)
            weights = probs_float
        else:
            out = F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout_p, scale=self.scaling
            )

        if beams > 1:
            out = self._unfold_beams(out, kv_bsz, beams, tgt_len)
            if weights is not None:
                weights = self._unfold_beams(weights, kv_bsz, beams, tgt_len)

        head_mask = self.head_mask()
        if head_mask is not None:
            if out.dtype in (torch.float16, torch.bfloat16) and head_mask.requires_grad:
                # The mask's gradient sums over batch, time and head_dim: in
                # float16 it overflows long before the weights' gradients do.
                out = (out.float() * head_mask.float().view(1, -1, 1, 1)).to(out.dtype)
            else:
                out = out * head_mask.to(out.dtype).view(1, -1, 1, 1)
        out = out.permute(2, 0, 1, 3).reshape(tgt_len, bsz, self.num_heads * self.head_dim)
        out = self.out_proj(out)

        if weights is not None:
            weights = self._summarise_weights(weights, head_mask, need_head_weights)
        return out, weights

    # -- helpers -----------------------------------------------------------
    def _use_saved_state(self, saved_state, k, v, key_padding_mask, static_kv):
        """Concatenate with (or reuse) cached keys/values; update the cache."""
        if "prev_key" in saved_state:
            prev_key = saved_state["prev_key"]
            prev_value = saved_state["prev_value"]
            if static_kv:
                k, v = prev_key, prev_value
            else:
                k = torch.cat([prev_key, k], dim=2)
                v = torch.cat([prev_value, v], dim=2)
        kv_bsz = k.size(0)
        key_padding_mask = MultiheadAttention._append_prev_key_padding_mask(
            key_padding_mask=key_padding_mask,
            prev_key_padding_mask=saved_state.get("prev_key_padding_mask"),
            batch_size=kv_bsz,
            src_len=k.size(2),
            static_kv=static_kv,
        )
        saved_state["prev_key"] = k
        saved_state["prev_value"] = v
        saved_state["prev_key_padding_mask"] = key_padding_mask
        return k, v, key_padding_mask, kv_bsz

    @staticmethod
    def _combined_mask(
        attn_mask: Optional[Tensor],
        key_padding_mask: Optional[Tensor],
        kv_bsz: int,
        src_len: int,
        dtype: torch.dtype,
    ) -> Optional[Tensor]:
        """Additive float mask broadcastable to (kv_bsz, H, L, src_len)."""
        if key_padding_mask is not None and key_padding_mask.dim() == 0:
            key_padding_mask = None
        if attn_mask is None and key_padding_mask is None:
            return None
        mask = None
        if attn_mask is not None:
            if attn_mask.dtype == torch.bool:
                attn_mask = torch.zeros_like(attn_mask, dtype=dtype).masked_fill(
                    attn_mask, float("-inf")
                )
            mask = attn_mask.to(dtype).view(1, 1, attn_mask.size(0), attn_mask.size(1))
        if key_padding_mask is not None:
            pad = key_padding_mask.to(torch.bool).view(kv_bsz, 1, 1, src_len)
            base = mask if mask is not None else torch.zeros((), dtype=dtype, device=pad.device)
            mask = base.masked_fill(pad, float("-inf"))
        return mask

    def _unfold_beams(self, x: Tensor, kv_bsz: int, beams: int, tgt_len: int) -> Tensor:
        """(kv_bsz, H, beams*tgt, X) -> (kv_bsz*beams, H, tgt, X)."""
        return (
            x.reshape(kv_bsz, self.num_heads, beams, tgt_len, x.size(-1))
            .transpose(1, 2)
            .reshape(kv_bsz * beams, self.num_heads, tgt_len, x.size(-1))
        )

    @staticmethod
    def _summarise_weights(
        weights: Tensor, head_mask: Optional[Tensor], need_head_weights: bool
    ) -> Tensor:
        """fairseq's layout: (H, bsz, tgt, src) per head, else the mean over heads.

        The mean is weighted by the head mask, so a masked model reports the
        same average as the stripped model. Per-head weights (fairseq's decoder
        asks for them at its alignment layer and averages them itself) are those
        of the heads the mask keeps (non-zero entries), i.e. exactly the stripped
        model's heads under a 0/1 mask; one all-zero row if it keeps none, so
        that fairseq's mean is defined (zero) instead of NaN.
        """
        weights = weights.transpose(0, 1)
        if need_head_weights:
            if head_mask is None:
                return weights
            kept = torch.nonzero(head_mask.detach() != 0).view(-1)
            if kept.numel() == 0:
                return weights.new_zeros((1,) + weights.shape[1:])
            return weights.index_select(0, kept)
        if head_mask is None:
            return weights.mean(dim=0)
        m = head_mask.to(weights.dtype).view(-1, 1, 1, 1)
        return (weights * m).sum(dim=0) / m.sum().clamp(min=1e-9)

    def _no_heads_forward(
        self, query: Tensor, need_weights: bool, need_head_weights: bool, key: Optional[Tensor]
    ) -> Tuple[Tensor, Optional[Tensor]]:
        """An attention with every head removed adds only its output bias."""
        tgt_len, bsz, _ = query.size()
        out = self.out_proj(query.new_zeros(tgt_len, bsz, 0))
        weights = None
        if need_weights:
            src_len = key.size(0) if key is not None else tgt_len
            # One zero "head" for per-head weights: see _summarise_weights.
            shape = (1, bsz, tgt_len, src_len) if need_head_weights else (bsz, tgt_len, src_len)
            weights = query.new_zeros(shape, dtype=torch.float32)
        return out, weights
