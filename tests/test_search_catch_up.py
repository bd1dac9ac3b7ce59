"""How a process's search index learns what other processes wrote (issue 25 item 3).

A process reads one per-scope version with its next search (``SearchRepository.version``: the
scope's items added and removed, counted by triggers) and, only when it moved, reads that scope's
new rows and removals. The reads are counted through a hook on the database's ``rows`` (every
read of the search and of its catch-up goes through it): statements and rows fetched, not time.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.facts.store import NewFact
from tiermem.storage.search import SearchRepository
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Scope

pytestmark = pytest.mark.usefixtures("backend")

FIXTURES = Path(__file__).parent / "fixtures"


def open_memory(root: Path, clock: FakeClock, user: str = "ada", **settings: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user, queue_replay=False,
                  **settings)


@contextmanager
def counted_reads(mem: Memory) -> Iterator[list[tuple[str, int]]]:
    """Every read ``mem``'s database runs in the block: ``(sql, rows fetched)``."""
    db: Any = mem.db
    reads: list[tuple[str, int]] = []
    real = db.rows

    def rows(sql: str, args: Any = (), what: str = "query") -> list[Any]:
        found = real(sql, args, what)
        reads.append((sql, len(found)))
        return list(found)

    db.rows = rows
    try:
        yield reads
    finally:
        del db.rows


def reads_of(mem: Memory, work: Callable[[], object]) -> list[tuple[str, int]]:
    with counted_reads(mem) as reads:
        work()
    return reads


#: The search's own lookups, whose text and rows follow the query's candidates (new items may join
#: them: their rows are the search's answer, not its catch-up): keyword matches, vector matches,
#: the candidates' rows and terms.
QUERY_READS = ("MATCH", "@@", "JOIN chunks", "ts_filter", "search_vectors v", "sqlite_sequence")


def items_read(reads: list[tuple[str, int]]) -> list[int]:
    """Rows fetched per statement, but for SQLite's id counters (two rows once anything was removed)."""
    return [n for sql, n in reads if "sqlite_sequence" not in sql]


def texts(hits: list[Any]) -> set[str]:
    return {hit.text for hit in hits}


@pytest.mark.parametrize("keyword_weight", [0.0, None])  # vectors alone, then the hybrid search
def test_a_process_sees_anothers_add_update_and_delete_in_its_next_search(root: Path, clock: FakeClock,
                                                                          keyword_weight: float | None) -> None:
    weight = {} if keyword_weight is None else {"search_keyword_weight": keyword_weight}
    with open_memory(root, clock, **weight) as reader, open_memory(root, clock, **weight) as writer:
        reader.facts.add("placeholder fact about the weather")
        assert reader.search("weather", min_score=0)  # loaded and caught up
        fact = writer.facts.add("Ada keeps bees in the orchard")
        assert fact is not None
        assert "Ada keeps bees in the orchard" in texts(reader.search("bees orchard", k=5, min_score=0))
        writer.facts.update(fact.id, content="Ada grows tomatoes in the greenhouse")
        found = texts(reader.search("tomatoes greenhouse bees orchard", k=5, min_score=0))
        assert "Ada grows tomatoes in the greenhouse" in found and "Ada keeps bees in the orchard" not in found
        writer.facts.delete(fact.id)
        assert "Ada grows tomatoes in the greenhouse" not in texts(reader.search("tomatoes greenhouse", k=5,
                                                                                   min_score=0))


def test_writes_in_another_scope_make_this_scope_read_nothing(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "ada") as reader, open_memory(root, clock, "bob") as writer:
        reader.facts.add_many([NewFact.checked(f"Ada's note {i} about the orchard bees", "knowledge", 1.0, None)
                               for i in range(20)])
        writer.facts.add("Bob's first note about the orchard bees")
        for _ in range(2):  # loaded, keyword statistics cached
            reader.search("orchard bees", k=5)
        unchanged = reads_of(reader, lambda: reader.search("orchard bees", k=5))
        for i in range(5):
            writer.facts.add(f"Bob's note {i} about the orchard bees and honey")
        gone = writer.facts.add("Bob's note that goes about the orchard")
        assert gone is not None
        writer.facts.delete(gone.id)
        writer.daily.append("Conversation", ["user: the orchard bees swarmed today"])  # bob's shared chunks
        after = reads_of(reader, lambda: reader.search("orchard bees", k=5))
        catch_up = reads_of(reader, lambda: reader._search.indexer.catch_up(reader.scope))
    assert [sql for sql, _ in after] == [sql for sql, _ in unchanged]  # the same statements
    assert items_read(after) == items_read(unchanged)  # and the same rows: nothing of bob's was read
    assert [sql for sql, _ in catch_up if "search_docs" in sql or "search_removed" in sql] == []


