"""The keyword side of a search: which keyword queries to run for a :class:`KeywordQuery`, within
a work budget.

Ranking costs time per matching row (BM25 on SQLite, ``ts_rank`` on PostgreSQL), so a term found
in a large share of a big store ("user" in every fact) would dominate the latency while adding
little to the ranking. Terms are therefore taken rarest first while the summed document frequency
stays within ``budget`` (``search_keyword_budget``); in stores smaller than the budget nothing is
ever dropped. Document frequencies come from the index (:class:`SearchIndex`) and are cached for
a while.

Lists produced (each best first):

- ``words``: the word index (stems), terms OR-ed;
- ``grams``: the gram index for runs of Chinese, Japanese, Korean, Thai ... text;
- ``substrings``: substrings of the words (through the gram index), when the word index found
  fewer than asked;
- ``scan``: one- and two-character runs of those scripts anywhere in the scope.

It also weighs the query's terms (IDF over the items' own text) and measures which of them each
candidate holds, the keyword coverage of :mod:`tiermem.search.evidence`. Finding which items
hold a term reads its occurrences, so that too is limited to the terms the budget affords.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from tiermem.search.evidence import QueryTerms, Term, idf
from tiermem.search.fts import KeywordQuery
from tiermem.search.hybrid import RankedList
from tiermem.storage.search import DfTerm, DocFilter, SearchIndex
from tiermem.types import Scope

SCAN_LIMIT = 5000  # items a short-term substring scan may collect
_CACHE_MAX = 10_000


@dataclass(frozen=True)
class KeywordResult:
    """The keyword lists of one search, and the query's terms for scoring (:mod:`.evidence`)."""

    lists: list[RankedList]
    terms: QueryTerms


class _Counting:
    """What one search counts document frequencies against: its scope, the scope's change count,
    and whether the store holds that scope only (asked once per search, when a count is first
    needed: then the whole store's counts are the scope's, counted faster; a search sends the read
    ahead, :meth:`SearchIndex.prefetch_start`)."""

    def __init__(self, docs: SearchIndex, scope: Scope, changes: int) -> None:
        self.docs, self.scope, self.changes = docs, scope, changes
        self._only: bool | None = None

    def counted(self) -> Scope | None:
        """The scope to count in: ``None`` (the whole store) when it holds this scope only."""
        if self._only is None:
            self._only = self.docs.only_scope(self.scope)
        return None if self._only else self.scope


