"""Head importance scoring (Michel et al. 2019) and its scores file."""

from .michel import (
    GRANULARITIES,
    HeadImportance,
    head_importance,
    head_mask_hooks,
    iterative_head_importance,
    normalize_per_layer,
)
from .scores_file import FORMAT, importance_document, ranking_for_model, read_importance

__all__ = [
    "FORMAT",
    "GRANULARITIES",
    "HeadImportance",
    "head_importance",
    "head_mask_hooks",
    "importance_document",
    "iterative_head_importance",
    "normalize_per_layer",
    "ranking_for_model",
    "read_importance",
]
