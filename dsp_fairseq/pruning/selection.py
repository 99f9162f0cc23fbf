"""Which heads to keep without a trained gate: from an importance ranking, or at random.

Pure functions over the attention layout (``AttentionSlot`` list). Heads are
named ``(slot prefix, head index)``; a ranking lists every head from least to
most important, and keeping K means dropping the first H - K of it. The
result is the ``kept`` mapping that :func:`~dsp_fairseq.pruning.strip.strip_checkpoint`
takes (slot prefix -> sorted head indices, every slot present).
"""

from __future__ import annotations

import random
from typing import Dict, List, Sequence, Tuple

from ..models.head_layout import AttentionSlot

Head = Tuple[str, int]


def all_heads(slots: Sequence[AttentionSlot]) -> List[Head]:
    """Every head in layout order."""
    return [(s.prefix, h) for s in slots for h in range(s.num_heads)]


def check_heads_to_keep(heads_to_keep: int, slots: Sequence[AttentionSlot]) -> None:
    """Raise ValueError unless 1 <= K <= H, naming the allowed range."""
    total = sum(s.num_heads for s in slots)
    if heads_to_keep is None or not 1 <= heads_to_keep <= total:
        raise ValueError(
            f"--heads-to-keep {heads_to_keep} is out of range: this model has H={total} "
            f"attention heads; choose K in [1, {total}]"
        )


def kept_from_heads(slots: Sequence[AttentionSlot], heads) -> Dict[str, List[int]]:
    """``{prefix: sorted head indices}`` for every slot (empty lists included)."""
    kept: Dict[str, List[int]] = {s.prefix: [] for s in slots}
    for prefix, head in heads:
        kept[prefix].append(int(head))
    return {p: sorted(v) for p, v in kept.items()}


def check_ranking(slots: Sequence[AttentionSlot], ranking: Sequence[Head]) -> List[Head]:
    """The ranking as (prefix, head) tuples; ValueError unless it lists each head once."""
    ranking = [(str(p), int(h)) for p, h in ranking]
    expected = set(all_heads(slots))
    if len(ranking) != len(expected) or set(ranking) != expected:
        missing = sorted(expected - set(ranking))[:3]
        extra = sorted(set(ranking) - expected)[:3]
        raise ValueError(
            f"the ranking must list each of the model's {len(expected)} heads exactly once "
            f"(got {len(ranking)} entries; missing e.g. {missing}, unknown e.g. {extra})"
        )
    return ranking


def kept_from_ranking(
    slots: Sequence[AttentionSlot], ranking: Sequence[Head], heads_to_keep: int
) -> Dict[str, List[int]]:
    """Keep the K most important heads: drop the first H - K of the ranking."""
    check_heads_to_keep(heads_to_keep, slots)
    ranking = check_ranking(slots, ranking)
    return kept_from_heads(slots, ranking[len(ranking) - heads_to_keep :])


def ranking_from_scores(slots: Sequence[AttentionSlot], scores: Dict[str, Sequence[float]]):
    """Heads from lowest to highest score; ties: the earlier head in layout order goes first."""
    for s in slots:
        if len(scores.get(s.prefix, ())) != s.num_heads:
            raise ValueError(f"{s.prefix}: expected {s.num_heads} scores")
    order = sorted(
        enumerate(all_heads(slots)),
        key=lambda item: (float(scores[item[1][0]][item[1][1]]), item[0]),
    )
    return [head for _, head in order]


def random_kept(
    slots: Sequence[AttentionSlot], heads_to_keep: int, seed: int
) -> Dict[str, List[int]]:
    """K heads drawn uniformly without replacement; the same seed gives the same heads."""
    check_heads_to_keep(heads_to_keep, slots)
    heads = all_heads(slots)
    chosen = random.Random(seed).sample(range(len(heads)), heads_to_keep)
    return kept_from_heads(slots, [heads[i] for i in chosen])


def kept_from_ranking_per_attention(
    slots: Sequence[AttentionSlot], ranking: Sequence[Head], per_slot: Sequence[int]
) -> Dict[str, List[int]]:
    """Keep, in each attention, its ``per_slot[i]`` most important heads (uniform layouts)."""
    ranking = check_ranking(slots, ranking)
    by_slot: Dict[str, List[Head]] = {s.prefix: [] for s in slots}
    for head in ranking:  # least to most important
        by_slot[head[0]].append(head)
    heads = []
    for slot, k in zip(slots, per_slot):
        heads.extend(by_slot[slot.prefix][len(by_slot[slot.prefix]) - k :] if k else [])
    return kept_from_heads(slots, heads)


def random_kept_per_attention(
    slots: Sequence[AttentionSlot], per_slot: Sequence[int], seed: int
) -> Dict[str, List[int]]:
    """``per_slot[i]`` heads drawn uniformly in each attention; the same seed, the same heads."""
    rng = random.Random(seed)
    heads = []
    for slot, k in zip(slots, per_slot):
        heads.extend((slot.prefix, h) for h in rng.sample(range(slot.num_heads), k))
    return kept_from_heads(slots, heads)
