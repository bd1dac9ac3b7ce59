"""The vectors of a scope in this process's memory: what the search engine searches on SQLite.

A scope's :class:`~tiermem.search.vectors.VectorIndex` is loaded on first use and then caught up
incrementally: new rows (``search_docs.id`` only grows) and the removal log. That works for
writes of this process (listeners call :meth:`LoadedIndexer.refresh` right after the commit) and
of other processes (every search syncs first). Whether there is anything to catch up with is one
read, the scope's version (:meth:`~tiermem.storage.search.SearchRepository.version`: its items
added and removed, counted by triggers): while it stands still, a search or a refresh reads
nothing more of the scope, whatever other scopes write; when it moved, only the scope's rows after
the index's watermark and its user's removals after its log position are read.

Threads: writers (a write's listeners, :meth:`Indexer.reindex`) embed one at a time in arrival
order and then catch the loaded indexes up; a search never waits for them: it embeds and syncs
itself only when nobody else is doing so, and reads each scope's index under that index's
:class:`~tiermem.concurrency.ReadWriteLock`, which a sync takes only to apply rows already read
(see :mod:`tiermem.concurrency`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tiermem.concurrency import ReadWriteLock
from tiermem.config import Settings
from tiermem.search.filters import SearchFilters
from tiermem.search.index_files import IndexFiles
from tiermem.search.indexer import PENDING_BATCH, Indexer
from tiermem.search.vectors import CATEGORY_CODE, NO_CATEGORY, NO_TIME, TIER_CODE, VectorIndex
from tiermem.storage.embeddings import EmbeddingRepository, VectorRow
from tiermem.storage.search import ScopeVersion, SearchIndex
from tiermem.types import Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder

log = logging.getLogger(__name__)

#: A scope's file is rewritten when a load caught it up by more than this many items or this
#: share of them (smaller gaps are cheaper to catch up in every new process than to rewrite).
RESAVE_MIN_CHANGES = 1000
RESAVE_SHARE = 20


@dataclass
class _Loaded:
    """A scope's index, how far it has read the store, and the lock around its in-memory state."""

    index: VectorIndex
    doc_seq: int
    removed_seq: int
    version: ScopeVersion  # the scope's version read before doc_seq and removed_seq: all it holds
    view: ReadWriteLock = field(default_factory=ReadWriteLock)



