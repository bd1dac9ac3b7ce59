"""Writes queued to go with the next wait or COMMIT (``Database.defer``) and reads sent ahead
(``Database.prefetch``): the same outcome on both backends as statements run one by one (issue 25
item 2; PostgreSQL pipelines them, SQLite runs them at once)."""

from __future__ import annotations

import pytest

from tiermem import Memory
from tiermem.storage.chunks import ChunkRepository

pytestmark = pytest.mark.usefixtures("backend")


def _value(mem: Memory, key: str) -> str | None:
    row = mem.db.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def test_a_deferred_write_commits_with_its_transaction_and_runs_at_once_outside_one(mem: Memory) -> None:
    with mem.db.transaction():
        mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", ("pipelined-a", "1"))
        mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", [("pipelined-b", "2"), ("pipelined-c", "3")],
                     many=True)
    mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", ("pipelined-d", "4"))
    assert [_value(mem, f"pipelined-{k}") for k in "abcd"] == ["1", "2", "3", "4"]


def test_a_deferred_writes_error_fails_and_rolls_back_the_whole_transaction(mem: Memory) -> None:
    with pytest.raises(mem.db.IntegrityError), mem.db.transaction():
        mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", ("pipelined-x", "1"))
        mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", ("pipelined-x", "2"))  # the key is taken
    assert _value(mem, "pipelined-x") is None
    mem.facts.add("the store still writes after the failed transaction")
    assert len(mem.facts.list()) == 1


def test_a_read_sent_ahead_is_answered_as_of_when_it_runs(mem: Memory) -> None:
    mem.db.defer("INSERT INTO meta (key, value) VALUES (?, ?)", ("pipelined-k", "old"))
    sql, args = "SELECT value FROM meta WHERE key = ?", ("pipelined-k",)
    with mem.db.transaction() as conn:
        mem.db.prefetch(sql, args)
        assert conn.execute(sql, args).fetchone()[0] == "old"  # nothing it reads was written since
        mem.db.prefetch(sql, args)
        mem.db.defer("UPDATE meta SET value = ? WHERE key = ?", ("new", "pipelined-k"))
        assert conn.execute(sql, args).fetchone()[0] == "new"  # a write to its table came after: read again
    assert _value(mem, "pipelined-k") == "new"


def test_daily_appends_and_their_index_are_whole_after_many_pipelined_appends(mem: Memory) -> None:
    for i in range(12):  # past psycopg's preparing of statements run five times
        mem.daily.append("Note", [f"record {i} a", f"record {i} b"])
    text = mem.daily.read()
    assert all(f"- record {i} a\n- record {i} b\n" in text for i in range(12))
    indexed = " ".join(c.text for c in ChunkRepository(mem.db).chunks("default", mem.daily.rel_for(mem.daily.today())))
    assert all(f"record {i} {x}" in indexed for i in range(12) for x in "ab")
