"""fairseq encoder/decoder layers whose attention builders make gated attention.

The builder methods are overridden, plus two thin forward wrappers: the
encoder/decoder read the head mask once per call, and a checkpointed layer
gets it as an input. Everything else is fairseq's.
"""

from __future__ import annotations

import contextlib
import functools
from typing import List, Optional

from fairseq.distributed import fsdp_wrap
from fairseq.models.transformer import TransformerDecoderBase, TransformerEncoderBase
from fairseq.modules import transformer_layer
from fairseq.modules.checkpoint_activations import checkpoint_wrapper
from torch import Tensor

from ..modules.gated_multihead_attention import GatedMultiheadAttention


class _MaskInputLayer:
    """A layer whose gated attentions can take the gate's mask as a forward input.

    ``forward(..., dsp_head_mask=M)`` makes every gated attention of the layer
    use ``M`` for this call. Activation checkpointing needs this: a
    checkpointed layer recomputes its forward during backward, and a mask read
    from the gate there (outside the layer's inputs) would backpropagate
    through the gate's graph once per layer ("backward through the graph a
    second time"); as an input, its gradient is returned to the caller instead.
    """

    def gated_attentions(self) -> List[GatedMultiheadAttention]:
        attns = [getattr(self, name, None) for name in ("self_attn", "encoder_attn")]
        return [a for a in attns if isinstance(a, GatedMultiheadAttention) and a.gate is not None]

    def forward(self, *args, dsp_head_mask: Optional[Tensor] = None, **kwargs):
        if dsp_head_mask is None:
            return super().forward(*args, **kwargs)
        attns = self.gated_attentions()
        for attn in attns:
            attn.give_mask(dsp_head_mask)
        try:
            return super().forward(*args, **kwargs)
        finally:
            for attn in attns:
                attn.give_mask(None)


class DSPEncoderLayer(_MaskInputLayer, transformer_layer.TransformerEncoderLayerBase):
    def build_self_attention(self, embed_dim, cfg):
        return GatedMultiheadAttention(
            embed_dim,
            cfg.encoder.attention_heads,
            dropout=cfg.attention_dropout,
            self_attention=True,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
            xformers_att_config=cfg.encoder.xformers_att_config,
        )


class DSPDecoderLayer(_MaskInputLayer, transformer_layer.TransformerDecoderLayerBase):
    def build_self_attention(self, embed_dim, cfg, add_bias_kv=False, add_zero_attn=False):
        return GatedMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            dropout=cfg.attention_dropout,
            add_bias_kv=add_bias_kv,
            add_zero_attn=add_zero_attn,
            self_attention=not cfg.cross_self_attention,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
            xformers_att_config=cfg.decoder.xformers_att_config,
        )

    def build_encoder_attention(self, embed_dim, cfg):
        return GatedMultiheadAttention(
            embed_dim,
            cfg.decoder.attention_heads,
            kdim=cfg.encoder.embed_dim,
            vdim=cfg.encoder.embed_dim,
            dropout=cfg.attention_dropout,
            encoder_decoder_attention=True,
            q_noise=self.quant_noise,
            qn_block_size=self.quant_noise_block_size,
            xformers_att_config=cfg.encoder.xformers_att_config,
        )


def _forward_with_mask(layer, checkpointed_forward, *args, **kwargs):
    """The checkpointed forward of ``layer``, with the gate's mask passed in as an input."""
    attns = layer.gated_attentions()
    if attns and "dsp_head_mask" not in kwargs:
        kwargs["dsp_head_mask"] = attns[0].gate.current_mask()
    return checkpointed_forward(*args, **kwargs)


def _wrap(layer, cfg):
    """fairseq's activation-checkpoint / FSDP wrapping of a layer.

    Checkpointing is fairseq's ``checkpoint_wrapper`` (so ``unwrap_checkpoint``
    undoes it), with the head mask read before the checkpoint and handed to the
    layer as an input (see _MaskInputLayer). A partial, as fairseq's own wrapper
    uses, so that a deep copy of the model (EMA) calls its own layer.
    """
    checkpoint = cfg.checkpoint_activations
    if checkpoint:
        layer = checkpoint_wrapper(layer, offload_to_cpu=cfg.offload_activations)
        layer.forward = functools.partial(_forward_with_mask, layer, layer.forward)
    return fsdp_wrap(layer, min_num_params=cfg.min_params_to_wrap if not checkpoint else 0)


class _OneMaskPerPass:
    """Encoder/decoder that reads the gate's mask once per call (one decoding step).

    In ``eval()`` the mask is the gate's top-K, computed afresh when read; the
    training mask is drawn once per model forward (TransformerDSPModel.forward).
    """

    head_gate = None  # set by TransformerDSPModel.setup_heads, outside _modules

    def attach_gate(self, gate) -> None:
        object.__setattr__(self, "head_gate", gate)

    def _one_mask(self):
        if self.head_gate is None:
            return contextlib.nullcontext()
        return self.head_gate.one_mask_per_pass()


class DSPTransformerEncoder(_OneMaskPerPass, TransformerEncoderBase):
    def build_encoder_layer(self, cfg):
        return _wrap(DSPEncoderLayer(cfg, return_fc=self.return_fc), cfg)

    def forward(self, *args, **kwargs):
        with self._one_mask():
            return super().forward(*args, **kwargs)


class DSPTransformerDecoder(_OneMaskPerPass, TransformerDecoderBase):
    def build_decoder_layer(self, cfg, no_encoder_attn=False):
        return _wrap(DSPDecoderLayer(cfg, no_encoder_attn), cfg)

    def forward(self, *args, **kwargs):
        with self._one_mask():
            return super().forward(*args, **kwargs)
