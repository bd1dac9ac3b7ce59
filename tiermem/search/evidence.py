"""What ``SearchHit.score`` means: how much evidence an item holds that it answers the query.

A score is built from two pieces of evidence, each in [0, 1], and never rescaled per query, so a
0.6 means the same for any query, any store size and any position in the list:

- **keyword coverage**: the IDF-weighted share of the query's terms that the item holds,
  ``sum(idf(t) * credit(t)) / sum(idf(t))`` over the query's terms ``t`` (content words after
  stop words are dropped, as their porter stems; trigrams of Chinese/Japanese/Korean/Thai runs;
  one- or two-character runs of those scripts). ``credit`` is 1 when the item's own text holds
  the term; 0.5 when a word of three or more characters is only a substring of the text
  (``press`` in ``WordPress``); ``search_context_weight`` (0.75) when only the item's keyword
  context holds it (a daily record's neighbours and its date in words), but only if the item's
  own text holds some query term: context supports what an item says, it does not stand in
  for it; else 0.
  ``idf(t) = ln(1 + (N + 1000 - n + 0.5) / (n + 0.5))`` with ``N`` items in the scope and ``n``
  items of the scope whose own text holds ``t``: a rare term weighs more than a common one. The 1,000 is a
  prior, as if the store also held 1,000 items without the term, so the weights of a small
  store do not swing as it grows. Terms too common to check within ``search_keyword_budget``
  (only in stores of thousands of items) are left out of both sums.
- **vector similarity**: the cosine of the query's embedding with the item's own text: the best
  of the item's vector and its sentence vectors, except that a Markdown chunk whose vector
  blends in the chunk before it (``search_chunk_context``) counts by its own vectors alone (its
  sentences, or its text alone). Below 0 counts as 0. The blended vector still finds candidates.

``score = (wk * coverage + wv * similarity) / (wk + wv)`` with ``wk`` = ``search_keyword_weight``
and ``wv`` = ``search_vector_weight`` (both 1 by default: the plain mean). A retriever whose
weight is 0 is not asked, and its evidence does not count.

The score is not a probability: what cosine an unrelated text reaches depends on the embedder, so
the floor under which "nothing relevant" is said is set per model (:mod:`tiermem.search.floor`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

PRIOR_ITEMS = 1000
SUBSTRING_CREDIT = 0.5
MIN_SUBSTRING = 3  # characters a word needs for substring credit


def idf(items: int, holding: int) -> float:
    """The weight of a term that ``holding`` of ``items`` items hold (see the module docstring)."""
    holding = max(0, holding)
    return math.log(1.0 + (max(items, holding) + PRIOR_ITEMS - holding + 0.5) / (holding + 0.5))


@dataclass(frozen=True)
class Term:
    """One term of the query: ``text`` as the query has it (casefolded), its IDF ``weight``, and
    for a word the word index's terms for it (``keys``, porter stems; empty for a run of an
    unsegmented script, which is looked for as a substring)."""

    text: str
    weight: float
    keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueryTerms:
    """The query's terms, ready to measure any item's keyword coverage."""

    terms: tuple[Term, ...] = ()
    context_credit: float = 0.75

    @cached_property
    def keys(self) -> list[str]:
        """Every word-index term to look up (the items' held terms are asked for these)."""
        return list(dict.fromkeys(key for term in self.terms for key in term.keys))

    @cached_property
    def total(self) -> float:
        return sum(term.weight for term in self.terms)

    def coverage(self, text: str, held: Mapping[str, set[str]]) -> float:
        """The item's keyword coverage in [0, 1]; ``held`` maps the word-index terms the item holds
        to the columns (``"text"``, ``"context"``) that hold them."""
        if self.total <= 0:
            return 0.0
        folded: str | None = None
        own = context = 0.0
        for term in self.terms:
            if term.keys and all("text" in held.get(key, ()) for key in term.keys):
                own += term.weight
            elif term.keys and all(key in held for key in term.keys):
                context += term.weight
            elif not term.keys or len(term.text) >= MIN_SUBSTRING:
                folded = text.casefold() if folded is None else folded
                if term.text in folded:
                    own += term.weight * (SUBSTRING_CREDIT if term.keys else 1.0)
        if own <= 0:  # context supports what the item says; it does not stand in for it
            return 0.0
        return min(1.0, (own + self.context_credit * context) / self.total)


@dataclass(frozen=True)
class Blend:
    """The weights that blend keyword coverage and vector similarity into one score."""

    keyword_weight: float = 1.0
    vector_weight: float = 1.0

    def score(self, coverage: float, similarity: float) -> float:
        """``(wk * coverage + wv * max(similarity, 0)) / (wk + wv)``, clamped to [0, 1]."""
        total = self.keyword_weight + self.vector_weight
        if total <= 0:
            return 0.0
        value = (self.keyword_weight * coverage + self.vector_weight * max(similarity, 0.0)) / total
        return min(1.0, max(0.0, value))

    def scores(self, coverage: Mapping[int, float], similarity: Mapping[int, float],
               ids: Sequence[int]) -> dict[int, float]:
        """``doc id -> score`` for ``ids`` (missing evidence counts as 0)."""
        return {doc_id: self.score(coverage.get(doc_id, 0.0), similarity.get(doc_id, 0.0)) for doc_id in ids}
