"""Journal record + digests + item state as one unit (issue 14, item 1), step by step.

Each fault-injection point of a queued write (:mod:`tiermem.faults`) is made to fail once; the
retry must leave every message in the Daily file exactly once. A torn append (a kill in the middle
of the write) is cut away by the next writer, a hand edit that moved the block is still
recognised, and the Daily file never carries a marker. Kills in real processes are in
test_queue_durability.py and test_chaos.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from queue_helpers import assert_once, day_text, extraction, files_are_the_store, journal_texts, outbox, rows, thread

from tiermem import Memory, faults
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.tiers.markdown import parse_records

JOURNAL_POINTS = ["journal.intent", "journal.appended", "journal.recorded"]
QUEUE_POINTS = ["queue.journaled", "queue.extracted", "queue.processed"]  # queue.claimed: a kill only (chaos)


pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(autouse=True)
def _disarmed() -> Iterator[None]:
    faults.disarm()
    yield
    faults.disarm()


def open_mem(root: Path, clock: FakeClock, **settings: object) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                  shutdown_flush_seconds=0, **settings)


def intents(root: Path) -> int:
    return int(rows(root, "SELECT COUNT(*) AS n FROM journal_intents")[0]["n"])


def day_file(root: Path) -> Path:
    return root / "memory" / "2026-03-14.md"


@pytest.mark.parametrize("point", JOURNAL_POINTS + QUEUE_POINTS)
def test_a_failure_at_any_step_leaves_each_message_once(root: Path, clock: FakeClock, point: str) -> None:
    model = ScriptedChatModel([extraction("Likes topic seven"), extraction("Likes topic seven")])
    with open_mem(root, clock, llm=model, extract_min_turns=1) as mem:
        faults.arm(point, "raise")
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)  # fails at the point (or, for queue.claimed, before the work)
        faults.disarm()
        mem.queue.add("t1", thread(0, 4))
        assert mem.queue.flush(timeout=20)
        assert [f.content for f in mem.facts.list()] == ["Likes topic seven"]
    assert_once(root, thread(0, 4))
    assert outbox(root) == [] and intents(root) == 0


@pytest.mark.parametrize("point", JOURNAL_POINTS)
def test_a_session_flush_failing_at_any_step_journals_once(root: Path, clock: FakeClock, point: str) -> None:
    with open_mem(root, clock) as mem:
        session = mem.session("s1")
        for message in thread(0, 3, "s1"):
            session.add(message["role"], message["content"])
        faults.arm(point, "raise")
        session.end()  # the flusher keeps what failed for the next flush
        faults.disarm()
        mem.queue.add("s1", thread(0, 3, "s1"))  # the queue sees the same conversation
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3, "s1"))
    assert intents(root) == 0


@pytest.mark.sqlite_only  # cuts the Daily file by hand: on Postgres the file is a mirror, never read back
def test_a_torn_append_is_cut_before_anything_else_is_written(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        mem.daily.append("Note", "written before the crash")
        before = day_file(root).stat().st_size
        faults.arm("journal.appended", "raise")
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)
        faults.disarm()
        whole = day_file(root).read_bytes()
        with open(day_file(root), "r+b") as handle:  # as if the kill came in the middle of the write
            handle.truncate(before + (len(whole) - before) // 2)
        assert intents(root) == 1
        mem.daily.append("Note", "written after the crash")  # any appender settles first
        assert intents(root) == 0
        texts = journal_texts(root)
        assert texts == ["written before the crash", "written after the crash"]
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))
    assert [r.text for r in parse_records(day_file(root).read_text())][:2] == texts


@pytest.mark.sqlite_only  # cuts the Daily file by hand (a mirror on Postgres)
def test_a_torn_first_append_of_the_day_removes_the_file(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        faults.arm("journal.appended", "raise")
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)
        faults.disarm()
        with open(day_file(root), "r+b") as handle:
            handle.truncate(20)  # only part of the title made it
        assert mem.queue.flush(timeout=20)
    assert day_file(root).read_text().startswith("# Daily Memory: 2026-03-14\n\n## Conversation (09:30)\n")
    assert_once(root, thread(0, 3))


@pytest.mark.sqlite_only  # edits the Daily file by hand (a mirror on Postgres)
def test_a_hand_edit_above_the_block_does_not_hide_it(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        mem.daily.append("Note", "first note")
        faults.arm("journal.appended", "raise")
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)
        faults.disarm()
        text = day_file(root).read_text()
        day_file(root).write_text(text.replace("- first note\n", "- first note, edited by hand\n"))
        mem.queue.add("t1", thread(0, 3))
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))


def test_an_append_that_never_happened_is_written_by_the_retry(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        faults.arm("journal.intent", "raise")
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)
        faults.disarm()
        # the intent is left for the next writer; where the files are in the database the failed
        # transaction took the intent with it
        assert journal_texts(root) == [] and intents(root) == (1 if files_are_the_store(root) else 0)
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))
    assert intents(root) == 0


def test_the_daily_file_carries_no_marker(root: Path, clock: FakeClock) -> None:
    with open_mem(root, clock) as mem:
        mem.queue.add("t1", thread(0, 3))
        assert mem.queue.flush(timeout=20)
    text = day_text(root, "2026-03-14")
    assert text == ("# Daily Memory: 2026-03-14\n\n## Conversation (09:30)\n"
                    + "".join(f"- {m['role']}: {m['content']}\n" for m in thread(0, 3)))


# --- durability levels -----------------------------------------------------------------------------

@pytest.mark.sqlite_only  # SQLite's PRAGMA synchronous and the files' fsync
@pytest.mark.parametrize(("level", "pragma", "syncs"), [("normal", 1, False), ("full", 2, True)])
def test_sqlite_synchronous_sets_the_pragma_and_fsyncs_the_journal(root: Path, clock: FakeClock,
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   level: str, pragma: int, syncs: bool) -> None:
    synced: list[int] = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (synced.append(fd), real(fd))[1])
    with open_mem(root, clock, sqlite_synchronous=level) as mem:
        assert mem.db.conn.execute("PRAGMA synchronous").fetchone()[0] == pragma
        mem.daily.append("Note", "kept through a power loss?")
        assert bool(synced) is syncs


def test_a_bad_durability_level_is_refused(root: Path, clock: FakeClock) -> None:
    from tiermem.errors import ConfigError

    with pytest.raises(ConfigError, match="sqlite_synchronous"):
        open_mem(root, clock, sqlite_synchronous="extra")


# --- the fault points themselves -------------------------------------------------------------------

def test_fault_specs_parse_and_bad_ones_are_refused() -> None:
    assert faults.parse("a:kill, b:raise@3,c") == {"a": ("kill", 1), "b": ("raise", 3), "c": ("kill", 1)}
    for bad in ("a:explode", ":kill", "a:kill@x", "a:raise@²", "a:kill@١"):
        with pytest.raises(ValueError, match="bad fault spec"):
            faults.parse(bad)


def test_an_armed_point_fires_at_its_nth_hit_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "p:raise@2")
    faults.point("p")
    with pytest.raises(faults.FaultInjected):
        faults.point("p")
    faults.point("p")
    faults.point("other")
