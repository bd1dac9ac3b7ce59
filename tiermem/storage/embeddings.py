"""SQL for embeddings: float32 vectors as BLOBs keyed by (content hash, model id).

The key makes the store a cache: text that did not change (same hash) is never embedded again
for the same model, whatever row it belongs to. ``search_docs.embed_hash`` links an item to its
vector; ``meta['embedding_model']`` records the model the index was built with, so a change of
model is noticed (and ``reindex`` fills in the vectors of the new one).

:class:`EmbeddingRepository` is the portable part (one SQL text for both backends). Where the
vectors are *searched* differs: SQLite stores them only, and the search engine loads a scope's
vectors into memory (:mod:`tiermem.search.loaded`); PostgreSQL also keeps a ``halfvec`` copy per
item with an HNSW index and answers nearest-neighbour queries itself (:class:`VectorQueries`,
:mod:`tiermem.storage.postgres.nearest`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from tiermem.storage.chunks import SHARED_AGENT
from tiermem.storage.sql import ROWS
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.search import DocFilter
    from tiermem.storage.sql import Database

MODEL_KEY = "embedding_model"


@dataclass(frozen=True)
class PendingDoc:
    """An item whose vector is not stored yet (for the model asked about), and its user (whose
    vector write key the vector write takes). ``cached``: ``(hash, stored vector or None)`` of the
    texts the read looked up in the cache along with it (a backend that hashes texts itself: see
    :meth:`EmbeddingRepository.unembedded`), so the indexer need not ask for them again."""

    id: int
    source: str
    ref: str
    tier: str
    text: str
    user_id: str
    cached: tuple[tuple[str, bytes | None], ...] = ()


_PENDING = "id, source, ref, tier, text, user_id"  # a PendingDoc's columns


def _pending(row: Any) -> PendingDoc:
    return PendingDoc(int(row[0]), row[1], row[2], row[3], row[4], str(row[5]))


#: One item of a scope as the vector index loads it: (id, tier, category, at, float32 blob or
#: None when the item has no vector for the model). Plain tuples: a scope may hold a million.
VectorRow = tuple[int, str, "str | None", "str | None", "bytes | None"]


#: An item's stored vector as the database search sees it: (doc id, tier, whether it is the item's
#: own vector (else a sentence part's), float32 blob).
ItemVector = tuple[int, str, bool, bytes]


class VectorQueries(Protocol):
    """Nearest-neighbour search done by the database (``Backend.vector_queries``)."""

    def nearest(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter) -> list[tuple[int, float]]:
        """The ``top`` items of ``scope`` whose own or part vectors of ``model`` are nearest to the
        float32 ``query`` (L2-normalised): ``(doc id, cosine of its best vector)``, best first."""
        ...

    def item_vectors(self, model: str, doc_ids: Sequence[int]) -> list[ItemVector]:
        """Every stored vector (own and parts, exact float32) of ``model`` for ``doc_ids``."""
        ...

    def nearest_vectors(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter,
                        also: Sequence[int]) -> tuple[list[tuple[int, float]], list[ItemVector]]:
        """:meth:`nearest`, and :meth:`item_vectors` of its hits and of ``also``, read together."""
        ...

    def prefetch_nearest(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter) -> None:
        """Send :meth:`nearest_vectors`' read (``also`` empty) ahead (:meth:`Database.prefetch`)."""
        ...

    def prefetch_item_vectors(self, model: str, doc_ids: Sequence[int]) -> None:
        """Send :meth:`item_vectors`' read ahead (:meth:`Database.prefetch`)."""
        ...


