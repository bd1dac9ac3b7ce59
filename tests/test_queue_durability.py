"""The update queue under crashes (issue 14, items 1 and 2): exactly once, never wedged.

- A kill between the Daily append and the recording of its digests must not make the retry
  journal the messages again (the write-ahead intent of :mod:`tiermem.tiers.conversation`).
- A claim is a lease: an expired lease is reclaimable whatever the claimer's PID says (PIDs are
  reused in containers), a live one is renewed by a heartbeat so a slow extraction is never taken
  twice, and an item recovered from a dead process merges into a newer pending item of its thread
  instead of hitting the outbox's unique key.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from queue_helpers import assert_once, extraction, files_are_the_store, journal_texts, outbox, sql, thread

from tiermem import Memory, ProviderError
from tiermem.clock import utc_iso
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")


def dead_pid() -> int:
    """The PID of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


# --- item 1: the crash window between append and digest record -----------------------------------

_KILLED_AFTER_APPEND = """
import os, signal, sys
from tiermem import Memory, ProviderError
from tiermem.storage.journal import FlushHashRepository
from tiermem.testing import HashEmbedder

def die(*args, **kwargs):  # the crash window: the record is appended, its digests are not stored yet
    os.kill(os.getpid(), signal.SIGKILL)

FlushHashRepository.remember = die
mem = Memory(sys.argv[1], embedder=HashEmbedder(), debounce_seconds=3600, timezone="UTC")
mem.queue.add("t1", [{"role": "user", "content": "t1 message number 0 about topic 0"},
                     {"role": "assistant", "content": "t1 message number 1 about topic 7"},
                     {"role": "user", "content": "t1 message number 2 about topic 14"}])
print("added", flush=True)
mem.queue.flush()
print("survived", flush=True)
"""


def test_sigkill_between_append_and_digests_does_not_double_the_record(root: Path) -> None:
    proc = subprocess.run([sys.executable, "-c", _KILLED_AFTER_APPEND, str(root)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == -9 and proc.stdout == "added\n", proc.stderr
    if files_are_the_store(root):
        assert_once(root, thread(0, 3))  # the kill came after the append
    else:
        assert journal_texts(root) == []  # append and record are one transaction: the kill undid both
    with Memory(root, embedder=HashEmbedder(), timezone="UTC", queue_replay=False) as mem:
        assert mem.queue.flush(timeout=20)
        mem.queue.add("t1", thread(0, 5))  # the agent kept talking
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 5))
    assert outbox(root) == []


def test_a_failed_digest_record_is_settled_by_the_next_writer(root: Path, clock: FakeClock,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    from tiermem.errors import StorageError
    from tiermem.storage.journal import FlushHashRepository

    real = FlushHashRepository.remember
    calls: list[int] = []

    def flaky(self: FlushHashRepository, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            raise StorageError("database is locked")
        real(self, *args, **kwargs)

    monkeypatch.setattr(FlushHashRepository, "remember", flaky)
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.queue.add("t1", thread(0, 3))
        mem.queue.flush(timeout=20)
        session = mem.session("t1")  # the same conversation, seen by a session as well
        for message in thread(0, 4):
            session.add(message["role"], message["content"])
        session.end()
        mem.queue.add("t1", thread(0, 4))
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 4))


# --- item 2a: leases instead of PID liveness ---------------------------------------------------

def claim_as(root: Path, claimer: str, claimed_at: str, lease_until: str | None = None) -> None:
    """Mark the queued items as taken by ``claimer`` (another process, alive or not)."""
    sql(root, "UPDATE outbox SET status = 'processing', claimed_by = ?, claimed_at = ?", claimer, claimed_at)
    if lease_until is not None:
        sql(root, "UPDATE outbox SET lease_until = ?", lease_until)


