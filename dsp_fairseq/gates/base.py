"""The one interface every head-gating method implements.

A gate owns one learnable score per gated head (``logits``, shape ``(H,)``)
and turns it into a head mask: a relaxed or sampled one while training, a
deterministic 0/1 one at test time (the mask that ``dsp-strip`` removes).
The model only ever calls this interface; it never branches on a method name.

The logits are model *state* (saved as ``head_gate.logits``) but not an
``nn.Parameter``: fairseq's trainer builds its optimizer, gradient clipping,
fp16 flattening and data-parallel reduction from ``model.parameters()``, and
the gate is trained apart from all of them by the ``translation_dsp`` task
(``dsp_fairseq/tasks/translation_dsp.py``) with its own constant-LR Adam,
whose moments are saved with the logits (``head_gate.adam_*``) so that a
resumed run continues them on every rank.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Type

import torch
from torch import Tensor, nn

from .schedules import GATE_SCHEDULES, GateSchedule
from .soft_topk import GATE_DTYPE, distance_from_khot, hard_topk_mask

# (start, end, k): keep exactly k heads among logits[start:end]. One segment
# covering all heads is the global budget; one per attention type gives
# per-type budgets. A gate built with budget None (only gates whose
# ``budget_optional`` is True) decides itself how many heads to keep.
Budget = List[Tuple[int, int, int]]

# fairseq's plain tasks only step the trainer's parameters, which the logits are not.
UNTRAINED_GATE = (
    "nothing trains this model's head gate: train transformer_dsp with --task translation_dsp "
    "(it gives the gate its own optimizer), or freeze the gate with --freeze-gates"
)

GATE_REGISTRY: Dict[str, Type[HeadGate]] = {}


def register_gate(name: str) -> Callable[[Type[HeadGate]], Type[HeadGate]]:
    """Class decorator: make a gate selectable with ``--gate-type NAME``."""

    def wrap(cls: Type[HeadGate]) -> Type[HeadGate]:
        if name in GATE_REGISTRY:
            raise ValueError(f"gate type {name!r} registered twice")
        GATE_REGISTRY[name] = cls
        cls.gate_type = name
        return cls

    return wrap


class HeadGate(nn.Module):
    """Base class: learnable head scores plus train-time and test-time masks."""

    gate_type = "base"
    #: whether the criterion should anneal a temperature for this gate
    uses_temperature = False
    #: whether the gate can pick the kept heads without a budget (see free_test_mask)
    budget_optional = False

    def __init__(self, num_heads: int, budget: Optional[Budget]):
        super().__init__()
        if num_heads < 1:
            raise ValueError("a gate needs at least one head")
        if budget is None and not self.budget_optional:
            raise ValueError(
                f"gate type {self.gate_type!r} needs a budget (--heads-to-keep or "
                "--heads-to-keep-per-type)"
            )
        self.num_heads = num_heads
        self.budget = None if budget is None else [tuple(seg) for seg in budget]
        # A plain leaf tensor, not an nn.Parameter: kept out of fairseq's optimizer (see above).
        self.logits = torch.empty(num_heads, dtype=torch.float32, requires_grad=True)
        self.reset_parameters()
        # Set by the translation_dsp task when it trains this gate (prepare_training).
        self.optimizer: Optional[torch.optim.Optimizer] = None
        self.anchor: Optional[nn.Parameter] = None
        self._restore_optimizer = True
        self.temperature = 1.0
        # the training schedule (temperatures, anneal share); the model sets its own
        self.schedule: GateSchedule = GATE_SCHEDULES["joint"]
        # constant learning rate of the logits (the model sets --gate-lr)
        self.lr = self.schedule.gate_lr
        self.num_updates = 0
        self.frozen = False
        self._train_mask: Optional[Tensor] = None
        # The mask of the encoder/decoder pass under way (see one_mask_per_pass).
        self._pass_mask: Optional[Tensor] = None
        self._pass_depth = 0

    # -- to be provided by each method ------------------------------------
    def sample_mask(self) -> Tensor:
        """A fresh training mask of shape (H,), differentiable w.r.t. logits."""
        raise NotImplementedError

    def test_scores(self) -> Tensor:
        """Scores whose top-k per budget segment is the test-time mask."""
        return self.logits

    def penalty(self) -> Optional[Tensor]:
        """Regulariser the criterion adds to the loss (None: none)."""
        return None

    def free_test_mask(self) -> Tensor:
        """0/1 test mask chosen by the gate itself, used when it has no budget.

        Only gates with ``budget_optional = True`` are built without a budget,
        and they must override this.
        """
        raise NotImplementedError(f"gate type {self.gate_type!r} needs a budget")

    # -- shared machinery -------------------------------------------------
    def reset_parameters(self) -> None:
        # Xavier-uniform of a (1, H) matrix, as in the DSP reference code.
        bound = math.sqrt(6.0 / (1 + self.num_heads))
        nn.init.uniform_(self.logits, -bound, bound)

    def init_from_scores(self, scores: Tensor, scale: float) -> None:
        """Start the logits from per-head scores (e.g. head importance, one per head).

        Their logarithms, standardised, times ``scale``: the first test mask keeps the
        top-scored heads, and the scale (2 gives about the spread trained logits reach)
        decides how much evidence training needs to swap a head.
        """
        scores = torch.as_tensor(scores, dtype=torch.float64).flatten()
        if scores.numel() != self.num_heads:
            raise ValueError(f"{scores.numel()} scores for a gate of {self.num_heads} heads")
        if not torch.isfinite(scores).all() or (scores < 0).any():
            raise ValueError("head scores must be finite and non-negative")
        positive = scores[scores > 0]
        floor = positive.min() / 2 if positive.numel() else torch.tensor(1.0, dtype=scores.dtype)
        logs = scores.clamp_min(floor).log()
        spread = logs.std() if self.num_heads > 1 else logs.new_tensor(0.0)
        z = (logs - logs.mean()) / spread if spread > 0 else torch.zeros_like(logs)
        with torch.no_grad():
            self.logits.copy_((scale * z).to(self.logits.dtype))

    @property
    def heads_to_keep(self) -> Optional[int]:
        """Budgeted number of kept heads; None when the gate decides (no budget)."""
        if self.budget is None:
            return None
        return sum(k for _, _, k in self.budget)

    def describe_budget(self) -> str:
        """How many heads the test mask keeps, in words (for logs)."""
        if self.budget is None:
            return "the heads the gate itself keeps"
        return f"{self.heads_to_keep} heads"

    def set_temperature(self, temperature: float) -> None:
        self.temperature = float(temperature)

    def set_num_updates(self, num_updates: int) -> None:
        # Called by fairseq's task.train_step before every forward, and on load.
        if self.optimizer is None and not self.frozen and self.logits.grad is not None:
            # A gradient that no optimizer will ever apply: fairseq's plain tasks
            # only step the trainer's parameters, which the logits are not.
            raise RuntimeError(UNTRAINED_GATE)
        self.num_updates = int(num_updates)

    def per_segment(self, fn: Callable[[Tensor, int], Tensor], scores: Tensor) -> Tensor:
        """Apply ``fn(scores[start:end], k)`` to each budget segment; concatenate."""
        return torch.cat([fn(scores[s:e], k) for s, e, k in self.budget])

    def test_mask(self) -> Tensor:
        """Deterministic 0/1 mask (float64): the top-k test scores of every budget
        segment, or the gate's own choice (:meth:`free_test_mask`) without a budget.
        """
        # Computed afresh (a top-k of H numbers): a cache keyed on the logits'
        # version went stale under fairseq's FP16Optimizer, whose p.data.copy_()
        # of the fp32 master weights does not bump it.
        with torch.no_grad():
            if self.budget is None:
                return self.free_test_mask().to(GATE_DTYPE).detach()
            return self.per_segment(hard_topk_mask, self.test_scores()).detach()

    @contextmanager
    def one_mask_per_pass(self) -> Iterator[Tensor]:
        """Within: :meth:`current_mask` returns the one mask read on entry.

        The model, encoder and decoder enter it (nested entries reuse the outer
        mask), so a forward or decoding step reads the mask once, however many
        attentions use it.
        """
        if self._pass_depth == 0:
            self._pass_mask = self.current_mask()
        self._pass_depth += 1
        try:
            yield self._pass_mask
        finally:
            self._pass_depth -= 1
            if self._pass_depth == 0:
                self._pass_mask = None

    def _apply(self, fn, recurse=True):
        # The logits stay float32 whatever the model's precision (model.half()
        # under --fp16, .bfloat16(), .to(dtype)); only device moves apply. In
        # float16 their gradient overflows at low temperature.
        def keep_precision(t: Tensor) -> Tensor:
            out = fn(t)
            if t.is_floating_point() and out.dtype in (torch.float16, torch.bfloat16):
                return t.to(device=out.device)
            return out

        super()._apply(keep_precision, recurse)
        with torch.no_grad():
            moved = keep_precision(self.logits)
        if moved is not self.logits:
            # In place, as nn.Module does for parameters: the task's Adam keeps its tensor.
            self.logits.data = moved
        return self

    # -- the logits (and their optimizer's moments) in the model's state dict --------
    _ADAM_KEYS = ("adam_step", "adam_exp_avg", "adam_exp_avg_sq")

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        destination.pop(prefix + "anchor", None)  # a trainer-side placeholder, not state
        destination[prefix + "logits"] = self.logits if keep_vars else self.logits.detach()
        for key, value in self._adam_tensors().items():
            destination[prefix + key] = value

    def _load_from_state_dict(
        self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
    ):
        super()._load_from_state_dict(
            state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys, errors
        )
        own = {prefix + k for k in ("logits", *self._ADAM_KEYS)}
        unexpected_keys[:] = [k for k in unexpected_keys if k not in own]
        missing_keys[:] = [k for k in missing_keys if k != prefix + "anchor"]
        key = prefix + "logits"
        if key not in state_dict:
            if strict:
                missing_keys.append(key)
            return
        value = state_dict[key]
        if value.shape != self.logits.shape:
            errors.append(
                f"size mismatch for {key}: copying a param with shape {tuple(value.shape)}, "
                f"the gate has {tuple(self.logits.shape)}"
            )
            return
        with torch.no_grad():
            self.logits.copy_(value)
        adam = {k: state_dict[prefix + k] for k in self._ADAM_KEYS if prefix + k in state_dict}
        if self.optimizer is not None and self._restore_optimizer:
            self._load_adam_tensors(adam)

    def prepare_training(self, optimizer: torch.optim.Optimizer, restore: bool = True) -> None:
        """Hand the gate the optimizer that trains its logits (the translation_dsp task's).

        Also registers ``anchor``, a zero-element parameter added to the training
        mask. It exists for fairseq's trainer, which needs at least one parameter
        (``--train-gates-only`` leaves none), and whose gradient fairseq clears
        (``p.grad = None``) when it starts an update or skips an overflowed one:
        the task reads that to know when to discard the gate's partial gradient.
        It is never saved. ``restore=False`` (``--reset-optimizer``) ignores Adam
        moments found in a checkpoint.
        """
        self.optimizer = optimizer
        self._restore_optimizer = restore
        self.anchor = nn.Parameter(torch.zeros(0, device=self.logits.device))

    def _adam_tensors(self) -> Dict[str, Tensor]:
        if self.optimizer is None:
            return {}
        state = self.optimizer.state.get(self.logits, {})
        if "exp_avg" not in state:
            return {}
        return {
            "adam_step": torch.as_tensor(state["step"], dtype=torch.float32).detach().clone(),
            "adam_exp_avg": state["exp_avg"].detach().clone(),
            "adam_exp_avg_sq": state["exp_avg_sq"].detach().clone(),
        }

    def _load_adam_tensors(self, adam: Dict[str, Tensor]) -> None:
        if not adam:
            return
        if set(adam) != set(self._ADAM_KEYS):
            raise ValueError(f"incomplete gate optimizer state: {sorted(adam)}")
        # Through torch's own Optimizer.load_state_dict (it casts to the logits' device).
        saved = self.optimizer.state_dict()
        saved["state"] = {
            0: {
                "step": adam["adam_step"].float().cpu(),
                "exp_avg": adam["adam_exp_avg"],
                "exp_avg_sq": adam["adam_exp_avg_sq"],
            }
        }
        self.optimizer.load_state_dict(saved)

    def freeze(self) -> None:
        """Fix the mask to the test mask, in training too, and stop training the logits.

        This is the fine-tuning phase of pipelined pruning (``--freeze-gates``):
        the model trains with exactly the heads that ``dsp-strip`` will keep.
        """
        self.frozen = True
        self.logits.requires_grad_(False)
        self._train_mask = None

    def resample(self) -> None:
        """Draw the training mask that every gated attention of this forward uses."""
        if not self.training or self.frozen:
            self._train_mask = None
            return
        mask = self.sample_mask()
        if self.anchor is not None:
            # + 0.0 exactly: puts the trainer's anchor in the graph (see prepare_training).
            mask = mask + self.anchor.sum().to(mask.dtype)
        self._train_mask = mask

    def current_mask(self) -> Tensor:
        """Mask for the forward pass under way (float64, shape (H,))."""
        if self._pass_mask is not None:
            return self._pass_mask
        if not self.training or self.frozen:
            return self.test_mask()
        if self._train_mask is None:
            self.resample()
        return self._train_mask

    def kept_heads(self) -> Tensor:
        """Boolean (H,) vector of the heads the test mask keeps."""
        return self.test_mask() > 0.5

    def stats(self) -> Dict[str, float]:
        """Numbers worth logging for the last training mask (the test mask if frozen)."""
        mask = self.test_mask() if self.frozen else self._train_mask
        if mask is None:
            return {}
        stats = {"gate_mask_sum": float(mask.detach().sum())}
        if self.budget is not None:
            stats["gate_khot_dist"] = sum(
                distance_from_khot(mask[s:e], k) * k for s, e, k in self.budget if k > 0
            ) / max(1, self.heads_to_keep)
        return stats


def build_budget(
    segment_sizes: Sequence[int],
    heads_to_keep: Optional[int] = None,
    per_segment: Optional[Sequence[int]] = None,
) -> Budget:
    """Budget segments for one global K or for one K per segment."""
    if (heads_to_keep is None) == (per_segment is None):
        raise ValueError("give exactly one of heads_to_keep and per_segment")
    total = sum(segment_sizes)
    if per_segment is None:
        return [(0, total, int(heads_to_keep))]
    budget, start = [], 0
    for size, k in zip(segment_sizes, per_segment):
        budget.append((start, start + size, int(k)))
        start += size
    return budget
