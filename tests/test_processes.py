"""Several processes share one root (R65), or on PostgreSQL one database from several roots (as
on several hosts): writes are seen, none is lost, and queue workers take each item once."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
from queue_helpers import assert_once, outbox, store, thread

from tiermem import Memory
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import HashEmbedder
from tiermem.types import Scope

pytestmark = pytest.mark.usefixtures("backend")

_WRITER = """
import sys
from tiermem import Memory
from tiermem.testing import HashEmbedder
with Memory(sys.argv[1], embedder=HashEmbedder()) as m:
    for i in range(int(sys.argv[3])):
        assert m.facts.add(f"{sys.argv[2]} fact {i}") is not None
"""


def _writer(root: Path, tag: str, n: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(root), tag, str(n)])


def test_second_process_sees_first_process_writes(root: Path) -> None:
    assert _writer(root, "first", 3).wait(timeout=60) == 0
    with Memory(root, embedder=HashEmbedder()) as m:
        assert sorted(f.content for f in m.facts.list()) == [f"first fact {i}" for i in range(3)]


def test_two_processes_adding_concurrently_lose_nothing(root: Path) -> None:
    Memory(root, embedder=HashEmbedder()).close()  # create the schema once
    procs = [_writer(root, tag, 200) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Memory(root, embedder=HashEmbedder()) as m:
        facts = m.facts.list()
        assert len(facts) == 400
        assert len({f.id for f in facts}) == 400
        assert {f.content for f in facts} == {f"{t} fact {i}" for t in "ab" for i in range(200)}


# --- queue workers in several processes ------------------------------------------------------------

_CLAIMER = """
import sys, time
from datetime import UTC, datetime
from pathlib import Path
from tiermem.config import load_settings
from tiermem.storage.backend import open_database
from tiermem.storage.outbox import OutboxRepository
root, go = Path(sys.argv[1]), Path(sys.argv[2])
db = open_database(root, load_settings(root))
outbox = OutboxRepository(db)
print("ready", flush=True)
while not go.exists():
    time.sleep(0.002)
while (item := outbox.claim(datetime.now(UTC), ignore_backoff=True)) is not None:
    time.sleep(0.002)  # the item's work
    assert outbox.done(item)
    print(item.id, flush=True)
"""

_WORKER = """
import sys, time
from pathlib import Path
from tiermem import Memory
from tiermem.testing import HashEmbedder
root, go = Path(sys.argv[1]), Path(sys.argv[2])
with Memory(root, embedder=HashEmbedder(), timezone="UTC", queue_replay=False, update_delay_seconds=0,
            shutdown_flush_seconds=0) as mem:
    done, real = [], mem.queue.outbox.done
    mem.queue.outbox.done = lambda item: real(item) and (done.append(item.id) or True)
    print("ready", flush=True)
    while not go.exists():
        time.sleep(0.002)
    deadline = time.monotonic() + 60
    while not mem.queue.flush(timeout=60) and time.monotonic() < deadline:
        time.sleep(0.01)  # the other worker still has an item in flight
    print(" ".join(map(str, done)), flush=True)
"""


def _roots(root: Path, backend: str) -> list[Path]:
    """Where the two processes run: one root on SQLite; two roots (two "hosts") on PostgreSQL."""
    return [root, root if backend == "sqlite" else root.parent / "second-host"]


def _start_together(script: str, roots: list[Path], go: Path) -> list[subprocess.Popen[str]]:
    procs = [subprocess.Popen([sys.executable, "-c", script, str(r), str(go)], stdout=subprocess.PIPE, text=True)
             for r in roots]
    for proc in procs:
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    go.touch()
    return procs


def _queue(root: Path, threads: int) -> list[int]:
    """``threads`` queued items, one per thread (thread ``q<i>``, three messages each); their ids."""
    with store(root) as db:
        repo = OutboxRepository(db)
        return [repo.put(f"q{i}", Scope("default", "default"), thread(0, 3, f"q{i}"), datetime.now(UTC))
                for i in range(threads)]


def test_two_processes_claim_each_item_once(root: Path, backend: str) -> None:
    Memory(root, embedder=HashEmbedder()).close()  # create the store once
    ids = _queue(root, 200)
    procs = _start_together(_CLAIMER, _roots(root, backend), root.parent / "go")
    claimed = [[int(line) for line in p.communicate(timeout=120)[0].split()] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sorted(claimed[0] + claimed[1]) == ids  # every item, none twice
    assert claimed[0] and claimed[1]  # both took part
    assert outbox(root) == []


def test_two_queue_workers_apply_each_item_once(root: Path, backend: str) -> None:
    Memory(root, embedder=HashEmbedder(), timezone="UTC").close()
    ids = _queue(root, 40)
    procs = _start_together(_WORKER, _roots(root, backend), root.parent / "go")
    done = [[int(n) for n in p.communicate(timeout=120)[0].split()] for p in procs]
    assert [p.returncode for p in procs] == [0, 0]
    assert sorted(done[0] + done[1]) == ids
    assert outbox(root) == []
    for i in range(40):
        assert_once(root, thread(0, 3, f"q{i}"))


# --- named cross-process locks (Backend.lock) -------------------------------------------------------

_HOLDER = """
import sys, time
from pathlib import Path
from tiermem.config import load_settings
from tiermem.storage.backend import open_database
root = Path(sys.argv[1])
db = open_database(root, load_settings(root))
with db.parts.lock(db, sys.argv[2], 10):
    print("held", flush=True)
    time.sleep(600)  # until killed
"""


def test_a_named_lock_excludes_other_processes_until_its_holder_dies(root: Path, backend: str) -> None:
    Memory(root, embedder=HashEmbedder()).close()
    name = "users/bob/.dream.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(_roots(root, backend)[1]), name],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        with store(root) as db:
            started = time.monotonic()
            with pytest.raises(TimeoutError), db.parts.lock(db, name, 0.2):
                pass
            assert time.monotonic() - started >= 0.2
            with db.parts.lock(db, "users/alice/.dream.lock", 0):  # another name is free
                pass
            holder.send_signal(signal.SIGKILL)
            holder.wait(timeout=30)
            with db.parts.lock(db, name, 10):  # the dead holder's lock is gone with it
                pass
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_lock_name_must_stay_under_the_root(root: Path) -> None:
    """Refused when the lock is asked for, before anything is created or taken."""
    from tiermem.errors import InvalidInput

    Memory(root, embedder=HashEmbedder()).close()
    with store(root) as db:
        for bad in ("", "/etc/x.lock", "../x.lock", "users/../../x.lock"):
            with pytest.raises(InvalidInput):
                db.parts.lock(db, bad, 0)
