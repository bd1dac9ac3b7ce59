"""The PostgreSQL backend: one shared database (schema) for many processes and hosts.

Needs the ``postgres`` extra (``pip install 'tiermem[postgres]'``); nothing here imports psycopg
until a store is opened with a ``postgresql://`` URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tiermem.storage.postgres import admin, locks, outbox
from tiermem.storage.sql import Backend

if TYPE_CHECKING:
    from tiermem.paths import UserPaths
    from tiermem.storage.embeddings import EmbeddingRepository, VectorQueries
    from tiermem.storage.files import MemoryFiles
    from tiermem.storage.search import SearchIndex
    from tiermem.storage.sql import Database


def _files(db: Database, paths: UserPaths, *, mirror: bool = True) -> MemoryFiles:
    from tiermem.storage.postgres.files import open_files  # lazily: it imports the tiers' path rules

    return open_files(db, paths, mirror=mirror)


def _search_index(db: Database) -> SearchIndex:
    from tiermem.storage.postgres.search import search_index

    return search_index(db)


def _embeddings(db: Database) -> EmbeddingRepository:
    from tiermem.storage.postgres.vectors import embeddings

    return embeddings(db)


def _vector_queries(db: Database) -> VectorQueries:
    from tiermem.storage.postgres.nearest import vector_queries

    return vector_queries(db)


def _ids_in(column: str, ids: Sequence[Any]) -> tuple[str, list[Any]]:
    """One array parameter: psycopg prepares the statement once for any number of ids (a
    placeholder each made each count a statement text of its own, prepared on every connection)."""
    return f"{column} = ANY(?)", [list(ids)]


BACKEND = Backend(
    name="postgres",
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
    vector_queries=_vector_queries,
)
