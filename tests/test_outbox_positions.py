"""Outbox items that start past position 0 (issue 23): a coding-agent hook queues only the messages
its transcript added since its last read, at their positions in the conversation
(``OutboxRepository.put(..., first_position=)``). Slices of one thread merge by position, the
processor journals each message at its position (so a later full replay writes nothing twice) and
extracts each once; stores and exports made before the field existed read as position 0."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import pytest
from queue_helpers import assert_once, extraction, journal_texts, outbox, sql, thread
from transfer_helpers import separate_stores, url_for  # noqa: F401  (an autouse fixture)

from tiermem import InvalidInput, Memory
from tiermem.clock import utc_iso
from tiermem.storage.outbox import OutboxRepository, unite
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")
FIXTURES = Path(__file__).parent / "fixtures"


def open_mem(root: Path, clock: FakeClock, llm: ScriptedChatModel | None = None) -> Memory:
    """A Memory of the store at ``root`` (on PostgreSQL each root its own schema)."""
    url = url_for(root)
    return Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                  shutdown_flush_seconds=0, extract_min_turns=1, **({"database_url": url} if url else {}))


def sent_texts(model: ScriptedChatModel) -> str:
    return "\n".join(request.text for request in model.requests)


def test_a_thread_saved_in_two_slices_is_journaled_and_extracted_once(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([extraction("First half fact"), extraction("Second half fact")])
    with open_mem(root, clock, model) as mem:
        box = OutboxRepository(mem.db)
        box.put("t1", mem.scope, thread(0, 10), clock.now())
        assert mem.queue.flush(timeout=20)
        box.put("t1", mem.scope, thread(10, 10), clock.now(), first_position=10)
        (item,) = mem.queue.pending()
        assert item.first_position == 10 and item.messages == thread(10, 10)
        assert mem.queue.flush(timeout=20)
        assert len(model.requests) == 2
        assert "message number 3 " in model.requests[0].text and "message number 13 " not in model.requests[0].text
        assert "message number 13 " in model.requests[1].text and "message number 3 " not in model.requests[1].text
        mem.queue.add("t1", thread(0, 20))  # the whole thread from 0: each message is at the position journaled
        assert mem.queue.flush(timeout=20)
        assert len(model.requests) == 2  # nothing new to extract
        assert {f.content for f in mem.facts.list()} == {"First half fact", "Second half fact"}
    assert_once(root, thread(0, 20))
    assert len(journal_texts(root)) == 20


def test_a_slice_merges_into_the_pending_item_of_its_thread(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        box = OutboxRepository(mem.db)
        first = box.put("t1", mem.scope, thread(0, 10), clock.now())
        assert box.put("t1", mem.scope, thread(10, 10), clock.now(), first_position=10) == first  # contiguous
        changed = thread(5, 10, tag="edited")
        assert box.put("t1", mem.scope, changed, clock.now(), first_position=5) == first  # overlapping: newer wins
        (item,) = box.items()
        assert item.first_position == 0
        assert item.messages == thread(0, 5) + changed + thread(15, 5)
        box.put("t1", mem.scope, thread(3, 2), clock.now(), first_position=3)  # inside: the rest stays
        assert box.items()[0].messages == thread(0, 5) + changed + thread(15, 5)


def test_slices_with_a_gap_keep_both_parts_at_their_positions(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        box = OutboxRepository(mem.db)
        box.put("t1", mem.scope, thread(20, 3), clock.now(), first_position=20)
        box.put("t1", mem.scope, thread(0, 2), clock.now())  # an earlier slice, arriving later
        (item,) = box.items()
        assert item.first_position == 0 and len(item.messages) == 23
        assert item.messages[2:20] == [None] * 18
        assert item.positioned() == [*enumerate(thread(0, 2)), *zip(range(20, 23), thread(20, 3), strict=True)]
        assert mem.queue.flush(timeout=20)
        mem.queue.add("t1", thread(0, 23))  # the gap's messages are new; the others were journaled in place
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 23))


def test_a_recovered_slice_merges_with_a_later_one_by_position(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        box = OutboxRepository(mem.db)
        old = box.put("t1", mem.scope, thread(0, 4), clock.now())
        gone = f"{socket.gethostname()}:999999999/x#1"
        sql(root, "UPDATE outbox SET status = 'processing', claimed_by = ?, claimed_at = ? WHERE id = ?",
            gone, utc_iso(clock.now()), old)  # its claimer died in flight
        box.put("t1", mem.scope, thread(4, 4), clock.now(), first_position=4)
        assert box.recover(clock.now()) == 1
        (item,) = box.items()
        assert (item.first_position, item.messages, item.attempts) == (0, thread(0, 8), 1)


def test_unite_prefers_the_newer_message_and_spans_both_ranges() -> None:
    a, b, c = ({"role": "user", "content": x} for x in "abc")
    assert unite((0, [a, b]), (1, [c])) == (0, [a, c])
    assert unite((2, [a]), (0, [b])) == (0, [b, None, a])
    assert unite((0, [a, None, b]), (1, [c])) == (0, [a, c, b])
    assert unite((1, [a, None]), (0, [None, None, c])) == (0, [None, a, c])


@pytest.mark.parametrize("bad", [-1, 1.5, "3", True, None])
def test_a_bad_first_position_is_refused_and_nothing_is_queued(root: Path, clock: FakeClock, bad: object) -> None:
    with open_mem(root, clock) as mem:
        with pytest.raises(InvalidInput, match="first_position"):
            OutboxRepository(mem.db).put("t1", mem.scope, thread(0, 1), clock.now(), first_position=bad)  # type: ignore[arg-type]
        assert outbox(root) == []


def test_export_and_import_carry_the_first_position(root: Path, tmp_path: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        OutboxRepository(mem.db).put("t1", mem.scope, thread(7, 2), clock.now(), first_position=7)
        OutboxRepository(mem.db).put("t2", mem.scope, thread(0, 1), clock.now())
        OutboxRepository(mem.db).put("t2", mem.scope, thread(3, 1), clock.now(), first_position=3)
        data = mem.export()
    assert [(r["thread_id"], r["first_position"]) for r in data["outbox"]] == [("t1", 7), ("t2", 0)]
    with open_mem(tmp_path / "copy", clock) as mem:
        mem.import_(data)
        assert mem.import_(data)["outbox"] == 2  # again: equal rows, no conflict
        items = {i.thread_id: i for i in mem.queue.pending()}
        assert (items["t1"].first_position, items["t1"].messages) == (7, thread(7, 2))
        assert items["t2"].positioned() == [(0, thread(0, 1)[0]), (3, thread(3, 1)[0])]


def test_an_export_without_first_positions_imports_them_as_0(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        OutboxRepository(mem.db).put("t1", mem.scope, thread(0, 2), clock.now())
        data = mem.export()
    for row in data["outbox"]:
        del row["first_position"]  # as exports made before the field did
    with open_mem(root.parent / "copy", clock) as mem:
        mem.import_(data)
        (item,) = mem.queue.pending()
        assert (item.first_position, item.messages) == (0, thread(0, 2))


@pytest.mark.parametrize("bad", [-2, "4", 1.5])
def test_an_import_with_a_bad_first_position_is_refused(root: Path, clock: FakeClock, bad: object) -> None:
    with open_mem(root, clock) as mem:
        OutboxRepository(mem.db).put("t1", mem.scope, thread(0, 2), clock.now())
        data = mem.export()
    data["outbox"][0]["first_position"] = bad
    with open_mem(root.parent / "copy", clock) as mem:
        with pytest.raises(InvalidInput, match="'outbox', row 0, field 'first_position'"):
            mem.import_(data)
        assert mem.queue.pending() == []


@pytest.mark.sqlite_only  # a tiermem.db written by 0.1.0; PostgreSQL's older schema: the test below
def test_items_of_a_store_made_before_start_at_position_0(tmp_path: Path, clock: FakeClock) -> None:
    root = Path(shutil.copytree(FIXTURES / "store_v0_1_0", tmp_path / "old"))
    with open_mem(root, clock) as mem:
        pending = [i for i in mem.queue.pending() if i.status == "pending"]
        assert [(i.thread_id, i.first_position) for i in pending] == [("t-pending", 0)]
        OutboxRepository(mem.db).put("t-pending", mem.scope, [{"role": "assistant", "content": "Pixel noted"}],
                                     clock.now(), first_position=1)
        mem.queue.flush(timeout=20)  # False: the store's dead item stays
        assert "user: remember my cat Pixel" in journal_texts(root)
        mem.queue.add("t-pending", [{"role": "user", "content": "remember my cat Pixel"},
                                    {"role": "assistant", "content": "Pixel noted"}])
        mem.queue.flush(timeout=20)
        assert [i.thread_id for i in mem.queue.pending()] == ["t-dead"]
    texts = journal_texts(root)
    assert texts.count("user: remember my cat Pixel") == 1 and texts.count("assistant: Pixel noted") == 1


def test_a_postgres_schema_made_before_gets_the_column(tmp_path: Path, clock: FakeClock, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("the SQLite store of an older release is the test above")
    import os

    import psycopg

    from tiermem.storage.postgres import schema

    url = os.environ["TIERMEM_DATABASE_URL"]
    with psycopg.connect(url, autocommit=True) as conn:  # the schema as the previous release left it
        conn.execute("CREATE TABLE tiermem_schema (version INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL DEFAULT now())")
        for number, step in enumerate(schema.MIGRATIONS[:7], start=1):
            step(conn)
            conn.execute("INSERT INTO tiermem_schema (version) VALUES (%s)", (number,))
        conn.execute("INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before)"
                     " VALUES ('t-old', 'default', 'default', %s, 'pending', %s, %s)",
                     (json.dumps(thread(0, 2)), utc_iso(clock.now()), utc_iso(clock.now())))
    with open_mem(tmp_path / "mem", clock) as mem:
        (item,) = mem.queue.pending()
        assert (item.thread_id, item.first_position, item.messages) == ("t-old", 0, thread(0, 2))
        OutboxRepository(mem.db).put("t-old", mem.scope, thread(2, 1), clock.now(), first_position=2)
        assert mem.queue.pending()[0].messages == thread(0, 3)
