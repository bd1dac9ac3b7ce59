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


def _curve(value: float, centre: float, slope: float) -> float:
    """A logistic curve through ``centre`` with ``slope``, shifted and stretched to run from 0 at
    ``value`` 0 to 1 at ``value`` 1 (``value`` clamped to [0, 1])."""
    value = min(1.0, max(0.0, value))

    def logistic(x: float) -> float:
        return 1.0 / (1.0 + math.exp(-slope * (x - centre)))

    low, high = logistic(0.0), logistic(1.0)
    return min(1.0, max(0.0, (logistic(value) - low) / (high - low))) if high > low else value


@dataclass(frozen=True)
class Calibration:
    """How much each kind of evidence says about an item answering the query, for one embedder
    model: keyword coverage and cosine each pass through a curve from [0, 1] to [0, 1] (a
    logistic through ``*_centre`` with ``*_slope``, pinned to 0 at 0 and 1 at 1), and the two
    are combined as a noisy-OR (see the module docstring). Measured per model
    (:data:`tiermem.search.floor.MODEL_CALIBRATIONS`, ``bench/score_fit.py``)."""

    keyword_centre: float = 0.5
    keyword_slope: float = 10.0
    vector_centre: float = 0.45
    vector_slope: float = 10.0

    def keyword(self, coverage: float) -> float:
        return _curve(coverage, self.keyword_centre, self.keyword_slope)

    def vector(self, similarity: float) -> float:
        return _curve(similarity, self.vector_centre, self.vector_slope)

    def score(self, coverage: float, similarity: float) -> float:
        """The noisy-OR of the two calibrated pieces of evidence (weights 1 and 1)."""
        return 1.0 - (1.0 - self.keyword(coverage)) * (1.0 - self.vector(similarity))


@dataclass(frozen=True)
class Blend:
    """How a candidate's two pieces of evidence make its score: the model's calibration and the
    weights (``search_keyword_weight``, ``search_vector_weight``); each kind's calibrated
    evidence counts in proportion to its weight over the larger weight (1 and 1: both in full)."""

    keyword_weight: float = 1.0
    vector_weight: float = 1.0
    calibration: Calibration = Calibration()

    def score(self, coverage: float, similarity: float) -> float:
        """``1 - (1 - tk * K(coverage)) * (1 - tv * V(similarity))`` with ``t = weight / max
        weight``, in [0, 1]."""
        top = max(self.keyword_weight, self.vector_weight)
        if top <= 0:
            return 0.0
        keyword = self.keyword_weight / top * self.calibration.keyword(coverage)
        vector = self.vector_weight / top * self.calibration.vector(max(similarity, 0.0))
        return min(1.0, max(0.0, 1.0 - (1.0 - keyword) * (1.0 - vector)))

    def scores(self, coverage: Mapping[int, float], similarity: Mapping[int, float],
               ids: Sequence[int]) -> dict[int, float]:
        """``doc id -> score`` for ``ids`` (missing evidence counts as 0)."""
        return {doc_id: self.score(coverage.get(doc_id, 0.0), similarity.get(doc_id, 0.0)) for doc_id in ids}


#: Calibrations by embedder ``model_id`` prefix (longest prefix wins), fitted with
#: ``bench/score_fit.py`` on the tuning halves of ``bench/paraphrase.py`` and LoCoMo dev (figures
#: in bench/README.md, issue 24); a model not listed gets :data:`UNKNOWN_MODEL_CALIBRATION`.
MODEL_CALIBRATIONS: dict[str, Calibration] = {
    # all-MiniLM-L6-v2 (fp32 and int8): cosines of true paraphrases 0.13-0.66 (median 0.39),
    # of unrelated texts mostly under 0.25
    "all-MiniLM-L6-v2": Calibration(keyword_centre=0.25, keyword_slope=10.0, vector_centre=0.25, vector_slope=10.0),
    # the word-hashing test embedder: its cosine counts shared words (stop words too), so an
    # unrelated text reaches higher cosines; fitted on LoCoMo dev alone (R@10 0.721 -> 0.754 in
    # bench/score_fit.py's order without thread support)
    "hash-": Calibration(keyword_centre=0.25, keyword_slope=10.0, vector_centre=0.4, vector_slope=6.0),
}
#: A model nobody measured: MiniLM's curves (OpenAI's text-embedding-3 cosines sit on a similar
#: scale: unrelated texts 0.1-0.25, paraphrases 0.4-0.7).
UNKNOWN_MODEL_CALIBRATION = MODEL_CALIBRATIONS["all-MiniLM-L6-v2"]


def default_calibration(model_id: str) -> Calibration:
    """The calibration of ``model_id`` (longest matching prefix), else the unknown model's."""
    best = max((prefix for prefix in MODEL_CALIBRATIONS if model_id.startswith(prefix)), key=len, default="")
    return MODEL_CALIBRATIONS[best] if best else UNKNOWN_MODEL_CALIBRATION
