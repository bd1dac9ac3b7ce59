"""PostgreSQL's own search machinery (issue 15): the gram and word columns, and vectors searched by
the database - a small scope exactly, a big one through the HNSW graph, both complete.

The rest of search runs on both backends in the other ``test_search_*`` modules."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.facts.store import NewFact  # noqa: E402
from tiermem.storage.postgres.nearest import PgVectorQueries  # noqa: E402
from tiermem.storage.postgres.vectors import halfvec  # noqa: E402
from tiermem.storage.search import DocFilter  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402
from tiermem.types import Scope  # noqa: E402

DIM = 16
SMALL = Scope("small", "default")
BIG = Scope("big", "default")


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


def open_memory(root: Path, url: str, user: str = "small", **settings: object) -> Memory:
    return Memory(root, embedder=HashEmbedder(DIM), database_url=url, user_id=user, timezone="UTC", **settings)


def add_other_scope(mem: Memory, rows: int, links: int = 2) -> int:
    """``rows`` items of user ``big`` with random vectors of the store's model, written straight into
    the tables (seconds, where embedding them would take minutes); the model's HNSW index is
    rebuilt over them with ``links`` links a node (2: the smallest graph pgvector allows, whose
    walks are as poor as walks get). Returns the model's key."""
    key = int(mem.db.rows("SELECT key FROM search_models")[0][0])
    with mem.db.transaction() as conn:
        conn.execute(f"DROP INDEX search_vectors_hnsw_{key}")
        conn.execute("INSERT INTO search_docs (source, ref, user_id, agent_name, tier, at, text, embed_hash)"
                     " SELECT 'fact', 'bulk' || g, 'big', 'default', 'fact', '2026-01-01T00:00:00.000000Z', '',"
                     " md5(g::text) FROM generate_series(1, ?) AS g", (rows,))
        conn.execute("INSERT INTO search_vectors (doc_id, model_key, content_hash, own, user_id, agent_name, tier, at,"
                     " indexed, vector) SELECT d.id, ?, d.embed_hash, true, d.user_id, d.agent_name, d.tier, d.at,"
                     " true,"
                     " CAST(CAST((SELECT array_agg(random() - 0.5) FROM generate_series(1, ?) WHERE d.id > 0)"
                     " AS real[]) AS halfvec) FROM search_docs d WHERE d.ref LIKE 'bulk%'", (key, DIM))
        conn.execute(f"CREATE INDEX search_vectors_hnsw_{key} ON search_vectors USING hnsw"
                     f" ((vector::halfvec({DIM})) halfvec_cosine_ops) WITH (m = {links}, ef_construction = {4 * links})"
                     f" WHERE model_key = {key} AND indexed")
    mem.db.conn.execute("ANALYZE search_vectors")
    return key


