"""PostgreSQL's read batch (``Database.reading``): reads outside a transaction sent ahead
(``Database.prefetch``) go with the next read that waits, are never answered stale after a write of
the batch's thread, and a batch whose connection the server dropped still answers; and the vector
query that checks the model's key and dimension itself reads them again when the model's row changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.storage.postgres.db import PgDatabase  # noqa: E402
from tiermem.storage.postgres.nearest import PgVectorQueries  # noqa: E402
from tiermem.storage.postgres.trips import count_round_trips  # noqa: E402
from tiermem.storage.search import DocFilter  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402
from tiermem.types import Scope  # noqa: E402

READ = "SELECT value FROM meta WHERE key = ?"


@pytest.fixture
def db() -> Iterator[PgDatabase]:
    with fresh_schema() as url:
        database = PgDatabase(url)
        try:
            with database.transaction() as conn:
                for key in ("a", "b", "c"):
                    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", (f"batch.{key}", key))
            yield database
        finally:
            database.close()


def test_reads_sent_ahead_go_with_the_next_read_that_waits(db: PgDatabase) -> None:
    with count_round_trips(db) as trips, db.reading():
        db.prefetch(READ, ["batch.a"])
        db.prefetch(READ, ["batch.b"])
        assert [r[0] for r in db.rows(READ, ["batch.c"])] == ["c"]  # one wait: it and the two sent before it
        assert [r[0] for r in db.rows(READ, ["batch.b"])] == ["b"]
        assert [r[0] for r in db.rows(READ, ["batch.a"])] == ["a"]
    assert trips.count == 1, trips.statements


def test_a_failing_read_sent_ahead_does_not_fail_the_read_asked_for(db: PgDatabase) -> None:
    """A read sent ahead in case it is needed fails (here: division by zero) in the wait of another
    read: that read is answered (run alone), and the batch goes on."""
    from tiermem.errors import StorageError

    failing = "SELECT 1 / (SELECT COUNT(*) - COUNT(*) FROM meta WHERE key = ?)"
    with db.reading():
        db.prefetch(failing, ["batch.a"])
        assert [r[0] for r in db.rows(READ, ["batch.b"])] == ["b"]
        db.prefetch(READ, ["batch.c"])
        assert [r[0] for r in db.rows(READ, ["batch.c"])] == ["c"]
        with pytest.raises(StorageError, match="division by zero"):  # asked for, it fails as itself
            db.rows(failing, ["batch.a"])


def test_a_read_sent_ahead_is_read_again_after_a_write_in_the_batch(db: PgDatabase) -> None:
    with db.reading():
        db.prefetch(READ, ["batch.a"])
        assert [r[0] for r in db.rows(READ, ["batch.b"])] == ["b"]  # the read sent ahead is answered here
        with db.transaction() as conn:
            conn.execute("UPDATE meta SET value = 'changed' WHERE key = 'batch.a'")
        assert [r[0] for r in db.rows(READ, ["batch.a"])] == ["changed"]
        db.prefetch(READ, ["batch.a"])
        db.conn.execute("UPDATE meta SET value = 'again' WHERE key = 'batch.a'")  # a write outside a transaction
        assert [r[0] for r in db.rows(READ, ["batch.a"])] == ["again"]


def test_a_batch_whose_connection_was_dropped_still_answers(db: PgDatabase) -> None:
    import psycopg

    with db.reading():
        pid = int(db.rows("SELECT pg_backend_pid()")[0][0])  # the batch's connection
        db.prefetch(READ, ["batch.a"])
        with psycopg.connect(db.url, autocommit=True) as other:
            other.execute("SELECT pg_terminate_backend(%s)", (pid,))
        assert [r[0] for r in db.rows(READ, ["batch.b"])] == ["b"]
        assert [r[0] for r in db.rows(READ, ["batch.a"])] == ["a"]
    assert [r[0] for r in db.rows(READ, ["batch.c"])] == ["c"]


def test_the_vector_query_reads_the_model_again_when_its_row_changed(tmp_path: Path) -> None:
    with fresh_schema() as url, Memory(tmp_path / "mem", embedder=HashEmbedder(16), database_url=url,
                                       timezone="UTC") as mem:
        for i in range(12):
            mem.facts.add(f"fact {i} about colour {i % 3}")
        query = mem._search.indexer.embed_query("colour").astype("<f4").tobytes()
        queries = PgVectorQueries(mem.db)
        scope = Scope("default", "default")
        first = queries.nearest(scope, "hash-16", query, 5, DocFilter())  # the model's key and dimension read
        with count_round_trips(mem.db) as trips:
            assert queries.nearest(scope, "hash-16", query, 5, DocFilter()) == first
        assert trips.count == 1  # checked by the query itself
        with mem.db.transaction() as conn:  # the model's row goes (its vectors with it) and comes back
            conn.execute("DELETE FROM search_models WHERE model = 'hash-16'")
            conn.execute("UPDATE search_docs SET embed_hash = NULL")
        mem._search.reindex()
        assert int(mem.db.rows("SELECT key FROM search_models WHERE model = 'hash-16'")[0][0]) > 1
        again = queries.nearest(scope, "hash-16", query, 5, DocFilter())
        assert again == PgVectorQueries(mem.db).nearest(scope, "hash-16", query, 5, DocFilter())
        assert [doc for doc, _ in again] != [] and len(again) == 5


def test_a_search_embeds_its_query_before_it_sends_reads_ahead(tmp_path: Path) -> None:
    """Reads sent ahead hold their implicit transaction's snapshot (and table locks) on the server until
    one read waits; a first search loads its model, which takes seconds: the query is embedded before
    the search's read batch opens, never inside it."""
    import numpy as np
    import numpy.typing as npt

    class Watching(HashEmbedder):
        def __init__(self) -> None:
            super().__init__(16)
            self.in_batch: list[bool] = []
            self.db: PgDatabase | None = None

        def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
            if self.db is not None:
                self.in_batch.append(getattr(self.db._pool.local, "reads", None) is not None)
            return super().embed(texts)

    embedder = Watching()
    with fresh_schema() as url, Memory(tmp_path / "mem", embedder=embedder, database_url=url, timezone="UTC") as mem:
        mem.facts.add("the user likes green")
        embedder.db = mem.db  # type: ignore[assignment]
        assert mem.search("which colour does the user like") and embedder.in_batch == [False]
