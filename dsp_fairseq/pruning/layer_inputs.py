"""Each calibration batch's input to the layer being refit, kept between refit jobs.

The refit works layer by layer in forward order, and each job needs the inputs of
one layer on every calibration batch. Running the model from its embeddings up to
that layer for every job costs a forward pass per job and batch (most of a
refit's time: the whole encoder again for every decoder job). Instead, like
SparseGPT's layer-by-layer pass, :class:`LayerInputs` keeps every batch's input
to the current layer of one model, with the other arguments fairseq's own forward
passes to each layer (masks, the encoder output), recorded from one real forward
pass per stack (the layers themselves replaced for it by stand-ins that record),
and moves them through a layer once its refits are done. A job
then runs only its layer. The numbers are the same as the model's forward pass:
the same layers, called with the same arguments by fairseq's loop.

The kept inputs take memory in proportion to the number of batches, so they are
kept only within a byte budget shared by the models (:class:`Budget`); a batch
beyond it is run from the embeddings, as before, and ``Budget(0)`` keeps none
(memory then independent of the number of batches).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

from torch import Tensor, nn

#: default budget of dsp-strip --reconstruct / dsp-reconstruct (--calibration-cache-mb)
DEFAULT_CACHE_MB = 1024

Where = Tuple[str, int]  # ("encoder" | "decoder", layer index)


class StopForward(Exception):
    """Raised by a hook once what it needs is captured: skips the rest of the forward."""


def layer_of(prefix: str) -> Where:
    """``("encoder", 2)`` for ``encoder.layers.2.self_attn`` (or ``.fc2``)."""
    stack, _, index = prefix.split(".")[:3]
    return stack, int(index)


class Budget:
    """Bytes that kept layer inputs may take, shared by the models of one refit."""

    def __init__(self, max_bytes: int):
        self.max_bytes = max(0, int(max_bytes))
        self.used = 0
        self.peak = 0

    def take(self, nbytes: int) -> bool:
        if self.used + nbytes > self.max_bytes:
            return False
        self.used += nbytes
        self.peak = max(self.peak, self.used)
        return True

    def give_back(self, nbytes: int) -> None:
        self.used -= nbytes


@dataclass
class _Entry:
    x: Optional[Tensor]  # the batch's input to the current layer
    calls: Dict[int, Tuple[tuple, dict]] = field(default_factory=dict)  # layer -> other args
    nbytes: int = 0


def _tensor_bytes(objs: Iterable[Any], seen: set) -> int:
    """Bytes of the tensors in ``objs`` (nested lists, tuples, dicts), each storage once."""
    total = 0
    for obj in objs:
        if isinstance(obj, Tensor):
            key = (obj.untyped_storage().data_ptr(), obj.device)
            if key not in seen:
                seen.add(key)
                total += obj.untyped_storage().nbytes()
        elif isinstance(obj, (list, tuple)):
            total += _tensor_bytes(obj, seen)
        elif isinstance(obj, dict):
            total += _tensor_bytes(obj.values(), seen)
    return total


class _Recorder(nn.Module):
    """Stands in for layer ``index`` during one recording pass: keeps the arguments
    fairseq's loop passes it (and ``x``, at the first recorded layer), returns ``x`` the
    way the layer would (an encoder layer: ``x``; a decoder layer: ``(x, attn, states)``),
    and stops the pass at the last layer."""

    def __init__(self, entry: _Entry, index: int, first: int, last: bool, stack: str):
        super().__init__()
        self.entry, self.index, self.first, self.last, self.stack = entry, index, first, last, stack

    def forward(self, x, *args, **kwargs):
        if self.index == self.first:
            self.entry.x = x
        self.entry.calls[self.index] = (tuple(args), dict(kwargs))
        if self.last:
            raise StopForward
        return x if self.stack == "encoder" else (x, None, None)


class LayerInputs:
    """One model's kept inputs to the layer a refit job works on, per calibration batch.

    ``move_to(where, batches)`` positions them at a layer: from the layer below by
    running it (its refits are done), or from one forward pass of the model per
    batch when the job enters a stack. ``runner(b, sample)`` is what a job calls to
    run batch ``b`` through that layer (hooks in it fire); a batch without kept
    inputs runs the whole model, as ``model(**net_input)`` does.
    """

    def __init__(self, model: nn.Module, budget: Budget):
        self.model = model
        self.budget = budget
        self.at: Optional[Where] = None
        self.entries: List[Optional[_Entry]] = []

    def _layers(self, stack: str) -> nn.ModuleList:
        return getattr(self.model, stack).layers

    def free(self) -> None:
        for entry in self.entries:
            if entry is not None:
                self.budget.give_back(entry.nbytes)
        self.entries = []
        self.at = None

    def move_to(self, where: Where, batches: Callable[[], Iterable[dict]]) -> None:
        if where == self.at:
            return
        if self.at is not None and self.at[0] == where[0] and self.at[1] < where[1]:
            layers = self._layers(where[0])
            for entry in self.entries:
                if entry is None:
                    continue
                for index in range(self.at[1], where[1]):
                    args, kwargs = entry.calls.pop(index)
                    out = layers[index](entry.x, *args, **kwargs)
                    entry.x = out[0] if isinstance(out, tuple) else out
            self.at = where
            return
        self.free()
        self.entries = [self._record(where, sample) for sample in batches()]
        self.at = where

    def _record(self, where: Where, sample: dict) -> Optional[_Entry]:
        """Run the model on ``sample`` up to layer ``where``, recording its input and the
        other arguments fairseq's loop passes to it and to every layer above it.

        The layers from ``where`` up are stand-ins for this one call (:class:`_Recorder`:
        they record and pass ``x`` through), so the pass costs the layers below only."""
        if self.budget.max_bytes == 0:
            return None
        stack, first = where
        layers = self._layers(stack)
        entry = _Entry(x=None)
        real = [layers[i] for i in range(first, len(layers))]
        try:
            for i in range(first, len(layers)):
                layers[i] = _Recorder(entry, i, first, last=i == len(layers) - 1, stack=stack)
            self.model(**sample["net_input"])
        except StopForward:
            pass
        finally:
            for i, layer in enumerate(real, start=first):
                layers[i] = layer
        if entry.x is None:
            raise RuntimeError(f"the forward pass never reached {stack}.layers.{first}")
        seen: set = set()
        entry.nbytes = _tensor_bytes([entry.x], seen)
        entry.nbytes += _tensor_bytes([c for call in entry.calls.values() for c in call], seen)
        return entry if self.budget.take(entry.nbytes) else None

    def runner(self, b: int, sample: dict) -> Callable[[], Any]:
        entry = self.entries[b] if b < len(self.entries) else None
        if entry is None:
            return lambda: self.model(**sample["net_input"])
        layer = self._layers(self.at[0])[self.at[1]]
        args, kwargs = entry.calls[self.at[1]]
        return lambda: layer(entry.x, *args, **kwargs)
