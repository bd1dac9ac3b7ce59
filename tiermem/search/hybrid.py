"""Hybrid ranking (R48): fuse ranked lists, then optional recency decay and MMR. Pure functions.

A ranked list is ``[(doc id, score), ...]`` best first, from one retriever (word index, trigram
index, substring scan, vectors), with a weight. Two fusions:

- ``rrf``: reciprocal rank fusion, ``sum(weight / (60 + rank))``; ignores the scores' scales;
- ``weighted``: each list's scores min-max normalised to [0, 1], then a weighted sum.

Either way the fused score is divided by its largest possible value, so scores lie in [0, 1]
(which lets provisional hits from other sources be merged on the same scale).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

RRF_K = 60
FUSIONS = ("rrf", "weighted")

Ranked = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class RankedList:
    """One retriever's candidates, best first."""

    name: str
    weight: float
    items: Ranked


def fuse(lists: Sequence[RankedList], method: str = "rrf") -> dict[int, float]:
    """``doc id -> fused score in [0, 1]``."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; expected one of {', '.join(FUSIONS)}")
    fused: dict[int, float] = {}
    used = [lst for lst in lists if lst.items and lst.weight > 0]
    if not used:
        return fused
    if method == "rrf":
        for lst in used:
            for rank, (doc_id, _) in enumerate(lst.items, start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + lst.weight / (RRF_K + rank)
        ceiling = sum(lst.weight for lst in used) / (RRF_K + 1)
    else:
        for lst in used:
            scores = [score for _, score in lst.items]
            low, high = min(scores), max(scores)
            span = high - low
            for doc_id, score in lst.items:
                norm = (score - low) / span if span > 0 else 1.0
                fused[doc_id] = fused.get(doc_id, 0.0) + lst.weight * norm
        ceiling = sum(lst.weight for lst in used)
    return {doc_id: score / ceiling for doc_id, score in fused.items()}


def decay(scores: Mapping[int, float], ages_days: Mapping[int, float | None],
          half_life_days: float) -> dict[int, float]:
    """Scores times ``0.5 ** (age / half_life)``; items without an age keep their score."""
    out: dict[int, float] = {}
    for doc_id, score in scores.items():
        age = ages_days.get(doc_id)
        out[doc_id] = score if age is None else score * math.pow(0.5, max(age, 0.0) / half_life_days)
    return out


def ranked(scores: Mapping[int, float]) -> list[tuple[int, float]]:
    """Best first; ties by id (older first) so results are stable."""
    return sorted(scores.items(), key=lambda item: (-item[1], item[0]))


def mmr(candidates: Sequence[tuple[int, float]], vectors: Mapping[int, npt.NDArray[np.float32]], k: int,
        lam: float) -> list[tuple[int, float]]:
    """Maximal marginal relevance: pick ``k`` items trading relevance (the scores, scaled to
    [0, 1]) against similarity to the ones already picked, ``lam * rel - (1 - lam) * sim``.
    Items without a vector count as dissimilar to everything. Returns the original scores."""
    if not candidates:
        return []
    top = max(score for _, score in candidates) or 1.0
    pool = list(candidates)
    picked: list[tuple[int, float]] = []
    similarity: Callable[[int, int], float] = lambda a, b: (  # noqa: E731
        float(vectors[a] @ vectors[b]) if a in vectors and b in vectors else 0.0)
    nearest = {doc_id: 0.0 for doc_id, _ in pool}
    while pool and len(picked) < k:
        best = max(range(len(pool)), key=lambda i: lam * pool[i][1] / top - (1 - lam) * nearest[pool[i][0]])
        chosen = pool.pop(best)
        picked.append(chosen)
        for doc_id, _ in pool:
            nearest[doc_id] = max(nearest[doc_id], similarity(doc_id, chosen[0]))
    return picked
