"""Statement plans on PostgreSQL (issue 25): a read whose right plan changes as its tables grow is planned
for its tables as they are at each run, not kept on a plan made while they were small.

psycopg prepares a statement it has run five times on a connection; the server then settles on one
generic plan for it, made with the table sizes of that moment. A fresh store's tables are nearly
empty then and are not analysed until autovacuum comes round (a minute or more), so the plan stayed
the one for an empty table: the journal's items of a file (read by every append's embedding) were
joined to their search rows by scanning every chunk's row once per chunk, 24 ms at 300 records of
one day (3 ms planned afresh), growing with the square of the day."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.storage.search import open_search_index  # noqa: E402
from tiermem.storage.sql import ROWS  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402

FILE_ITEMS = "%JOIN chunks c ON c.user_id = s.user_id%"  # the items around new chunks (SearchRepository.file_windows)


def last_chunk(mem: Memory) -> int:
    return int(mem.db.rows("SELECT MAX(id) FROM search_docs WHERE source = 'chunk'")[0][0])


def window(mem: Memory, doc_id: int) -> list[str]:
    """The texts of the items around the chunk item ``doc_id``, as an append's embedding reads them."""
    return [item[1] for w in open_search_index(mem.db).file_windows([doc_id], 4, 2) for item in w.items]


def test_the_items_of_a_file_are_planned_afresh_each_time_they_are_read(tmp_path: Path) -> None:
    """The read is never prepared (:data:`~tiermem.storage.sql.PLAN_EACH_RUN`), so the server plans
    it for the tables as they are. Before, on one connection, it was prepared at its sixth run and
    the server used its generic plan from then on."""
    with fresh_schema() as url, Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC", database_url=url,
                                       postgres_pool_size=1, queue_replay=False) as mem:  # one connection
        for i in range(10):  # each append's embedding reads the items around its record
            mem.daily.append("Note", f"record {i} of the morning")
        last = last_chunk(mem)
        with mem.db.transaction(ROWS) as conn:
            assert len(window(mem, last)) == 5
            prepared = conn.execute("SELECT generic_plans FROM pg_prepared_statements WHERE statement LIKE ?",
                                    (FILE_ITEMS,)).fetchall()
            others = conn.execute("SELECT COUNT(*) FROM pg_prepared_statements").fetchone()[0]
    assert others > 0  # the connection does prepare the statements it runs again and again
    assert prepared == []


def test_a_read_planned_at_each_run_is_retried_on_a_connection_the_server_dropped(tmp_path: Path) -> None:
    """The file's items are a read like any other: when the pooled connection died (a server restart),
    it runs again on another. Before, the comment in front hid the ``SELECT`` from the retry check and
    the read failed with a StorageError."""
    import psycopg

    with fresh_schema() as url, Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC", database_url=url,
                                       postgres_pool_size=1, queue_replay=False) as mem:  # one connection
        mem.daily.append("Note", "the only record of the morning")
        last = last_chunk(mem)
        pid = mem.db.rows("SELECT pg_backend_pid()")[0][0]
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        items = window(mem, last)
    assert items == ["the only record of the morning"]


def test_a_read_planned_at_each_run_in_a_pipelined_transaction_is_not_prepared_and_keeps_the_prefetched_reads(
        tmp_path: Path) -> None:
    """Inside a transaction with a pipeline open the read goes through the pipeline: it is still never
    prepared, and, being a read, it does not drop the reads prefetched before it. Before, it was
    prepared at its sixth run there, and its first run dropped every prefetched read (read again:
    here it then saw another connection's later write)."""
    import psycopg

    probe = "SELECT value FROM meta WHERE key = ?"
    with fresh_schema() as url, Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC", database_url=url,
                                       postgres_pool_size=1, queue_replay=False) as mem:
        mem.daily.append("Note", "the only record of the morning")
        mem.db.conn.execute("INSERT INTO meta (key, value) VALUES ('probe', 'prefetched')")
        last = last_chunk(mem)
        with mem.db.transaction(ROWS) as conn:
            mem.db.prefetch(probe, ("probe",))
            assert len(window(mem, last)) == 1  # waits: the prefetched read is answered now
            with psycopg.connect(url, autocommit=True) as other:
                other.execute("UPDATE meta SET value = 'read again' WHERE key = 'probe'")
            for _ in range(9):
                assert len(window(mem, last)) == 1
            value = conn.execute(probe, ("probe",)).fetchone()[0]
            prepared = conn.execute("SELECT statement FROM pg_prepared_statements WHERE statement LIKE ?",
                                    (FILE_ITEMS,)).fetchall()
    assert value == "prefetched"
    assert prepared == []
