"""Which writes wait for which (issue 25 item 1; docs/postgres.md, "What can run at once").

On PostgreSQL a write of one scope (or one user's files, one queue thread) locks only that,
plus a shared hold on the store's lock; a store-wide write (purge, import) takes the store's lock
alone and exclusively. So writers of different scopes never wait for each other, a writer of the
same scope does, and a store-wide write waits for the scoped ones and they for it. SQLite has one
writer per file: there only the "nothing lost, nothing doubled" test applies.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.errors import StorageError
from tiermem.storage.sql import STORE, WriteKey, scope_key
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Scope

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
PATIENCE = 60.0  # seconds: far above what the work takes; reaching it fails the test


@pytest.fixture
def postgres(backend: str) -> str:
    if backend != "postgres":
        pytest.skip("SQLite has one writer per file: every write waits for the others")
    return backend


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Callable[[str], Memory]]:
    """``open(user)``: a Memory of that user on the test's store (closed at the end)."""
    opened: list[Memory] = []

    def open_store(user: str) -> Memory:
        mem = Memory(tmp_path / "root", llm="none", embedder=HashEmbedder(), clock=FakeClock(START), user_id=user,
                     timezone="UTC", max_facts=20)
        opened.append(mem)
        return mem

    yield open_store
    for mem in opened:
        mem.close()


class Holder(threading.Thread):
    """Holds a write transaction of ``key`` open until :meth:`release` (a long transaction)."""

    def __init__(self, mem: Memory, key: WriteKey) -> None:
        super().__init__(daemon=True)
        self.mem, self.key = mem, key
        self.holding, self._release = threading.Event(), threading.Event()
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            with self.mem.db.transaction(self.key) as conn:
                conn.execute("SELECT 1")
                self.holding.set()
                if not self._release.wait(PATIENCE):
                    raise AssertionError("nobody released the transaction")
        except BaseException as exc:  # reported by the test
            self.error = exc
            self.holding.set()

    def __enter__(self) -> Holder:
        self.start()
        assert self.holding.wait(PATIENCE) and self.error is None, self.error
        return self

    def __exit__(self, *exc: object) -> None:
        self._release.set()
        self.join(PATIENCE)
        assert not self.is_alive() and self.error is None, self.error


class Worker(threading.Thread):
    def __init__(self, work: Callable[[], object]) -> None:
        super().__init__(daemon=True)
        self.work = work
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.work()
        except BaseException as exc:  # reported by the test
            self.error = exc

    def finish(self) -> None:
        self.join(PATIENCE)
        assert not self.is_alive(), "the writer was still waiting"
        assert self.error is None, self.error


def waiting_for_a_lock(mem: Memory) -> bool:
    """True once some session of the store's database waits for an advisory lock."""
    rows = mem.db.rows("SELECT COUNT(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
                       " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")
    return int(rows[0][0]) > 0


def until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, "the condition never came true"
        time.sleep(0.01)


def add_facts(mem: Memory, name: str, n: int) -> Callable[[], None]:
    return lambda: [mem.facts.add(f"{name} fact number {i}") for i in range(n)]


def test_writers_of_other_scopes_go_on_while_one_scope_holds_a_long_transaction(
        postgres: str, stores: Callable[[str], Memory]) -> None:
    ann, bob, cat = stores("ann"), stores("bob"), stores("cat")
    with Holder(cat, scope_key(cat.scope)) as holder:
        writers = [Worker(add_facts(ann, "ann", 15)), Worker(add_facts(bob, "bob", 15))]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.finish()  # done while cat's transaction is still open
        assert holder.is_alive()
    assert [f.content for f in ann.facts.list()].count("ann fact number 7") == 1
    assert ann.facts.count() == bob.facts.count() == 15
    assert cat.facts.count() == 0


def test_a_writer_of_the_same_scope_waits(postgres: str, stores: Callable[[str], Memory]) -> None:
    ann = stores("ann")
    with Holder(ann, scope_key(ann.scope)):
        writer = Worker(lambda: ann.facts.add("written after the long transaction"))
        writer.start()
        until(lambda: waiting_for_a_lock(ann))
        assert writer.is_alive() and ann.facts.count() == 0
    writer.finish()
    assert [f.content for f in ann.facts.list()] == ["written after the long transaction"]


