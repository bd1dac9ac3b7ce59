"""Vectors for the search index: embed new items, re-index; searching them is per backend.

- New items (a fact written, a daily file re-indexed) get ``embed_hash IS NULL`` from the
  triggers. :meth:`Indexer.embed_pending` embeds them in batches *outside* any write transaction
  and writes all their vectors in one transaction. Vectors are cached by the hash of the embedded
  text and the model id: text seen before is never embedded again.
- Where vectors are searched depends on the store (``Backend.vector_queries``): in this process's
  memory, per scope (:class:`tiermem.search.loaded.LoadedIndexer`, SQLite), or by the database
  itself (:class:`tiermem.search.database.DatabaseIndexer`, PostgreSQL with pgvector). Both
  score with the same float32 cosines.
- The model the index was built with is kept in ``meta``; another model is reported (log and
  :meth:`Indexer.status`) and :meth:`Indexer.reindex` fills in its vectors.
- With ``search_sentence_vectors`` on, an item of two or more sentences also gets one vector per
  sentence (:mod:`tiermem.search.parts`), and a one-sentence Markdown chunk (whose own vector
  blends in the chunk before it) a vector of its text alone; these part vectors are cached by
  hash like any text (and linked to the item for a database that searches them) and found again
  from the item's text when a scope is loaded; the index scores the item by its best vector.
- With ``search_derived_vectors`` on (the default), a Markdown chunk's own vector is not embedded:
  it is combined (:func:`combine`) from the vectors of its sentences - its parts, embedded anyway -
  and of the chunk before's, so a journal record costs one embedding per sentence, about the
  tokens of its text, instead of about three times that (issue 16: LoCoMo dev R@10 within 0.001).
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tiermem.concurrency import FairLock
from tiermem.config import Settings
from tiermem.errors import ProviderError
from tiermem.search.parts import sentence_parts
from tiermem.search.vectors import TIER_CODE
from tiermem.storage.embeddings import EmbeddingRepository, PendingDoc
from tiermem.storage.search import REMOVED_LOG_KEEP, ScopeVersion, SearchIndex
from tiermem.types import Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder
    from tiermem.search.filters import SearchFilters

log = logging.getLogger(__name__)

EMBED_BATCH = 256  # texts per embedder call
CONTEXT_RADIUS = 2  # neighbouring chunks (each side) in a chunk's keyword context
PENDING_BATCH = 2048  # items per read of the pending list

Progress = Callable[[int, int], None]  # (done, total)


@dataclass(frozen=True)
class IndexStatus:
    """What the vector index holds for the current model."""

    model: str
    index_model: str | None  # the model the stored index was built with
    items: int
    missing: int  # items without a vector for ``model`` (reindex fills them)
    models: dict[str, int]  # stored vectors per model

    @property
    def model_changed(self) -> bool:
        return self.index_model is not None and self.index_model != self.model


@dataclass(frozen=True)
class ReindexResult:
    model: str
    items: int  # items that lacked a vector for the model
    embedded: int  # texts sent to the embedder
    reused: int  # items whose text already had a vector (cache hits)


@dataclass(frozen=True)
class Cosines:
    """A vector search (:meth:`Indexer.nearest_cosines`): its hits, best first, and the cosines
    (:meth:`Indexer.similarities`) found along with them for the items of ``asked`` that have a vector."""

    hits: list[tuple[int, float]]
    cosines: dict[int, float]
    asked: set[int]


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class Indexer:
    """Embeds items and writes their vectors; subclasses search them (see the module docstring)."""

    def __init__(self, docs: SearchIndex, vectors: EmbeddingRepository,
                 embedder: Callable[[], Embedder], settings: Settings) -> None:
        self.docs = docs
        self.vectors = vectors
        self._embedder_factory = embedder
        self._embedder: Embedder | None = None
        self.settings = settings
        self._embed_lock = FairLock()  # one thread embeds pending items at a time, in arrival order
        self._sync_lock = threading.Lock()  # one thread reads new rows into the loaded indexes at a time
        self._model_lock = threading.Lock()
        self._pruned_at = 0
        self._last_query: tuple[tuple[str, str], npt.NDArray[np.float32]] | None = None

    # --- the model -------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        if self._embedder is None:
            with self._model_lock:
                if self._embedder is None:
                    embedder = self._embedder_factory()
                    self._check_model(embedder)
                    self._embedder = embedder
        return self._embedder

    @property
    def model(self) -> str:
        return str(self.embedder.model_id)

    def _loaded_model(self) -> str | None:
        """The model, if it is loaded already (reading what is pending never loads it)."""
        embedder = self._embedder
        return None if embedder is None else str(embedder.model_id)

    def _check_model(self, embedder: Embedder) -> None:
        current = str(embedder.model_id)
        stored = self.vectors.index_model()
        if stored is None:
            self.vectors.set_index_model(current)
        elif stored != current:
            missing = self.vectors.count_without_vector(current)
            log.warning("the search index was built with embedder %r, this Memory uses %r: %d items have no"
                        " vector for it (keyword search still finds them); run `tiermem reindex`",
                        stored, current, missing)

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        """The query's vector; the last one is kept, so one prompt's searches of several tiers
        (``format_for_injection(query=...)``) embed the query once."""
        model = self.model
        last = self._last_query
        if last is not None and last[0] == (model, text):
            return last[1]
        vector: npt.NDArray[np.float32] = self._embed([text])[0]
        vector.setflags(write=False)  # shared by the searches that reuse it
        self._last_query = ((model, text), vector)
        return vector

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        embedder = self.embedder
        parts = [embedder.embed(texts[i:i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
        out = np.concatenate(parts) if parts else np.zeros((0, embedder.dim), np.float32)
        if out.shape != (len(texts), embedder.dim):
            raise ProviderError(f"embedder {embedder.model_id!r} returned shape {out.shape} for {len(texts)} texts")
        out = np.ascontiguousarray(out, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return (out / np.where(norms > 0, norms, 1.0)).astype(np.float32)

    # --- writing vectors -------------------------------------------------------------------
    def prepare(self, docs: Sequence[PendingDoc]) -> tuple[list[str], list[tuple[str, int]]]:
        """What to embed for each item, and the keyword contexts to (re)write.

        A fact is embedded as it is. With ``search_chunk_context`` on, a Markdown chunk is embedded
        together with the chunk before it (an answer makes sense with its question), and its
        keyword context holds its neighbours (``CONTEXT_RADIUS`` chunks each side) and, for a
        daily record, its date in words; the contexts of the chunks just before new ones change
        too. Both depend only on the file, so an append and a full re-index give the same result.
        """
        texts, _, contexts = self._plan(docs)
        return texts, contexts

    def _plan(self, docs: Sequence[PendingDoc]) -> tuple[list[str], list[str | None], list[tuple[str, int]]]:
        """:meth:`prepare`, plus the text of the chunk blended into each item (``None``: none)."""
        texts = [doc.text for doc in docs]
        before: list[str | None] = [None] * len(docs)
        chunk_docs = {doc.id: i for i, doc in enumerate(docs) if doc.source == "chunk"}
        if not self.settings.search_chunk_context or not chunk_docs:
            return texts, before, []
        contexts: dict[int, str] = {}  # doc id -> its new context (windows of one file may overlap)
        # a window of the file, not all of it: the new chunks, the chunk before each and the
        # neighbours of every context that changes (those of the new chunks and of the
        # CONTEXT_RADIUS chunks before each); a window's first item is the file's when fewer came before
        for window in self.docs.file_windows(list(chunk_docs), 2 * CONTEXT_RADIUS, CONTEXT_RADIUS):
            items = window.items
            touched: set[int] = set()
            for position in window.asked:
                if position > 0:
                    i = chunk_docs[items[position][0]]
                    before[i] = items[position - 1][1]
                    texts[i] = items[position - 1][1] + "\n" + items[position][1]
                touched.update(range(max(0, position - CONTEXT_RADIUS), position + 1))
            for position in sorted(touched):
                context = _keyword_context(items, position)
                if context != items[position][3]:
                    contexts[items[position][0]] = context
        return texts, before, [(context, doc_id) for doc_id, context in contexts.items()]

    def _write(self, docs: Sequence[PendingDoc]) -> tuple[int, int]:
        """Embed what is not cached and link every doc to its vector; ``(embedded, reused)``.

        With ``search_derived_vectors`` a Markdown chunk's own vector is not embedded but combined
        from the vectors of its pieces and of the chunk before's (:func:`combine`): its sentences,
        embedded anyway as its parts, so each text is embedded once. It is stored under the hash of
        the text it stands for, like any vector. What is cached is read once (:meth:`_stored`): the
        items' texts, their parts and the derived chunks' pieces together."""
        if not docs:
            return 0, 0
        texts, before, contexts = self._plan(docs)
        hashes = [text_hash(t) for t in texts]
        model = self.model
        part_texts = self._part_texts([(doc.id, doc.text, doc.source) for doc in docs])
        part_links = [(text_hash(t), doc_id) for doc_id, t in part_texts]
        derivable = {i: [(text_hash(p), p) for p in self._pieces(doc.text, before[i])] for i, doc in enumerate(docs)
                     if self.settings.search_derived_vectors and doc.source == "chunk"}
        stored = self._stored(docs, [*hashes, *(h for h, _ in part_links),
                                     *(h for pieces in derivable.values() for h, _ in pieces)])
        fresh = [i for i, h in enumerate(hashes) if h not in stored]
        fresh_ids = {docs[i].id for i in fresh}
        todo = {h: t for (h, doc_id), (_, t) in zip(part_links, part_texts, strict=True)
                if doc_id in fresh_ids}  # a known text's parts came with it
        derived = [i for i in fresh if i in derivable]
        pieces = {h: p for i in derived for h, p in derivable[i]}
        todo.update((hashes[i], texts[i]) for i in fresh if i not in derivable)
        found = {h: stored[h] for h in pieces if h in stored}
        missing = {h: t for h, t in {**todo, **pieces}.items() if h not in stored}
        blobs: list[tuple[str, bytes]] = []
        if missing:
            matrix = self._embed(list(missing.values()))
            blobs = [(h, matrix[i].astype("<f4").tobytes()) for i, h in enumerate(missing)]
        if derived:
            found.update(blobs)
            blobs += [(hashes[i], self._derived(docs[i].text, before[i], found)) for i in derived]
        links = [(h, doc.id) for h, doc in zip(hashes, docs, strict=True)]
        self.vectors.store(model, self.embedder.dim, blobs, links, contexts, part_links,
                           users={doc.user_id for doc in docs})
        new_items = len({hashes[i] for i in fresh})
        return new_items, len(docs) - new_items

    def _stored(self, docs: Sequence[PendingDoc], hashes: Sequence[str]) -> dict[str, bytes]:
        """``hash -> float32 blob`` of the ``hashes`` cached for the model, in one read; what came
        with the pending items' read (:attr:`PendingDoc.cached`) is not asked again."""
        known = dict(pair for doc in docs for pair in doc.cached)
        stored = {h: blob for h, blob in known.items() if blob is not None}
        rest = [h for h in hashes if h not in known]
        if rest:
            stored.update(self.vectors.vectors_by_hash(rest, self.model))
        return stored

    def _pieces(self, text: str, before: str | None) -> list[str]:
        """The texts whose vectors make up an item's derived vector: the sentences of it and of
        the chunk blended in (each text whole when it is one sentence or sentences are off)."""
        split = self.settings.search_sentence_vectors
        return [p for t in (text, before) if t is not None for p in ((split and sentence_parts(t)) or [t])]

    def _derived(self, text: str, before: str | None, vectors: dict[str, bytes]) -> bytes:
        """The float32 blob of an item's derived vector, from its pieces' ``vectors`` (by hash)."""
        import numpy as np

        def of(t: str) -> npt.NDArray[np.float32]:
            parts = self._pieces(t, None)
            return combine([np.frombuffer(vectors[text_hash(p)], np.float32) for p in parts],
                           [len(p.split()) for p in parts])

        own = of(text)
        if before is not None:
            own = combine([of(before), own], [len(before.split()), len(text.split())])
        return own.astype("<f4").tobytes()

    def _part_texts(self, items: Sequence[tuple[int, str, str]]) -> list[tuple[int, str]]:
        """``(doc id, part text)`` of the items' parts (none when the setting is off): each sentence
        of a longer item; and a Markdown chunk of one sentence, embedded together with the chunk
        before it, also gets its own text alone (a question about that record alone matches it
        even when the chunk before is about something else)."""
        if not self.settings.search_sentence_vectors:
            return []
        alone = self.settings.search_chunk_context
        out: list[tuple[int, str]] = []
        for doc_id, text, source in items:
            parts = sentence_parts(text) or ([text] if alone and source == "chunk" else [])
            out.extend((doc_id, part) for part in parts)
        return out

    def _part_vectors(self, items: Sequence[tuple[int, str, str]], embed_missing: bool) -> list[tuple[int, bytes]]:
        """``(doc id, float32 blob)`` of the items' sentence parts; parts without a stored vector
        are embedded (and stored) when ``embed_missing``, else left out."""
        parts = self._part_texts(items)
        if not parts:
            return []
        model = self.model
        hashes = [text_hash(t) for _, t in parts]
        found = self.vectors.vectors_by_hash(hashes, model)
        missing = {h: t for h, (_, t) in zip(hashes, parts, strict=True) if h not in found}
        if embed_missing and missing:
            matrix = self._embed(list(missing.values()))
            blobs = [(h, matrix[i].astype("<f4").tobytes()) for i, h in enumerate(missing)]
            self.vectors.store(model, self.embedder.dim, blobs, [],
                               parts=[(h, doc_id) for (doc_id, _), h in zip(parts, hashes, strict=True)])
            found.update(blobs)
        return [(doc_id, found[h]) for (doc_id, _), h in zip(parts, hashes, strict=True) if h in found]

    def embed_pending(self, wait: bool = True, scope: Scope | None = None) -> int | None:
        """Embed every item (of ``scope``, or of all scopes) that was never embedded; returns how
        many items were linked, or ``None`` without ``wait`` when another thread is embedding (it
        will do these too). A search passes its scope: it never needs another scope's vectors."""
        if not self._embed_lock.acquire(blocking=wait):
            return None
        try:
            done = after = 0
            while True:
                docs = self.vectors.unembedded(PENDING_BATCH, after, scope, self._loaded_model())
                self._write(docs)
                done += len(docs)
                if len(docs) < PENDING_BATCH:  # the last of them (one more read would find none)
                    return done
                after = docs[-1].id
        finally:
            self._embed_lock.release()

    def reindex(self, progress: Progress | None = None, drop_other_models: bool = False) -> ReindexResult:
        """Give every item a vector of the current model (cached texts are reused), record the
        model as the index's, and reload the loaded scopes."""
        model = self.model
        with self._embed_lock, self._sync_lock:
            total = self.vectors.count_without_vector(model)
            embedded = reused = done = after = 0
            while True:
                docs = self.vectors.without_vector(model, PENDING_BATCH, after)
                if not docs:
                    break
                new, old = self._write(docs)
                embedded, reused, done, after = embedded + new, reused + old, done + len(docs), docs[-1].id
                if progress is not None:
                    progress(done, total)
            for items in self.vectors.sentence_texts(None, chunks=self.settings.search_chunk_context):
                self._part_vectors(items, embed_missing=True)
            self.vectors.set_index_model(model)
            if drop_other_models:
                self.vectors.drop_models_except(model)
            self._reset()
        log.info("reindex with %s: %d items, %d embedded, %d reused", model, done, embedded, reused)
        return ReindexResult(model, done, embedded, reused)

    def status(self, scope: Scope | None = None) -> IndexStatus:
        model = self.model
        items = self.docs.count(scope) if scope is not None else sum(self.vectors.models().values())
        return IndexStatus(model, self.vectors.index_model(), items,
                           self.vectors.count_without_vector(model, scope), self.vectors.models())

    # --- searching (per backend: in memory, :mod:`.loaded`; in the database, :mod:`.database`) ---
    def _reset(self) -> None:
        """Forget what was loaded (after a re-index)."""

    def _prune_removed_log(self) -> None:
        """Trim the log of removed items once it grew past :data:`REMOVED_LOG_KEEP` since the last trim."""
        removed = self.docs.high_water()[1]
        if removed - self._pruned_at > REMOVED_LOG_KEEP:
            self.docs.prune_removed_log(REMOVED_LOG_KEEP)
            self._pruned_at = removed

    def refresh(self, scopes: Collection[Scope] | None = None, chunks: Sequence[int] | None = None) -> None:
        """After a write: embed the new items of ``scopes`` (the written ones; ``None``: every
        scope) or, given ``chunks``, of those Markdown chunks alone, and bring loaded state up to date."""
        raise NotImplementedError

    def embed_written(self, scopes: Collection[Scope] | None, chunks: Sequence[int] | None = None) -> None:
        """Embed what is pending in ``scopes`` (``None``: in every scope). A writer embeds only its
        own scopes' items: another process's are its own to embed (or the next search of their
        scope's), so writers of different scopes never queue for each other's vector writes.
        ``chunks``: the Markdown chunks the write added; only their items are embedded, so writers
        of one user (whose chunks are one scope's) never take on each other's records either;
        ``PENDING_BATCH`` at a time, as pending items are (a re-indexed large file adds all its chunks)."""
        if chunks is not None:
            with self._embed_lock:
                for start in range(0, len(chunks), PENDING_BATCH):
                    self._write(self.vectors.unembedded_chunks(chunks[start:start + PENDING_BATCH],
                                                               self._loaded_model()))
            return
        if scopes is None:
            self.embed_pending()
        for scope in sorted(scopes or (), key=lambda s: (s.user_id, s.agent_name)):
            self.embed_pending(scope=scope)

    def catch_up(self, scope: Scope) -> None:
        """Bring what this process holds of ``scope`` up to date with the store (after its pending
        items were embedded), so the next search need not; nothing here (a database searches itself)."""

    def nearest(self, scope: Scope, vector: npt.NDArray[np.float32], top: int,
                filters: SearchFilters | None = None) -> list[tuple[int, float]]:
        """The ``top`` items of ``scope`` most similar to ``vector``: ``(doc id, cosine)``."""
        raise NotImplementedError

    def prefetch_nearest(self, scope: Scope, vector: npt.NDArray[np.float32], top: int, filters: SearchFilters,
                         version: ScopeVersion) -> None:
        """Send :meth:`nearest_cosines`' query ahead where the database answers it (in a read batch,
        :meth:`Database.reading`: it travels with the search's next read); nothing here."""

    def nearest_cosines(self, scope: Scope, vector: npt.NDArray[np.float32], top: int, filters: SearchFilters,
                        also: Sequence[int], version: ScopeVersion) -> Cosines:
        """:meth:`nearest`, and the :meth:`similarities` an indexer finds cheaper to compute with it
        than apart (of the hits and of ``also``, the other candidates; none here): the database's
        vectors come with the nearest query. ``version``: the scope's, read at the search's start."""
        return Cosines(self.nearest(scope, vector, top, filters), {}, set())

    def similarities(self, scope: Scope, vector: npt.NDArray[np.float32], doc_ids: Sequence[int]) -> dict[int, float]:
        """The cosine of ``vector`` with the own text of each of ``doc_ids`` that has a vector: the
        best of its vector and its parts', except that a Markdown chunk embedded together with the
        chunk before it (``search_chunk_context``) counts by its parts alone when it has any."""
        raise NotImplementedError

    def held_vectors(self, scope: Scope, doc_ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        """The own vectors of ``doc_ids`` (for MMR)."""
        raise NotImplementedError

    def blended_tiers(self) -> list[int]:
        """Tier codes whose own vector blends in the chunk before (``search_chunk_context``)."""
        return [TIER_CODE["core"], TIER_CODE["daily"]] if self.settings.search_chunk_context else []


def combine(vectors: Sequence[npt.NDArray[np.float32]], weights: Sequence[int]) -> npt.NDArray[np.float32]:
    """The L2-normalised weighted sum of unit vectors: how a mean-pooling embedder (MiniLM) would
    see the texts joined, each weighing by its length (its words), without embedding them again."""
    import numpy as np

    total = np.zeros_like(vectors[0], dtype=np.float32)
    for vector, weight in zip(vectors, weights, strict=True):
        total += max(1, weight) * vector
    norm = float(np.linalg.norm(total))
    return (total / norm if norm > 0 else total).astype(np.float32)


def _keyword_context(items: Sequence[tuple[int, str, str | None, str]], position: int) -> str:
    """A chunk's keyword context: its date in words (daily records) and its neighbours' text."""
    from datetime import date

    parts: list[str] = []
    day = items[position][2]
    if day:
        try:
            when = date.fromisoformat(day[:10])
            parts.append(f"{when:%A} {when.day} {when:%B} {when.year}")
        except ValueError:
            pass
    lo, hi = max(0, position - CONTEXT_RADIUS), min(len(items), position + CONTEXT_RADIUS + 1)
    parts.extend(items[i][1] for i in range(lo, hi) if i != position)
    return "\n".join(parts)
