"""A fact added while others search keeps its vector (issue 22 item 8a), hundreds of times.

    python bench/index_race.py [--runs 300] [--mode both|threads|processes]
                               [--backend both|sqlite|postgres] [--url URL] [--json]

The scenario of ``tests/test_search_index.py::test_concurrent_writers_and_searchers``: a seed
fact, then two writers add 40 facts each while two searchers search; then every searcher must
find all 81 facts by their vectors alone (``search_keyword_weight = 0``), and no item of the
scope may lack a vector. Each run is a new scope (user ``rN``) of one store, so each run's first
search loads its scope while the writers write: the moment the race lost a fact.

- **threads**: one ``Memory``; the writers and searchers are threads of this process.
- **processes**: four forked processes, each with its own ``Memory`` on the store (SQLite: one
  root; PostgreSQL: one database, a root each); each searcher reports what its own index finds.

Printed per backend and mode: runs, failed runs, facts missed in all, items left without a
vector, seconds. Exit 1 when a run failed. Before the fix about one SQLite run in ten missed a
fact (bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

FACTS = 40  # per writer
QUERY = "astronomy fact number"
WANTED = 2 * FACTS + 1  # the writers' facts and the seed


def _open(root: Path, url: str | None, user: str) -> Any:
    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    extra = {"database_url": url} if url else {}
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", user_id=user, search_keyword_weight=0.0,
                  queue_replay=False, **extra)


def _write(mem: Any, prefix: str) -> None:
    for i in range(FACTS):
        mem.facts.add(f"{prefix} fact number {i} about astronomy")


def _search_until(mem: Any, done: Callable[[], bool]) -> int:
    """Search while the writers write (at least once), then count the facts found."""
    while True:
        finished = done()
        mem.search("astronomy", k=5)
        if finished:
            return len(mem.search(QUERY, k=1000))


def run_threads(root: Path, url: str | None, user: str) -> list[int]:
    """One run with threads: what each searcher found at the end."""
    with _open(root, url, user) as mem:
        mem.facts.add("seed fact about astronomy")
        writers = [threading.Thread(target=_write, args=(mem, p)) for p in ("alpha", "beta")]
        found: list[int] = []

        def search() -> None:
            found.append(_search_until(mem, lambda: not any(w.is_alive() for w in writers)))

        searchers = [threading.Thread(target=search) for _ in range(2)]
        for thread in writers + searchers:
            thread.start()
        for thread in writers + searchers:
            thread.join()
        return found


def _process(role: str, root: Path, url: str | None, user: str, start: Any, writing: Any, results: Any) -> None:
    mem = _open(root, url, user)
    try:
        start.wait()
        if role == "searcher":
            results.put(_search_until(mem, lambda: writing.value == 0))
        else:
            _write(mem, role)
    finally:
        mem.close()
        if role != "searcher":
            with writing.get_lock():
                writing.value -= 1


def run_processes(root: Path, url: str | None, user: str) -> list[int]:
    """One run with forked processes: what each searcher process found at the end."""
    with _open(root, url, user) as mem:
        mem.facts.add("seed fact about astronomy")
    ctx = mp.get_context("fork")  # this process holds no connection now; fork is 10x faster to start
    start, writing, results = ctx.Barrier(4), ctx.Value("i", 2), ctx.Queue()
    roles = ["alpha", "beta", "searcher", "searcher"]
    procs = [ctx.Process(target=_process, args=(role, root.with_name(f"host{n}") if url else root, url, user, start,
                                                writing, results)) for n, role in enumerate(roles)]
    for proc in procs:
        proc.start()
    found = [results.get(timeout=300) for _ in range(2)]
    for proc in procs:
        proc.join()
    if any(proc.exitcode for proc in procs):
        raise SystemExit(f"a process failed: exit codes {[p.exitcode for p in procs]}")
    return found


def without_vector(root: Path, url: str | None, user: str) -> int:
    with _open(root, url, user) as mem:
        return int(mem.vector_status().missing)


def bench(backend: str, mode: str, url: str | None, runs: int) -> dict[str, Any]:
    one = run_threads if mode == "threads" else run_processes
    failed = missed = unvectored = 0
    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch) / "shared"
        for n in range(runs):
            user = f"r{n}"
            found = one(root, url, user)
            lost = sum(WANTED - f for f in found)
            left = without_vector(root, url, user)
            failed += bool(lost or left)
            missed += lost
            unvectored += left
    return {"backend": backend, "mode": mode, "runs": runs, "failed_runs": failed, "facts_missed": missed,
            "items_without_vector": unvectored, "seconds": round(time.perf_counter() - began, 1)}


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
    parser.add_argument("--runs", type=int, default=300)
    parser.add_argument("--mode", choices=["both", "threads", "processes"], default="both")
    parser.add_argument("--backend", choices=["both", "sqlite", "postgres"], default="both")
    parser.add_argument("--url", default=None, help="a PostgreSQL server to use instead of a private one")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    modes = ["threads", "processes"] if args.mode == "both" else [args.mode]
    rows = []
    for backend in backends:
        for mode in modes:
            with database(backend, args.url) as url:
                rows.append(bench(backend, mode, url, args.runs))
            print(json.dumps(rows[-1]) if args.json else "  ".join(f"{k}={v}" for k, v in rows[-1].items()),
                  flush=True)
    sys.exit(1 if any(r["failed_runs"] for r in rows) else 0)


if __name__ == "__main__":
    main()
