"""PostgreSQL's partial vector graph (issue 16): a user's vectors enter the HNSW index only once
the user has more than ``EXACT_MAX_ROWS`` of them (below, every search of theirs is an exact scan),
and searches find them on both sides of that line; an older schema is migrated to it.

The limit is lowered to a few rows (``EXACT_MAX_ROWS`` is read when the repositories are made)
so that crossing it takes a handful of facts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.facts.store import NewFact  # noqa: E402
from tiermem.storage.postgres import vectors  # noqa: E402
from tiermem.storage.postgres.db import PgDatabase  # noqa: E402
from tiermem.storage.postgres.nearest import PgVectorQueries  # noqa: E402
from tiermem.storage.postgres.vectors import PgEmbeddings, halfvec  # noqa: E402
from tiermem.storage.search import DocFilter  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402
from tiermem.types import Scope  # noqa: E402

DIM = 16
LIMIT = 20
MODEL = "hash-16"


@pytest.fixture
def url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setattr(vectors, "EXACT_MAX_ROWS", LIMIT)
    with fresh_schema() as fresh:
        yield fresh


def flags(db: Any, user: str) -> list[bool]:
    return [bool(r[0]) for r in db.rows("SELECT indexed FROM search_vectors WHERE user_id = ? ORDER BY doc_id", [user])]


def own_vector(db: Any, doc_id: int) -> bytes:
    row = db.rows("SELECT CAST(CAST(vector AS vector) AS real[]) FROM search_vectors WHERE doc_id = ? AND own",
                  [doc_id])[0][0]
    query = np.array(row, np.float32)
    return bytes((query / np.linalg.norm(query)).astype("<f4").tobytes())


def graph_walk(db: Any, scope: Scope, blob: bytes, top: int) -> list[int]:
    """The HNSW walk alone (no exact fallback), as ``nearest`` asks it."""
    condition = "v.model_key = 1 AND v.user_id = ? AND v.agent_name IN (?, ?)"
    walked = PgVectorQueries(db).approximate(condition, [scope.user_id, scope.agent_name, "*"], halfvec(blob), DIM, top)
    return [doc for doc, _ in walked]


def no_exact(*args: object) -> list[tuple[int, float]]:
    raise AssertionError("a user past the limit is answered by the graph")


def test_a_small_users_vectors_stay_out_of_the_graph_and_are_found_exactly(tmp_path: Path, url: str) -> None:
    with Memory(tmp_path / "mem", embedder=HashEmbedder(DIM), database_url=url, user_id="small",
                timezone="UTC") as mem:
        mem.facts.add_many([NewFact(f"small fact {i} about hobby {i}") for i in range(12)])
        db = mem.db
        assert flags(db, "small") == [False] * 12
        doc = int(db.rows("SELECT id FROM search_docs WHERE user_id = 'small' ORDER BY id LIMIT 1")[0][0])
        blob = own_vector(db, doc)

        assert graph_walk(db, Scope("small", "default"), blob, 5) == []  # not in the graph
        found = PgVectorQueries(db, exact_max_rows=0).nearest(Scope("small", "default"), MODEL, blob, 5, DocFilter())
        assert found[0][0] == doc and found[0][1] == pytest.approx(1.0, abs=1e-3) and len(found) == 5
        hits = mem.search("hobby 7", k=3, min_score=0)
        assert hits and hits[0].text == "small fact 7 about hobby 7"


def test_crossing_the_limit_moves_a_users_vectors_into_the_graph(
        tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with Memory(tmp_path / "mem", embedder=HashEmbedder(DIM), database_url=url, user_id="grows",
                timezone="UTC") as mem:
        mem.facts.add_many([NewFact(f"first batch fact {i} on river {i}") for i in range(LIMIT)])
        db = mem.db
        assert flags(db, "grows") == [False] * LIMIT  # at the limit: still exact
        with Memory(tmp_path / "other", embedder=HashEmbedder(DIM), database_url=url, user_id="other",
                    timezone="UTC") as other:
            other.facts.add_many([NewFact(f"someone else's fact {i}") for i in range(3)])

        mem.facts.add_many([NewFact(f"second batch fact {i} on mountain {i}") for i in range(5)])
        assert flags(db, "grows") == [True] * (LIMIT + 5)  # the rows written before moved too
        mem.facts.add("a fact written after the crossing")
        assert flags(db, "grows") == [True] * (LIMIT + 6)  # a new row goes straight into the graph
        assert flags(db, "other") == [False] * 3  # another user's rows are untouched

        scope = Scope("grows", "default")
        first = int(db.rows("SELECT id FROM search_docs WHERE user_id = 'grows' ORDER BY id LIMIT 1")[0][0])
        blob = own_vector(db, first)
        assert graph_walk(db, scope, blob, 5)[0] == first  # rows from before the crossing are in the graph
        queries = PgVectorQueries(db)
        monkeypatch.setattr(queries, "exact", no_exact)
        found = queries.nearest(scope, MODEL, blob, 5, DocFilter())
        assert found[0][0] == first and len(found) == 5
        hits = mem.search("second batch fact 3 on mountain 3", k=3, min_score=0)
        assert hits and hits[0].text == "second batch fact 3 on mountain 3"


def old_schema(url: str) -> None:
    """A store of schema version 3 (before the partial graph): user ``big`` with ``LIMIT + 10``
    vectors and ``small`` with 4, under the HNSW index of every row of the model."""
    import psycopg

    from tiermem.storage.postgres import schema

    with psycopg.connect(url, autocommit=True) as conn:
        schema._vector_extension(conn)
        with conn.transaction():
            conn.execute("CREATE TABLE tiermem_schema (version INTEGER PRIMARY KEY, at TIMESTAMPTZ NOT NULL"
                         " DEFAULT now())")
            for number, step in enumerate(schema.MIGRATIONS[:3], start=1):
                step(conn)
                conn.execute("INSERT INTO tiermem_schema (version) VALUES (%s)", (number,))
            conn.execute("INSERT INTO search_models (model, dim) VALUES (%s, %s)", (MODEL, DIM))
            conn.execute(f"CREATE INDEX search_vectors_hnsw_1 ON search_vectors USING hnsw"
                         f" ((vector::halfvec({DIM})) halfvec_cosine_ops) WHERE model_key = 1")
            for user, count in (("big", LIMIT + 10), ("small", 4)):
                conn.execute("INSERT INTO search_docs (source, ref, user_id, agent_name, tier, at, text, embed_hash)"
                             " SELECT 'fact', %s || g, %s, 'default', 'fact', '2026-01-01T00:00:00.000000Z', '',"
                             " md5(%s || g) FROM generate_series(1, %s) AS g", (user, user, user, count))
            conn.execute("INSERT INTO search_vectors (doc_id, model_key, content_hash, own, user_id, agent_name, tier,"
                         " at, vector) SELECT d.id, 1, d.embed_hash, true, d.user_id, d.agent_name, d.tier, d.at,"
                         f" CAST(CAST((SELECT array_agg(random() - 0.5) FROM generate_series(1, {DIM}) WHERE d.id > 0)"
                         " AS real[]) AS halfvec) FROM search_docs d")


def test_an_older_schema_is_migrated_to_the_partial_graph(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    old_schema(url)
    db = PgDatabase(url)
    try:
        assert db.rows("SELECT MAX(version) FROM tiermem_schema")[0][0] >= 4
        definition = db.rows("SELECT indexdef FROM pg_indexes WHERE indexname = 'search_vectors_hnsw_1'")[0][0]
        assert "indexed" in definition
        assert flags(db, "big") == [True] * (LIMIT + 10) and flags(db, "small") == [False] * 4

        first = int(db.rows("SELECT MIN(doc_id) FROM search_vectors WHERE user_id = 'big'")[0][0])
        blob = own_vector(db, first)
        assert graph_walk(db, Scope("big", "default"), blob, 3)[0] == first
        queries = PgVectorQueries(db)
        monkeypatch.setattr(queries, "exact", no_exact)
        assert queries.nearest(Scope("big", "default"), MODEL, blob, 3, DocFilter())[0][0] == first
        small = int(db.rows("SELECT MIN(doc_id) FROM search_vectors WHERE user_id = 'small'")[0][0])
        found = PgVectorQueries(db).nearest(Scope("small", "default"), MODEL, own_vector(db, small), 10, DocFilter())
        assert found[0][0] == small and len(found) == 4

        with db.transaction() as conn:
            new = int(conn.execute("INSERT INTO search_docs (source, ref, user_id, agent_name, tier, at, text,"
                                   " embed_hash) VALUES ('fact', 'new', 'big', 'default', 'fact',"
                                   " '2026-01-02T00:00:00.000000Z', '', 'n1') RETURNING id").fetchone()[0])
        PgEmbeddings(db).store(MODEL, DIM, [("n1", blob)], [("n1", new)])
        assert db.rows("SELECT indexed FROM search_vectors WHERE doc_id = ?", [new])[0][0] is True
    finally:
        db.close()