def exact_cosines(mem: Memory, scope: Scope, query: np.ndarray) -> dict[int, float]:
    """Every item of the scope with its cosine to ``query``, computed here from the halfvec rows."""
    rows = mem.db.rows("SELECT doc_id, CAST(CAST(vector AS vector) AS real[]) FROM search_vectors"
                       " WHERE user_id = ? AND agent_name = ?", [scope.user_id, scope.agent_name])
    matrix = np.array([r[1] for r in rows], np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    cosines = matrix @ (query / np.linalg.norm(query))
    return {int(r[0]): float(c) for r, c in zip(rows, cosines, strict=True)}


def exact_top(mem: Memory, scope: Scope, query: np.ndarray, k: int) -> list[int]:
    """The scope's ``k`` nearest items by cosine."""
    cosines = exact_cosines(mem, scope, query)
    return sorted(cosines, key=lambda doc: -cosines[doc])[:k]


def assert_exact_nearest(found: list[int], cosines: dict[int, float], k: int) -> None:
    """``found`` is the ``k`` nearest, best first: its cosines are the ``k`` best ones in order. Items
    whose cosines differ by less than the server's float arithmetic from ours may come in either order."""
    best = sorted(cosines.values(), reverse=True)[:k]
    assert len(found) == k == len(set(found))
    assert [cosines[doc] for doc in found] == pytest.approx(best, abs=1e-4)


def test_a_small_scope_among_100k_rows_of_other_scopes_gets_its_exact_nearest(
        tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_memory(tmp_path / "mem", url, search_keyword_weight=0.0) as mem:
        mem.facts.add_many([NewFact(f"small scope fact {i} about topic {i % 7} and colour {i % 5}") for i in range(50)])
        add_other_scope(mem, 100_000)
        other = mem.db.rows("SELECT CAST(CAST(vector AS vector) AS real[]) FROM search_vectors WHERE user_id = 'big'"
                            " LIMIT 1")[0][0]
        query = np.array(other, np.float32)  # far from the small scope, in the middle of the big one
        blob = (query / np.linalg.norm(query)).astype("<f4").tobytes()
        cosines = exact_cosines(mem, SMALL, query)

        queries = PgVectorQueries(mem.db)
        assert_exact_nearest([doc for doc, _ in queries.nearest(SMALL, "hash-16", blob, 10, DocFilter())], cosines, 10)
        assert len(queries.nearest(SMALL, "hash-16", blob, 50, DocFilter())) == 50

        graph_first = PgVectorQueries(mem.db, exact_max_rows=0)  # the graph walk whatever the scope's size
        condition = "v.model_key = 1 AND v.user_id = ? AND v.agent_name IN (?, ?)"
        walked = graph_first.approximate(condition, ["small", "default", "*"], halfvec(blob), DIM, 50)
        assert len(walked) < 50  # the walk gives up (hnsw.max_scan_tuples) long before it has them all
        walked_then_exact = graph_first.nearest(SMALL, "hash-16", blob, 50, DocFilter())
        assert_exact_nearest([doc for doc, _ in walked_then_exact], cosines, 50)

        hits = mem.search("topic 3 colour 2", k=10, min_score=0)  # the engine end to end: this scope only
        assert len(hits) == 10 and all(hit.text.startswith("small scope fact") for hit in hits)


def test_a_big_scope_is_answered_by_the_graph(tmp_path: Path, url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with open_memory(tmp_path / "mem", url) as mem:
        mem.facts.add("a fact that registers the model")
        add_other_scope(mem, 20_000, links=6)
        row = mem.db.rows("SELECT CAST(CAST(vector AS vector) AS real[]) FROM search_vectors WHERE user_id = 'big'"
                          " ORDER BY doc_id LIMIT 1")[0][0]
        query = np.array(row, np.float32) / np.linalg.norm(row)
        queries = PgVectorQueries(mem.db)

        def no_exact(*args: object) -> list[tuple[int, float]]:
            raise AssertionError("a scope of 20,000 items is walked in the graph")

        monkeypatch.setattr(queries, "exact", no_exact)
        found = queries.nearest(BIG, "hash-16", query.astype("<f4").tobytes(), 10, DocFilter())
        truth = exact_top(mem, BIG, query, 10)
        assert found[0][0] == truth[0] and found[0][1] == pytest.approx(1.0, abs=1e-3)
        assert len(found) == 10 and len({doc for doc, _ in found} & set(truth)) >= 8


def test_a_narrow_filter_in_a_big_scope_falls_back_to_the_exact_scan(tmp_path: Path, url: str) -> None:
    with open_memory(tmp_path / "mem", url, user="big") as mem:
        goals = [mem.facts.add(f"goal number {i}: learn instrument {i}", category="goal") for i in range(3)]
        add_other_scope(mem, 20_000)
        query = mem._search.indexer.embed_query("learn instrument").astype("<f4").tobytes()
        found = PgVectorQueries(mem.db).nearest(BIG, "hash-16", query, 5, DocFilter(category="goal"))
        assert sorted(doc for doc, _ in found) == sorted(
            int(r[0]) for r in mem.db.rows("SELECT id FROM search_docs WHERE category = 'goal'"))
        assert len(found) == len(goals) == 3


def test_the_gram_column_holds_cjk_characters_pairs_and_every_word_trigram(tmp_path: Path, url: str) -> None:
    with open_memory(tmp_path / "mem", url) as mem:
        mem.facts.add("我喜欢养蜜蜂 and WordPress.org")
        grams = mem.db.rows("SELECT tsvector_to_array(grams) FROM search_docs")[0][0]
        assert {"蜜", "蜜蜂", "养蜜蜂", "and", "wor", "ord", "org"} <= set(grams)
        assert not any(" " in g or "." in g for g in grams)  # windows never cross a space or punctuation
        words = mem.db.rows("SELECT tsvector_to_array(words) FROM search_docs")[0][0]
        assert {"wordpress", "org"} <= set(words)  # the dot splits as in the query parser


def test_vectors_go_with_their_item_and_with_their_cache_entry(tmp_path: Path, url: str) -> None:
    with open_memory(tmp_path / "mem", url) as mem:
        kept = mem.facts.add("The user sails on the lake every Sunday. The boat is blue.")
        gone = mem.facts.add("The user keeps bees")
        assert kept is not None and gone is not None
        own, parts = mem.db.rows("SELECT COUNT(*) FILTER (WHERE own), COUNT(*) FILTER (WHERE NOT own)"
                                 " FROM search_vectors")[0]
        assert (own, parts) == (2, 2)  # one own vector each, two sentences of the longer fact
        mem.facts.delete(gone.id)
        assert mem.db.rows("SELECT COUNT(*) FROM search_vectors")[0][0] == 3
        with mem.db.transaction() as conn:  # what a purge does to the cache of a purged text
            conn.execute("DELETE FROM embeddings WHERE content_hash = (SELECT embed_hash FROM search_docs)")
        assert mem.db.rows("SELECT COUNT(*) FROM search_vectors WHERE own")[0][0] == 0


def test_terms_reach_tsquery_as_quoted_lexemes() -> None:
    from tiermem.storage.postgres.search import all_of, any_of, lexeme

    assert lexeme("it's") == "'it''s'" and lexeme("a\\b") == "'a\\\\b'"
    assert any_of(["bee", "honey", "bee"], "AC") == "'bee':AC | 'honey':AC"
    assert all_of(["wor", "ord"]) == "('wor' & 'ord')"


def test_quotes_and_backslashes_in_indexed_text_are_found(tmp_path: Path, url: str) -> None:
    with open_memory(tmp_path / "mem", url, search_vector_weight=0.0) as mem:
        fact = mem.facts.add("Ms O'Brien keeps a C:\\bees\\hive folder and a ‘honey’ jar")
        assert fact is not None
        for query in ("O'Brien", "C:\\bees", "‘honey’", "'bees':* & !hive"):
            assert [h.ref for h in mem.search(query, min_score=0)] == [fact.id], query


def _graph_index(mem: Memory, model: str) -> bool:
    found = mem.db.rows("SELECT to_regclass('search_vectors_hnsw_' || key) IS NOT NULL FROM search_models"
                        " WHERE model = ?", (model,), "test")
    return bool(found and found[0][0])


def _rows_of(mem: Memory, model: str) -> int:
    return int(mem.db.rows("SELECT COUNT(*) FROM search_vectors v JOIN search_models m ON m.key = v.model_key"
                           " WHERE m.model = ?", (model,), "test")[0][0])


def test_a_models_key_is_found_by_its_name_first_seen_switched_and_dropped_by_another_store(
        tmp_path: Path, url: str) -> None:
    """The vector write finds the model's key by its name in each statement: a model first seen is
    registered with its graph index; another model gets its own; a model whose row another store
    dropped (``reindex --drop-other-models``) while this one had it registered is made again, with
    its graph index, at this store's next write, and its rows land under the new key."""
    with open_memory(tmp_path / "a", url) as mem, \
            Memory(tmp_path / "b", embedder=HashEmbedder(8), database_url=url, user_id="small",
                   timezone="UTC") as other:
        first, second = mem._search.indexer.model, other._search.indexer.model
        assert first != second
        mem.facts.add("the first model's fact")
        assert _graph_index(mem, first) and _rows_of(mem, first) > 0
        other.facts.add("the second model's fact")
        assert _graph_index(mem, second) and _rows_of(mem, second) > 0
        other._search.indexer.vectors.drop_models_except(second)
        assert _rows_of(mem, first) == 0 and not _graph_index(mem, first)
        mem.facts.add("a fact written after the drop")
        assert _graph_index(mem, first)
        assert _rows_of(mem, first) == 1  # this write's item (the earlier ones lost their vectors with the drop)
