"""The ``transformer_dsp`` model: fairseq's Transformer with gated, removable heads."""

from __future__ import annotations

import logging
import os
from typing import Dict, Iterator, List, Optional, Tuple

import torch
from fairseq.models import register_model, register_model_architecture
from fairseq.models.transformer import (
    TransformerConfig,
    TransformerModel,
    base_architecture,
    transformer_iwslt_de_en,
)

from ..gates import GATE_REGISTRY, HeadGate
from ..gates.schedules import GATE_SCHEDULES, default_schedule_name
from ..modules.gated_multihead_attention import GatedMultiheadAttention
from .gate_config import build_gate, gate_schedule
from .head_layout import ATTENTION_TYPES, AttentionSlot, attention_slots, parse_attention_types
from .layers import DSPTransformerDecoder, DSPTransformerEncoder

logger = logging.getLogger(__name__)

DSP_DEFAULTS = {
    "gate_type": "dsp",
    "gated_attentions": ",".join(ATTENTION_TYPES),
    "gate_lr": None,  # the gate schedule's
    "gate_schedule": None,  # pipelined with --train-gates-only, else joint
    "heads_to_keep": None,
    "heads_to_keep_per_type": None,
    "heads_per_attention": None,
    "stripped_heads": None,
    "train_gates_only": False,
    "train_gates_with": None,
    "train_only": None,
    "freeze_gates": False,
    "gate_init_scores": None,
    "gate_init_scale": 2.0,
}