def test_an_expired_claim_is_reclaimed_even_if_its_pid_is_alive(root: Path, clock: FakeClock) -> None:
    """After a container restart the new process is PID 1 again, and so was the dead claimer."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 3))
    claim_as(root, f"{socket.gethostname()}:{os.getpid()}", utc_iso(clock.now() - timedelta(hours=2)))
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))
    assert outbox(root) == []


def test_a_live_lease_of_another_process_is_respected_until_it_expires(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                queue_lease_seconds=120) as mem:
        mem.queue.add("t1", thread(0, 3))
        claim_as(root, "other-host:4242", utc_iso(clock.now()), utc_iso(clock.now() + timedelta(seconds=120)))
        assert mem.queue.flush(timeout=20) is False  # someone else holds it
        assert journal_texts(root) == [] and [r["status"] for r in outbox(root)] == ["processing"]
        clock.advance(121)
        assert mem.queue.flush(timeout=20) is True
    assert_once(root, thread(0, 3))
    assert outbox(root) == []


def test_a_claim_of_a_process_that_is_gone_is_reclaimed_at_once(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.queue.add("t1", thread(0, 3))
        claim_as(root, f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now()),
                 utc_iso(clock.now() + timedelta(hours=1)))
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))


def test_the_default_lease_outlasts_every_provider_retry() -> None:
    from tiermem.config import Settings
    from tiermem.queue.worker import QueuePolicy, lease_seconds

    settings = Settings(provider_timeout_seconds=60, provider_max_retries=3)
    assert lease_seconds(settings) > (3 + 1) * 60 + (0.5 + 1 + 2) * 1.1
    assert lease_seconds(replace(settings, provider_timeout_seconds=600)) > 4 * 600
    assert lease_seconds(replace(settings, queue_lease_seconds=42.0)) == 42.0
    policy = QueuePolicy.from_settings(settings)
    assert policy.lease_seconds == lease_seconds(settings)
    assert 0 < policy.heartbeat_seconds < policy.lease_seconds / 2


class BlockingModel(ScriptedChatModel):
    """An LLM whose extraction hangs until the test lets it finish (a slow provider)."""

    def __init__(self, replies: list[Any]) -> None:
        super().__init__(replies)
        self.entered = threading.Event()
        self.go = threading.Event()

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.entered.set()
        assert self.go.wait(timeout=30)
        return super().complete(messages, json_schema=json_schema)


@pytest.fixture
def slow(root: Path, clock: FakeClock) -> Iterator[tuple[Memory, BlockingModel]]:
    model = BlockingModel([extraction("Slow fact")])
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                extract_min_turns=1, queue_lease_seconds=60, shutdown_flush_seconds=0) as mem:
        yield mem, model


def lease_until(root: Path) -> str | None:
    rows = outbox(root)
    return rows[0]["lease_until"] if rows else None


@pytest.mark.parametrize("heartbeat", [0.01, None])
def test_a_slow_extraction_is_never_taken_twice_while_its_heartbeat_runs(
        slow: tuple[Memory, BlockingModel], root: Path, clock: FakeClock, heartbeat: float | None) -> None:
    mem, model = slow
    mem.queue.policy = replace(mem.queue.policy, heartbeat_seconds=heartbeat or 3600.0)
    mem.queue.add("t1", thread(0, 2))
    worker = threading.Thread(target=mem.queue.flush, kwargs={"timeout": 30})
    worker.start()
    assert model.entered.wait(timeout=20)
    clock.advance(600)  # ten lease lengths pass while the provider is slow
    if heartbeat:
        deadline = time.monotonic() + 10
        while (lease_until(root) or "") <= utc_iso(clock.now()) and time.monotonic() < deadline:
            time.sleep(0.01)
    other_model = ScriptedChatModel([extraction("Slow fact")])
    with Memory(root, llm=other_model, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                extract_min_turns=1, queue_lease_seconds=60, shutdown_flush_seconds=0) as other:
        other.queue.flush(timeout=5)
    model.go.set()
    worker.join(timeout=30)
    if heartbeat:
        assert other_model.requests == []  # the renewed lease kept it from taking the item
    else:
        assert len(other_model.requests) == 1  # without renewal the lease ran out: the control case
    assert outbox(root) == []
    assert [f.content for f in mem.facts.list()] == ["Slow fact"]
    assert_once(root, thread(0, 2))


# --- item 2b: a recovered item merges into the newer pending one ---------------------------------

def test_recovery_merges_into_a_newer_pending_item_of_the_thread(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 3))
    claim_as(root, f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now()))  # died in flight
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.queue.add("t1", thread(0, 6))  # the agent kept talking: a newer pending item
        assert [r["status"] for r in outbox(root)] == ["processing", "pending"]
        result = CliRunner().invoke(_cli(), ["--root", str(root), "queue", "status"],
                                    env={"TIERMEM_EMBEDDER": "hash"})
        assert result.exit_code == 0 and "Traceback" not in result.output, result.output
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 6))
    assert outbox(root) == []


def test_merging_keeps_the_messages_of_both_items(root: Path, clock: FakeClock) -> None:
    """The recovered item had more messages than the newer one (the agent sent a shorter list)."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 5))
    claim_as(root, f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now()))
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.queue.add("t1", thread(0, 3))
        mem.queue.outbox.recover(clock.now())
        (item,) = mem.queue.pending()
        assert item.messages == thread(0, 5) and item.status == "pending"
        assert item.attempts == 1 and "interrupted" in (item.last_error or "")
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 5))


def test_an_item_that_keeps_killing_its_process_ends_dead_with_a_reason(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                queue_max_attempts=2) as mem:
        mem.queue.add("t1", thread(0, 1))
        for _ in range(2):
            claim_as(root, f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now()))
            mem.queue.outbox.recover(clock.now(), max_attempts=2)
        (item,) = mem.queue.pending()
        assert item.status == "dead" and "interrupted" in (item.last_error or "")


