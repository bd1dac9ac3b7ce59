"""Vectors searched by the database itself (PostgreSQL with pgvector: ``Backend.vector_queries``).

Nothing is loaded into this process: every search asks the database for the nearest items of
the scope (:meth:`tiermem.storage.embeddings.VectorQueries.nearest`, an HNSW index or an exact
scan, see :mod:`tiermem.storage.postgres.nearest`), so many processes on many hosts search one
store without each holding its vectors. The cosines that go into the scores are computed here,
from the stored float32 vectors, exactly as :mod:`tiermem.search.loaded` does on SQLite.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Collection, Sequence
from typing import TYPE_CHECKING

from tiermem.config import Settings
from tiermem.search.indexer import Cosines, Indexer
from tiermem.search.vectors import TIER_CODE
from tiermem.storage.embeddings import EmbeddingRepository, ItemVector, VectorQueries
from tiermem.storage.search import DocFilter, ScopeVersion, SearchIndex
from tiermem.types import Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder
    from tiermem.search.filters import SearchFilters


_SCOPES_MAX = 10_000  # scopes whose version is remembered (then forgotten at once: each reads again)
PRUNE_EVERY = 64  # refreshes (writes) per look at the removal log's size


class DatabaseIndexer(Indexer):
    """Embeds items (shared :class:`Indexer`) and asks the database for nearest neighbours."""

    def __init__(self, docs: SearchIndex, vectors: EmbeddingRepository, embedder: Callable[[], Embedder],
                 settings: Settings, queries: VectorQueries) -> None:
        super().__init__(docs, vectors, embedder, settings)
        self.queries = queries
        #: The version of each scope at which its items were all embedded (by whoever wrote them or here).
        self._embedded: dict[Scope, ScopeVersion] = {}
        self._refreshes = itertools.count()  # next() is atomic: threads share it without a lock

    def refresh(self, scopes: Collection[Scope] | None = None,
                chunks: Sequence[int] | None = None) -> None:
        """After a write: embed the written scopes' new items (``chunks``: those chunks' alone; waits
        its turn behind other writers). The removal log is looked at by the first refresh and then
        every :data:`PRUNE_EVERY` th (not a read per write): trimmed once it grew past
        ``REMOVED_LOG_KEEP``, at most ``PRUNE_EVERY - 1`` of this process's writes late."""
        self.embed_written(scopes, chunks)
        if next(self._refreshes) % PRUNE_EVERY == 0:
            self._prune_removed_log()

    def nearest(self, scope: Scope, vector: npt.NDArray[np.float32], top: int,
                filters: SearchFilters | None = None) -> list[tuple[int, float]]:
        """Items of ``scope`` written behind this process's back are embedded first, unless another
        thread is embedding right now (a search does not wait for a writer). Looked for only when
        the scope's version moved since they were last all embedded: other scopes' writes cost a
        search nothing here."""
        self._embed_behind(scope, self.docs.version(scope))  # first: an item added after it moves it again
        flt = filters.for_sql() if filters is not None else DocFilter()
        return self.queries.nearest(scope, self.model, _blob(vector), top, flt)

    def prefetch_nearest(self, scope: Scope, vector: npt.NDArray[np.float32], top: int, filters: SearchFilters,
                         version: ScopeVersion) -> None:
        """Embed what was written behind this process's back (as :meth:`nearest`), then send
        :meth:`nearest_cosines`' query ahead: in a read batch it travels with the keyword lists."""
        self._embed_behind(scope, version)
        self.queries.prefetch_nearest(scope, self.model, _blob(vector), top, filters.for_sql())

    def nearest_cosines(self, scope: Scope, vector: npt.NDArray[np.float32], top: int, filters: SearchFilters,
                        also: Sequence[int], version: ScopeVersion) -> Cosines:
        """:meth:`nearest` with the vectors of its hits read by the same query
        (:meth:`VectorQueries.nearest_vectors`; sent ahead by :meth:`prefetch_nearest`), and their
        cosines as :meth:`similarities` makes them. The vectors of the other candidates (``also``)
        are sent ahead for :meth:`similarities`, to travel with the search's read of the items."""
        self._embed_behind(scope, version)
        hits, vectors = self.queries.nearest_vectors(scope, self.model, _blob(vector), top, filters.for_sql(), [])
        found = {doc_id for doc_id, _ in hits}
        self.queries.prefetch_item_vectors(self.model, [i for i in dict.fromkeys(also) if i not in found])
        return Cosines(hits, self._cosines(vector, vectors), found)

    def _embed_behind(self, scope: Scope, version: ScopeVersion) -> None:
        """Embed the items of ``scope`` written behind this process's back when its version moved
        since they were last all embedded (not while another thread embeds: a search does not wait)."""
        if self._embedded.get(scope) != version and self.embed_pending(wait=False, scope=scope) is not None:
            if len(self._embedded) > _SCOPES_MAX:
                self._embedded.clear()
            self._embedded[scope] = version

    def similarities(self, scope: Scope, vector: npt.NDArray[np.float32], doc_ids: Sequence[int]) -> dict[int, float]:
        """As :meth:`tiermem.search.loaded.LoadedIndexer.similarities`, from the stored float32 vectors."""
        return self._cosines(vector, self.queries.item_vectors(self.model, list(dict.fromkeys(doc_ids))))

    def _cosines(self, vector: npt.NDArray[np.float32], vectors: Sequence[ItemVector]) -> dict[int, float]:
        import numpy as np

        q = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        blended = set(self.blended_tiers())
        own: dict[int, tuple[float, int]] = {}  # doc id -> (cosine, tier code)
        parts: dict[int, float] = {}
        for doc_id, tier, is_own, blob in vectors:
            if len(blob) != 4 * len(q):
                continue
            value = float(np.frombuffer(blob, np.float32) @ q)
            if is_own:
                own[doc_id] = (value, TIER_CODE.get(tier, 0))
            else:
                parts[doc_id] = max(parts.get(doc_id, value), value)
        return {doc_id: (max(parts[doc_id], value) if tier not in blended else parts[doc_id])
                if doc_id in parts else value for doc_id, (value, tier) in own.items()}

    def held_vectors(self, scope: Scope, doc_ids: Sequence[int]) -> dict[int, npt.NDArray[np.float32]]:
        import numpy as np

        dim = self.embedder.dim
        return {doc_id: np.frombuffer(blob, np.float32).copy()
                for doc_id, _, is_own, blob in self.queries.item_vectors(self.model, list(dict.fromkeys(doc_ids)))
                if is_own and len(blob) == 4 * dim}


def _blob(vector: npt.NDArray[np.float32]) -> bytes:
    import numpy as np

    return bytes(np.ascontiguousarray(vector, dtype="<f4").reshape(-1).tobytes())
