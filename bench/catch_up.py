"""Issue 25 item 3: what a search costs in one process while another process writes (PostgreSQL).

    python bench/catch_up.py [--n 100000] [--queries 40] [--url URL] [--json]

The store of ``bench/search.py --backend postgres`` (``n`` facts of scope default/default with
vectors and the HNSW graph, built once under the cache folder and reused). A reader process times
``SearchEngine.search_vector`` on that scope and counts its reads (statements and rows fetched,
through a hook on the database's ``rows``) in three phases: nobody writes; another process adds
facts to another scope (user ``other``) as fast as it can; it adds facts to the reader's scope.
The writer is a ``Memory`` embedding with a hash embedder of the store's model and dimension.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from pgserver import DEFAULT_CACHE, server_url, with_schema  # noqa: E402
from search import DIM, MODEL, SCOPE, queries, vectors, vocabulary  # noqa: E402


def bench_model() -> Any:
    """A hash embedder of the store's model id and dimension: what the writer embeds its facts with,
    and the reader the writer's facts it finds not embedded yet (as any process catching up)."""
    from tiermem.testing import HashEmbedder

    class BenchModel(HashEmbedder):
        @property
        def model_id(self) -> str:
            return MODEL

    return BenchModel(DIM)


def _writer(url: str, user: str, stop: Any, done: Any) -> None:
    import numpy as np

    from tiermem import Memory

    root = Path(tempfile.mkdtemp(prefix="catch-up-writer-"))
    with Memory(root, database_url=url, embedder=bench_model(), timezone="UTC", user_id=user, max_facts=10**7,
                queue_replay=False, mirror_files=False) as mem:
        rng = np.random.default_rng(time.time_ns())  # new texts every run: none is a duplicate
        i = 0
        while not stop.is_set():
            mem.facts.add(f"written while searching {i} {int(rng.integers(1 << 30))} about lakes")
            i += 1
        done.value = i


def _phase(engine: Any, qs: list[tuple[str, Any]], label: str) -> dict[str, Any]:
    from tiermem.search.filters import SearchFilters

    db = engine.db
    real = db.rows
    reads: list[int] = []

    def rows(sql: str, args: Any = (), what: str = "query") -> list[Any]:
        found = real(sql, args, what)
        reads.append(len(found))
        return list(found)

    times, statements, fetched = [], [], []
    db.rows = rows
    try:
        for text, vec in qs:
            reads.clear()
            started = time.perf_counter()
            engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
            times.append(time.perf_counter() - started)
            statements.append(len(reads))
            fetched.append(sum(reads))
    finally:
        del db.rows
    times.sort()
    return {"phase": label, "median_ms": round(statistics.median(times) * 1000, 1),
            "p95_ms": round(times[int(0.95 * (len(times) - 1))] * 1000, 1),
            "statements": round(statistics.mean(statements), 1), "rows": round(statistics.mean(fetched), 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--url", default=None)
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    import numpy as np
    from search_postgres import FORMAT, _built, _connect, _mark_built, build

    from tiermem.clock import SystemClock
    from tiermem.config import load_settings
    from tiermem.search.engine import SearchEngine
    from tiermem.search.filters import SearchFilters
    from tiermem.storage.postgres.db import PgDatabase

    base = server_url(args.url, args.cache)
    schema = f"bench_search_n{args.n}_v{FORMAT}"
    vocab = vocabulary(20_000, np.random.default_rng(0))
    if not _built(base, schema):
        with _connect(base) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        build(base, schema, args.n, vocab)
        _mark_built(base, schema)
    url = with_schema(base, schema)
    qs = queries(args.queries, vocab, vectors(args.n, 2))
    settings = load_settings(args.cache, {"timezone": "UTC"}, environ={})
    db = PgDatabase(url)
    engine = SearchEngine(db, bench_model, settings, SystemClock())  # queries come with their vectors
    for _ in range(2):  # warm: the keyword statistics of every query cached, the scope caught up
        for text, vec in qs:
            engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
    results = [_phase(engine, qs, "nobody writes")]
    ctx = mp.get_context("spawn")
    for user, label in (("other", "another process writes another scope"),
                        (SCOPE.user_id, "another process writes this scope")):
        stop, done = ctx.Event(), ctx.Value("i", 0)
        proc = ctx.Process(target=_writer, args=(url, user, stop, done))
        proc.start()
        time.sleep(8)  # the writer's imports and first writes
        began = time.perf_counter()
        result = _phase(engine, qs, label)
        elapsed = time.perf_counter() - began
        stop.set()
        proc.join()
        result["writer_facts"] = done.value
        result["phase_seconds"] = round(elapsed, 1)
        results.append(result)
    db.close()
    if args.json:
        print(json.dumps(results, indent=1))
    else:
        for r in results:
            print(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
