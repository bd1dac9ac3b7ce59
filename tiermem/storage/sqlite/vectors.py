"""Embeddings on SQLite: stored only; the search engine loads a scope's vectors into memory and
searches them there (:mod:`tiermem.search.loaded`)."""

from __future__ import annotations

from tiermem.storage.embeddings import EmbeddingRepository
from tiermem.storage.sql import Database


class SqliteEmbeddings(EmbeddingRepository):
    SENTENCE_TEST = ("d.text GLOB ?", "*[.!?…。！？][ \n\t]*")


def embeddings(db: Database) -> SqliteEmbeddings:
    """The ``Backend.embeddings`` factory."""
    return SqliteEmbeddings(db)
