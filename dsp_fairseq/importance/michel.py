"""Head importance scores of Michel, Levy & Neubig (NeurIPS 2019).

The importance of head h is the expected absolute gradient of the loss with
respect to a mask m_h fixed at 1 that scales the head's output:

    I_h = (1 / N_tokens) * sum over units x of | d loss(x) / d m_h |

The mask is applied by a forward pre-hook on each attention's output
projection (whose input is the concatenation of the head outputs), so any
``transformer_dsp`` model works, gated, ungated (a stock ``transformer``
checkpoint loaded as ``transformer_dsp``) or stripped; a gated model keeps its
own test mask. The loss is the token-level negative log-likelihood (no label
smoothing), computed in ``eval()`` mode (no dropout).

The unit x over which the absolute value is taken (``granularity``):

* ``token`` (default; Michel et al.'s per-token definition, docs/methods.md): every target token's loss; one backward
  pass per target position of a batch (each sentence has its own copy of
  the mask, so one pass serves all sentences of the batch);
* ``sentence``: every sentence's summed loss; one backward pass per batch;
* ``batch``: every batch's summed loss (as in the authors' public code).

Everything here is computation on a model and batches; loading checkpoints
and data is the CLI's job (``dsp-importance``).
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import (
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    MutableMapping,
    Optional,
    Sequence,
    Tuple,
)

import torch
from torch import Tensor, nn

from ..models.head_layout import AttentionSlot

GRANULARITIES = ("token", "sentence", "batch")
SCORE_DTYPE = torch.float64

#: progress(batch_index, num_tokens_so_far) after every batch
Progress = Optional[Callable[[int, int], None]]


@dataclass
class HeadImportance:
    """Importance of every head of the model, in head-layout order."""

    slots: List[AttentionSlot]
    scores: Tensor  # (H,) float64; 0 for heads masked out (``alive`` False)
    num_batches: int
    num_sentences: int
    num_tokens: int
    #: heads from least to most important, as indices into ``scores``
    ranking: List[int] = field(default_factory=list)
    #: iterative mode: the heads masked at each step (indices into ``scores``)
    steps: List[List[int]] = field(default_factory=list)

    def per_slot(self) -> Dict[str, List[float]]:
        """``{slot prefix: [score of head 0, head 1, ...]}``."""
        out, start = {}, 0
        for slot in self.slots:
            out[slot.prefix] = self.scores[start : start + slot.num_heads].tolist()
            start += slot.num_heads
        return out


def attention_modules(model: nn.Module) -> List[Tuple[AttentionSlot, nn.Module]]:
    """(slot, attention module) pairs of a ``transformer_dsp`` model, layout order."""
    if not hasattr(model, "attention_modules"):
        raise TypeError(
            f"{type(model).__name__} is not a transformer_dsp model; load stock fairseq "
            "transformer checkpoints as transformer_dsp (dsp-importance does this)"
        )
    return [
        (AttentionSlot(slot.kind, slot.layer, slot.prefix, attn.num_heads), attn)
        for slot, attn in model.attention_modules()
    ]


class _MaskHolder:
    """The (batch, H) mask of the forward pass under way, read by the hooks."""

    mask: Optional[Tensor] = None


@contextmanager
def head_mask_hooks(
    modules: Sequence[Tuple[AttentionSlot, nn.Module]], holder: _MaskHolder
) -> Iterator[None]:
    """Scale each head's output by ``holder.mask[:, its column]`` while active."""

    def make_hook(start: int, heads: int, head_dim: int):
        def hook(_module, inputs):
            (x,) = inputs  # (time, batch, heads * head_dim), heads concatenated
            time, bsz, _ = x.shape
            m = holder.mask[:, start : start + heads]
            if m.size(0) != bsz:
                raise RuntimeError(f"head mask has {m.size(0)} rows for a batch of {bsz}")
            x = x.reshape(time, bsz, heads, head_dim) * m.to(x.dtype).view(1, bsz, heads, 1)
            return (x.reshape(time, bsz, heads * head_dim),)

        return hook

    handles, start = [], 0
    try:
        for slot, attn in modules:
            if slot.num_heads:
                handles.append(
                    attn.out_proj.register_forward_pre_hook(
                        make_hook(start, slot.num_heads, attn.head_dim)
                    )
                )
            start += slot.num_heads
        yield
    finally:
        for handle in handles:
            handle.remove()


