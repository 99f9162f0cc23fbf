"""The JSON file ``dsp-importance`` writes and ``dsp-strip --importance`` reads.

    {
      "format": "dsp-head-importance/1",
      "method": "michel2019",
      "metadata": {...},                 # checkpoint, data, tokens, options
      "num_heads": H,
      "slots": [{"prefix": "encoder.layers.0.self_attn", "kind": "enc-self",
                 "layer": 0, "num_heads": 4, "scores": [s0, s1, s2, s3]}, ...],
      "ranking": [["decoder.layers.1.encoder_attn", 2], ...],   # least important first
      "steps": [[[prefix, head], ...], ...]                      # iterative mode only
    }

``ranking`` is optional when reading (hand-written files): without it heads
are ranked by score, ties broken by layout order.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from typing import Dict, Iterator, List, MutableMapping, Sequence

import torch

from ..models.head_layout import AttentionSlot
from ..pruning.selection import Head, check_ranking, ranking_from_scores
from .michel import SCORE_DTYPE, HeadImportance, ranking_of

FORMAT = "dsp-head-importance/1"


def importance_document(result: HeadImportance, metadata: dict) -> dict:
    """The JSON-serialisable document for ``result``."""
    heads = [(s.prefix, h) for s in result.slots for h in range(s.num_heads)]
    per_slot = result.per_slot()
    return {
        "format": FORMAT,
        "method": "michel2019",
        "metadata": dict(
            metadata,
            num_batches=result.num_batches,
            num_sentences=result.num_sentences,
            num_tokens=result.num_tokens,
        ),
        "num_heads": len(heads),
        "slots": [
            {
                "prefix": s.prefix,
                "kind": s.kind,
                "layer": s.layer,
                "num_heads": s.num_heads,
                "scores": per_slot[s.prefix],
            }
            for s in result.slots
        ],
        "ranking": [list(heads[i]) for i in result.ranking],
        "steps": [[list(heads[i]) for i in step] for step in result.steps],
    }


def write_json_atomic(document: dict, path: str) -> None:
    """Write to a temporary file beside ``path``, then rename over it."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(document, f, indent=1)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def read_importance(path: str) -> dict:
    """Load a scores file; ValueError with the reason if it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as err:
        raise ValueError(f"{path}: cannot read importance scores: {err}") from err
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}: not a JSON file: {err}") from err
    if not isinstance(doc, dict) or not isinstance(doc.get("slots"), list):
        raise ValueError(f"{path}: not an importance scores file (no 'slots' list)")
    if doc.get("format", FORMAT) != FORMAT:
        raise ValueError(f"{path}: unsupported format {doc.get('format')!r}; expected {FORMAT}")
    return doc


def scores_by_slot(
    doc: dict, slots: Sequence[AttentionSlot], source: str = ""
) -> Dict[str, List[float]]:
    """The document's scores per attention prefix, checked against the model's layout."""
    have = {}
    for entry in doc["slots"]:
        try:
            have[str(entry["prefix"])] = [float(v) for v in entry["scores"]]
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"{source}: malformed slot entry {entry!r}") from err
    want = {s.prefix: s.num_heads for s in slots}
    got = {p: len(v) for p, v in have.items()}
    if want != got:
        diff = sorted(
            f"{p}: model {want.get(p, 'absent')}, scores {got.get(p, 'absent')}"
            for p in set(want) | set(got)
            if want.get(p) != got.get(p)
        )
        raise ValueError(
            f"{source}: the scores were computed for another attention layout "
            f"(heads per attention differ: {'; '.join(diff[:4])})"
        )
    return have


def ranking_for_model(doc: dict, slots: Sequence[AttentionSlot], source: str = "") -> List[Head]:
    """The document's ranking, checked against the model's attention layout."""
    scores = scores_by_slot(doc, slots, source)
    if doc.get("ranking"):
        return check_ranking(slots, [tuple(item) for item in doc["ranking"]])
    return ranking_from_scores(slots, scores)


class EstimateCache(MutableMapping[str, HeadImportance]):
    """Importance estimates on disk, one JSON file per alive set, for
    ``iterative_head_importance(cache=...)``: runs of ``dsp-importance --iterative``
    to different K with one ``--cache-dir`` estimate their common path once.

    ``fingerprint`` (JSON-serialisable) names what an estimate depends on (the
    checkpoint's content, the batches, the options); files of another
    fingerprint in the same folder are ignored, never overwritten.
    """

    def __init__(self, folder: str, fingerprint: dict, slots: Sequence[AttentionSlot]):
        self.folder = folder
        self.fingerprint = fingerprint
        self.slots = list(slots)
        self.hits = self.stored = 0  # estimates reused / written by this object
        self._tag = hashlib.sha256(json.dumps(fingerprint, sort_keys=True).encode()).hexdigest()
        os.makedirs(folder, exist_ok=True)

    def _path(self, key: str) -> str:
        name = hashlib.sha256(f"{self._tag}:{key}".encode()).hexdigest()[:24]
        return os.path.join(self.folder, f"estimate-{name}.json")

    def _read(self, path: str) -> dict:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        return doc if doc.get("fingerprint") == self.fingerprint else {}

    def __contains__(self, key: object) -> bool:
        return (
            isinstance(key, str)
            and os.path.isfile(self._path(key))
            and bool(self._read(self._path(key)))
        )

    def __getitem__(self, key: str) -> HeadImportance:
        doc = self._read(self._path(key)) if os.path.isfile(self._path(key)) else {}
        if not doc:
            raise KeyError(key)
        self.hits += 1
        scores = torch.tensor(doc["scores"], dtype=SCORE_DTYPE)
        return HeadImportance(
            self.slots, scores, doc["num_batches"], doc["num_sentences"], doc["num_tokens"],
            ranking_of(scores),
        )  # fmt: skip

    def __setitem__(self, key: str, value: HeadImportance) -> None:
        doc = {
            "fingerprint": self.fingerprint,
            "alive": key,
            "scores": value.scores.tolist(),
            "num_batches": value.num_batches,
            "num_sentences": value.num_sentences,
            "num_tokens": value.num_tokens,
        }
        write_json_atomic(doc, self._path(key))
        self.stored += 1

    def __delitem__(self, key: str) -> None:
        if key not in self:
            raise KeyError(key)
        os.unlink(self._path(key))

    def __iter__(self) -> Iterator[str]:
        for name in sorted(os.listdir(self.folder)):
            if name.startswith("estimate-") and name.endswith(".json"):
                doc = self._read(os.path.join(self.folder, name))
                if doc:
                    yield doc["alive"]

    def __len__(self) -> int:
        return sum(1 for _ in self)


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
