"""The SQLite backend: one file under the memory root (the embedded default)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tiermem.storage.sql import Backend
from tiermem.storage.sqlite import admin, locks, outbox

if TYPE_CHECKING:
    from tiermem.paths import UserPaths
    from tiermem.storage.embeddings import EmbeddingRepository
    from tiermem.storage.files import MemoryFiles
    from tiermem.storage.search import SearchIndex
    from tiermem.storage.sql import Database


def _files(db: Database, paths: UserPaths, *, mirror: bool = True) -> MemoryFiles:
    from tiermem.storage.sqlite.files import open_files  # lazily: it imports the tiers' path rules

    return open_files(db, paths, mirror=mirror)


def _search_index(db: Database) -> SearchIndex:
    from tiermem.storage.sqlite.search import search_index

    return search_index(db)


def _embeddings(db: Database) -> EmbeddingRepository:
    from tiermem.storage.sqlite.vectors import embeddings

    return embeddings(db)


def _ids_in(column: str, ids: Sequence[Any]) -> tuple[str, list[Any]]:
    """A placeholder each: SQLite has no arrays (its statement cache is per text, and in the process)."""
    return f"{column} IN ({', '.join('?' for _ in ids)})", list(ids)


BACKEND = Backend(
    name="sqlite",
    columns=admin.columns,
    tables=admin.tables,
    text_columns=admin.text_columns,
    snapshot=admin.snapshot,
    sync_ids=admin.sync_ids,
    secure_delete=admin.secure_delete,
    compact=admin.compact,
    lock=locks.lock,
    ids_in=_ids_in,
    claim_outbox=outbox.claim,
    files=_files,
    search_index=_search_index,
    embeddings=_embeddings,
    vector_queries=None,
)