class EmbeddingRepository:
    """Vectors, their cache keys, and the model the index was built with."""

    #: SQL condition (and its argument) of a text that may hold more than one sentence: an end
    #: mark followed by white space. Backends override it with their pattern syntax.
    SENTENCE_TEST: tuple[str, str] = ("", "")

    def __init__(self, db: Database) -> None:
        self.db = db

    def _rows(self, sql: str, args: Sequence[Any]) -> list[Any]:
        return self.db.rows(sql, args, "embedding query")

    # --- model identity --------------------------------------------------------------------
    def index_model(self) -> str | None:
        """The model the stored index was built with (``None``: no vectors yet)."""
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [MODEL_KEY])
        return str(rows[0][0]) if rows else None

    def set_index_model(self, model: str) -> None:
        with self.db.transaction(ROWS) as conn:  # one row's upsert
            conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value ="
                         " excluded.value", (MODEL_KEY, model))

    def models(self) -> dict[str, int]:
        """``model -> number of stored vectors``."""
        rows = self._rows("SELECT model, COUNT(*) FROM embeddings GROUP BY model ORDER BY model", [])
        return {str(r[0]): int(r[1]) for r in rows}

    # --- what needs embedding --------------------------------------------------------------
    def unembedded(self, limit: int, after_id: int = 0, scope: Scope | None = None,
                   model: str | None = None) -> list[PendingDoc]:
        """Items (of ``scope`` or all) never embedded (``embed_hash IS NULL``), oldest first. The
        unembedded ids come from their partial index first: searched by the scope index, a scope's
        query would read every embedded item of the scope (each search asks). ``model``: a backend
        that can hash the texts itself also looks up their stored vectors of ``model`` in the same
        read (:attr:`PendingDoc.cached`); here it is not used."""
        sql, args = self._pending_sql(limit, after_id, scope)
        return [_pending(r) for r in self._rows(sql, args)]

    @staticmethod
    def _pending_sql(limit: int, after_id: int, scope: Scope | None) -> tuple[str, list[Any]]:
        """The read of :meth:`unembedded` (:data:`_PENDING` columns) and its arguments."""
        sql = f"SELECT {_PENDING} FROM search_docs WHERE embed_hash IS NULL AND id > ?"
        args: list[Any] = [after_id]
        if scope is not None:
            sql = (f"SELECT {_PENDING} FROM search_docs WHERE id IN (SELECT id FROM search_docs"
                   " WHERE embed_hash IS NULL AND id > ?) AND user_id = ? AND agent_name IN (?, ?)")
            args += [scope.user_id, scope.agent_name, SHARED_AGENT]
        return sql + " ORDER BY id LIMIT ?", [*args, limit]

    def unembedded_chunks(self, chunk_ids: Sequence[int], model: str | None = None) -> list[PendingDoc]:
        """The items of the Markdown chunks ``chunk_ids`` never embedded, by id (the ones a write
        just added: read through the ``(source, ref)`` index, whatever else is pending); ``model``
        as for :meth:`unembedded`."""
        found: list[PendingDoc] = []
        for start in range(0, len(chunk_ids), 500):
            among, args = self.db.parts.ids_in("ref", [str(int(i)) for i in chunk_ids[start:start + 500]])
            rows = self._rows(f"SELECT {_PENDING} FROM search_docs WHERE source = 'chunk' AND"
                              f" {among} AND embed_hash IS NULL", args)
            found += [_pending(r) for r in rows]
        return sorted(found, key=lambda doc: doc.id)

    def without_vector(self, model: str, limit: int, after_id: int = 0, scope: Scope | None = None) -> list[PendingDoc]:
        """Items (of ``scope`` or all) that have no vector for ``model``, by id."""
        sql = ("SELECT d.id, d.source, d.ref, d.tier, d.text, d.user_id FROM search_docs d LEFT JOIN embeddings e"
               " ON e.content_hash = d.embed_hash AND e.model = ? WHERE d.id > ? AND e.vector IS NULL")
        args: list[Any] = [model, after_id]
        if scope is not None:
            sql += " AND d.user_id = ? AND d.agent_name IN (?, ?)"
            args += [scope.user_id, scope.agent_name, SHARED_AGENT]
        rows = self._rows(sql + " ORDER BY d.id LIMIT ?", [*args, limit])
        return [_pending(r) for r in rows]

    def count_without_vector(self, model: str, scope: Scope | None = None) -> int:
        sql = ("SELECT COUNT(*) FROM search_docs d LEFT JOIN embeddings e ON e.content_hash = d.embed_hash"
               " AND e.model = ? WHERE e.vector IS NULL")
        args: list[Any] = [model]
        if scope is not None:
            sql += " AND d.user_id = ? AND d.agent_name IN (?, ?)"
            args += [scope.user_id, scope.agent_name, SHARED_AGENT]
        return int(self._rows(sql, args)[0][0])

    # --- vectors ---------------------------------------------------------------------------
    def store(self, model: str, dim: int, vectors: Sequence[tuple[str, bytes]],
              links: Sequence[tuple[str, int]], contexts: Sequence[tuple[str, int]] = (),
              parts: Sequence[tuple[str, int]] = (), users: Collection[str] | None = None) -> None:
        """Write ``(hash, float32 blob)`` vectors, ``(hash, doc id)`` links and ``(context, doc id)``
        keyword contexts in one transaction. ``parts``: ``(hash, doc id)`` of the items' sentence
        vectors (a backend that searches vectors itself indexes them; SQLite finds them again
        from the items' text when it loads a scope). ``users``: the users of the linked items when
        the caller knows them (a backend that locks per user need not read them; ``None``: read)."""
        with self.db.transaction(ROWS) as conn:  # ON CONFLICT DO NOTHING, updates by id
            self._write(conn, model, dim, vectors, links, contexts)

    def _write(self, conn: Any, model: str, dim: int, vectors: Sequence[tuple[str, bytes]],
               links: Sequence[tuple[str, int]], contexts: Sequence[tuple[str, int]]) -> None:
        # sent with the transaction's next read or its COMMIT (Database.defer): nothing here reads them back
        self.db.defer(
            "INSERT INTO embeddings (content_hash, model, dim, vector) VALUES (?, ?, ?, ?)"
            " ON CONFLICT (content_hash, model) DO NOTHING",
            [(h, model, dim, blob) for h, blob in vectors], many=True)
        # an item linked and given a new context is updated once: each update writes a row version
        # (on PostgreSQL into every index of search_docs, its GIN indexes too: never HOT)
        new_context = {doc_id: text for text, doc_id in contexts}
        both = [(h, new_context[doc_id], doc_id) for h, doc_id in links if doc_id in new_context]
        if both:
            self.db.defer("UPDATE search_docs SET embed_hash = ?, context = ? WHERE id = ?", both, many=True)
        linked = [(h, doc_id) for h, doc_id in links if doc_id not in new_context]
        if linked:
            self.db.defer("UPDATE search_docs SET embed_hash = ? WHERE id = ?", linked, many=True)
        linked_ids = {doc_id for _, doc_id in links}
        others = [(text, doc_id, text) for text, doc_id in contexts if doc_id not in linked_ids]
        if others:
            self.db.defer("UPDATE search_docs SET context = ? WHERE id = ? AND context <> ?",  # never NULL
                          others, many=True)

    def vectors_of(self, doc_ids: Sequence[int], model: str) -> dict[int, bytes]:
        """``doc id -> float32 blob`` for the items that have a vector for ``model``."""
        out: dict[int, bytes] = {}
        for start in range(0, len(doc_ids), 500):
            part = [int(i) for i in doc_ids[start:start + 500]]
            rows = self._rows(
                "SELECT d.id, e.vector FROM search_docs d JOIN embeddings e ON e.content_hash = d.embed_hash"
                f" AND e.model = ? WHERE d.id IN ({', '.join('?' for _ in part)})", [model, *part])
            out.update((int(r[0]), bytes(r[1])) for r in rows)
        return out

    def scope_rows(self, scope: Scope, model: str, after_id: int = 0, batch: int = 20_000) -> Iterator[list[VectorRow]]:
        """The items of ``scope`` with id > ``after_id`` and their vectors, in batches.

        Items first (the facts of the agent, then the user's shared chunks: each an index range in
        id order), then their vectors looked up by sorted hash - much faster than a join that
        visits the vector table in random order."""
        for agent in (scope.agent_name, SHARED_AGENT):
            last = after_id
            while True:
                rows = self._rows(
                    "SELECT id, tier, category, at, embed_hash FROM search_docs WHERE user_id = ? AND agent_name = ?"
                    " AND id > ? ORDER BY id LIMIT ?", [scope.user_id, agent, last, batch])
                if not rows:
                    break
                found = self._vectors_by_hash(sorted({str(r[4]) for r in rows if r[4]}), model)
                yield [(int(r[0]), str(r[1]), r[2], r[3], found.get(r[4]) if r[4] else None) for r in rows]
                last = int(rows[-1][0])
                if len(rows) < batch:
                    break

    def sentence_texts(self, scope: Scope | None, after_id: int = 0, batch: int = 20_000,
                       chunks: bool = False) -> Iterator[list[tuple[int, str, str]]]:
        """``(id, text, source)`` of the items (of ``scope`` or all) with id > ``after_id`` whose text
        may hold more than one sentence (an end mark followed by white space), and with ``chunks``
        every Markdown chunk too, in batches by id."""
        test, pattern = self.SENTENCE_TEST
        sql = f"SELECT d.id, d.text, d.source FROM search_docs d WHERE d.id > ? AND ({test}"
        sql += " OR d.source = 'chunk')" if chunks else ")"
        extra: list[Any] = []
        if scope is not None:
            sql += " AND d.user_id = ? AND d.agent_name IN (?, ?)"
            extra = [scope.user_id, scope.agent_name, SHARED_AGENT]
        last = after_id
        while True:
            rows = self._rows(sql + " ORDER BY d.id LIMIT ?", [last, pattern, *extra, batch])
            if not rows:
                return
            yield [(int(r[0]), str(r[1]), str(r[2])) for r in rows]
            last = int(rows[-1][0])

    def vectors_by_hash(self, hashes: Sequence[str], model: str) -> dict[str, bytes]:
        """``hash -> float32 blob`` of the ``hashes`` that have a vector for ``model``."""
        return self._vectors_by_hash(sorted(set(hashes)), model)

    def _vectors_by_hash(self, hashes: Sequence[str], model: str) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        for start in range(0, len(hashes), 500):
            among, args = self.db.parts.ids_in("content_hash", hashes[start:start + 500])
            rows = self._rows(f"SELECT content_hash, vector FROM embeddings WHERE model = ? AND {among}",
                              [model, *args])
            out.update((str(r[0]), bytes(r[1])) for r in rows)
        return out

    def drop_models_except(self, model: str) -> int:
        """Delete the vectors of every other model; returns how many."""
        with self.db.transaction() as conn:
            return int(conn.execute("DELETE FROM embeddings WHERE model <> ?", (model,)).rowcount)