@register_model("transformer_dsp")
class TransformerDSPModel(TransformerModel):
    """Transformer whose attention heads carry learnable gates (DSP and baselines).

    ``--heads-to-keep K`` is a global budget over the H gated heads; the gate
    (``--gate-type``) produces a training mask and, in ``eval()``, the exact
    top-K mask that ``dsp-strip`` removes. A model built with
    ``--stripped-heads`` has no gates and only the heads that were kept.
    """

    @staticmethod
    def add_args(parser):
        TransformerModel.add_args(parser)
        # fmt: off
        parser.add_argument("--heads-to-keep", type=int, metavar="K",
                            help="global budget: number of gated heads to keep (default: all)")
        parser.add_argument("--heads-to-keep-per-type", type=str, metavar="SPEC",
                            help="budget per attention type instead of one K, "
                                 "e.g. enc-self=6,dec-self=4,cross=8, or 'proportional': "
                                 "--heads-to-keep K shared in proportion to each type's heads, "
                                 "or 'proportional-at-small-k': so where K <= H/4, one global "
                                 "K above")
        parser.add_argument("--heads-per-attention", type=str, metavar="ENC,DEC",
                            help="uniform layout: keep exactly ENC heads in every encoder "
                                 "self-attention and DEC in every decoder self- and "
                                 "cross-attention (the gate chooses which); exports to "
                                 "CTranslate2 without padding")
        parser.add_argument("--gated-attentions", type=str, metavar="TYPES",
                            help="comma-separated attention types that carry gates "
                                 "(default: enc-self,dec-self,cross)")
        parser.add_argument("--gate-type", type=str, metavar="NAME",
                            help=f"head gate: one of {', '.join(sorted(GATE_REGISTRY))} (default: dsp)")
        parser.add_argument("--gate-lr", type=float, metavar="LR",
                            help="constant Adam learning rate of the gate logits, "
                                 "no warmup/decay, no weight decay (default: the gate "
                                 "schedule's: 0.05 pipelined, 0.2 reference and joint)")
        parser.add_argument("--gate-schedule", type=str, metavar="NAME",
                            choices=sorted(GATE_SCHEDULES),
                            help="named gate-training schedule (temperatures, gate lr, anneal "
                                 "share of the run): pipelined (default with "
                                 "--train-gates-only), reference (the DSP reference code's "
                                 "pipelined setting) or joint (default otherwise)")
        parser.add_argument("--train-gates-only", action="store_true", default=None,
                            help="freeze every parameter except the gate logits (pipelined pruning)")
        parser.add_argument("--train-gates-with", type=str, metavar="NAMES",
                            help="with --train-gates-only: also train the parameters whose "
                                 "names contain one of these comma-separated strings, e.g. "
                                 "out_proj (the gate then chooses heads whose loss the output "
                                 "projections can make up for)")
        parser.add_argument("--train-only", type=str, metavar="NAMES",
                            help="train only the parameters whose names contain one of these "
                                 "comma-separated strings and freeze the rest, e.g. "
                                 "out_proj,fc2 (the layers dsp-reconstruct refits) to tune a "
                                 "reconstructed model by distillation; not with "
                                 "--train-gates-only (use --train-gates-with there)")
        parser.add_argument("--freeze-gates", action="store_true", default=None,
                            help="freeze the gate logits and train with the fixed test mask "
                                 "(fine-tuning phase of pipelined pruning)")
        parser.add_argument("--gate-init-scores", type=str, metavar="JSON",
                            help="start the gate logits from these per-head scores (a "
                                 "dsp-importance file of the same model) instead of at random: "
                                 "standardised log scores times --gate-init-scale")
        parser.add_argument("--gate-init-scale", type=float, metavar="X",
                            help="spread of the logits started from --gate-init-scores "
                                 "(default 2: about the spread trained logits reach)")
        parser.add_argument("--stripped-heads", type=str, metavar="SPEC",
                            help="set by dsp-strip: heads left in each attention, "
                                 "e.g. enc-self=4,2,0;dec-self=1,4,3;cross=0,0,1")
        # fmt: on

    @classmethod
    def build_encoder(cls, args, src_dict, embed_tokens):
        return DSPTransformerEncoder(TransformerConfig.from_namespace(args), src_dict, embed_tokens)

    @classmethod
    def build_decoder(cls, args, tgt_dict, embed_tokens):
        cfg = TransformerConfig.from_namespace(args)
        return DSPTransformerDecoder(
            cfg, tgt_dict, embed_tokens, no_encoder_attn=cfg.no_cross_attention
        )

    @classmethod
    def build_model(cls, args, task):
        transformer_dsp(args)
        model = super().build_model(args, task)
        model.args = args
        model.setup_heads(args)
        if args.train_only:
            if args.train_gates_only:
                raise ValueError(
                    "--train-only with --train-gates-only: name the parameters trained "
                    "beside the gates with --train-gates-with instead"
                )
            model._train_only(args.train_only, "--train-only")
        return model

    def _train_only(self, names: str, option: str) -> None:
        """Freeze every parameter whose name contains none of the comma-separated ``names``."""
        wanted = [n.strip() for n in names.split(",") if n.strip()]
        for name, param in self.named_parameters():
            param.requires_grad_(any(w in name for w in wanted))
        if wanted and not any(p.requires_grad for p in self.parameters()):
            raise ValueError(
                f"{option} {names}: no parameter name contains it (e.g. out_proj, fc2)"
            )

    # -- heads ---------------------------------------------------------------
    def attention_modules(self) -> Iterator[Tuple[AttentionSlot, GatedMultiheadAttention]]:
        """Every attention with its slot, in head-layout order."""
        for slot in attention_slots(self.args):
            yield slot, self.get_submodule(slot.prefix)

    def head_counts(self) -> Dict[str, List[int]]:
        """Number of heads present in each attention, by type and layer."""
        counts: Dict[str, List[int]] = {}
        for slot, attn in self.attention_modules():
            counts.setdefault(slot.kind, []).append(attn.num_heads)
        return counts

    def setup_heads(self, args) -> None:
        """Resize stripped attentions, or build the gate and attach it to each attention."""
        self.head_gate: Optional[HeadGate] = None
        if args.stripped_heads:
            for slot, attn in self.attention_modules():
                if slot.num_heads != attn.num_heads:
                    attn.keep_heads_(torch.arange(slot.num_heads))
            return
        if args.gate_type == "none":
            if args.train_gates_only or args.freeze_gates:
                raise ValueError(
                    "--train-gates-only/--freeze-gates need a gate; --gate-type is none"
                )
            return
        if args.train_gates_only and args.freeze_gates:
            raise ValueError(
                "--train-gates-only and --freeze-gates together leave nothing to train; "
                "train the gates first, then fine-tune with --freeze-gates"
            )
        self.head_gate, gated = build_gate(args, attention_slots(args))
        self._gate_init_missing: Optional[str] = None
        if args.gate_init_scores:
            self._init_gate_from_scores(args, gated)
        start = 0
        for slot in gated:
            self.get_submodule(slot.prefix).attach_gate(self.head_gate, start)
            start += slot.num_heads
        self.encoder.attach_gate(self.head_gate)
        self.decoder.attach_gate(self.head_gate)
        if args.train_gates_only:
            # The gate's logits are not parameters (the translation_dsp task trains them).
            self._train_only(args.train_gates_with or "", "--train-gates-with")
        elif args.train_gates_with:
            raise ValueError("--train-gates-with needs --train-gates-only")
        if args.freeze_gates:
            self.head_gate.freeze()
        logger.info(
            "transformer_dsp: %s gate on %d heads of %s, keeping %s%s",
            args.gate_type,
            self.head_gate.num_heads,
            args.gated_attentions,
            self.head_gate.describe_budget(),
            " (frozen: training with the test mask)" if args.freeze_gates else "",
        )

    def _init_gate_from_scores(self, args, gated: List[AttentionSlot]) -> None:
        from ..importance.scores_file import read_importance, scores_by_slot

        path = args.gate_init_scores
        if not os.path.isfile(path):
            # A gated checkpoint loaded elsewhere brings its own logits and needs no file;
            # loading a gate-less base checkpoint without it is an error (see below).
            self._gate_init_missing = path
            return
        source = f"--gate-init-scores {path}"
        by_slot = scores_by_slot(read_importance(path), attention_slots(args), source)
        scores = [v for slot in gated for v in by_slot[slot.prefix]]
        self.head_gate.init_from_scores(torch.tensor(scores), args.gate_init_scale)
        logger.info(
            "transformer_dsp: gate logits start from %s (scale %g)", path, args.gate_init_scale
        )

    # -- fairseq hooks ---------------------------------------------------------
    def forward(self, src_tokens, src_lengths, prev_output_tokens, **kwargs):
        if self.head_gate is None:
            return super().forward(src_tokens, src_lengths, prev_output_tokens, **kwargs)
        self.head_gate.resample()  # one mask for the whole forward pass
        with self.head_gate.one_mask_per_pass():
            return super().forward(src_tokens, src_lengths, prev_output_tokens, **kwargs)

    def upgrade_state_dict_named(self, state_dict, name):
        super().upgrade_state_dict_named(state_dict, name)
        prefix = f"{name}." if name else ""
        key = f"{prefix}head_gate.logits"
        if self.head_gate is not None and key not in state_dict:
            if self._gate_init_missing:
                raise ValueError(
                    f"--gate-init-scores {self._gate_init_missing}: no such file; the gates "
                    "of this gate-less checkpoint were to start from it (run dsp-importance "
                    "first, or drop the option)"
                )
            # A checkpoint without gates (stock fairseq transformer): start the
            # gates from their fresh initialisation; no other key changes.
            logger.info(
                "checkpoint has no gate logits: initialising %d gates", self.head_gate.num_heads
            )
            state_dict[key] = self.head_gate.logits.detach().clone()


