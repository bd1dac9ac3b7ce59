"""The keyword side of a search: which FTS5 queries to run for a :class:`KeywordQuery`, within a
work budget.

BM25 ranking costs time per matching row, so a term found in a large share of a big store
("user" in every fact) would dominate the latency while adding little to the ranking. Terms are
therefore taken rarest first while the summed document frequency stays within ``budget``
(``search_keyword_budget``); in stores smaller than the budget nothing is ever dropped. Document
frequencies come from the ``fts5vocab`` tables and are cached for a while.

Lists produced (each best first):

- ``words``: the porter/unicode61 index, terms OR-ed, BM25;
- ``grams``: the trigram index for runs of Chinese, Japanese, Korean, Thai ... text;
- ``substrings``: trigram phrases of the words, when the word index found fewer than asked;
- ``scan``: a substring scan of the scope for one- and two-character runs of those scripts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from tiermem.search.fts import KeywordQuery, match_expression
from tiermem.search.hybrid import RankedList
from tiermem.storage.search import DocFilter, SearchRepository
from tiermem.types import Scope

SCAN_LIMIT = 5000  # items a short-term substring scan may collect
_CACHE_MAX = 10_000


class KeywordSearch:
    """Runs the keyword queries of one search against the FTS5 indexes."""

    def __init__(self, docs: SearchRepository, budget: int, context_weight: float = 0.5) -> None:
        self.docs = docs
        self.budget = budget
        self.context_weight = context_weight
        self._df: dict[tuple[str, str], tuple[int, int]] = {}  # (table, term) -> (df, doc seq then)
        self._lock = threading.Lock()

    def lists(self, scope: Scope, query: KeywordQuery, flt: DocFilter, n: int, weight: float) -> list[RankedList]:
        doc_seq = self.docs.high_water()[0]
        lists: list[RankedList] = []
        words = self._affordable_words(query.words, doc_seq)
        found: set[int] = set()
        if words:
            items = self.docs.match("search_words", match_expression(words), scope, flt, n, self.context_weight)
            lists.append(RankedList("words", weight, items))
            found = {doc_id for doc_id, _ in items}
        grams = self._affordable("search_grams", list(query.grams), [[g.casefold()] for g in query.grams], doc_seq)
        if grams:
            lists.append(RankedList("grams", weight, self.docs.match("search_grams", match_expression(grams), scope,
                                                                       flt, n)))
        if len(found) < n and query.substrings:
            pieces = [[s[i:i + 3] for i in range(len(s) - 2)] for s in query.substrings]
            phrases = self._affordable("search_grams", list(query.substrings), pieces, doc_seq)
            if phrases:
                extra = [(doc_id, score) for doc_id, score in
                         self.docs.match("search_grams", match_expression(phrases), scope, flt, n)
                         if doc_id not in found]
                lists.append(RankedList("substrings", weight, extra))
        if query.short:
            lists.append(RankedList("scan", weight, scan_ranking(
                self.docs.scan(query.short, scope, flt, SCAN_LIMIT), query.short, n)))
        return lists

    def _affordable_words(self, words: Sequence[str], doc_seq: int) -> list[str]:
        if not words or doc_seq * len(words) <= self.budget:
            return list(words)
        stems = self.docs.stems(words)
        if stems is None:
            return list(words)
        return self._affordable("search_words", list(words), [[s] for s in stems], doc_seq)

    def _affordable(self, table: str, terms: list[str], index_terms: list[list[str]], doc_seq: int) -> list[str]:
        """``terms`` (each costing the document frequencies of its ``index_terms``) rarest first
        while the total cost stays within the budget; in the original order."""
        if not terms or doc_seq * sum(len(t) for t in index_terms) <= self.budget:
            return terms
        df = self._doc_freqs(table, [t for group in index_terms for t in group], doc_seq)
        costs = [sum(df[t] for t in group) for group in index_terms]
        kept: set[int] = set()
        total = 0
        for i in sorted(range(len(terms)), key=lambda i: costs[i]):
            if total + costs[i] > self.budget:
                break
            kept.add(i)
            total += costs[i]
        return [term for i, term in enumerate(terms) if i in kept]

    def _doc_freqs(self, table: str, terms: list[str], doc_seq: int) -> dict[str, int]:
        out: dict[str, int] = {}
        missing: list[str] = []
        with self._lock:
            for term in terms:
                cached = self._df.get((table, term))
                if cached is not None and doc_seq - cached[1] < 1000 + cached[0] // 10:
                    out[term] = cached[0]
                else:
                    missing.append(term)
        if missing:
            fresh = self.docs.doc_freqs(table, missing)
            with self._lock:
                if len(self._df) > _CACHE_MAX:
                    self._df.clear()
                for term, count in fresh.items():
                    self._df[(table, term)] = (count, doc_seq)
            out.update(fresh)
        return out


def scan_ranking(found: Sequence[tuple[int, str]], needles: Sequence[str], n: int) -> list[tuple[int, float]]:
    """Rank scan hits: more distinct terms first, then more occurrences, then shorter text."""
    scored = []
    for doc_id, text in found:
        distinct = sum(1 for needle in needles if needle in text)
        count = sum(text.count(needle) for needle in needles)
        scored.append((doc_id, distinct + min(count, 9) / 10 + 1 / (10 + len(text))))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:n]
