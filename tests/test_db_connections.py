"""Database connections follow the threads alive now, not every thread the process ever ran
(issue 22 item 5): short-lived threads and a server's worker threads that come and go between
bursts leave no open file behind. Counted from /proc/self/fd: the SQLite file and its -wal/-shm,
or the sockets of PostgreSQL connections."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tiermem import Memory
from tiermem.storage.sqlite.connections import IDLE_CONNECTIONS
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options

pytestmark = [pytest.mark.usefixtures("backend"),
              pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")]

FACT = "Keeps the staging database on port 5433"
PG_POOL_SIZE = 5  # PgDatabase's default pool_size
Bound = Callable[[int], int]  # threads alive at once -> most database descriptors left open after them


def _links() -> list[str]:
    found = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            found.append(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            continue  # closed between the listing and the read (the listing's own fd)
    return found


def _sqlite_fds(root: Path) -> int:
    """Open descriptors on the store's database file, its -wal and its -shm."""
    db = str(root / "tiermem.db")
    return sum(1 for link in _links() if link in (db, db + "-wal", db + "-shm"))


def _sockets() -> int:
    return sum(1 for link in _links() if link.startswith("socket:"))


@pytest.fixture
def store(backend: str, root: Path, clock: FakeClock) -> Iterator[tuple[Memory, Callable[[], int], Bound]]:
    """The Memory, a counter of its database descriptors, and the most it may hold once the threads
    that used it ended, given how many were alive at once.

    SQLite: pool-size + 4 after threads that ran one at a time (the main thread's and the idle
    connection, a file and a -wal each, and the shared -shm); one more for each further thread that
    was alive at once: SQLite does not close the file of a closed connection while another
    connection of the process holds a lock on it (every open one does, in WAL mode), and reuses it
    for the next connection it opens. PostgreSQL: the pool's connections, over the sockets open
    before the store (psycopg's pool never holds more)."""
    sockets = _sockets()
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        assert mem.facts.add(FACT, "knowledge", 0.9) is not None
        if backend == "sqlite":
            yield mem, lambda: _sqlite_fds(root), lambda alive: IDLE_CONNECTIONS + 4 + alive - 1
        else:
            yield mem, lambda: _sockets() - sockets, lambda alive: PG_POOL_SIZE + 4


def _read(mem: Memory, seen: list[str]) -> None:
    seen.extend(f.content for f in mem.facts.list())


def _run_threads(mem: Memory, total: int, alive: int) -> list[str]:
    seen: list[str] = []
    for _ in range(total // alive):
        wave = [threading.Thread(target=_read, args=(mem, seen)) for _ in range(alive)]
        for thread in wave:
            thread.start()
        for thread in wave:
            thread.join()
    return seen


@pytest.mark.parametrize("alive", [1, 10])
def test_a_thousand_short_lived_threads_leave_a_bounded_number_of_database_files_open(
        store: tuple[Memory, Callable[[], int], Bound], alive: int) -> None:
    mem, open_fds, bound = store
    assert _run_threads(mem, 1000, alive) == [FACT] * 1000
    assert 0 < open_fds() <= bound(alive)
    assert _run_threads(mem, 1000, alive) == [FACT] * 1000
    assert 0 < open_fds() <= bound(alive)  # the next thousand add nothing beyond it
    assert [f.content for f in mem.facts.list()] == [FACT]  # the main thread's connection still works


def test_a_server_under_bursts_with_idle_gaps_does_not_grow(store: tuple[Memory, Callable[[], int], Bound]) -> None:
    """Each burst: 32 page loads, 8 at a time, on the viewer's app, served by anyio's worker
    threads; the gap after it ends those threads (as anyio does to a worker idle for 10 s)."""
    mem, open_fds, bound = store
    app = build_app(mem, ui_options(8767), "csrf-token-for-the-tests-0123456789")
    counts = []
    for _ in range(8):
        before = set(threading.enumerate())
        with TestClient(app, base_url="http://127.0.0.1:8767") as client, ThreadPoolExecutor(8) as pool:
            pages = list(pool.map(lambda _: client.get("/facts"), range(32)))
        for thread in set(threading.enumerate()) - before:  # the burst's worker threads, now ending
            thread.join(timeout=30)
            assert not thread.is_alive()
        assert all(page.status_code == 200 and FACT in page.text for page in pages)
        counts.append(open_fds())
    # 8 requests at a time run on up to twice as many anyio worker threads alive at once (a new one
    # starts when a request comes before an idle worker is back in its queue; measured: 10-16 files
    # after a burst, varying with scheduling), so the bound is bound(16); a connection kept per
    # thread ever run would hold 2 files for each of the 8 bursts' 8+ threads: 128 and more
    assert min(counts) > 0 and max(counts) <= bound(2 * 8), counts  # however many bursts came before
