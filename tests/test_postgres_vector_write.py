"""The vector write after a write on PostgreSQL (``PgEmbeddings.store``): one round trip (``BEGIN``, the
users' vector locks, the statements and ``COMMIT`` queued together) that still waits for a writer holding
one of those locks, repeated on another connection when the server dropped the pooled one; and the
pending reads that look up the cache by the texts' hashes made by the server, as the indexer makes them."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.search.indexer import text_hash  # noqa: E402
from tiermem.storage.postgres.trips import count_round_trips  # noqa: E402
from tiermem.storage.postgres.vectors import PgEmbeddings  # noqa: E402
from tiermem.storage.sql import WriteKey  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402

PATIENCE = 60.0


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


def _memory(root: Path, url: str, embed_on_write: bool = True) -> Memory:
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", database_url=url, embed_on_write=embed_on_write,
                  queue_replay=False)


def _pending(mem: Memory) -> int:
    return int(mem.db.rows("SELECT COUNT(*) FROM search_docs WHERE embed_hash IS NULL", (), "test")[0][0])


def _blob(seed: int) -> bytes:
    vector = np.random.default_rng(seed).standard_normal(8).astype(np.float32)
    return (vector / np.linalg.norm(vector)).astype("<f4").tobytes()


def test_a_vector_write_is_one_round_trip_and_waits_for_its_users_vector_lock(tmp_path: Path, url: str) -> None:
    with _memory(tmp_path / "mem", url, embed_on_write=False) as mem:
        mem.facts.add("the fact whose vector waits")
        doc_id = int(mem.db.rows("SELECT id FROM search_docs", (), "test")[0][0])
        repo, blob = PgEmbeddings(mem.db), _blob(1)
        repo.store("m", 8, [("warm", blob)], [("warm", doc_id)], users={mem.scope.user_id})  # registers the model
        with count_round_trips(mem.db) as trips:
            repo.store("m", 8, [("h", blob)], [("h", doc_id)], users={mem.scope.user_id})
        assert trips.count == 1
        holding, release, done = threading.Event(), threading.Event(), threading.Event()

        def hold() -> None:  # another writer of the user's vectors
            with mem.db.transaction(WriteKey.named("vectors", "m", mem.scope.user_id)) as conn:
                conn.execute("SELECT 1")
                holding.set()
                release.wait(PATIENCE)

        def write() -> None:
            repo.store("m", 8, [("later", _blob(2))], [("later", doc_id)], users={mem.scope.user_id})
            done.set()

        holder, writer = threading.Thread(target=hold, daemon=True), threading.Thread(target=write, daemon=True)
        holder.start()
        assert holding.wait(PATIENCE)
        writer.start()
        deadline = time.monotonic() + PATIENCE
        while not mem.db.rows("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted", (),
                              "test")[0][0]:
            assert time.monotonic() < deadline, "the vector write never waited for the lock"
            time.sleep(0.01)
        assert not done.is_set()
        assert mem.db.rows("SELECT embed_hash FROM search_docs WHERE id = ?", (doc_id,), "test")[0][0] == "h"
        release.set()
        holder.join(PATIENCE)
        writer.join(PATIENCE)
        assert done.is_set()
        assert mem.db.rows("SELECT embed_hash FROM search_docs WHERE id = ?", (doc_id,), "test")[0][0] == "later"


def test_a_vector_write_survives_dropped_pooled_connections(tmp_path: Path, url: str) -> None:
    import psycopg

    with _memory(tmp_path / "mem", url) as mem:
        mem.facts.add("written before the server dropped the connections")
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                          " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        doc_id = int(mem.db.rows("SELECT MAX(id) FROM search_docs", (), "test")[0][0])
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                          " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
        PgEmbeddings(mem.db).store("m", 8, [("after", _blob(3))], [("after", doc_id)], users={mem.scope.user_id})
        assert mem.db.rows("SELECT embed_hash FROM search_docs WHERE id = ?", (doc_id,), "test")[0][0] == "after"
        mem.facts.add("written after it")
        assert _pending(mem) == 0


def test_the_pending_reads_look_up_the_cache_by_the_hashes_the_indexer_makes(tmp_path: Path, url: str) -> None:
    texts = ["café ☕ 日本: la première ligne", "a record\twith a tab and 'quotes' and a backslash \\n",
             "the third record, longer. It has two sentences!"]
    with _memory(tmp_path / "mem", url, embed_on_write=False) as mem:
        fact = "Ünïcödé fact — with a dash and an emoji 🦆"
        mem.facts.add(fact)
        mem.daily.append("Note", texts)
        repo = PgEmbeddings(mem.db)
        stored = {text_hash(fact): _blob(4), text_hash(texts[0]): _blob(5),
                  text_hash(texts[0] + "\n" + texts[1]): _blob(6)}
        repo.store("m", 8, list(stored.items()), [])
        (pending_fact,) = [d for d in repo.unembedded(100, 0, mem.scope, model="m") if d.source == "fact"]
        assert pending_fact.cached == ((text_hash(fact), stored[text_hash(fact)]),)
        chunk_ids = [int(r[0]) for r in mem.db.rows("SELECT id FROM chunks ORDER BY line_start", (), "test")]
        pending = repo.unembedded_chunks(chunk_ids, "m")
        assert len(pending) == 3 and all(d.user_id == mem.scope.user_id for d in pending)
        texts_of = {d.text: d for d in pending}
        chunk_texts = [str(r[0]) for r in mem.db.rows("SELECT text FROM chunks ORDER BY line_start", (), "test")]
        for position, text in enumerate(chunk_texts):
            expected = {text_hash(text): stored.get(text_hash(text))}
            if position > 0:
                before = chunk_texts[position - 1]
                expected[text_hash(before)] = stored.get(text_hash(before))
                expected[text_hash(before + "\n" + text)] = stored.get(text_hash(before + "\n" + text))
            assert dict(texts_of[text].cached) == expected
        assert any(blob is not None for d in pending for _, blob in d.cached)


def test_an_items_link_and_its_new_context_are_written_as_one_row_version(tmp_path: Path, url: str) -> None:
    # every update of a search_docs row writes a new version into all its indexes (GIN words and grams
    # included: the partial index on embed_hash IS NULL keeps it from being HOT), so the item linked
    # to its vector and given a new context in the same write is updated once, not twice
    with _memory(tmp_path / "mem", url, embed_on_write=False) as mem:
        mem.facts.add("the fact whose link and context are written together")
        mem.facts.add("another fact whose context alone changes")
        first, second = [int(r[0]) for r in mem.db.rows("SELECT id FROM search_docs ORDER BY id", (), "test")]
        repo = PgEmbeddings(mem.db)
        with mem.db.transaction() as conn:  # the caller's transaction: its counts are readable before COMMIT
            repo.store("m", 8, [("h", _blob(1))], [("h", first)], [("near words", first), ("other words", second)],
                       users={mem.scope.user_id})
            updated = conn.execute("SELECT pg_stat_get_xact_tuples_updated(CAST('search_docs' AS regclass))",
                                   ()).fetchone()[0]
        assert updated == 2  # one version of each item
        rows = mem.db.rows("SELECT id, embed_hash, context FROM search_docs ORDER BY id", (), "test")
        assert [tuple(r) for r in rows] == [(first, "h", "near words"), (second, None, "other words")]
        hits = mem.search("near words", k=1, min_score=0)
        assert hits[0].text == "the fact whose link and context are written together"
