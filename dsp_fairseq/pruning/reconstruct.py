"""Layer-wise reconstruction of a pruned model: refit what the removed heads broke.

After heads are removed, each pruned attention's output projection (the kept
heads' columns and the bias) is refit by ridge least squares so that the pruned
sublayer reproduces the unpruned model's output on calibration batches (teacher
forcing, ``eval()``), attention by attention in forward order (the encoder, then
the decoder's self- and cross-attention layer by layer), each fed by the already
reconstructed layers below (Kwon et al. 2022, "A Fast Post-Training Pruning
Framework for Transformers"; SparseGPT-style one class per layer that
accumulates a Gram matrix and solves once).

The target of attention ``a`` on a token is, by default, the unpruned model's
*residual stream* after the sublayer: ``teacher_out + teacher_residual -
student_residual``, so the refit also corrects the drift the layers below left
in the residual (``target="residual"``); ``target="output"`` fits the unpruned
sublayer output alone. An attention left with no head is fit with only its bias:
the mean of the target. Each fit keeps only the Gram matrix ``[X 1]^T [X 1]``
and ``[X 1]^T Y``, in float64; the batches' inputs to the layer being refit are
kept between jobs within a memory budget (:mod:`.layer_inputs`: a job runs its
layer instead of the model up to it; with a budget of 0 memory does not depend
on the number of batches).

``refit_ffn`` (default) also refits each block's FFN output layer (``fc2``),
after the block's attentions, against the unpruned block output: measured
better than the attention refit alone on every model tried (bench/RESULTS.md).

Pure computation on two models and batches; reading checkpoints and data is the
CLI's job (``dsp-strip --reconstruct``, ``dsp-reconstruct``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import torch
from torch import Tensor, nn

from .layer_inputs import DEFAULT_CACHE_MB, Budget, LayerInputs, StopForward, layer_of

TARGETS = ("residual", "output")
RIDGE_TOWARDS = ("zero", "current")
GRAM_DTYPE = torch.float64


class LinearRefit:
    """Least-squares refit of one linear layer ``y = W x + b`` from streamed batches.

    ``add_batch`` accumulates ``[X 1]^T [X 1]`` and ``[X 1]^T Y`` (float64) over
    the rows selected by a mask; ``solve`` returns the ridge solution. The ridge
    is relative: ``ridge * mean(diag(X^T X))`` is added to the weight part of the
    Gram diagonal (the bias is not shrunk), so it means the same for every layer.
    """

    def __init__(self, in_features: int, out_features: int, device=None):
        n = in_features + 1
        self.in_features = in_features
        self.gram = torch.zeros(n, n, dtype=GRAM_DTYPE, device=device)
        self.cross = torch.zeros(n, out_features, dtype=GRAM_DTYPE, device=device)
        self.target_sq = 0.0  # sum of |y|^2, for the relative error
        self.rows = 0

    def add_batch(self, x: Tensor, y: Tensor, keep: Optional[Tensor] = None) -> None:
        """``x``: (..., in), ``y``: (..., out); ``keep``: bool (...), rows to use."""
        rows = y.numel() // y.size(-1)  # (x may have no columns: an attention with no head)
        x = x.reshape(rows, x.size(-1)).to(GRAM_DTYPE)
        y = y.reshape(rows, y.size(-1)).to(GRAM_DTYPE)
        if keep is not None:
            keep = keep.reshape(-1)
            x, y = x[keep], y[keep]
        ones = torch.ones(x.size(0), 1, dtype=GRAM_DTYPE, device=x.device)
        xa = torch.cat([x, ones], dim=1)
        self.gram += xa.T @ xa
        self.cross += xa.T @ y
        self.target_sq += float((y * y).sum())
        self.rows += x.size(0)

    def solve(self, ridge: float, prior: Optional[Tensor] = None) -> Tuple[Tensor, Tensor]:
        """``(weight (out, in), bias (out,))`` in float64.

        ``prior`` (a weight (out, in)) shrinks the weight towards it instead of towards
        zero: ``min |XW^T + b - Y|^2 + lambda |W - prior|^2`` (a MAP fit around weights
        that are already good, e.g. those a gate run trained).
        """
        if self.rows == 0:
            raise ValueError("no calibration rows were accumulated: nothing to refit from")
        n = self.in_features
        gram = self.gram.clone()
        cross = self.cross
        if n and ridge > 0:
            diag = torch.diagonal(gram)[:n]
            lam = ridge * float(diag.mean().clamp_min(1e-12))
            diag += lam
            if prior is not None:
                cross = cross.clone()
                cross[:n] += lam * prior.to(GRAM_DTYPE).T
        try:
            sol = torch.linalg.solve(gram, cross)
        except RuntimeError:  # singular (ridge 0 with dependent features)
            sol = torch.linalg.pinv(gram) @ cross
        return sol[:n].T.contiguous(), sol[n].contiguous()

    def residual_error(self, weight: Tensor, bias: Tensor) -> float:
        """Relative squared error ``|XW^T + b - Y|^2 / |Y|^2`` of a solution, from the sums."""
        sol = torch.cat([weight.T.to(GRAM_DTYPE), bias.view(1, -1).to(GRAM_DTYPE)], dim=0)
        # |Y|^2 - 2 tr(S^T X^T Y) + tr(S^T X^T X S)
        err = self.target_sq - 2 * float((sol * self.cross).sum())
        err += float((sol * (self.gram @ sol)).sum())
        return max(err, 0.0) / max(self.target_sq, 1e-30)


@dataclass
class SlotRecord:
    """What the refit did to one attention (or FFN output layer)."""

    prefix: str
    heads: int
    rows: int
    error_before: float  # relative squared error of the pruned weights, same target
    error_after: float


@dataclass
class ReconstructionReport:
    target: str
    ridge: float
    batches: int
    ridge_toward: str = "zero"
    tokens: Dict[str, int] = field(default_factory=dict)  # encoder / decoder positions
    layer_inputs_mb: float = 0.0  # the most memory the kept layer inputs took
    slots: List[SlotRecord] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "target": self.target,
            "ridge": self.ridge,
            "ridge_toward": self.ridge_toward,
            "calibration_batches": self.batches,
            "calibration_tokens": dict(self.tokens),
            "layer_inputs_mb": round(self.layer_inputs_mb, 1),
            "layers": [vars(s) for s in self.slots],
        }

    def table(self) -> str:
        rows = [f"{'refit layer':<34} {'heads':>5} {'error before':>13} {'after':>9}"]
        for s in self.slots:
            rows.append(
                f"{s.prefix:<34} {s.heads:>5} {s.error_before:>13.4f} {s.error_after:>9.4f}"
            )
        rows.append(
            f"reconstruction: target {self.target}, ridge {self.ridge:g} towards "
            f"{self.ridge_toward}, {self.batches} "
            f"batches ({self.tokens.get('encoder', 0):,} source / "
            f"{self.tokens.get('decoder', 0):,} target tokens)"
        )
        return "\n".join(rows)


def _parent(model: nn.Module, prefix: str) -> nn.Module:
    return model.get_submodule(prefix.rsplit(".", 1)[0])


def forward_order(model: nn.Module) -> List[str]:
    """Attention prefixes of a ``transformer_dsp`` model in the order a forward pass runs them."""
    prefixes = [slot.prefix for slot, _ in model.attention_modules()]

    def key(prefix: str):
        parts = prefix.split(".")  # encoder|decoder . layers . i . self_attn|encoder_attn
        return (parts[0] != "encoder", int(parts[2]), parts[3] != "self_attn")

    return sorted(prefixes, key=key)


def _residual_module(layer: nn.Module, attn_name: str) -> Tuple[nn.Module, bool]:
    """The module whose input is the sublayer's residual, and whether it is the attention."""
    if getattr(layer, "normalize_before", False):
        ln = "self_attn_layer_norm" if attn_name == "self_attn" else "encoder_attn_layer_norm"
        return getattr(layer, ln), False
    return getattr(layer, attn_name), True


