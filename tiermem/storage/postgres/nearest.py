"""Nearest neighbours searched by PostgreSQL: the queries of ``Backend.vector_queries`` over the
``search_vectors`` rows (their schema and writes: :mod:`tiermem.storage.postgres.vectors`).

A query counts the scope's vector rows first (a bounded count on the B-tree ``(model_key,
user_id, agent_name)``). Up to :data:`~tiermem.storage.postgres.vectors.EXACT_MAX_ROWS` rows it
computes every distance: exact, and faster than the graph at that size (``bench/search.py
--backend postgres``). Above, it walks the HNSW graph with iterative scan (``hnsw.iterative_scan =
relaxed_order``, ``hnsw.ef_search =`` :data:`EF_SEARCH` and no sorting, set for that one statement
by ``tiermem_vector_query``); when the walk stops short of ``top`` items (``hnsw.max_scan_tuples``:
a small scope in a big table, or a narrow filter), the exact query answers instead, so a scope
always gets its ``top`` nearest. Once the process knows the model's key and dimension (read with
the first query), the count, the graph check and both queries are one statement, each query gated
by the other's outcome (an initial filter: only the branch taken runs), so a search's vector step
is one round trip.

A query walks the graph only when the scope's user is in it (the partial graph, see
:mod:`tiermem.storage.postgres.vectors`); else, whatever the count, the exact scan answers, and
the exact scan reads every row of the scope, in the graph or not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from tiermem.storage.embeddings import ItemVector
from tiermem.storage.postgres.vectors import HNSW_MAX_DIM, exact_limit, halfvec
from tiermem.storage.search import DocFilter, filter_sql, scope_sql
from tiermem.storage.sql import Database
from tiermem.types import Scope

EF_SEARCH = 100  # the graph walk's candidate list: recall@10 0.964 at 100k items (bench/README.md)
OVERFETCH = 4  # vector rows fetched per item asked for: an item may hold several (its sentences)


class PgVectorQueries:
    """Nearest neighbours by the database (see the module docstring)."""

    def __init__(self, db: Database, exact_max_rows: int | None = None, ef_search: int = EF_SEARCH) -> None:
        self.db = db
        self.exact_max_rows = exact_limit(exact_max_rows)
        self.ef_search = ef_search
        #: model -> (key, dim) as :meth:`where` last read them: a query then checks them itself
        #: (:meth:`_one_statement`) instead of reading them first.
        self._models: dict[str, tuple[int, int]] = {}

    def _rows(self, sql: str, args: Sequence[Any]) -> list[Any]:
        return self.db.rows(sql, args, "vector query")

    def nearest(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter) -> list[tuple[int, float]]:
        return self._nearest(scope, model, query, top, flt, None)[0]

    def nearest_vectors(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter,
                        also: Sequence[int]) -> tuple[list[tuple[int, float]], list[ItemVector]]:
        """:meth:`nearest` and :meth:`item_vectors` of its hits and of ``also`` in one statement
        (two when the graph walk finds fewer than ``top``): the vectors of a search's candidates
        cost no round trip of their own."""
        return self._nearest(scope, model, query, top, flt, [int(i) for i in also])

    def prefetch_nearest(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter) -> None:
        """Send :meth:`nearest_vectors`' statement (``also`` empty) ahead, when it is one statement
        (the model's key and dimension known)."""
        known = self._models.get(model)
        if known is not None and top > 0 and len(query) == 4 * known[1]:
            self.db.prefetch(*self._one_statement(scope, model, known, halfvec(query), top, flt, []))

    def _nearest(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter,
                 also: list[int] | None) -> tuple[list[tuple[int, float]], list[ItemVector]]:
        known = self._models.get(model)
        if known is not None and top > 0 and len(query) == 4 * known[1]:
            sql, args = self._one_statement(scope, model, known, halfvec(query), top, flt, also)
            found = self._found(self._rows(sql, args), also)
            if found is not None:
                return found
            self._models.pop(model, None)  # the model's row changed since: read it again
        return self._nearest_read(scope, model, query, top, flt, also)

    def _nearest_read(self, scope: Scope, model: str, query: bytes, top: int, flt: DocFilter,
                      also: list[int] | None) -> tuple[list[tuple[int, float]], list[ItemVector]]:
        """:meth:`_nearest` after :meth:`where` (the model's key and dimension, the scope's size):
        one round trip more."""
        found = self.where(scope, model, flt)
        if found is None or top <= 0 or len(query) != 4 * found[2]:
            return [], self.item_vectors(model, also) if also else []
        condition, values, dim, rows, graph = found
        vector = halfvec(query)
        if graph and dim <= HNSW_MAX_DIM and rows > self.exact_max_rows:
            hits, vectors = self._hits(*self._approximate_sql(condition, values, vector, dim, top), model, also)
            if len(hits) >= top:
                return hits, vectors
        return self._hits(*self._exact_sql(condition, values, vector, top), model, also)

    def _hits(self, sql: str, args: list[Any], model: str,
              also: list[int] | None) -> tuple[list[tuple[int, float]], list[ItemVector]]:
        """The hits of ``sql`` (``doc_id, distance``, best first) as cosines, with (``also`` not
        ``None``) every vector of ``model`` of the hits and of ``also``, in the same statement."""
        if also is None:
            return [(int(r[0]), 1.0 - float(r[1])) for r in self._rows(sql, args)], []
        tail, tail_args = _with_vectors(model, also)
        rows = self._rows(f"WITH hits AS ({sql}){tail}", [*args, *tail_args])
        return _split(rows)

    def _one_statement(self, scope: Scope, model: str, known: tuple[int, int], vector: Any, top: int,
                       flt: DocFilter, also: list[int] | None) -> tuple[str, list[Any]]:
        """:meth:`where` and the nearest query (with the vectors, as :meth:`_hits`) as one statement,
        for the model's ``known`` key and dimension: ``size`` checks them (``known``) and decides as
        :meth:`_nearest_read` does - the graph walk when the scope's user is in the graph and the
        scope holds more than ``exact_max_rows`` rows, the exact scan when it is not or the walk
        found fewer than ``top``; only the branch taken runs (its condition is an initial filter).
        A row of rank -1 says the model's row is not ``known`` any more."""
        key, dim = known
        where, values = scope_sql(scope, "v")
        extra, extra_args = filter_sql(flt, "v")
        condition, values = f"v.model_key = {int(key)} AND {where}{extra}", [*values, *extra_args]
        args: list[Any] = [model, *values, self.exact_max_rows + 1, self.exact_max_rows, scope.user_id]
        sql = (f"WITH size AS MATERIALIZED (SELECT EXISTS (SELECT 1 FROM search_models m WHERE m.key = {int(key)}"
               f" AND m.model = ? AND m.dim = {int(dim)}) AS known, (SELECT COUNT(*) FROM (SELECT 1 FROM search_vectors"
               f" v WHERE {condition} LIMIT ?) AS s) > ? AND EXISTS (SELECT 1 FROM search_vectors g WHERE g.model_key"
               f" = {int(key)} AND g.user_id = ? AND g.indexed) AS walk)")
        walked = ""  # no graph for this dimension
        if dim <= HNSW_MAX_DIM:
            walk, walk_args = self._approximate_sql(condition, values, vector, dim, top)
            sql += ", walked AS (" + walk.replace(" GROUP BY", " WHERE (SELECT known AND walk FROM size) GROUP BY", 1)
            sql += ")"
            args += walk_args
            walked = "SELECT doc_id, distance FROM walked WHERE (SELECT COUNT(*) FROM walked) >= ? UNION ALL "
        exact, exact_args = self._exact_sql(condition, values, vector, top)
        gate = " AND (SELECT COUNT(*) FROM walked) < ?" if dim <= HNSW_MAX_DIM else ""
        sql += ", exact AS (" + exact.replace(" GROUP BY", f" AND (SELECT known FROM size){gate} GROUP BY", 1) + ")"
        args += exact_args[:-1] + ([top] if gate else []) + exact_args[-1:]
        sql += f", hits AS ({walked}SELECT doc_id, distance FROM exact)"
        args += [top] if dim <= HNSW_MAX_DIM else []
        tail, tail_args = _with_vectors(model, also if also is not None else [], also is not None)
        return sql + tail + " UNION ALL SELECT -1, NULL, -1, NULL, NULL, NULL FROM size WHERE NOT known", [
            *args, *tail_args]

    @staticmethod
    def _found(rows: list[Any], also: list[int] | None
               ) -> tuple[list[tuple[int, float]], list[ItemVector]] | None:
        """:meth:`_one_statement`'s rows as :meth:`_hits` gives them; ``None`` when they say the
        model's row is not the one known."""
        hits, vectors = _split(rows)
        if hits and hits[0][0] < 0:  # the marker row (doc id and rank -1) ranks first
            return None
        return hits, vectors if also is not None else []

    def where(self, scope: Scope, model: str, flt: DocFilter) -> tuple[str, list[Any], int, int, bool] | None:
        """The condition (with its arguments) selecting the scope's vector rows of ``model`` that
        pass ``flt``, the model's dimension, how many rows that is (counted up to one past the
        exact-search limit) and whether the scope's user is in the graph; ``None`` when no vector
        of ``model`` is stored."""
        where, args = scope_sql(scope, "v")
        extra, extra_args = filter_sql(flt, "v")
        found = self._rows(f"SELECT m.key, m.dim, (SELECT COUNT(*) FROM (SELECT 1 FROM search_vectors v WHERE"
                           f" v.model_key = m.key AND {where}{extra} LIMIT ?) AS s), EXISTS (SELECT 1 FROM"
                           " search_vectors g WHERE g.model_key = m.key AND g.user_id = ? AND g.indexed)"
                           " FROM search_models m WHERE m.model = ?",
                           [*args, *extra_args, self.exact_max_rows + 1, scope.user_id, model])
        if not found:
            return None
        key, dim, rows = (int(v) for v in found[0][:3])
        self._models[model] = (key, dim)
        return f"v.model_key = {key} AND {where}{extra}", [*args, *extra_args], dim, rows, bool(found[0][3])

    def exact(self, condition: str, values: Sequence[Any], vector: Any, top: int) -> list[tuple[int, float]]:
        """Every distance of the scope (the uncast column: the HNSW index does not apply)."""
        return self._hits(*self._exact_sql(condition, values, vector, top), "", None)[0]

    def approximate(self, condition: str, values: Sequence[Any], vector: Any, dim: int,
                    top: int) -> list[tuple[int, float]]:
        """The HNSW walk: vector rows nearest first, grouped by item (of the rows in the graph)."""
        return self._hits(*self._approximate_sql(condition, values, vector, dim, top), "", None)[0]

    @staticmethod
    def _exact_sql(condition: str, values: Sequence[Any], vector: Any, top: int) -> tuple[str, list[Any]]:
        return (f"SELECT v.doc_id, MIN(v.vector <=> ?) AS distance FROM search_vectors v WHERE {condition}"
                " GROUP BY v.doc_id ORDER BY distance, v.doc_id LIMIT ?", [vector, *values, top])

    def _approximate_sql(self, condition: str, values: Sequence[Any], vector: Any, dim: int,
                         top: int) -> tuple[str, list[Any]]:
        numbered = f"{condition} AND v.indexed"
        for i in range(1, len(values) + 1):
            numbered = numbered.replace("?", f"$2[{i}]", 1)
        inner = (f"SELECT v.doc_id, (v.vector::halfvec({dim})) <=> $1::halfvec({dim}) AS distance"
                 f" FROM search_vectors v WHERE {numbered} ORDER BY distance LIMIT {int(top) * OVERFETCH}")
        return ("SELECT doc_id, MIN(distance) AS distance FROM tiermem_vector_query(?, ?, ?, ?)"
                " GROUP BY doc_id ORDER BY distance, doc_id LIMIT ?",
                [inner, vector, [str(v) for v in values], self.ef_search, top])

    def item_vectors(self, model: str, doc_ids: Sequence[int]) -> list[ItemVector]:
        if not doc_ids:
            return []
        rows = self._rows(_ITEM_VECTORS, [model, sorted({int(i) for i in doc_ids})])
        return [(int(r[0]), str(r[1]), bool(r[2]), bytes(r[3])) for r in rows]

    def prefetch_item_vectors(self, model: str, doc_ids: Sequence[int]) -> None:
        if doc_ids:
            self.db.prefetch(_ITEM_VECTORS, [model, sorted({int(i) for i in doc_ids})])


_ITEM_VECTORS = ("SELECT v.doc_id, v.tier, v.own, e.vector FROM search_models m JOIN search_vectors v"
                 " ON v.model_key = m.key JOIN embeddings e ON e.content_hash = v.content_hash AND e.model = m.model"
                 " WHERE m.model = ? AND v.doc_id = ANY(?)")


def _with_vectors(model: str, also: list[int], vectors: bool = True) -> tuple[str, list[Any]]:
    """The rest of a statement after its ``hits`` (``doc_id, distance``, best first): the hits
    numbered (``doc_id, distance, rank, NULL, NULL, NULL``) and, with ``vectors``, every vector of
    ``model`` of the hits and of ``also`` (``doc_id, NULL, NULL, tier, own, vector``)."""
    sql = (", ranked AS (SELECT doc_id, distance, row_number() OVER (ORDER BY distance, doc_id) AS n FROM hits)"
           " SELECT r.doc_id, r.distance, r.n, NULL, NULL, NULL FROM ranked r")
    if not vectors:
        return sql, []
    return (sql + " UNION ALL SELECT v.doc_id, NULL, NULL, v.tier, v.own, e.vector FROM search_models m"
            " JOIN search_vectors v ON v.model_key = m.key JOIN embeddings e ON e.content_hash = v.content_hash"
            " AND e.model = m.model WHERE m.model = ? AND v.doc_id IN (SELECT doc_id FROM hits UNION"
            " SELECT unnest(CAST(? AS BIGINT[])))", [model, also])


def _split(rows: list[Any]) -> tuple[list[tuple[int, float]], list[ItemVector]]:
    """:func:`_with_vectors`' rows as the hits (cosines, best first) and the vectors (one pass,
    each row unpacked once: a row's items by index cost a Python call each)."""
    ranked: list[tuple[int, int, float]] = []
    vectors: list[ItemVector] = []
    for doc_id, distance, rank, tier, own, blob in rows:
        if rank is None:
            vectors.append((int(doc_id), str(tier), bool(own), bytes(blob)))
        else:
            ranked.append((int(rank), int(doc_id), 1.0 - float(distance) if distance is not None else 0.0))
    ranked.sort()
    return [(doc_id, cosine) for _, doc_id, cosine in ranked], vectors


def vector_queries(db: Database) -> PgVectorQueries:
    """The ``Backend.vector_queries`` factory."""
    return PgVectorQueries(db)
