"""Zero-padding of one attention's projections to a given number of heads (pure functions).

fairseq stores an attention as q/k/v projections (rows = heads x head width) and an
output projection (columns = heads x head width). Appending zero rows to q/k/v and zero
columns to the output projection adds heads whose query, key and value are 0: their
attention weights are uniform over a zero value, so they contribute exactly 0.
"""

from __future__ import annotations

from typing import Dict, Optional

import torch
from torch import Tensor

PROJ = ("q_proj", "k_proj", "v_proj")


def pad_attention(
    weights: Dict[str, Optional[Tensor]], kept: int, head_dim: int, heads: int, width: int
) -> Dict[str, Tensor]:
    """Projections of an attention keeping ``kept`` heads of width ``head_dim``, written as
    ``heads`` heads of width ``width``.

    ``weights`` maps ``q_proj.weight``, ``q_proj.bias``, ... ``out_proj.weight``,
    ``out_proj.bias`` to tensors (biases may be None: then zero). With ``kept`` > 0 the width
    must equal ``head_dim`` and the kept heads come first; with ``kept`` == 0 every
    q/k/v/out weight is zero (width is then free, 1 is cheapest) and only the output bias
    remains.
    """
    if kept > heads:
        raise ValueError(f"cannot write {kept} heads as {heads}")
    if kept and width != head_dim:
        raise ValueError(f"heads of width {head_dim} cannot be written with width {width}")
    out_w = weights["out_proj.weight"]
    d_model = out_w.shape[0]
    dtype = out_w.dtype
    rows = heads * width
    result: Dict[str, Tensor] = {}
    for name in PROJ:
        w = weights[f"{name}.weight"]
        b = weights.get(f"{name}.bias")
        if w.shape[0] != kept * head_dim:
            raise ValueError(
                f"{name}.weight has {w.shape[0]} rows, expected {kept} heads x {head_dim}"
            )
        new_w = torch.zeros(rows, w.shape[1], dtype=dtype)
        new_b = torch.zeros(rows, dtype=dtype)
        if kept:
            new_w[: w.shape[0]] = w
            if b is not None:
                new_b[: b.shape[0]] = b
        result[f"{name}.weight"] = new_w
        result[f"{name}.bias"] = new_b
    new_out = torch.zeros(d_model, rows, dtype=dtype)
    if kept:
        new_out[:, : out_w.shape[1]] = out_w
    result["out_proj.weight"] = new_out
    bias = weights.get("out_proj.bias")
    result["out_proj.bias"] = (
        bias.clone() if bias is not None else torch.zeros(d_model, dtype=dtype)
    )
    return result
