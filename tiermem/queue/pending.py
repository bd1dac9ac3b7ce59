"""Read-your-writes (R35): queued turns whose extraction has not landed yet, as provisional hits.

A search with ``include_pending=True`` asks this source too. It scores the user and assistant
messages of the scope's queued items on the scale of every other hit (:mod:`tiermem.search.evidence`):
each ``role: text`` counts as a daily record's own text, with its keyword coverage of the query
and its cosine to the query vector (embeddings cached by text, so each pending message is
embedded once). The hits come back marked ``provisional``; the search applies its score floor to
them like to the rest.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from tiermem.search.engine import PendingQuery
from tiermem.storage.outbox import OutboxItem
from tiermem.tiers.turns import to_message
from tiermem.types import Scope, SearchHit

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder

_CACHE_LIMIT = 4096


class PendingHits:
    """A ``PendingSource`` over the update queue's outbox."""

    def __init__(self, pending: Callable[[Scope], list[OutboxItem]], embedder: Callable[[], Embedder]) -> None:
        self.pending = pending
        self.embedder = embedder
        self._vectors: dict[str, npt.NDArray[np.float32]] = {}
        self._lock = threading.Lock()

    def __call__(self, request: PendingQuery) -> Sequence[SearchHit]:
        if request.filters.tiers is not None and "daily" not in request.filters.tiers:
            return []
        if request.filters.category is not None:
            return []
        texts: list[tuple[str, str]] = []  # (ref, text)
        for item in self.pending(request.scope):
            for position, raw in item.positioned():
                message = to_message(raw)
                if message.role in ("user", "assistant") and message.text.strip():
                    texts.append((f"queue:{item.thread_id}#{position}", f"{message.role}: {message.text}"))
        if not texts:
            return []
        vectors = self._embed([t for _, t in texts])
        scores = request.score([t for _, t in texts], (vectors @ request.vector).tolist())
        ranked = sorted(zip(scores, texts, strict=True), key=lambda pair: -pair[0])[: request.k]
        return [SearchHit(text, score, "daily", ref, provisional=True) for score, (ref, text) in ranked]

    def _embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        import numpy as np

        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if missing:
            fresh = self.embedder().embed(missing)
            with self._lock:
                if len(self._vectors) + len(missing) > _CACHE_LIMIT:
                    self._vectors.clear()
                self._vectors.update(zip(missing, fresh, strict=True))
        with self._lock:
            return np.stack([self._vectors[t] for t in texts]).astype(np.float32)
