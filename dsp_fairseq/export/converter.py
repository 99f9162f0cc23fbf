"""``DSPFairseqConverter``: CTranslate2's fairseq converter for stripped head layouts.

CTranslate2's own ``FairseqConverter`` refuses the ``transformer_dsp`` architecture, cannot
load a gated checkpoint safely, assumes ``d_model / num_heads`` for every head width and
one head count for the whole model. This subclass keeps everything else of it (its
configuration checks, its spec classes, its weight-copying functions, its vocabulary
handling, ``Converter.convert``'s validation, quantization and saving) and adds:

* loading through :func:`dsp_fairseq.checkpoint_io.load_checkpoint` (weights-only);
* a gated ``transformer_dsp`` checkpoint is stripped in memory first (its test mask, as
  ``dsp-strip`` would); a stock ``transformer`` exports with all its heads;
* one head count per stack with zero-padded heads (:mod:`.layout`, :mod:`.padding`) and
  ``head_dim`` written on every attention;
* the decoder's alignment heads set to the kept heads of the alignment layer, so that a
  padded layout's attention (``return_attention``, ``replace_unknowns``) is fairseq's
  average over the heads that exist, not over zero padding;
* the options of ``FairseqConverter``'s constructor honoured (``source_lang``,
  ``target_lang``, ``no_default_special_tokens``, ``user_dir``) or refused with the reason
  (``fixed_dictionary``, ``unsafe_deserialization``);
* refusal, with the reason, of options CTranslate2's Transformer cannot represent.
"""

from __future__ import annotations

import argparse
import copy
import os
import shutil
import tempfile
from types import SimpleNamespace
from typing import List, Optional, Tuple

import numpy as np

from ..checkpoint_io import CheckpointError, load_checkpoint, model_args
from ..models.head_layout import attention_slots
from ..models.stock import arch_of, dsp_model_args, is_dsp_arch, is_stock_transformer_arch
from ..pruning.strip import GATE_PREFIX
from .layout import ExportPlan, plan_export
from .padding import pad_attention

try:  # optional dependency: only this module needs it
    from ctranslate2.converters import fairseq as ct2_fairseq
    from ctranslate2.converters.fairseq import FairseqConverter
    from ctranslate2.specs.model_spec import ACCEPTED_MODEL_TYPES
except ImportError:  # pragma: no cover - reported by the CLI
    ct2_fairseq = None
    FairseqConverter = object
    ACCEPTED_MODEL_TYPES = ()

# Whatever the installed CTranslate2 accepts (int8_float16, bfloat16, ... in 4.x).
QUANTIZATIONS = tuple(ACCEPTED_MODEL_TYPES)


class ExportError(CheckpointError):
    """A checkpoint that cannot be exported to CTranslate2; the message says why."""


def unsupported_options(args) -> List[str]:
    """Reasons CTranslate2's Transformer spec cannot represent this model (empty: fine).

    CTranslate2's own checks (activation, positional embeddings, pre-norm on both
    sides) run too, in :meth:`DSPFairseqConverter._load`; these are the options its
    fairseq converter would otherwise convert into a wrong model.
    """
    g = lambda name, default=None: getattr(args, name, default)  # noqa: E731
    reasons = []
    if g("encoder_embed_dim") != g("decoder_embed_dim"):
        reasons.append(
            f"--encoder-embed-dim {g('encoder_embed_dim')} differs from --decoder-embed-dim "
            f"{g('decoder_embed_dim')} (CTranslate2 has one model width)"
        )
    for name in ("decoder_input_dim", "decoder_output_dim"):
        if g(name) is not None and g(name) != g("decoder_embed_dim"):
            reasons.append(f"--{name.replace('_', '-')} {g(name)} differs from the embed dim")
    if g("adaptive_softmax_cutoff"):
        reasons.append("--adaptive-softmax-cutoff (adaptive softmax) is not supported")
    if g("adaptive_input") or g("tie_adaptive_weights"):
        reasons.append("--adaptive-input is not supported")
    if g("cross_self_attention"):
        reasons.append("--cross-self-attention is not supported")
    if g("no_cross_attention"):
        reasons.append("--no-cross-attention is not supported (the spec has cross-attention)")
    if g("decoder_normalize_before") and g("no_decoder_final_norm"):
        reasons.append("--no-decoder-final-norm with pre-norm layers is not supported")
    for name in ("scale_attn", "scale_fc", "scale_heads", "scale_resids"):
        if g(name):
            reasons.append(f"--{name.replace('_', '-')} (NormFormer) is not supported")
    return reasons