class KeywordSearch:
    """Runs the keyword queries of one search against the store's keyword index."""

    def __init__(self, docs: SearchIndex, budget: int, context_weight: float = 0.75) -> None:
        self.docs = docs
        self.budget = budget
        self.context_weight = context_weight
        self._df: dict[tuple[Scope, str, str], tuple[int, int]] = {}  # (scope, index, term) -> (df, scope's changes)
        self._total: dict[Scope, tuple[int, int]] = {}  # scope -> (items in it, its changes when counted)
        self._lock = threading.Lock()

    def run(self, scope: Scope, query: KeywordQuery, flt: DocFilter, n: int, weight: float,
            changes: int | None = None) -> KeywordResult:
        """The keyword lists (best first, at most ``n`` items each) and the query's terms; ``changes``:
        the scope's change count (:meth:`SearchIndex.version`), read here when not given."""
        if changes is None:
            changes = self.docs.version(scope)[0]  # one read; other scopes' writes never move it
        at = _Counting(self.docs, scope, changes)
        lists: list[RankedList] = []
        keys = self.docs.index_terms(list(query.words)) if query.words else []
        words = self._affordable(scope, "words", _df_terms(query.words, keys), at)
        if words:
            self._send_counts(scope, _df_terms(query.words, keys), set(words), at)
        found: set[int] = set()
        if words:
            chosen = set(words)
            items = self.docs.match_words(words, [k for w, k in zip(query.words, keys, strict=True) if w in chosen],
                                          scope, flt, n, self.context_weight)
            lists.append(RankedList("words", weight, items))
            found = {doc_id for doc_id, _ in items}
        grams = self._affordable(scope, "grams", _df_terms(query.grams), at)
        if grams:
            lists.append(RankedList("grams", weight, self.docs.match_grams(grams, scope, flt, n)))
        if len(found) < n and query.substrings:
            pieces = [[s[i:i + 3] for i in range(len(s) - 2)] for s in query.substrings]
            phrases = self._affordable(scope, "grams", _df_terms(query.substrings, pieces), at)
            if phrases:
                extra = [(doc_id, score) for doc_id, score in self.docs.match_substrings(phrases, scope, flt, n)
                         if doc_id not in found]
                lists.append(RankedList("substrings", weight, extra))
        scanned: Sequence[tuple[int, str]] = ()
        if query.short:
            scanned = self.docs.scan(query.short, scope, flt, SCAN_LIMIT)
            lists.append(RankedList("scan", weight, scan_ranking(scanned, query.short, n)))
        return KeywordResult(lists, self._terms(scope, query, keys, set(words), at, scanned))

    # --- evidence --------------------------------------------------------------------------
    def _terms(self, scope: Scope, query: KeywordQuery, keys: list[list[str]], checked: set[str], at: _Counting,
               scanned: Sequence[tuple[int, str]]) -> QueryTerms:
        """The query's terms with their weights (``keys``: each word's index terms); words too
        common for the budget (not in ``checked``) are left out. Counts are the scope's own."""
        total = self._items(scope, at.changes)
        terms: list[Term] = []
        if query.words:
            words = [t for t in _df_terms(query.words, keys) if t.keys and t.text in checked]
            df = self._doc_freqs(scope, "text", words, at)
            terms.extend(Term(t.text, idf(total, df[t.text]), t.keys) for t in words)
        if query.grams:
            grams = _df_terms(query.grams)
            df = self._doc_freqs(scope, "grams", grams, at)
            terms.extend(Term(t.text, idf(total, df[t.text])) for t in grams)
        for needle in query.short:
            terms.append(Term(needle, idf(total, sum(1 for _, text in scanned if needle in text))))
        return QueryTerms(tuple(terms), self.context_weight)

    def _send_counts(self, scope: Scope, words: list[DfTerm], checked: set[str], at: _Counting) -> None:
        """Send ahead the counts that weigh the afforded words (:meth:`_terms` asks for them after the
        lists): in a read batch they travel with the word list."""
        missing = self._cached(scope, "text", [t for t in words if t.keys and t.text in checked], at, None)[1]
        if missing:
            self.docs.prefetch_doc_freqs("text", missing, at.counted())

    def coverage(self, terms: QueryTerms, texts: Mapping[int, str],
                 held: Mapping[int, dict[str, set[str]]] | None = None) -> dict[int, float]:
        """The keyword coverage of indexed items (``doc id -> text``), see :mod:`.evidence`;
        ``held``: which of the terms they hold, when read already (:meth:`SearchIndex.docs_holding`)."""
        if not terms.terms:
            return {}
        if held is None:
            held = self.docs.held_terms(terms.keys, list(texts))
        return {doc_id: terms.coverage(text, held.get(doc_id, {})) for doc_id, text in texts.items()}

    def text_coverage(self, terms: QueryTerms, texts: Sequence[str]) -> list[float]:
        """The keyword coverage of texts that are not in the index, as if each were an item's own
        text (no context)."""
        if not terms.terms:
            return [0.0 for _ in texts]
        held = [{key: {"text"} for key in keys} for keys in self.docs.index_terms(list(texts))]
        return [terms.coverage(text, h) for text, h in zip(texts, held, strict=True)]

    def _items(self, scope: Scope, changes: int) -> int:
        """Items in the scope, recounted when the scope changed noticeably since."""
        with self._lock:
            count, seq = self._total.get(scope, (0, -1))
        if seq < 0 or abs(changes - seq) > max(50, count // 100):
            count = self.docs.count(scope)
            with self._lock:
                if len(self._total) > _CACHE_MAX:
                    self._total.clear()
                self._total[scope] = (count, changes)
        return count

    def _affordable(self, scope: Scope, index: str, terms: list[DfTerm], at: _Counting) -> list[str]:
        """The texts of ``terms`` (each costing the scope's document frequencies of its keys)
        rarest first while the total cost stays within the budget; in the original order."""
        if not terms or at.changes * sum(len(t.keys) for t in terms) <= self.budget:
            return [t.text for t in terms]
        if index == "grams":
            costs = self._gram_costs(scope, terms, at)
        else:
            df = self._doc_freqs(scope, index, terms, at, cap=self.budget)
            costs = [df[t.text] for t in terms]
        kept: set[int] = set()
        total = 0
        for i in sorted(range(len(terms)), key=lambda i: costs[i]):
            if total + costs[i] > self.budget:
                break
            kept.add(i)
            total += costs[i]
        return [term.text for i, term in enumerate(terms) if i in kept]

    def _gram_costs(self, scope: Scope, terms: list[DfTerm], at: _Counting) -> list[int]:
        """What each of ``terms`` costs: the summed matches of its grams, counted a gram of each term
        at a time until the term exceeds the budget (then it is left out whatever its exact cost, so
        its other grams are not counted: a common word's substring costs one capped count, not one
        per gram)."""
        df: dict[str, int] = {}
        costs = [0 for _ in terms]
        counting = [i for i, term in enumerate(terms) if term.keys]
        depth = 0
        while counting:
            keys = [terms[i].keys[depth] for i in counting]
            missing = [DfTerm(key, (key,)) for key in dict.fromkeys(keys) if key not in df]
            if missing:
                df.update(self._doc_freqs(scope, "grams", missing, at, cap=self.budget))
            for i, key in zip(counting, keys, strict=True):
                costs[i] += df[key]
            depth += 1
            counting = [i for i in counting if costs[i] <= self.budget and depth < len(terms[i].keys)]
        return costs

    def _doc_freqs(self, scope: Scope, index: str, terms: Sequence[DfTerm], at: _Counting,
                   cap: int | None = None) -> dict[str, int]:
        """The scope's document frequencies (:meth:`SearchIndex.doc_freqs`), cached; with ``cap``,
        a count above it stands for any count above it (the index may stop counting there)."""
        capped = f"{index}>{cap}"
        out, missing = self._cached(scope, index, terms, at, cap)
        if missing:
            fresh, weights = self._count(index, missing, at, cap)
            with self._lock:
                if len(self._df) > _CACHE_MAX:
                    self._df.clear()
                for text, count in fresh.items():
                    self._df[(scope, index if cap is None or count <= cap else capped, text)] = (count, at.changes)
                for text, count in weights.items():
                    self._df[(scope, "text", text)] = (count, at.changes)
            out.update(fresh)
        return out

    def _cached(self, scope: Scope, index: str, terms: Sequence[DfTerm], at: _Counting,
                cap: int | None) -> tuple[dict[str, int], list[DfTerm]]:
        """The cached counts of ``terms`` still true enough (off by 10% at most), and the terms to count."""
        out: dict[str, int] = {}
        missing: list[DfTerm] = []
        with self._lock:
            for term in terms:
                cached = self._df.get((scope, index, term.text))
                if cached is None and cap is not None:
                    cached = self._df.get((scope, f"{index}>{cap}", term.text))
                if cached is not None and 0 <= at.changes - cached[1] <= cached[0] // 10:
                    out[term.text] = cached[0]
                else:
                    missing.append(term)
        return out, missing

    def _count(self, index: str, terms: Sequence[DfTerm], at: _Counting,
               cap: int | None) -> tuple[dict[str, int], dict[str, int]]:
        """The counts of ``terms`` in ``index``, and (words counted against the budget) the ``"text"``
        counts of those within it, which weigh them if afforded (:meth:`SearchIndex.word_counts`:
        counted with them on PostgreSQL, not apart later)."""
        if index == "words" and cap is not None:
            pairs = self.docs.word_counts(terms, at.counted(), cap)
            return ({t.text: words for t, (words, _) in zip(terms, pairs, strict=True)},
                    {t.text: text for t, (_, text) in zip(terms, pairs, strict=True) if text is not None})
        return dict(zip((t.text for t in terms), self.docs.doc_freqs(index, terms, at.counted(), cap), strict=True)), {}


def _df_terms(texts: Sequence[str], keys: Sequence[Sequence[str]] | None = None) -> list[DfTerm]:
    """Query words with their index terms, or grams (casefolded, each its own key)."""
    if keys is None:
        return [DfTerm(t.casefold(), (t.casefold(),)) for t in texts]
    return [DfTerm(t, tuple(k)) for t, k in zip(texts, keys, strict=True)]


def scan_ranking(found: Sequence[tuple[int, str]], needles: Sequence[str], n: int) -> list[tuple[int, float]]:
    """Rank scan hits: more distinct terms first, then more occurrences, then shorter text."""
    scored = []
    for doc_id, text in found:
        distinct = sum(1 for needle in needles if needle in text)
        count = sum(text.count(needle) for needle in needles)
        scored.append((doc_id, distinct + min(count, 9) / 10 + 1 / (10 + len(text))))
    scored.sort(key=lambda item: (-item[1], item[0]))
    return scored[:n]