class LoadedIndexer(Indexer):
    """Embeds items and keeps the in-memory vector index of each scope current."""

    def __init__(self, docs: SearchIndex, vectors: EmbeddingRepository, embedder: Callable[[], Embedder],
                 settings: Settings) -> None:
        super().__init__(docs, vectors, embedder, settings)
        self._loaded: dict[Scope, _Loaded] = {}  # replaced whole under _sync_lock, read without a lock
        self._files = IndexFiles.for_store(vectors.db, settings)
        #: How each scope was last loaded: ``"file"`` (its index file, caught up) or ``"rows"``.
        self.load_sources: dict[Scope, str] = {}
        self.files_written = 0

    def _reset(self) -> None:
        """After a re-index: forget the loaded indexes and delete the files (vectors changed)."""
        self._loaded = {}
        if self._files is not None:
            self._files.drop_all()

    def refresh(self, scopes: Collection[Scope] | None = None,
                chunks: Sequence[int] | None = None) -> None:
        """After a write: embed the written scopes' new items (``chunks``: those chunks' alone), then
        bring every loaded scope up to date (waits its turn behind other writers; searches do not wait for it)."""
        self.embed_written(scopes, chunks)
        with self._sync_lock:
            for scope in list(self._loaded):
                self._sync_locked(scope)
            self._prune_removed_log()

    def nearest(self, scope: Scope, vector: npt.NDArray[np.float32], top: int,
                filters: SearchFilters | None = None) -> list[tuple[int, float]]:
        """The ``top`` items of ``scope`` most similar to ``vector`` (index brought up to date first)."""
        flt = filters.for_vectors() if filters is not None else None
        loaded = self._current(scope)
        with loaded.view.reading():
            return loaded.index.search(vector, top, flt)

    def similarities(self, scope: Scope, vector: npt.NDArray[np.float32], doc_ids: Sequence[int]) -> dict[int, float]:
        """The cosine of ``vector`` with the own text of each of ``doc_ids`` that has a vector: the
        best of its vector and its parts', except that a Markdown chunk embedded together with the
        chunk before it (``search_chunk_context``) counts by its parts alone when it has any."""
        loaded = self._current(scope)
        with loaded.view.reading():
            return loaded.index.similarities(vector, doc_ids, self.blended_tiers())

    def held_vectors(self, scope: Scope, doc_ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        loaded = self._current(scope)
        with loaded.view.reading():
            return {k: v.copy() for k, v in loaded.index.vectors(doc_ids).items()}

    def _current(self, scope: Scope) -> _Loaded:
        """The scope's index for a search: caught up with the store unless another thread is
        embedding or syncing right now (then as it is: the search does not wait for a writer)."""
        loaded = self._loaded.get(scope)
        if loaded is None:  # the first search of a scope waits for its load in any case
            self.embed_pending(scope=scope)
            return self._sync(scope, wait=True)
        if self.docs.version(scope) == loaded.version:
            return loaded  # nothing of the scope was added or removed since: nothing to embed or read
        if self.embed_pending(wait=False, scope=scope) is None:
            return loaded
        return self._sync(scope, wait=False)

    def catch_up(self, scope: Scope) -> None:
        """A loaded scope's index caught up with the store now (one not loaded stays so)."""
        if scope in self._loaded:
            self._sync(scope, wait=True)

    def index(self, scope: Scope) -> VectorIndex:
        """The scope's vector index, loaded on first use and synced on every call (for one thread:
        searches read it under its lock, see :meth:`nearest`)."""
        self.embed_pending()
        return self.sync(scope)

    def sync(self, scope: Scope) -> VectorIndex:
        return self._sync(scope, wait=True).index

    def _sync(self, scope: Scope, wait: bool) -> _Loaded:
        """Catch the scope's index up with the store (load it on first use); without ``wait``, give
        up at once when another thread is syncing."""
        if not self._sync_lock.acquire(blocking=wait):
            return self._loaded.get(scope) or self._sync(scope, wait=True)
        try:
            return self._sync_locked(scope)
        finally:
            self._sync_lock.release()

    def _sync_locked(self, scope: Scope) -> _Loaded:
        loaded = self._loaded.get(scope)
        if loaded is None:
            loaded = self._load(scope)
            self._loaded = {**self._loaded, scope: loaded}
            return loaded
        version = self.docs.version(scope)  # first: a change after it moves it again, for the next sync
        if version == loaded.version:
            return loaded
        if version[0] == loaded.version[0]:  # only the removal log was cut: none of it was the scope's
            loaded.removed_seq, loaded.version = max(loaded.removed_seq, version[1]), version
            return loaded
        doc_seq, removed_seq = self.docs.high_water()
        if removed_seq > loaded.removed_seq:
            gone, complete = self.docs.removed_since(scope.user_id, loaded.removed_seq)
            if not complete:
                loaded = self._load(scope)
                self._loaded = {**self._loaded, scope: loaded}
                return loaded
            with loaded.view.writing():
                loaded.index.remove(gone)
            loaded.removed_seq = removed_seq
        if doc_seq > loaded.doc_seq:
            self._add_rows(scope, loaded.index, loaded.doc_seq, doc_seq, view=loaded.view)
            loaded.doc_seq = doc_seq
        loaded.version = version
        return loaded

    def _load(self, scope: Scope) -> _Loaded:
        """The scope's index: from its file when that is usable (caught up with the store), else
        rebuilt from the rows and saved to the file."""
        loaded = self._load_file(scope) if self._files is not None else None
        if loaded is not None:
            self.load_sources[scope] = "file"
            return loaded
        version = self.docs.version(scope)
        doc_seq, removed_seq = self.docs.high_water()
        index = VectorIndex(self.embedder.dim, **self._index_options())
        index.reserve(self.docs.count(scope))
        missing = self._add_rows(scope, index, 0, doc_seq, embed_missing=False)
        loaded = _Loaded(index, doc_seq, removed_seq, version)
        self.load_sources[scope] = "rows"
        if missing:
            log.warning("%d items of %s/%s have no vector for %r: run `tiermem reindex`", missing,
                        scope.user_id, scope.agent_name, self.model)
        else:  # a file holds every item up to its doc_seq (IndexFiles.matches)
            self._save(scope, loaded)
        return loaded

    def _index_options(self) -> dict[str, Any]:
        s = self.settings
        return {"exact_max": s.search_exact_max_items, "float_max": s.search_float_max_items,
                "shortlist": s.search_shortlist, "fetch_exact": self._fetch_exact,
                "max_parts": s.search_max_part_vectors}

    def _load_file(self, scope: Scope) -> _Loaded | None:
        """The scope's index from its file, brought up to date with the store: removals from the
        log, then new rows. ``None`` when there is no usable file, or it does not match the rows."""
        assert self._files is not None
        saved = self._files.load(scope, self.model, self.embedder.dim, **self._index_options())
        if saved is None:
            return None
        version = self.docs.version(scope)
        doc_seq, removed_seq = self.docs.high_water()
        index = saved.index
        gone: list[int] = []
        if removed_seq < saved.removed_seq:
            log.info("the vector index file of %s/%s is newer than the database: rebuilding", scope.user_id,
                     scope.agent_name)
            return None
        if removed_seq > saved.removed_seq:
            gone, complete = self.docs.removed_since(scope.user_id, saved.removed_seq)
            if not complete:
                return None
            index.remove(gone)
        whole_store = doc_seq <= saved.doc_seq and self.docs.only_scope(scope)
        if not self._files.matches(scope, index, saved.doc_seq, whole_store):
            log.info("the vector index file of %s/%s does not match the database: rebuilding", scope.user_id,
                     scope.agent_name)
            return None
        held = len(index)
        missing = self._add_rows(scope, index, saved.doc_seq, doc_seq) if doc_seq > saved.doc_seq else 0
        loaded = _Loaded(index, max(doc_seq, saved.doc_seq), removed_seq, version)
        changed = len(gone) + abs(len(index) - held)
        if not missing and changed > max(RESAVE_MIN_CHANGES, held // RESAVE_SHARE):
            self._save(scope, loaded)
        return loaded

    def _save(self, scope: Scope, loaded: _Loaded) -> None:
        """Write the scope's file (skipped when an item was removed meanwhile: the next load retries)."""
        if self._files is None:
            return
        if self._files.save(scope, self.model, self.embedder.dim, loaded.index, loaded.doc_seq,
                            loaded.removed_seq, lambda: self.docs.high_water()[1]):
            self.files_written += 1

    def _add_rows(self, scope: Scope, index: VectorIndex, after_id: int, upto: int, embed_missing: bool = True,
                  view: ReadWriteLock | None = None) -> int:
        """Add the scope's items with ``after_id`` < id <= ``upto``; returns how many of them are
        left without a vector. ``upto`` is the watermark the index will have read to, taken before:
        every item up to it was committed then, and the index never reads below it again.

        So items never embedded yet are embedded first, here: a writer commits an item, then
        stores its vector, and a scope loaded in between would otherwise pass the item over
        for good (issue 22 item 8a). With ``embed_missing`` also items whose vector is of another
        model (a scope's first load leaves those to ``reindex``). With ``view`` (an index searches
        can see), rows are read first and added under its write lock."""
        guard = view.writing if view is not None else nullcontext
        model = self.model
        after = after_id
        while True:
            found = (self.vectors.without_vector(model, PENDING_BATCH, after, scope) if embed_missing
                     else self.vectors.unembedded(PENDING_BATCH, after, scope))
            docs = [doc for doc in found if doc.id <= upto]  # later ones: the next sync's
            if not docs:
                break
            self._write(docs)
            after = docs[-1].id
        missing = 0
        for batch in self.vectors.scope_rows(scope, model, after_id):
            rows = [r for r in batch if r[0] <= upto]
            usable = [r for r in rows if r[4] is not None]
            missing += len(rows) - len(usable)
            with guard():
                _add_to_index(index, usable)
        if self.settings.search_sentence_vectors:
            for texts in self.vectors.sentence_texts(scope, after_id, chunks=self.settings.search_chunk_context):
                items = [item for item in texts if item[0] <= upto]
                parts = self._part_vectors(items, embed_missing=False)  # new items got theirs in _write
                with guard():
                    _add_parts(index, parts)
        return missing

    def _fetch_exact(self, ids: npt.NDArray[np.int64]) -> dict[int, npt.NDArray[np.float32]]:
        import numpy as np

        blobs = self.vectors.vectors_of(ids.tolist(), self.model)
        return {doc_id: np.frombuffer(blob, np.float32) for doc_id, blob in blobs.items()}


def _add_to_index(index: VectorIndex, rows: Sequence[VectorRow]) -> None:
    import numpy as np

    rows = [r for r in rows if r[4] is not None and len(r[4]) == index.dim * 4]
    if not rows:
        return
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    tiers = np.fromiter((TIER_CODE.get(r[1], 0) for r in rows), np.int8, len(rows))
    cats = np.fromiter((CATEGORY_CODE.get(r[2] or "", NO_CATEGORY) for r in rows), np.int8, len(rows))
    when = _when_array([r[1] for r in rows], [r[3] for r in rows])
    matrix = np.frombuffer(b"".join(r[4] for r in rows if r[4] is not None), np.float32).reshape(len(rows), index.dim)
    index.add(ids, matrix, tiers, cats, when)


def _add_parts(index: VectorIndex, parts: Sequence[tuple[int, bytes]]) -> None:
    import numpy as np

    parts = [p for p in parts if len(p[1]) == index.dim * 4]
    if parts:
        ids = np.fromiter((p[0] for p in parts), np.int64, len(parts))
        matrix = np.frombuffer(b"".join(p[1] for p in parts), np.float32).reshape(len(parts), index.dim)
        index.add_parts(ids, matrix)


def _when_array(tiers: list[str], ats: list[str | None]) -> npt.NDArray[np.int64]:
    """:func:`_when` of many items, parsed by numpy where the stored format allows."""
    import numpy as np

    out = np.full(len(tiers), NO_TIME, np.int64)
    for tier, unit, width in (("fact", "us", 27), ("daily", "D", 10)):
        rows = [i for i, (t, at) in enumerate(zip(tiers, ats, strict=True)) if t == tier and at]
        if not rows:
            continue
        texts = [str(ats[i]) for i in rows]
        try:
            if tier == "fact" and not all(len(t) == width and t.endswith("Z") for t in texts):
                raise ValueError("not the stored format")
            parsed = np.array([t[:-1] if tier == "fact" else t[:10] for t in texts], dtype=f"datetime64[{unit}]")
            out[rows] = parsed.astype(np.int64)
        except ValueError:
            out[rows] = [_when(tier, t) for t in texts]
    return out


def _when(tier: str, at: str | None) -> int:
    """A fact's ``created_at`` in microseconds, a daily record's day in days (since the epoch)."""
    from tiermem.clock import parse_utc
    from tiermem.search.filters import epoch_days, epoch_micros

    if not at:
        return NO_TIME
    try:
        if tier == "fact":
            return epoch_micros(parse_utc(at))
        if tier == "daily":
            from datetime import date

            return epoch_days(date.fromisoformat(at[:10]))
    except ValueError:
        return NO_TIME
    return NO_TIME