def _check_supported(layer: nn.Module, prefix: str) -> None:
    for name in ("attn_ln", "c_attn", "ffn_layernorm", "w_resid"):
        if getattr(layer, name, None) is not None:
            raise ValueError(
                f"{prefix}: layer option {name} (NormFormer / scaled residuals) changes the "
                "sublayer output after the attention; reconstruction supports fairseq's "
                "plain pre-norm and post-norm layers only"
            )


def _capture(
    model: nn.Module, prefix: str, sample: dict, kind: str, run: Optional[Callable] = None
) -> Dict[str, Tensor]:
    """Run ``model`` on ``sample`` until the refit layer of job ``(prefix, kind)`` has run.

    ``run`` runs the forward pass (default ``model(**sample["net_input"])``; a
    :class:`LayerInputs` runner starts at the job's layer with its kept input).

    Returns ``x`` (the refit layer's input), ``out`` (its output) and, for the
    layers fit to the residual stream (``kind`` ``attn``: out_proj; ``fc2``),
    ``residual``: the sublayer's residual input. ``fc1`` is fit to the
    unpruned layer's own output (its input already drifted), so it needs none.
    ``qkv``: ``q_proj_in``, ``k_proj_in`` and the three projections' outputs.
    """
    layer = _parent(model, prefix)
    attn_name = prefix.rsplit(".", 1)[1]
    got: Dict[str, Tensor] = {}
    handles = []

    def keep_residual(_m, args, kwargs):
        got["residual"] = kwargs["query"] if "query" in kwargs else args[0]

    if kind == "fc2":
        # residual of the FFN = the input of final_layer_norm in pre-norm, else the
        # input of fc1 (post-norm: the output of the previous LayerNorm)
        res_mod = layer.final_layer_norm if layer.normalize_before else layer.fc1
        handles.append(
            res_mod.register_forward_pre_hook(lambda _m, a: got.__setitem__("residual", a[0]))
        )
    elif kind == "attn":
        res_mod, is_attn = _residual_module(layer, attn_name)
        if is_attn:
            handles.append(res_mod.register_forward_pre_hook(keep_residual, with_kwargs=True))
        else:
            handles.append(
                res_mod.register_forward_pre_hook(lambda _m, a: got.__setitem__("residual", a[0]))
            )

    def out_hook(_m, inputs, output):
        got["x"], got["out"] = inputs[0], output
        raise StopForward

    if kind == "qkv":  # the projections' inputs and outputs; stop once v_proj has run
        attn = getattr(layer, attn_name)
        for name in ("q_proj", "k_proj"):
            handles.append(
                getattr(attn, name).register_forward_hook(
                    lambda _m, a, out, n=name: got.update({n + "_in": a[0], n: out})
                )
            )

        def v_hook(_m, inputs, output):
            got["v_proj"] = output
            raise StopForward

        handles.append(attn.v_proj.register_forward_hook(v_hook))
    else:
        handles.append(_refit_layer(model, prefix, kind).register_forward_hook(out_hook))
    try:
        if run is None:
            model(**sample["net_input"])
        else:
            run()
    except StopForward:
        pass
    finally:
        for h in handles:
            h.remove()
    if not got or (kind in ("attn", "fc2") and "residual" not in got):
        raise RuntimeError(f"{prefix}: the forward pass never reached this layer")
    return got