def _dsp_defaults(args) -> None:
    for key, value in DSP_DEFAULTS.items():
        if getattr(args, key, None) is None:
            setattr(args, key, value)
    parse_attention_types(args.gated_attentions)  # fail early on a typo
    # Resolved here so that the checkpoint records the schedule and gate lr it trained with.
    schedule = gate_schedule(args)
    args.gate_schedule = args.gate_schedule or default_schedule_name(bool(args.train_gates_only))
    if args.gate_lr is None:
        args.gate_lr = schedule.gate_lr


@register_model_architecture("transformer_dsp", "transformer_dsp")
def transformer_dsp(args):
    base_architecture(args)
    _dsp_defaults(args)


@register_model_architecture("transformer_dsp", "transformer_dsp_iwslt_de_en")
def transformer_dsp_iwslt_de_en(args):
    transformer_iwslt_de_en(args)
    _dsp_defaults(args)


@register_model_architecture("transformer_dsp", "transformer_dsp_small")
def transformer_dsp_small(args):
    """3+3 layers, 256/1024, 4 heads (36 gated heads): trains on a CPU."""
    for side in ("encoder", "decoder"):
        if getattr(args, f"{side}_embed_dim", None) is None:
            setattr(args, f"{side}_embed_dim", 256)
        if getattr(args, f"{side}_ffn_embed_dim", None) is None:
            setattr(args, f"{side}_ffn_embed_dim", 1024)
        if getattr(args, f"{side}_attention_heads", None) is None:
            setattr(args, f"{side}_attention_heads", 4)
        if getattr(args, f"{side}_layers", None) is None:
            setattr(args, f"{side}_layers", 3)
    transformer_dsp(args)