def _cli() -> Any:
    from tiermem.cli.main import cli

    return cli


@pytest.mark.skipif(not Path("/proc/1/stat").exists(), reason="process start times come from /proc")
def test_a_reused_pid_is_told_apart_by_the_start_time_in_the_claim(root: Path, clock: FakeClock) -> None:
    """PID 1 is alive, but it is not the process that claimed the item (that one started at
    another time): no need to wait for the lease."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as mem:
        mem.queue.add("t1", thread(0, 3))
        claim_as(root, f"{socket.gethostname()}:1/1.deadbeef#1", utc_iso(clock.now()),
                 utc_iso(clock.now() + timedelta(hours=1)))
        assert mem.queue.flush(timeout=20)
    assert_once(root, thread(0, 3))


def _token(conn: Any) -> None:
    from tiermem.storage.outbox import claimer_gone, this_process

    conn.send((this_process(), claimer_gone(this_process())))


def test_a_forked_process_claims_under_its_own_identity() -> None:
    import multiprocessing

    from tiermem.storage.outbox import claimer_gone, this_process

    mine = this_process()
    context = multiprocessing.get_context("fork")
    ours, theirs = context.Pipe(duplex=False)
    child = context.Process(target=_token, args=(theirs,))
    child.start()
    token, gone_in_child = ours.recv()
    child.join(timeout=20)
    assert token != mine and token.split("/")[1] != mine.split("/")[1]  # not the parent's tag
    assert gone_in_child is False and claimer_gone(token)  # alive to itself; gone once it exited
    assert claimer_gone(mine) is False


def test_a_claimer_whose_lease_was_taken_over_changes_nothing(root: Path, clock: FakeClock) -> None:
    # debounce past the clock's moves: the queue's own thread must not take the item between the claims
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0, debounce_seconds=3600) as mem:
        mem.queue.add("t1", thread(0, 3))
        box = mem.queue.outbox
        first = box.claim(clock.now(), lease_seconds=60)
        assert first is not None
        clock.advance(61)
        assert box.recover(clock.now(), 60) == 1  # the lease ran out
        second = box.claim(clock.now(), lease_seconds=60)
        assert second is not None and second.id == first.id and second.claimed_by != first.claimed_by
        assert box.renew(first, clock.now(), 60) is False
        assert box.done(first) is False
        assert box.failed(first, "late failure", clock.now(), 5) == "lost"
        assert [(r["status"], r["claimed_by"]) for r in outbox(root)] == [("processing", second.claimed_by)]
        assert box.renew(second, clock.now(), 60) is True and box.done(second) is True
    assert outbox(root) == []


def test_two_dead_items_of_one_thread_are_retried_as_one(root: Path, clock: FakeClock) -> None:
    """Before: ``retry_dead`` set both back to pending in one UPDATE and hit the unique key."""
    model = ScriptedChatModel([ProviderError("down")] * 2 + [extraction("Back again")])
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                queue_max_attempts=1, extract_min_turns=1, shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 2))
        assert mem.queue.flush(timeout=20) is False
        mem.queue.add("t1", thread(0, 4))
        assert mem.queue.flush(timeout=20) is False
        assert [i.status for i in mem.queue.pending()] == ["dead", "dead"]
        assert mem.queue.retry_dead() == 2
        (item,) = mem.queue.pending()
        assert item.messages == thread(0, 4) and item.attempts == 0
        assert mem.queue.flush(timeout=20)
        assert [f.content for f in mem.facts.list()] == ["Back again"]
    assert_once(root, thread(0, 4))


def test_a_deferred_item_merges_into_a_newer_one_that_arrived_meanwhile(root: Path, clock: FakeClock) -> None:
    """Before: ``defer`` set the item back to pending next to the newer one: IntegrityError."""
    with Memory(root, llm=ScriptedChatModel([]), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                queue_replay=False, extract_min_turns=5, shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 2))
        box = mem.queue.outbox
        item = box.claim(clock.now(), lease_seconds=60)
        assert item is not None
        mem.queue.add("t1", thread(0, 4))  # arrives while the first is being processed
        box.defer(item, clock.now())
        (merged,) = mem.queue.pending()
        assert merged.status == "pending" and merged.messages == thread(0, 4) and merged.attempts == 0


# --- PostgreSQL: claims that do not wait (FOR UPDATE SKIP LOCKED) ------------------------------------

def _row_locker() -> Any:
    """Another session on the test's PostgreSQL store, in a transaction (to hold row locks)."""
    import psycopg

    conn = psycopg.connect(os.environ["TIERMEM_DATABASE_URL"])
    conn.execute("SELECT 1")  # psycopg opens the transaction here
    return conn


