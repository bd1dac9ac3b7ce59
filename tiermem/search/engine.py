"""``SearchEngine``: hybrid keyword + vector search over facts, ``MEMORY.md`` and daily records.

One search (R44-R49):

1. validate the arguments (``InvalidInput`` otherwise): the query (control characters dropped,
   then it must hold something), ``k`` in 1..1000, tier, category, date range, ``min_score``;
2. bring the scope's vector index up to date (new items embedded, other processes' writes);
3. keyword candidates: the word index (BM25, stop words removed), the trigram index for
   Chinese/Japanese/Korean/Thai text, a substring scan for one- or two-character runs of those
   scripts, and trigram substrings of the words when the word index finds too little;
4. vector candidates from the vector index - in memory, or the database's own where it has one
   (query embedding: one embedder call);
5. every candidate gets its **score**: the evidence that it answers the query, in [0, 1],
   ``(wk * keyword coverage + wv * cosine) / (wk + wv)`` - the IDF-weighted share of the
   query's terms the item holds, and the cosine of the query's and the item's embeddings,
   weighted by ``search_keyword_weight`` and ``search_vector_weight`` (1 and 1). Nothing is
   rescaled per query, so a score means the same for any query and any store
   (:mod:`tiermem.search.evidence` has the exact definition);
6. order (``search_fusion``): ``weighted`` by the score itself, plus for a daily record a share
   of the score of the question before it and of another speaker's reply after it (the records
   next to the candidates join them: :mod:`tiermem.search.thread`); ``rrf`` by reciprocal rank
   fusion of the candidate lists; then optional recency decay and MMR (which change the order,
   not the scores); a hit the thread support put above higher scores is marked
   ``lifted_by_thread``;
7. the top ``k`` as :class:`~tiermem.types.SearchHit`, minus those scoring below the floor:
   ``min_score``, else the floor of explicit questions (the ``search_min_score`` setting, else
   the embedder model's default; automatic injection passes its own floor as ``min_score``:
   :mod:`tiermem.search.floor`). So a query about nothing in memory returns ``[]``.

Everything is confined to the scope: facts of (user, agent) and the user's Markdown chunks.
Queued items whose extraction has not landed can join the results through
:attr:`SearchEngine.pending_sources` (``include_pending=True``), scored on the same scale
(:meth:`SearchEngine.score_texts`) and held to the same floor.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, tzinfo
from functools import partial
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.clock import Clock, parse_utc
from tiermem.config import Settings
from tiermem.errors import InvalidInput
from tiermem.search import fts
from tiermem.search.evidence import Blend, QueryTerms, default_calibration
from tiermem.search.filters import SearchFilters, build_filters
from tiermem.search.floor import check_min_score, check_use, floor_in_force
from tiermem.search.hybrid import RankedList, decay, fuse, mmr, ranked
from tiermem.search.indexer import Cosines, Indexer, IndexStatus, Progress, ReindexResult
from tiermem.search.keywords import KeywordResult, KeywordSearch
from tiermem.search.thread import FileLines, extra_ids, mark_lifted, support_of, supported
from tiermem.storage.search import DocRow, SearchIndex, open_search_index
from tiermem.storage.sql import Database
from tiermem.types import Fact, Scope, SearchHit

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder

log = logging.getLogger(__name__)

MAX_K = 1000
THREAD_HEAD = 30  # candidates whose conversation neighbours are read (at least 2k)


#: ``(texts, cosines with the query) -> scores``: evidence scores of texts outside the index.
TextScorer = Callable[[Sequence[str], Sequence[float]], list[float]]


@dataclass(frozen=True)
class PendingQuery:
    """What a pending source is asked: the search and its (already computed) query vector."""

    scope: Scope
    query: str
    k: int
    filters: SearchFilters
    vector: npt.NDArray[np.float32]
    #: Scores texts (with their cosines to ``vector``) on the scale of the engine's hits.
    score: TextScorer = lambda texts, similarities: [0.0 for _ in texts]  # noqa: E731


@dataclass(frozen=True)
class QueryVector:
    """A query's embedding (:meth:`SearchEngine.embed_query`), for searches of other scopes: one
    prompt searched in several scopes is embedded once. A search uses it only for the same
    (cleaned) query text and embedder model, and embeds the query itself otherwise."""

    model: str
    text: str
    vector: npt.NDArray[np.float32]


#: A source of provisional hits (queued items not extracted yet). It returns hits scored with
#: :attr:`PendingQuery.score`, like the engine's; the engine marks them ``provisional``, merges
#: them by score, and applies the floor to them too.
PendingSource = Callable[[PendingQuery], Sequence[SearchHit]]


def clean_query(query: Any) -> str:
    """The query without control characters; ``InvalidInput`` if nothing searchable is left."""
    if not isinstance(query, str):
        raise InvalidInput(f"query must be a string, got {type(query).__name__}")
    return validate.text(fts.clean(query[: validate.MAX_QUERY_CHARS + 1]), "query", validate.MAX_QUERY_CHARS)


class SearchEngine:
    """Hybrid search over one database; scopes are passed per call."""

    def __init__(self, db: Database, embedder: Callable[[], Embedder], settings: Settings, clock: Clock,
                 tz: tzinfo | None = None) -> None:
        self.db = db
        self.docs = open_search_index(db)
        self.settings = settings
        self.clock = clock
        self.tz = tz if tz is not None else settings.tz()
        self.indexer = make_indexer(db, self.docs, embedder, settings)
        self.keywords = KeywordSearch(self.docs, settings.search_keyword_budget, settings.search_context_weight)
        self.pending_sources: list[PendingSource] = []
        #: Run after validation, before each search (``Memory`` re-indexes edited Markdown files).
        self.before_search: list[Callable[[], object]] = []

    # --- write-side hooks ------------------------------------------------------------------
    def on_facts_change(self, events: Sequence[tuple[str, Fact]]) -> None:
        """``FactStore.subscribe_batch`` listener: embed the batch's scopes' new texts now, update
        loaded indexes."""
        self._refresh({Scope(fact.user_id, fact.agent_name) for _, fact in events})

    def on_chunk_change(self, event: str, chunk_ids: list[int], scope: Scope | None = None) -> None:
        """``ChunkRepository.listeners`` entry: Markdown chunks of ``scope``'s user were added or
        deleted; the added ones are embedded (none else of the scope: another writer's records
        are its own to embed, or the next search's), loaded indexes updated."""
        self._refresh(None if scope is None else {scope}, chunk_ids if event == "added" else [])

    def _refresh(self, scopes: set[Scope] | None, chunks: Sequence[int] | None = None) -> None:
        if not self.settings.embed_on_write:
            return  # left pending (no vector yet): the next search, in any process, embeds them first
        try:
            self.indexer.refresh(scopes, chunks)
        except Exception:  # the write is committed; the next search embeds what is missing
            log.warning("could not embed new items now; the next search retries", exc_info=True)

    def reindex(self, progress: Progress | None = None, drop_other_models: bool = False) -> ReindexResult:
        return self.indexer.reindex(progress, drop_other_models)

    def status(self, scope: Scope | None = None) -> IndexStatus:
        return self.indexer.status(scope)

    # --- search ----------------------------------------------------------------------------
    def search(self, scope: Scope, query: Any, k: Any = 10, category: Any = None, tier: Any = None,
               since: Any = None, until: Any = None, include_pending: Any = False,
               min_score: Any = None, query_vector: QueryVector | None = None) -> list[SearchHit]:
        """The ``k`` best hits for ``query`` in ``scope`` that score at least ``min_score`` (default:
        :meth:`min_score`) (see the module docstring); ``query_vector``: the query's embedding
        made before (:meth:`embed_query`), used when its text and model are this search's."""
        text = clean_query(query)
        k = validate.positive_int(k, "k", MAX_K)
        filters = build_filters(category, tier, since, until, self.tz)
        if not isinstance(include_pending, bool):
            raise InvalidInput("include_pending must be True or False")
        if query_vector is not None and not isinstance(query_vector, QueryVector):
            raise InvalidInput(f"query_vector must be a QueryVector, got {type(query_vector).__name__}")
        floor = check_min_score(min_score)
        vector = self._query_vector(text, query_vector)  # first: reads sent ahead hold a snapshot until one waits
        floor = self.min_score() if floor is None else floor
        with self.db.reading():  # the reads of the hooks and of the search travel together where they can
            self._send_ahead(scope, text)
            for hook in list(self.before_search):
                hook()
            hits, terms = self._search(scope, text, vector, k, filters, floor)
        if include_pending and self.pending_sources:
            scorer = partial(self.score_texts, terms)
            hits = self._merge_pending(PendingQuery(scope, text, k, filters, vector, scorer), hits)
        return mark_lifted([hit for hit in hits if hit.score >= floor])

    def _send_ahead(self, scope: Scope, text: str) -> None:
        """Send the search's first reads ahead (the scope's version, whether the store holds it only,
        the query words' index terms): in a read batch (:meth:`Database.reading`) they travel with
        the next read that waits."""
        self.docs.prefetch_start(scope)
        if self.settings.search_keyword_weight > 0:
            self.docs.prefetch_terms(list(fts.parse(text).words))

    def embed_query(self, query: Any) -> QueryVector:
        """The embedding of ``query`` (cleaned as a search cleans it), for :meth:`search`."""
        text = clean_query(query)
        return QueryVector(self.indexer.model, text, self.indexer.embed_query(text))

    def _query_vector(self, text: str, given: QueryVector | None) -> npt.NDArray[np.float32]:
        if given is not None and given.text == text and given.model == self.indexer.model:
            return given.vector
        return self.indexer.embed_query(text)

    def min_score(self, use: Any = "explicit") -> float:
        """The floor in force for ``use`` ("explicit" | "inject"): its setting, else the embedder
        model's default (:func:`tiermem.search.floor.floor_in_force`)."""
        check_use(use)  # before the model is looked up
        return floor_in_force(self.settings, self.indexer.model, use)

    def search_vector(self, scope: Scope, text: str, vector: npt.NDArray[np.float32], k: int,
                      filters: SearchFilters) -> list[SearchHit]:
        """The search after validation and query embedding (what ``bench/search.py`` times)."""
        with self.db.reading():
            self._send_ahead(scope, text)
            return self._search(scope, text, vector, k, filters)[0]

    def _search(self, scope: Scope, text: str, vector: npt.NDArray[np.float32], k: int,
                filters: SearchFilters, floor: float = 0.0) -> tuple[list[SearchHit], QueryTerms]:
        """The hits scoring at least ``floor``, and the query's terms (to score provisional hits on
        the same scale). In a read batch (:meth:`Database.reading`, PostgreSQL) the reads that do not
        wait for each other travel together: the vector query and the weights' counts with the word
        list, the other candidates' vectors with the candidates' rows."""
        s = self.settings
        n = max(s.search_candidates, k)
        version = self.docs.version(scope)  # read once, first: the keyword counts and the vector index share it
        if s.search_vector_weight > 0:
            self.indexer.prefetch_nearest(scope, vector, n, filters, version)
        keyword = (self.keywords.run(scope, fts.parse(text), filters.for_sql(), n, s.search_keyword_weight,
                                     version[0]) if s.search_keyword_weight > 0 else KeywordResult([], QueryTerms()))
        found = Cosines([], {}, set())
        if s.search_vector_weight > 0:
            also = [doc_id for lst in keyword.lists if lst.weight > 0 for doc_id, _ in lst.items]
            found = self.indexer.nearest_cosines(scope, vector, n, filters, also, version)
        vectors = RankedList("vector", s.search_vector_weight, found.hits)
        lists = [*keyword.lists, vectors]
        ids = list({doc_id: None for lst in lists if lst.weight > 0 for doc_id, _ in lst.items})
        holding = None
        if keyword.terms.terms and s.search_keyword_weight > 0:  # the items with the terms they hold (coverage)
            rows, holding = self.docs.docs_holding(ids, keyword.terms.keys)
        else:
            rows = self.docs.docs(ids)
        evidence, why = self._evidence(scope, keyword.terms, vector, rows, found, holding)
        order = fuse(lists, evidence, s.search_fusion)
        if (s.search_fusion == "weighted" and (s.search_reply_support > 0 or s.search_next_support > 0)
                and any(row.tier == "daily" for row in rows.values())):
            order = self._thread(scope, keyword.terms, vector, k, (rows, evidence, why), order)
        cosines = {doc_id: made["vector"] for doc_id, made in why.items()}
        candidates = ranked({doc_id: value for doc_id, value in order.items()
                             if doc_id in rows and evidence[doc_id] >= floor}, cosines)
        if s.search_recency_half_life_days is not None:
            ages = {doc_id: self._age_days(rows[doc_id]) for doc_id, _ in candidates}
            candidates = ranked(decay(dict(candidates), ages, s.search_recency_half_life_days), cosines)
            for doc_id, age in ages.items():  # what recency did to the order (the score stays the evidence)
                if age is not None:
                    why[doc_id]["recency"] = 0.5 ** (max(age, 0.0) / s.search_recency_half_life_days)
        if s.search_mmr_lambda is not None:
            held = self.indexer.held_vectors(scope, [doc_id for doc_id, _ in candidates])
            candidates = mmr(candidates, held, k, s.search_mmr_lambda)
        return [_hit(rows[doc_id], evidence[doc_id], why[doc_id]) for doc_id, _ in candidates[:k]], keyword.terms

    def _thread(self, scope: Scope, terms: QueryTerms, vector: npt.NDArray[np.float32], k: int,
                found: tuple[dict[int, DocRow], dict[int, float], dict[int, dict[str, float]]],
                order: dict[int, float]) -> dict[int, float]:
        """``order`` with conversation-thread support (:mod:`tiermem.search.thread`) for the best
        candidates' daily records; their neighbours join ``found`` (rows, evidence, why) with
        their own evidence. Only the head of the list is looked at: on LoCoMo the best 30 give
        the same recall as all candidates (the best 20: -0.0006 R@10), at a fraction of the reads."""
        rows, evidence, why = found
        head = {doc_id: rows[doc_id] for doc_id, _ in ranked(order)[:max(THREAD_HEAD, 2 * k)] if doc_id in rows}
        lines = FileLines.read(self.db, scope, head)
        if not lines.starts:
            return order
        extra = self.docs.docs(extra_ids(lines.around(head), set(rows)))
        if extra:
            more, more_why = self._evidence(scope, terms, vector, extra)
            rows.update(extra)
            evidence.update(more)
            why.update(more_why)
        near = lines.adding(rows).around(head | extra)  # rows: every candidate, the neighbours among them
        base = {doc_id: order.get(doc_id, evidence[doc_id]) for doc_id in rows}
        lifted = supported(base, evidence, rows, near, self.settings.search_reply_support,
                           self.settings.search_next_support)
        for doc_id, support in support_of(base, lifted).items():
            why[doc_id]["thread"] = support  # shown as a lifted hit's mark when it outranks higher scores
        return lifted

    def _evidence(self, scope: Scope, terms: QueryTerms, vector: npt.NDArray[np.float32],
                  rows: dict[int, DocRow], known: Cosines | None = None,
                  held: dict[int, dict[str, set[str]]] | None = None
                  ) -> tuple[dict[int, float], dict[int, dict[str, float]]]:
        """The evidence score of every candidate (:mod:`tiermem.search.evidence`), and what made
        it: ``{"keyword": coverage, "vector": cosine}`` (shown by ``tiermem ui``); ``known``: the
        cosines already computed with the vector search (only the others are asked for); ``held``:
        the query's terms each candidate holds, read with it."""
        blend = self.blend()
        coverage: dict[int, float] = {}
        if blend.keyword_weight > 0:
            coverage = self.keywords.coverage(terms, {doc_id: row.text for doc_id, row in rows.items()}, held)
        similarity: dict[int, float] = {}
        if blend.vector_weight > 0:
            known = known or Cosines([], {}, set())
            similarity = {doc_id: known.cosines[doc_id] for doc_id in rows if doc_id in known.cosines}
            missing = [doc_id for doc_id in rows if doc_id not in known.asked]
            if missing:
                similarity.update(self.indexer.similarities(scope, vector, missing))
        why = {doc_id: {"keyword": coverage.get(doc_id, 0.0), "vector": similarity.get(doc_id, 0.0)} for doc_id in rows}
        return blend.scores(coverage, similarity, list(rows)), why

    def blend(self) -> Blend:
        """How evidence makes a score here: the weights and the embedder model's calibration."""
        return Blend(self.settings.search_keyword_weight, self.settings.search_vector_weight,
                     default_calibration(self.indexer.model))

    def score_texts(self, terms: QueryTerms, texts: Sequence[str], similarities: Sequence[float]) -> list[float]:
        """Scores of texts outside the index (provisional hits) on the hits' scale: each text counts
        as an item's own text, with its cosine to the query given."""
        blend = self.blend()
        coverage = self.keywords.text_coverage(terms, texts) if blend.keyword_weight > 0 else [0.0] * len(texts)
        return [blend.score(c, v if blend.vector_weight > 0 else 0.0)
                for c, v in zip(coverage, similarities, strict=True)]

    def _age_days(self, row: DocRow) -> float | None:
        if not row.at or row.tier == "core":
            return None
        now = self.clock.now()
        try:
            if row.tier == "fact":
                return (now - parse_utc(row.at)).total_seconds() / 86400
            return float((now.astimezone(self.tz).date() - datetime.fromisoformat(row.at[:10]).date()).days)
        except ValueError:
            return None

    def _merge_pending(self, request: PendingQuery, hits: list[SearchHit]) -> list[SearchHit]:
        merged = list(hits)
        for source in list(self.pending_sources):
            try:
                merged.extend(replace(hit, provisional=True) for hit in source(request))
            except Exception:  # a broken source must not break search
                log.warning("pending source %r failed", source, exc_info=True)
        merged.sort(key=lambda hit: -hit.score)
        return merged[: request.k]


def make_indexer(db: Database, docs: SearchIndex, embedder: Callable[[], Embedder], settings: Settings) -> Indexer:
    """The indexer for ``db``: vectors searched by the database when its backend can
    (``Backend.vector_queries``), else loaded into this process's memory per scope."""
    vectors = db.parts.embeddings(db)
    if db.parts.vector_queries is not None:
        from tiermem.search.database import DatabaseIndexer

        return DatabaseIndexer(docs, vectors, embedder, settings, db.parts.vector_queries(db))
    from tiermem.search.loaded import LoadedIndexer

    return LoadedIndexer(docs, vectors, embedder, settings)


def _hit(row: DocRow, score: float, why: dict[str, float]) -> SearchHit:
    """``extra``: the doc id and what made the score (keyword coverage, cosine) and the order (recency
    factor, thread support)."""
    if row.source == "fact":
        return SearchHit(row.text, score, "fact", row.ref, category=row.category,
                         date=row.at[:10] if row.at else None, extra={"doc_id": row.id, **why})
    ref = f"{row.path}#L{row.line_start}-L{row.line_end}" if row.path else f"chunk:{row.ref}"
    return SearchHit(row.text, score, row.tier, ref, date=row.at if row.tier == "daily" else None,
                     extra={"doc_id": row.id, **why})