def _ct2_checks(args) -> None:
    """CTranslate2's own configuration checks (``_get_model_spec``), as a stock transformer."""
    stock = copy.copy(args)
    stock.arch = "transformer"
    # CTranslate2 compares the two stacks' head counts because its from_config() takes
    # one; the per-stack counts are set afterwards.
    stock.decoder_attention_heads = stock.encoder_attention_heads
    try:
        return ct2_fairseq._get_model_spec(stock)
    except ValueError as err:
        raise ExportError(f"CTranslate2 cannot represent this model: {err}") from err


def _stack_width(plan: ExportPlan, stack: str) -> int:
    widths = {
        a.head_dim
        for a in plan.attentions
        if a.kept and (a.kind == "enc-self") == (stack == "encoder")
    }
    return widths.pop() if widths else 1


def _build_spec(args, plan: ExportPlan):
    """CTranslate2's TransformerSpec with each stack's head count and ``head_dim`` declared
    on every attention (the empty attentions' width is set to 1 afterwards).

    The same options as CTranslate2's fairseq converter passes to ``from_config``, but one
    encoder and one decoder spec built separately, since their head counts differ.
    """
    from ctranslate2.specs import transformer_spec

    activation = ct2_fairseq._SUPPORTED_ACTIVATIONS[getattr(args, "activation_fn", "relu")]
    common = dict(
        pre_norm=args.encoder_normalize_before,
        activation=activation,
        layernorm_embedding=getattr(args, "layernorm_embedding", False),
    )
    encoder = transformer_spec.TransformerEncoderSpec(
        args.encoder_layers, plan.encoder_heads, head_dim=_stack_width(plan, "encoder"), **common
    )
    layer, heads = alignment(args, plan)
    decoder = transformer_spec.TransformerDecoderSpec(
        args.decoder_layers,
        plan.decoder_heads,
        head_dim=_stack_width(plan, "decoder"),
        alignment_layer=layer,
        alignment_heads=heads,
        **common,
    )
    return transformer_spec.TransformerSpec(encoder, decoder)


def alignment(args, plan: ExportPlan) -> Tuple[int, int]:
    """CTranslate2's (alignment_layer, alignment_heads) for fairseq's alignment.

    fairseq's decoder averages the cross-attention weights of its alignment layer (default:
    the last) over its first ``--alignment-heads`` heads (default: all of them); a stripped
    layer has only its kept heads. CTranslate2 averages the first ``alignment_heads`` heads
    of the padded layer (0: all), and the padding puts the kept heads first, so the count
    is the kept one: averaging in the zero-padded heads (uniform weights) would not give
    fairseq's attention.
    """
    layer = getattr(args, "alignment_layer", None)
    layer = args.decoder_layers - 1 if layer is None or layer < 0 else int(layer)
    cross = [a for a in plan.attentions if a.kind == "cross" and a.layer == layer]
    kept = cross[0].kept if cross else 0
    wanted = getattr(args, "alignment_heads", None) or kept
    return layer, min(wanted, kept)


def _prepare_state(state: dict, log) -> Tuple[dict, argparse.Namespace, str]:
    """(stripped or full state, transformer_dsp args without gate, description)."""
    from ..pruning.strip import strip_checkpoint

    args = model_args(state)
    arch = arch_of(args)
    if is_stock_transformer_arch(arch):
        args = dsp_model_args(args)
        return dict(state, model=state["model"]), args, f"stock fairseq {arch}: all heads"
    if not is_dsp_arch(arch):
        raise ExportError(
            f"architecture {arch!r} is neither a transformer_dsp architecture nor one of "
            "fairseq's `transformer` model; dsp-export-ct2 exports only those"
        )
    if getattr(args, "stripped_heads", None):
        return state, copy.copy(args), f"stripped transformer_dsp ({args.stripped_heads})"
    has_gate = any(k.startswith(GATE_PREFIX) for k in state["model"])
    if not has_gate or getattr(args, "gate_type", "dsp") == "none":
        args = copy.copy(args)
        args.gate_type = "none"
        weights = {k: v for k, v in state["model"].items() if not k.startswith(GATE_PREFIX)}
        return dict(state, model=weights), args, "transformer_dsp without gate: all heads"
    new_state, _ = strip_checkpoint(state)
    log(
        "gated transformer_dsp checkpoint: exporting the heads of its gate's test mask "
        "(stripped in memory, as dsp-strip would)"
    )
    return new_state, copy.copy(model_args(new_state)), "gated transformer_dsp, stripped"


