"""Multiply-add counts of Transformer encoder-decoder decoding, per attention head layout.

Used for the FLOP bound B of the speed benchmark: the speed-up one would see if
decoding time fell in proportion to the multiply-adds that removing heads saves
(q/k/v/out projections and attention products of the removed heads, in the
encoder and per decoded token). Layer norms, softmax and biases are ignored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List


@dataclass(frozen=True)
class Dims:
    enc_embed: int
    dec_embed: int
    enc_ffn: int
    dec_ffn: int
    head_dim_enc: int
    head_dim_dec: int
    vocab: int


def decode_macs(
    dims: Dims, heads: Dict[str, List[int]], src_len: float, steps: int, beam: int
) -> float:
    """Multiply-adds to encode one sentence and decode ``steps`` tokens for ``beam`` hypotheses.

    ``heads``: heads present per attention type and layer, e.g. {"enc-self": [4, 2, 0], ...}.
    Cross-attention keys/values are projected once per source sentence (fairseq's beam trick).
    """
    d, dd = dims.enc_embed, dims.dec_embed
    macs = 0.0
    for h in heads.get("enc-self", []):
        w = h * dims.head_dim_enc
        macs += src_len * (4 * d * w + 2 * src_len * w + 2 * d * dims.enc_ffn)
    per_step = 0.0
    for t in range(1, steps + 1):
        for h in heads.get("dec-self", []):
            w = h * dims.head_dim_dec
            per_step += 4 * dd * w + 2 * t * w
        for h in heads.get("cross", []):
            w = h * dims.head_dim_dec
            per_step += 2 * dd * w + 2 * src_len * w
        per_step += len(heads.get("dec-self", [])) * 2 * dd * dims.dec_ffn + dd * dims.vocab
    macs += beam * per_step
    for h in heads.get("cross", []):
        macs += src_len * 2 * d * h * dims.head_dim_dec
    return macs


def flop_bound(
    dims: Dims,
    full: Dict[str, List[int]],
    pruned: Dict[str, List[int]],
    src_len: float,
    steps: int,
    beam: int,
) -> float:
    """B = MACs(unpruned) / MACs(pruned) for the same workload."""
    return decode_macs(dims, full, src_len, steps, beam) / decode_macs(
        dims, pruned, src_len, steps, beam
    )


def captured_share(t_pruned: float, t_full: float, bound: float) -> float:
    """(1 - t_pruned / t_full) / (1 - 1 / B): the part of the allowed saving realised."""
    allowed = 1 - 1 / bound
    return (1 - t_pruned / t_full) / allowed if allowed > 0 else float("nan")
