"""Hybrid ranking (R48): the order of the candidates, then optional recency decay and MMR. Pure
functions.

A ranked list is ``[(doc id, score), ...]`` best first, from one retriever (word index, trigram
index, substring scan, vectors), with a weight. Every candidate also has an evidence score in
[0, 1] (:mod:`tiermem.search.evidence`), which is what a hit shows. Two orders (``search_fusion``):

- ``weighted`` (default): by the evidence score itself (the weighted mean of keyword coverage and
  vector similarity), so hits come in the order of their scores;
- ``rrf``: reciprocal rank fusion of the lists, ``sum(weight / (60 + rank))``, which ignores the
  lists' scales; the hits still show their evidence scores.

Recency decay and MMR reorder further; they change the order, not the scores shown.
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

Ranked = Sequence[tuple[int, float]]


@dataclass(frozen=True)
class RankedList:
    """One retriever's candidates, best first."""

    name: str
    weight: float
    items: Ranked


def rrf(lists: Sequence[RankedList], evidence: Mapping[int, float]) -> dict[int, float]:
    """``doc id -> sum(weight / (60 + rank))`` over the lists with a positive weight."""
    fused: dict[int, float] = {}
    for lst in lists:
        if lst.weight > 0:
            for rank, (doc_id, _) in enumerate(lst.items, start=1):
                fused[doc_id] = fused.get(doc_id, 0.0) + lst.weight / (RRF_K + rank)
    return fused


def weighted(lists: Sequence[RankedList], evidence: Mapping[int, float]) -> dict[int, float]:
    """The evidence scores of the candidates of the lists with a positive weight."""
    return {doc_id: evidence.get(doc_id, 0.0) for lst in lists if lst.weight > 0 for doc_id, _ in lst.items}


FUSIONS: dict[str, Callable[[Sequence[RankedList], Mapping[int, float]], dict[int, float]]] = {
    "rrf": rrf, "weighted": weighted}


def fuse(lists: Sequence[RankedList], evidence: Mapping[int, float], method: str = "weighted") -> dict[int, float]:
    """``doc id -> ranking value`` (higher first) of every candidate, by ``method``."""
    if method not in FUSIONS:
        raise ValueError(f"unknown fusion {method!r}; expected one of {', '.join(FUSIONS)}")
    return FUSIONS[method](lists, evidence)


def decay(scores: Mapping[int, float], ages_days: Mapping[int, float | None],
          half_life_days: float) -> dict[int, float]:
    """Scores times ``0.5 ** (age / half_life)``; items without an age keep their score."""
    out: dict[int, float] = {}
    for doc_id, score in scores.items():
        age = ages_days.get(doc_id)
        out[doc_id] = score if age is None else score * math.pow(0.5, max(age, 0.0) / half_life_days)
    return out


def ranked(scores: Mapping[int, float], tiebreak: Mapping[int, float] | None = None) -> list[tuple[int, float]]:
    """Best first; ties by ``tiebreak`` (higher first: the hits' cosines, so items that hold every
    query word and score 1.0 come in the order of their meaning), then by id (older first) so
    results are stable."""
    second = tiebreak or {}
    return sorted(scores.items(), key=lambda item: (-item[1], -second.get(item[0], 0.0), item[0]))


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
