"""Pure tensor surgery for removing attention heads.

Each function takes weights and head indices and returns new weights (or new
``nn.Linear`` modules); nothing here mutates its inputs. Head ``h`` of an
attention with head size ``d`` owns rows ``[h*d, (h+1)*d)`` of the q, k and v
projections (weights and biases) and the same columns of the output
projection's weight; the output bias belongs to no head and is kept whole.
"""

from __future__ import annotations

from typing import Dict, Optional, Sequence, Union

import torch
from torch import Tensor, nn

HeadIndex = Union[Tensor, Sequence[int]]


def head_feature_index(heads: HeadIndex, head_dim: int) -> Tensor:
    """Feature indices covered by ``heads``, in head order: [h*d, ..., h*d+d-1, ...]."""
    heads = torch.as_tensor(heads, dtype=torch.long).view(-1)
    if heads.numel() and (heads.min() < 0):
        raise ValueError(f"negative head index in {heads.tolist()}")
    if torch.unique(heads).numel() != heads.numel():
        raise ValueError(f"duplicate head index in {heads.tolist()}")
    offsets = torch.arange(head_dim, dtype=torch.long)
    return (heads.view(-1, 1) * head_dim + offsets.view(1, -1)).view(-1)


def select_rows(weight: Tensor, bias: Optional[Tensor], index: Tensor):
    """Output features ``index`` of a linear map: (weight[index], bias[index])."""
    new_bias = None if bias is None else bias.index_select(0, index).clone()
    return weight.index_select(0, index).clone(), new_bias


def select_columns(weight: Tensor, index: Tensor) -> Tensor:
    """Input features ``index`` of a linear map's weight."""
    return weight.index_select(1, index).clone()


def linear_from(weight: Tensor, bias: Optional[Tensor]) -> nn.Linear:
    """A new ``nn.Linear`` holding exactly these tensors (dtype/device kept)."""
    out_f, in_f = weight.shape
    layer = nn.Linear(in_f, out_f, bias=bias is not None, device=weight.device, dtype=weight.dtype)
    with torch.no_grad():
        layer.weight.copy_(weight)
        if bias is not None:
            layer.bias.copy_(bias)
    return layer


def prune_attention_weights(
    weights: Dict[str, Optional[Tensor]], keep: HeadIndex, head_dim: int
) -> Dict[str, Optional[Tensor]]:
    """Keep heads ``keep`` in a dict of attention tensors.

    ``weights`` holds ``{q,k,v,out}_proj.{weight,bias}`` (biases may be None).
    Returns a new dict of the same keys with the removed heads' rows (q/k/v) and
    columns (out weight) dropped; ``out_proj.bias`` is returned unchanged.
    """
    index = head_feature_index(keep, head_dim)
    result: Dict[str, Optional[Tensor]] = {}
    for name in ("q_proj", "k_proj", "v_proj"):
        w, b = select_rows(weights[f"{name}.weight"], weights.get(f"{name}.bias"), index)
        result[f"{name}.weight"], result[f"{name}.bias"] = w, b
    result["out_proj.weight"] = select_columns(weights["out_proj.weight"], index)
    out_bias = weights.get("out_proj.bias")
    result["out_proj.bias"] = None if out_bias is None else out_bias.clone()
    return result


def prune_attention_projections(
    projections: Dict[str, nn.Linear], keep: HeadIndex, head_dim: int
) -> Dict[str, nn.Linear]:
    """Module-level wrapper of :func:`prune_attention_weights`: new Linear layers."""
    tensors = {}
    for name, lin in projections.items():
        tensors[f"{name}.weight"] = lin.weight.detach()
        tensors[f"{name}.bias"] = None if lin.bias is None else lin.bias.detach()
    pruned = prune_attention_weights(tensors, keep, head_dim)
    return {
        name: linear_from(pruned[f"{name}.weight"], pruned[f"{name}.bias"]) for name in projections
    }


def restore_columns(
    full_weight: Tensor, kept_weight: Tensor, keep: HeadIndex, head_dim: int
) -> Tensor:
    """The inverse of :func:`select_columns` for heads: ``full_weight`` with the
    columns of heads ``keep`` replaced by ``kept_weight``'s (in head order).

    Used to write a refit of a stripped output projection back into the unstripped
    model (alternating gate training and refits); the removed heads' columns stay.
    """
    index = head_feature_index(keep, head_dim)
    if kept_weight.shape != (full_weight.shape[0], index.numel()):
        raise ValueError(
            f"a weight of {tuple(kept_weight.shape)} does not fit {index.numel() // max(head_dim, 1)} "
            f"heads of {head_dim} features in a {tuple(full_weight.shape)} projection"
        )
    new = full_weight.clone()
    new[:, index] = kept_weight.to(new.dtype)
    return new