def _refit_layer(model: nn.Module, prefix: str, kind: str) -> nn.Linear:
    """The linear layer job ``(prefix, kind)`` refits: an attention's out_proj, fc1 or fc2."""
    return (
        _attention(model, prefix).out_proj
        if kind == "attn"
        else getattr(_parent(model, prefix), kind)
    )


def refit_name(prefix: str, kind: str) -> str:
    """The module name a job refits (the attention's prefix for its out_proj)."""
    return prefix if kind == "attn" else prefix.rsplit(".", 1)[0] + "." + kind


def _positions(sample: dict, prefix: str, pad: int) -> Tensor:
    """(time, batch) mask of real (non-pad) positions for a layer's stream."""
    net = sample["net_input"]
    tokens = net["src_tokens"] if prefix.startswith("encoder") else net["prev_output_tokens"]
    return tokens.ne(pad).T


@torch.no_grad()
def reconstruct(
    student: nn.Module,
    teacher: nn.Module,
    batches: Callable[[], Iterable[dict]],
    ridge: float = 1e-3,
    target: str = "residual",
    refit_ffn: bool = True,
    refit_fc1: bool = False,
    refit_qkv: bool = False,
    kept: Optional[Dict[str, List[int]]] = None,
    ridge_toward: str = "zero",
    progress: Optional[Callable[[str], None]] = None,
    cache_mb: float = DEFAULT_CACHE_MB,
) -> ReconstructionReport:
    """Refit ``student``'s attention output projections in place to match ``teacher``.

    ``student`` is the pruned ``transformer_dsp`` model (stripped, no gate),
    ``teacher`` the unpruned one with the same dictionaries and non-attention
    shapes; ``batches()`` returns a fresh iterable of the same calibration
    batches each call. Both models are used in ``eval()`` and left in it.
    ``refit_ffn`` also refits each block's ``fc2`` against the unpruned block
    output; ``refit_fc1`` (with it) first refits ``fc1`` so that its
    pre-activations on the pruned model's drifted input match the unpruned ones;
    ``refit_qkv`` first refits each attention's kept q/k/v projection rows to the
    unpruned model's rows of the same heads (``kept``: the unpruned head index of
    every kept head, per attention, as dsp-strip records it). ``ridge_toward="current"``
    shrinks each refit layer towards the weights it has instead of towards zero.
    ``cache_mb``: memory for the batches' inputs to the layer being refit, kept
    between jobs so that a job runs its layer alone (:mod:`.layer_inputs`; the same
    numbers, in a fraction of the time); 0 runs the model from its embeddings for
    every job and batch, in memory independent of the number of batches.
    """
    if target not in TARGETS:
        raise ValueError(f"reconstruction target {target!r}: choose one of {', '.join(TARGETS)}")
    if ridge < 0:
        raise ValueError(f"--ridge {ridge} must be >= 0")
    if ridge_toward not in RIDGE_TOWARDS:
        raise ValueError(
            f"--ridge-toward {ridge_toward!r}: choose one of {', '.join(RIDGE_TOWARDS)}"
        )
    toward_current = ridge_toward == "current"
    if refit_fc1 and not refit_ffn:
        raise ValueError("refitting fc1 needs the FFN refit (fc2) too")
    if refit_qkv and kept is None:
        raise ValueError("refitting q/k/v needs the kept heads' indices in the unpruned model")
    if cache_mb < 0:
        raise ValueError(f"--calibration-cache-mb {cache_mb} must be >= 0")
    student.eval()
    teacher.eval()
    pad = student.decoder.dictionary.pad()
    order = forward_order(student)
    teacher_prefixes = set(forward_order(teacher))
    missing = [p for p in order if p not in teacher_prefixes]
    if missing:
        raise ValueError(f"the unpruned model has no attention {missing[0]}")
    report = ReconstructionReport(target=target, ridge=ridge, batches=0, ridge_toward=ridge_toward)
    jobs: List[Tuple[str, str]] = []  # (attention prefix, qkv | attn | fc1 | fc2)
    for i, prefix in enumerate(order):
        _check_supported(_parent(student, prefix), prefix)
        if refit_qkv and _attention(student, prefix).num_heads > 0:
            jobs.append((prefix, "qkv"))
        jobs.append((prefix, "attn"))
        layer = prefix.rsplit(".", 1)[0]
        last_in_layer = i + 1 == len(order) or not order[i + 1].startswith(layer + ".")
        if refit_ffn and last_in_layer:  # the block's FFN runs after all its attentions
            jobs.extend([(prefix, "fc1")] if refit_fc1 else [])
            jobs.append((prefix, "fc2"))
    # the batches' inputs to the layer of the current job, one set per model
    budget = Budget(cache_mb * 2**20)
    inputs = s_in, t_in = LayerInputs(student, budget), LayerInputs(teacher, budget)
    for i, (prefix, kind) in enumerate(jobs):
        for kept_inputs in inputs:
            kept_inputs.move_to(layer_of(prefix), batches)
        if kind == "qkv":
            for rec in _refit_projections(
                student, teacher, prefix, kept, batches, pad, ridge, toward_current, inputs
            ):
                report.slots.append(rec)
                if progress is not None:
                    progress(
                        f"[{i + 1}/{len(jobs)}] {rec.prefix}: relative error "
                        f"{rec.error_before:.4f} -> {rec.error_after:.4f} ({rec.rows:,} positions)"
                    )
            continue
        lin = _refit_layer(student, prefix, kind)
        fit = LinearRefit(lin.in_features, lin.out_features)
        n_batches = 0
        for b, sample in enumerate(batches()):
            s = _capture(student, prefix, sample, kind, s_in.runner(b, sample))
            t = _capture(teacher, prefix, sample, kind, t_in.runner(b, sample))
            y = t["out"].double()
            if target == "residual" and kind != "fc1":
                y = y + t["residual"].double() - s["residual"].double()
            fit.add_batch(s["x"], y, _positions(sample, prefix, pad))
            n_batches += 1
            if i == 0:
                tokens = report.tokens
                tokens["encoder"] = tokens.get("encoder", 0) + int(
                    _positions(sample, "encoder", pad).sum()
                )
                tokens["decoder"] = tokens.get("decoder", 0) + int(
                    _positions(sample, "decoder", pad).sum()
                )
        report.batches = n_batches
        weight, bias = fit.solve(ridge, lin.weight.detach() if toward_current else None)
        old_b = lin.bias if lin.bias is not None else torch.zeros(lin.out_features)
        before = fit.residual_error(lin.weight.detach().double(), old_b.detach().double())
        lin.weight.copy_(weight.to(lin.weight.dtype))
        if lin.bias is None:
            raise ValueError(f"{refit_name(prefix, kind)}: the layer has no bias to refit")
        lin.bias.copy_(bias.to(lin.bias.dtype))
        after = fit.residual_error(weight, bias)
        name = refit_name(prefix, kind)
        heads = _attention(student, prefix).num_heads if kind == "attn" else -1
        report.slots.append(SlotRecord(name, heads, fit.rows, before, after))
        if progress is not None:
            progress(
                f"[{i + 1}/{len(jobs)}] {name}: {f'{heads} heads, ' if kind == 'attn' else ''}"
                f"relative error {before:.4f} -> {after:.4f} ({fit.rows:,} positions)"
            )
    report.layer_inputs_mb = budget.peak / 2**20
    return report