def test_a_store_wide_write_waits_for_a_scoped_one(postgres: str, stores: Callable[[str], Memory]) -> None:
    ann = stores("ann")

    def store_wide() -> None:
        with ann.db.transaction(STORE) as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('store-wide', 'done')")

    with Holder(ann, scope_key(Scope("bob", "default"))):
        writer = Worker(store_wide)
        writer.start()
        until(lambda: waiting_for_a_lock(ann))
        assert writer.is_alive()
    writer.finish()
    assert ann.db.rows("SELECT value FROM meta WHERE key = 'store-wide'")[0][0] == "done"


def test_a_scoped_write_waits_for_a_store_wide_one(postgres: str, stores: Callable[[str], Memory]) -> None:
    ann, bob = stores("ann"), stores("bob")
    with Holder(bob, STORE):
        writer = Worker(lambda: ann.facts.add("written after the purge"))
        writer.start()
        until(lambda: waiting_for_a_lock(ann))
        assert writer.is_alive() and ann.facts.count() == 0
    writer.finish()
    assert ann.facts.count() == 1


def test_a_nested_write_takes_the_locks_its_transaction_lacks(postgres: str, stores: Callable[[str], Memory]) -> None:
    ann, bob = stores("ann"), stores("bob")
    inside, release = threading.Event(), threading.Event()

    def nested() -> None:
        with ann.db.transaction(scope_key(ann.scope)), ann.db.transaction(scope_key(bob.scope)):
            inside.set()
            assert release.wait(PATIENCE)

    outer = Worker(nested)
    outer.start()
    assert inside.wait(PATIENCE)
    writer = Worker(lambda: bob.facts.add("bob waits for ann's nested write"))
    writer.start()
    until(lambda: waiting_for_a_lock(bob))
    assert writer.is_alive()
    release.set()
    outer.finish()
    writer.finish()
    assert bob.facts.count() == 1


def test_nested_writes_that_wait_for_each_other_end_in_one_clear_error(
        postgres: str, stores: Callable[[str], Memory]) -> None:
    ann, bob = stores("ann"), stores("bob")
    both_in = threading.Barrier(2, timeout=PATIENCE)

    def crossing(first: Memory, second: Memory) -> Callable[[], None]:
        def work() -> None:
            with first.db.transaction(scope_key(first.scope)) as conn:
                conn.execute("INSERT INTO meta (key, value) VALUES (?, 'x')", (first.scope.user_id,))
                both_in.wait()
                with second.db.transaction(scope_key(second.scope)):
                    pass
        return work

    writers = [Worker(crossing(ann, bob)), Worker(crossing(bob, ann))]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(PATIENCE)
    errors = [w.error for w in writers]
    assert sum(e is None for e in errors) == 1, errors
    failed = next(e for e in errors if e is not None)
    assert isinstance(failed, StorageError) and "waited for each other" in str(failed)
    kept = ann.db.rows("SELECT key FROM meta WHERE key IN ('ann', 'bob')")
    assert len(kept) == 1  # the failed one was rolled back, the other committed


def test_writers_of_many_scopes_at_once_lose_and_double_nothing(stores: Callable[[str], Memory]) -> None:
    """Four users' writers at full speed, two of them in one scope adding the same facts (its
    duplicates and its cap still hold), each also appending to its user's journal."""
    mems = {user: stores(user) for user in ("ann", "bob", "cat", "dan")}
    twin = stores("ann")  # a second writer of ann's scope

    def work(mem: Memory, name: str) -> Callable[[], None]:
        def run() -> None:
            for i in range(30):
                mem.facts.add(f"fact {i} of {mem.scope.user_id}", confidence=0.5 + i / 100)
                mem.daily.append("Note", [f"{name} note {i}"])
        return run

    writers = [Worker(work(mem, user)) for user, mem in mems.items()] + [Worker(work(twin, "twin"))]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.finish()
    for user, mem in mems.items():
        contents = [f.content for f in mem.facts.list()]
        assert len(contents) == len(set(contents)) == 20  # the cap, no duplicate
        assert set(contents) == {f"fact {i} of {user}" for i in range(10, 30)}  # the strongest kept
        notes = [line for line in mem.daily.read().splitlines() if line.startswith("- ")]
        expected = {f"- {user} note {i}" for i in range(30)} | (
            {f"- twin note {i}" for i in range(30)} if user == "ann" else set())
        assert sorted(notes) == sorted(expected)
