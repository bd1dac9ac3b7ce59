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

FILE_ITEMS = "%FROM chunks c JOIN search_docs d%"


def test_the_items_of_a_file_are_planned_afresh_each_time_they_are_read(tmp_path: Path) -> None:
    """The read is never prepared (:data:`~tiermem.storage.sql.PLAN_EACH_RUN`), so the server plans
    it for the tables as they are. Before, on one connection, it was prepared at its sixth run and
    the server used its generic plan from then on."""
    with fresh_schema() as url, Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC", database_url=url,
                                       postgres_pool_size=1, queue_replay=False) as mem:  # one connection
        for i in range(10):  # each append's embedding reads the file's items
            mem.daily.append("Note", f"record {i} of the morning")
        rel = mem.daily.rel_for(mem.daily.today())
        with mem.db.transaction(ROWS) as conn:
            assert len(open_search_index(mem.db).file_items("default", rel)) == 10
            prepared = conn.execute("SELECT generic_plans FROM pg_prepared_statements WHERE statement LIKE ?",
                                    (FILE_ITEMS,)).fetchall()
            others = conn.execute("SELECT COUNT(*) FROM pg_prepared_statements").fetchone()[0]
    assert others > 0  # the connection does prepare the statements it runs again and again
    assert prepared == []