def export_plan(args) -> ExportPlan:
    counts: dict = {}
    for slot in attention_slots(args):
        counts.setdefault(slot.kind, []).append(slot.num_heads)
    head_dims = {
        "encoder": args.encoder_embed_dim // args.encoder_attention_heads,
        "decoder": args.decoder_embed_dim // args.decoder_attention_heads,
    }
    return plan_export(counts, head_dims)


def _padded_module(module, plan) -> SimpleNamespace:
    """The attention's projections padded to the plan, shaped like fairseq's modules."""
    weights = {}
    for name in ("q_proj", "k_proj", "v_proj", "out_proj"):
        layer = getattr(module, name)
        weights[f"{name}.weight"] = layer.weight.detach()
        weights[f"{name}.bias"] = None if layer.bias is None else layer.bias.detach()
    padded = pad_attention(weights, plan.kept, module.head_dim, plan.heads, plan.head_dim)

    def linear(name):
        return SimpleNamespace(weight=padded[f"{name}.weight"], bias=padded[f"{name}.bias"])

    return SimpleNamespace(**{n: linear(n) for n in ("q_proj", "k_proj", "v_proj", "out_proj")})


class DSPFairseqConverter(FairseqConverter):
    """CTranslate2's ``FairseqConverter`` for stripped, gated and stock checkpoints."""

    def __init__(
        self,
        model_path: str,
        data_dir: Optional[str] = None,
        source_lang: Optional[str] = None,
        target_lang: Optional[str] = None,
        fixed_dictionary: Optional[str] = None,
        no_default_special_tokens: bool = False,
        user_dir: Optional[str] = None,
        unsafe_deserialization: bool = False,
        log=print,
    ):
        """``FairseqConverter``'s options; those that do not apply are refused, with why."""
        if ct2_fairseq is None:
            raise ExportError("ctranslate2 is not installed: pip install ctranslate2")
        if fixed_dictionary is not None:
            raise ExportError(
                "fixed_dictionary is for fairseq's multilingual models; transformer_dsp "
                "checkpoints are bilingual (their dictionaries come from data_dir)"
            )
        if unsafe_deserialization:
            raise ExportError(
                "unsafe_deserialization: checkpoints are always loaded weights-only here "
                "(with the plugin's allowlist of fairseq's config types)"
            )
        super().__init__(
            model_path,
            data_dir,
            source_lang=source_lang,
            target_lang=target_lang,
            no_default_special_tokens=no_default_special_tokens,
            user_dir=user_dir,
        )
        self._log = log
        self.plan: Optional[ExportPlan] = None
        self.description = ""

    def _load(self):
        import torch
        from fairseq import tasks

        if self._user_dir:  # more fairseq extensions than this plugin, as upstream allows
            from fairseq.utils import import_user_module

            import_user_module(argparse.Namespace(user_dir=self._user_dir))
        state = load_checkpoint(self._model_path)
        state, args, self.description = _prepare_state(state, self._log)
        reasons = unsupported_options(args)
        if reasons:
            raise ExportError("CTranslate2 cannot represent this model: " + "; ".join(reasons))
        _ct2_checks(args)
        self.plan = plan = export_plan(args)
        spec = _build_spec(args, plan)

        args = copy.copy(args)
        args.data = self._data_dir or getattr(args, "data", None)
        for side in ("source", "target"):
            if getattr(self, f"_{side}_lang") is not None:
                setattr(args, f"{side}_lang", getattr(self, f"_{side}_lang"))
        with torch.no_grad():
            task = tasks.setup_task(args)
            model = task.build_model(args)
            model.load_state_dict(state["model"], strict=True)
            model.eval()

            ct2_fairseq.set_transformer_encoder(spec.encoder, model.encoder)
            ct2_fairseq.set_transformer_decoder(spec.decoder, model.decoder)
            for a in plan.attentions:
                if a.kind == "enc-self":
                    layer_spec, module = spec.encoder.layer[a.layer], model.encoder.layers[a.layer]
                    attn_spec, attn, is_self = layer_spec.self_attention, module.self_attn, True
                else:
                    layer_spec, module = spec.decoder.layer[a.layer], model.decoder.layers[a.layer]
                    if a.kind == "dec-self":
                        attn_spec, attn, is_self = layer_spec.self_attention, module.self_attn, True
                    else:
                        attn_spec, attn, is_self = layer_spec.attention, module.encoder_attn, False
                ct2_fairseq.set_multi_head_attention(
                    attn_spec, _padded_module(attn, a), self_attention=is_self
                )
                attn_spec.head_dim = np.dtype("int32").type(a.head_dim)
                for linear in attn_spec.linear:
                    for name in ("weight", "bias"):
                        value = getattr(linear, name, None)
                        if isinstance(value, torch.Tensor):
                            setattr(linear, name, value.numpy())

            spec.register_source_vocabulary(ct2_fairseq._get_vocab(task.source_dictionary))
            spec.register_target_vocabulary(ct2_fairseq._get_vocab(task.target_dictionary))
            if self._no_default_special_tokens:  # as upstream: the caller supplies them
                spec.config.decoder_start_token = None
            else:
                spec.config.decoder_start_token = spec.config.eos_token
                spec.config.add_source_eos = True
        if plan.attentions and alignment(args, plan)[1] == 0:
            self._log(
                "note: the alignment layer keeps no cross-attention head; fairseq reports an "
                "all-zero attention for it, CTranslate2's return_attention will not"
            )
        return spec