def _attention(model: nn.Module, prefix: str) -> nn.Module:
    return getattr(_parent(model, prefix), prefix.rsplit(".", 1)[1])


def _refit_projections(
    student, teacher, prefix, kept, batches, pad, ridge, toward_current=False, inputs=None
) -> List[SlotRecord]:
    """Refit one attention's q_proj and k_proj/v_proj (one solve each: k and v share
    their input) so that, on the pruned model's inputs, they give the unpruned model's
    rows of the kept heads on its own inputs."""
    attn = _attention(student, prefix)
    heads = list(kept.get(prefix, ()))
    if len(heads) != attn.num_heads:
        raise ValueError(
            f"{prefix}: {attn.num_heads} heads in the pruned model, {len(heads)} kept indices"
        )
    d = attn.head_dim
    rows = torch.cat([torch.arange(h * d, (h + 1) * d) for h in heads])
    key_stream = "encoder" if attn.encoder_decoder_attention else prefix
    fits = {
        "q_proj": LinearRefit(attn.q_proj.in_features, len(rows)),
        "kv_proj": LinearRefit(attn.k_proj.in_features, 2 * len(rows)),
    }
    s_in, t_in = inputs if inputs is not None else (None, None)
    for b, sample in enumerate(batches()):
        s = _capture(student, prefix, sample, "qkv", s_in and s_in.runner(b, sample))
        t = _capture(teacher, prefix, sample, "qkv", t_in and t_in.runner(b, sample))
        fits["q_proj"].add_batch(
            s["q_proj_in"], t["q_proj"][..., rows], _positions(sample, prefix, pad)
        )
        kv = torch.cat([t["k_proj"][..., rows], t["v_proj"][..., rows]], dim=-1)
        fits["kv_proj"].add_batch(s["k_proj_in"], kv, _positions(sample, key_stream, pad))
    records = []
    for name, fit in fits.items():
        layers = [attn.q_proj] if name == "q_proj" else [attn.k_proj, attn.v_proj]
        old_w = torch.cat([lin.weight.detach() for lin in layers]).double()
        old_b = torch.cat([lin.bias.detach() for lin in layers]).double()
        before = fit.residual_error(old_w, old_b)
        weight, bias = fit.solve(ridge, old_w if toward_current else None)
        for j, lin in enumerate(layers):
            part = slice(j * len(rows), (j + 1) * len(rows))
            lin.weight.copy_(weight[part].to(lin.weight.dtype))
            lin.bias.copy_(bias[part].to(lin.bias.dtype))
        after = fit.residual_error(weight, bias)
        records.append(SlotRecord(f"{prefix}.{name}", -1, fit.rows, before, after))
    return records