def test_catching_up_with_n_writes_reads_rows_of_those_writes_not_of_the_store(tmp_path: Path,
                                                                              clock: FakeClock) -> None:
    def catch_up_reads(items: int, writes: int) -> list[tuple[str, int]]:
        """The reads of the reader's next search that an unchanged search does not run, after another
        process wrote ``writes`` facts into the reader's scope of ``items`` facts."""
        root = tmp_path / f"store-{items}-{writes}"
        with open_memory(root, clock, max_facts=5000) as reader, open_memory(root, clock, max_facts=5000) as writer:
            for start in range(0, items, 500):
                reader.facts.add_many([NewFact.checked(f"stored fact {i} on topic {i % 7} about rivers", "knowledge",
                                                       1.0, None) for i in range(start, min(items, start + 500))])
            for _ in range(2):
                reader.search("rivers lakes", k=5)
            unchanged = [sql for sql, _ in reads_of(reader, lambda: reader.search("rivers lakes", k=5))]
            for i in range(writes):
                writer.facts.add(f"new fact {i} about mountain lakes")
            extra = []
            for sql, n in reads_of(reader, lambda: reader.search("rivers lakes", k=5)):
                if sql in unchanged:
                    unchanged.remove(sql)
                elif not any(mark in sql for mark in QUERY_READS):
                    extra.append((sql, n))
            assert len(reader.search("mountain lakes", k=50, min_score=0)) >= writes
        return extra

    assert catch_up_reads(1500, 0) == []  # nothing at all when nobody wrote
    for items in (60, 1500):
        extra = catch_up_reads(items, 6)
        assert sum(n for _, n in extra) <= 4 * 6 + 10, extra  # a few rows per write, none per stored item
        assert len(extra) <= 12, extra


def test_a_version_counts_the_scopes_and_its_users_shared_items_added_and_removed(root: Path,
                                                                                  clock: FakeClock) -> None:
    with open_memory(root, clock, "ada") as ada, open_memory(root, clock, "bob") as bob:
        docs = SearchRepository(ada.db)
        start = docs.version(ada.scope)
        bob.facts.add("Bob's fact")
        bob.daily.append("Conversation", ["user: Bob's record"])
        ada_other = Scope("ada", "other")
        other_start = docs.version(ada_other)
        fact = ada.facts.add("Ada's fact")
        assert fact is not None
        assert docs.version(ada.scope)[0] == start[0] + 1
        ada.facts.update(fact.id, content="Ada's fact, changed")  # its old item removed, the new one added
        ada.facts.delete(fact.id)
        ada.daily.append("Conversation", ["user: Ada's record"])  # the user's shared items: every agent's
        assert docs.version(ada.scope)[0] == start[0] + 4 + 1
        assert docs.version(ada_other)[0] == other_start[0] + 1


def test_a_store_made_before_counts_its_items_and_catches_up(tmp_path: Path, clock: FakeClock, backend: str) -> None:
    if backend == "postgres":
        root = tmp_path / "old"
        before = _old_postgres_schema()
    else:
        root = Path(shutil.copytree(FIXTURES / "store_v0_1_0", tmp_path / "old"))
        before = None
    with open_memory(root, clock, "ada") as reader:
        docs = SearchRepository(reader.db)
        held = {(str(r[0]), str(r[1])): int(r[2]) for r in reader.db.rows(
            "SELECT user_id, agent_name, COUNT(*) FROM search_docs GROUP BY user_id, agent_name")}
        counted = {(str(r[0]), str(r[1])): int(r[2]) for r in reader.db.rows(
            "SELECT user_id, agent_name, value FROM change_epochs WHERE topic = 'search'")}
        assert counted == held and held  # every item of the older store counted once
        if before is not None:
            assert held == before
        reader.search("anything at all", min_score=0)
        with open_memory(root, clock, "ada") as writer:
            writer.facts.add("Ada's first fact after the upgrade, about herons")
        assert docs.version(reader.scope)[0] == held.get(("ada", "default"), 0) + 1
        assert "Ada's first fact after the upgrade, about herons" in texts(reader.search("herons", min_score=0))


def _old_postgres_schema() -> dict[tuple[str, str], int]:
    """The schema as the previous release (version 9) left it, with items of two scopes."""
    import os

    import psycopg

    from tiermem.storage.postgres import schema

    with psycopg.connect(os.environ["TIERMEM_DATABASE_URL"], autocommit=True) as conn:
        schema._vector_extension(conn)
        with conn.transaction():
            conn.execute("CREATE TABLE tiermem_schema (version INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL"
                         " DEFAULT now())")
            for number, step in enumerate(schema.MIGRATIONS[:9], start=1):
                step(conn)
                conn.execute("INSERT INTO tiermem_schema (version) VALUES (%s)", (number,))
            for user, agent, count in (("ada", "default", 3), ("bob", "coding", 2)):
                conn.execute("INSERT INTO search_docs (source, ref, user_id, agent_name, tier, at, text)"
                             " SELECT 'fact', %s || g, %s, %s, 'fact', '2026-01-01T00:00:00.000000Z',"
                             " 'an old item about ' || g FROM generate_series(1, %s) AS g",
                             (user + agent, user, agent, count))
    return {("ada", "default"): 3, ("bob", "coding"): 2}