def _waiting_for_a_lock(conn: Any) -> bool:
    return bool(conn.execute("SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                             " AND datname = current_database()").fetchone()[0])


def test_a_claim_skips_an_item_another_session_holds(root: Path, clock: FakeClock, backend: str) -> None:
    if backend != "postgres":
        pytest.skip("row locks are PostgreSQL's: SQLite claimers take turns on the write lock")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 2))
        mem.queue.add("t2", thread(0, 2, "t2"))
        first, second = (r["id"] for r in outbox(root))
        box, locker = mem.queue.outbox, _row_locker()
        try:
            locker.execute("SELECT id FROM outbox WHERE id = %s FOR UPDATE", [first])  # another worker's claim
            taken = box.claim(clock.now(), lease_seconds=60)  # does not wait for it
            assert taken is not None and taken.id == second
            assert box.claim(clock.now(), lease_seconds=60) is None
        finally:
            locker.rollback()
            locker.close()
        again = box.claim(clock.now(), lease_seconds=60)
        assert again is not None and again.id == first


def test_a_merge_loses_nothing_when_the_newer_item_is_claimed_meanwhile(root: Path, clock: FakeClock,
                                                                       backend: str) -> None:
    """Recovery merges a dead claimer's item into the thread's pending one; a claimer that does not
    wait for the write lock may take that one first: then the recovered item stays an item."""
    if backend != "postgres":
        pytest.skip("only PostgreSQL claims outside the write lock")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 3))
        claim_as(root, f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now()))  # died in flight
        mem.queue.add("t1", thread(0, 6))
        old, newer = (r["id"] for r in outbox(root))
        locker = _row_locker()
        try:
            locker.execute("UPDATE outbox SET status = 'processing', claimed_by = 'another worker' WHERE id = %s",
                           [newer])
            recovering = threading.Thread(target=mem.queue.outbox.recover, args=(clock.now(), 60.0, 5))
            recovering.start()
            deadline = time.monotonic() + 20
            while not _waiting_for_a_lock(locker) and time.monotonic() < deadline:
                time.sleep(0.005)  # until recovery waits on the row the other worker holds
            locker.commit()
        finally:
            locker.close()
        recovering.join(timeout=20)
        rows = {r["id"]: r for r in outbox(root)}
        assert rows[newer]["status"] == "processing" and rows[newer]["claimed_by"] == "another worker"
        assert rows[old]["status"] == "pending" and rows[old]["attempts"] == 1
        assert json.loads(rows[old]["messages"]) == thread(0, 3)


@pytest.mark.parametrize("ends", ["rollback", "commit"])
@pytest.mark.parametrize("when", ["claim", "recover"])
def test_a_flush_waits_for_an_item_a_killed_claimer_still_holds(root: Path, clock: FakeClock, backend: str,
                                                               monkeypatch: pytest.MonkeyPatch, ends: str,
                                                               when: str) -> None:
    """A process killed while its claim statement runs leaves a server session that holds the row
    until the server notices the client is gone (a moment, longer on a loaded machine); the
    session then rolls the claim back, or commits it as a dead claimer's. A flush meanwhile must
    wait for the row, not stop with the item pending (or processing) and its messages not
    journaled (the chaos test's "queue not drained after a flush: {'pending': 1}" and "... is
    there 0 times"). The session ends once the flush's claim found nothing, right then or after
    the flush's next recovery looked."""
    if backend != "postgres":
        pytest.skip("only PostgreSQL claims skip held rows; SQLite claimers wait for the write lock")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", thread(0, 3))
        killed = _row_locker()
        killed.execute("UPDATE outbox SET status = 'processing', claimed_by = %s, claimed_at = %s",
                       [f"{socket.gethostname()}:{dead_pid()}", utc_iso(clock.now())])  # its claim in flight
        box, found_nothing = mem.queue.outbox, threading.Event()

        def session_ends(step: str) -> None:
            if found_nothing.is_set() and step == when and not killed.closed:
                getattr(killed, ends)()
                killed.close()

        def claim(*args: Any, claim: Any = box.claim, **kwargs: Any) -> Any:
            item = claim(*args, **kwargs)
            if item is None:
                found_nothing.set()
            session_ends("claim")
            return item

        def recover(*args: Any, recover: Any = box.recover, **kwargs: Any) -> Any:
            count = recover(*args, **kwargs)
            session_ends("recover")
            return count

        monkeypatch.setattr(box, "claim", claim)
        monkeypatch.setattr(box, "recover", recover)
        try:
            assert mem.queue.flush(timeout=20) is True
        finally:
            ended, _ = killed.closed, killed.close()
        assert ended and box.counts() == {}
    assert_once(root, thread(0, 3))