def token_nll(model: nn.Module, sample: dict, pad: int) -> Tuple[Tensor, Tensor]:
    """Per-token negative log-likelihood (batch, time), 0 at padding, and the pad mask."""
    net_output = model(**sample["net_input"])
    lprobs = model.get_normalized_probs(net_output, log_probs=True)
    target = sample["target"]
    nonpad = target.ne(pad)
    nll = -lprobs.gather(-1, target.unsqueeze(-1)).squeeze(-1)
    return nll.masked_fill(~nonpad, 0.0), nonpad


def _abs_grads(nll: Tensor, nonpad: Tensor, mask: Tensor, granularity: str) -> Tensor:
    """Sum over units of |d loss(unit) / d mask_h| for one batch: (H,)."""
    if granularity == "batch":
        (grad,) = torch.autograd.grad(nll.sum(), mask)
        return grad.sum(0).abs()
    if granularity == "sentence":
        (grad,) = torch.autograd.grad(nll.sum(), mask)
        return grad.abs().sum(0)
    # token: row b of d(sum_b nll[b, t]) / d mask is d nll[b, t] / d mask[b],
    # because sentence b's computation only involves its own mask row.
    total = torch.zeros(mask.size(1), dtype=mask.dtype, device=mask.device)
    positions = [t for t in range(nll.size(1)) if bool(nonpad[:, t].any())]
    for i, t in enumerate(positions):
        (grad,) = torch.autograd.grad(nll[:, t].sum(), mask, retain_graph=i < len(positions) - 1)
        total += grad.abs().sum(0)
    return total


def normalize_per_layer(scores: Tensor, slots: Sequence[AttentionSlot]) -> Tensor:
    """Divide each attention's scores by their L2 norm (Michel et al.'s option)."""
    out, start = scores.clone(), 0
    for slot in slots:
        part = out[start : start + slot.num_heads]
        part /= part.norm(p=2) + 1e-20
        start += slot.num_heads
    return out


def head_importance(
    model: nn.Module,
    batches: Iterable[dict],
    granularity: str = "token",
    normalize: bool = False,
    alive: Optional[Tensor] = None,
    progress: Progress = None,
) -> HeadImportance:
    """Importance of every head of ``model`` over ``batches`` (fairseq samples).

    ``alive`` (bool, (H,)): heads whose mask is 1; the others are masked to 0
    during the estimate and get score 0. ``normalize``: L2-normalise each
    attention's scores. The model is left as it was (mode and parameters).
    """
    if granularity not in GRANULARITIES:
        raise ValueError(f"granularity {granularity!r}: choose one of {', '.join(GRANULARITIES)}")
    modules = attention_modules(model)
    slots = [slot for slot, _ in modules]
    num_heads = sum(s.num_heads for s in slots)
    if alive is None:
        alive = torch.ones(num_heads, dtype=torch.bool)
    if alive.shape != (num_heads,):
        raise ValueError(f"alive must have shape ({num_heads},), got {tuple(alive.shape)}")
    pad = model.decoder.dictionary.pad()
    dtype = next(model.parameters()).dtype
    device = next(model.parameters()).device
    alive_f = alive.to(device=device, dtype=dtype)
    total = torch.zeros(num_heads, dtype=SCORE_DTYPE, device=device)
    holder = _MaskHolder()
    batches_seen = sentences = tokens = 0
    was_training = model.training
    model.eval()
    try:
        with head_mask_hooks(modules, holder):
            for sample in batches:
                bsz = sample["target"].size(0)
                holder.mask = alive_f.expand(bsz, num_heads).clone().requires_grad_(True)
                with torch.enable_grad():
                    nll, nonpad = token_nll(model, sample, pad)
                    total += _abs_grads(nll, nonpad, holder.mask, granularity).to(SCORE_DTYPE)
                batches_seen += 1
                sentences += bsz
                tokens += int(nonpad.sum())
                holder.mask = None
                if progress is not None:
                    progress(batches_seen, tokens)
    finally:
        model.train(was_training)
    if tokens == 0:
        raise ValueError("no target tokens in the batches: nothing to estimate importance from")
    scores = (total / tokens).cpu()
    scores[~alive.cpu()] = 0.0
    if normalize:
        scores = normalize_per_layer(scores, slots)
    return HeadImportance(slots, scores, batches_seen, sentences, tokens, ranking_of(scores))