def resolve_data_dir(state_args, data_dir: Optional[str]) -> str:
    """The fairseq data folder with the dictionaries: --data, else the checkpoint's own."""
    candidates = [data_dir] if data_dir else []
    if not data_dir:
        candidates += str(getattr(state_args, "data", "") or "").split(os.pathsep)
    for path in candidates:
        if path and os.path.isdir(path):
            return path
    raise ExportError(
        "need the fairseq data folder holding dict.SRC.txt and dict.TGT.txt (the "
        "vocabularies): give --data DIR"
        + (
            f" (the checkpoint's own, {data_dir or candidates}, does not exist)"
            if candidates
            else ""
        )
    )


def export_checkpoint(
    input_path: str,
    output_dir: str,
    data_dir: Optional[str] = None,
    quantization: Optional[str] = None,
    force: bool = False,
    log=print,
) -> DSPFairseqConverter:
    """Convert ``input_path`` into the CTranslate2 model folder ``output_dir``, atomically.

    The model is written into a temporary folder beside ``output_dir`` and renamed into
    place, so ``output_dir`` is either absent, the old model (on failure) or the new one.
    """
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(
            f"--quantization {quantization!r}: CTranslate2 accepts {', '.join(QUANTIZATIONS)}"
        )
    output_dir = os.path.abspath(output_dir)
    parent = os.path.dirname(output_dir)
    if not os.path.isdir(parent):
        raise ExportError(f"--output {output_dir}: folder {parent} does not exist; create it first")
    if os.path.exists(output_dir) and not force:
        raise ExportError(f"--output {output_dir} exists; remove it or pass --force")
    state_args = model_args(load_checkpoint(input_path))
    data = resolve_data_dir(state_args, data_dir)
    converter = DSPFairseqConverter(input_path, data, log=log)
    tmp = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.tmp-", dir=parent)
    old = None
    try:
        try:
            converter.convert(tmp, quantization=quantization, force=True)
        except (OSError, ValueError) as err:
            if isinstance(err, CheckpointError):
                raise
            raise ExportError(f"export failed: {type(err).__name__}: {err}") from err
        if os.path.exists(output_dir):
            old = tempfile.mkdtemp(prefix=f".{os.path.basename(output_dir)}.old-", dir=parent)
            os.rename(output_dir, os.path.join(old, "model"))
        os.rename(tmp, output_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        if old and not os.path.exists(output_dir):
            os.rename(os.path.join(old, "model"), output_dir)
        raise
    finally:
        if old:
            shutil.rmtree(old, ignore_errors=True)
    return converter