def ranking_of(scores: Tensor, among: Optional[Tensor] = None) -> List[int]:
    """Indices from lowest to highest score (ties: lower index first), optionally a subset."""
    idx = range(scores.numel()) if among is None else torch.nonzero(among).view(-1).tolist()
    return sorted(idx, key=lambda i: (float(scores[i]), i))


def alive_key(alive: Tensor) -> str:
    """The cache key of a set of unmasked heads: one '1' or '0' per head."""
    return "".join("1" if a else "0" for a in alive.tolist())


def iterative_head_importance(
    model: nn.Module,
    batches: Callable[[], Iterable[dict]],
    heads_to_keep: int,
    step_fraction: float = 0.1,
    granularity: str = "token",
    normalize: bool = False,
    progress: Progress = None,
    on_step: Optional[Callable[[int, int, List[int]], None]] = None,
    cache: Optional[MutableMapping[str, HeadImportance]] = None,
) -> HeadImportance:
    """Mask the least important heads step by step, re-estimating after each step.

    Each step masks ``ceil(step_fraction * H)`` heads (10% of all heads by
    default, never going below ``heads_to_keep``) and re-estimates the rest
    with those heads masked, until ``heads_to_keep`` heads remain; then a final
    estimate scores the survivors. ``batches()`` must return a fresh iterable
    of the same batches each time. The ranking lists the masked heads in the
    order they were masked, then the survivors by their final score, so its
    last ``heads_to_keep`` entries are the survivors. ``on_step(step, heads
    left, masked)`` reports each step.

    ``cache`` (optional) maps an alive set (``alive_key``) to its estimate: an
    estimate found there is reused, a new one is stored. The path down to K
    does not depend on K until the last step (each step masks the same
    ``step_size`` heads), so runs to K = 36, 18 and 9 sharing one cache
    estimate their common prefix once. The cache must belong to one model,
    one set of batches and one ``granularity``/``normalize``.
    """
    num_heads = sum(s.num_heads for s, _ in attention_modules(model))
    if not 1 <= heads_to_keep <= num_heads:
        raise ValueError(
            f"--heads-to-keep {heads_to_keep} is out of range: this model has H={num_heads} "
            f"attention heads; choose K in [1, {num_heads}]"
        )
    if not 0 < step_fraction <= 1:
        raise ValueError(f"step fraction {step_fraction} must lie in (0, 1]")
    step_size = max(1, math.ceil(step_fraction * num_heads))
    alive = torch.ones(num_heads, dtype=torch.bool)
    last = torch.zeros(num_heads, dtype=SCORE_DTYPE)
    masked_order: List[int] = []
    steps: List[List[int]] = []
    while True:
        key = alive_key(alive)
        if cache is not None and key in cache:
            result = cache[key]
        else:
            result = head_importance(model, batches(), granularity, normalize, alive, progress)
            if cache is not None:
                cache[key] = result
        last[alive] = result.scores[alive]
        left = int(alive.sum())
        if left <= heads_to_keep:
            break
        drop = ranking_of(result.scores, among=alive)[: min(step_size, left - heads_to_keep)]
        alive[drop] = False
        masked_order += drop
        steps.append(drop)
        if on_step is not None:
            on_step(len(steps), int(alive.sum()), drop)
    # a new object: the last estimate may live in the cache
    return replace(
        result, scores=last, ranking=masked_order + ranking_of(last, among=alive), steps=steps
    )
