"""SQL of the search index: keyword queries over the FTS5 tables, item metadata, change tracking.

Every searchable item (a fact, a ``MEMORY.md`` bullet, a daily record) is one row of
``search_docs``, kept in sync with ``facts`` and ``chunks`` by triggers (see the migration).
Queries are always confined to one scope: facts of (user, agent) and the user's Markdown chunks
(``agent_name = '*'``). MATCH expressions come from :mod:`tiermem.search.fts`, which quotes every
term, so no user text reaches FTS5 as syntax.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.errors import StorageError
from tiermem.storage.chunks import SHARED_AGENT
from tiermem.storage.db import Database
from tiermem.types import Scope

#: Removal-log rows kept; older ones are pruned (an index that fell further behind reloads).
REMOVED_LOG_KEEP = 50_000
_PRUNED_KEY = "search_removed_pruned_below"


@dataclass(frozen=True)
class DocFilter:
    """Filters as SQL sees them: allowed tiers, a fact category, a time window.

    ``fact_from``/``fact_to`` bound ``created_at`` (UTC ISO strings, half-open ``[from, to)``);
    ``day_from``/``day_to`` bound a daily record's day (``YYYY-MM-DD``, inclusive). With a time
    window, items without a date (``MEMORY.md`` bullets) are left out.
    """

    tiers: tuple[str, ...] | None = None
    category: str | None = None
    fact_from: str | None = None
    fact_to: str | None = None
    day_from: str | None = None
    day_to: str | None = None

    @property
    def has_window(self) -> bool:
        return any(v is not None for v in (self.fact_from, self.fact_to, self.day_from, self.day_to))


@dataclass(frozen=True)
class DocRow:
    """What a hit needs to describe itself."""

    id: int
    source: str  # "fact" | "chunk"
    ref: str
    tier: str
    category: str | None
    at: str | None
    text: str
    path: str | None = None
    line_start: int | None = None
    line_end: int | None = None


def _scope_sql(scope: Scope, alias: str = "d") -> tuple[str, list[Any]]:
    return (f"{alias}.user_id = ? AND {alias}.agent_name IN (?, ?)",
            [scope.user_id, scope.agent_name, SHARED_AGENT])


def filter_sql(flt: DocFilter, alias: str = "d") -> tuple[str, list[Any]]:
    """``AND ...`` clauses (possibly empty) for ``flt`` over ``search_docs`` aliased ``alias``."""
    clauses: list[str] = []
    args: list[Any] = []
    if flt.tiers is not None:
        clauses.append(f"{alias}.tier IN ({', '.join('?' for _ in flt.tiers)})")
        args.extend(flt.tiers)
    if flt.category is not None:
        clauses.append(f"{alias}.tier = 'fact' AND {alias}.category = ?")
        args.append(flt.category)
    if flt.has_window:
        fact = [f"{alias}.tier = 'fact'"]
        day = [f"{alias}.tier = 'daily'"]
        for bound, op, target in ((flt.fact_from, ">=", fact), (flt.fact_to, "<", fact),
                                  (flt.day_from, ">=", day), (flt.day_to, "<=", day)):
            if bound is not None:
                target.append(f"{alias}.at {op} ?")
        clauses.append(f"(({' AND '.join(fact)}) OR ({' AND '.join(day)}))")
        args.extend(v for v in (flt.fact_from, flt.fact_to) if v is not None)
        args.extend(v for v in (flt.day_from, flt.day_to) if v is not None)
    return "".join(f" AND {c}" for c in clauses), args


class SearchRepository:
    """Keyword search and item lookups over ``search_docs`` and its FTS5 tables."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _rows(self, sql: str, args: Sequence[Any]) -> list[sqlite3.Row]:
        return self.db.rows(sql, args, "search query")

    # --- keyword search --------------------------------------------------------------------
    def match(self, table: str, expression: str, scope: Scope, flt: DocFilter, limit: int,
              context_weight: float = 0.5) -> list[tuple[int, float]]:
        """``(doc id, score)`` best first for an FTS5 MATCH; score = -bm25 (higher is better).
        In the word index, the ``context`` column counts ``context_weight`` times the text."""
        if table not in ("search_words", "search_grams"):
            raise ValueError(f"unknown FTS table {table!r}")
        where, args = _scope_sql(scope)
        extra, extra_args = filter_sql(flt)
        rank = f"bm25({table}, 1.0, {float(context_weight)!r})" if table == "search_words" else f"bm25({table})"
        sql = (f"SELECT d.id, {rank} AS rank FROM {table} JOIN search_docs d ON d.id = {table}.rowid"
               f" WHERE {table} MATCH ? AND {where}{extra} ORDER BY rank LIMIT ?")
        rows = self._rows(sql, [expression, *args, *extra_args, limit])
        return [(int(r[0]), -float(r[1])) for r in rows]

    def scan(self, needles: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> list[tuple[int, str]]:
        """Items of the scope containing any of ``needles`` (a plain ``instr`` scan, for terms too
        short for the trigram index); ``(doc id, text)`` in id order, at most ``limit``."""
        if not needles:
            return []
        where, args = _scope_sql(scope)
        extra, extra_args = filter_sql(flt)
        anyof = " OR ".join("instr(d.text, ?) > 0" for _ in needles)
        sql = f"SELECT d.id, d.text FROM search_docs d WHERE {where}{extra} AND ({anyof}) LIMIT ?"
        rows = self._rows(sql, [*args, *extra_args, *needles, limit])
        return [(int(r[0]), str(r[1])) for r in rows]

    def index_terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The terms the word index makes of each of ``texts`` (porter stems, in order), using a
        scratch FTS5 table in ``temp``: what the word index would hold for that text."""
        conn = self.db.conn
        found: list[list[str]] = [[] for _ in texts]
        if not texts:
            return found
        try:
            self._scratch_tables()
            conn.executemany("INSERT INTO temp.tiermem_query (rowid, text) VALUES (?, ?)",
                             [(i + 1, text) for i, text in enumerate(texts)])
            rows = conn.execute("SELECT doc, term FROM temp.tiermem_query_terms ORDER BY doc, offset").fetchall()
            conn.execute("DELETE FROM temp.tiermem_query")
        except sqlite3.Error as exc:
            raise StorageError(f"cannot tokenize the query: {exc}") from exc
        for doc, term in rows:
            found[int(doc) - 1].append(str(term))
        return found

    def _scratch_tables(self) -> None:
        conn = self.db.conn
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_query USING fts5(text,"
                     " tokenize='porter unicode61 remove_diacritics 2')")
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_query_terms USING"
                     " fts5vocab(temp, tiermem_query, 'instance')")

    def held_terms(self, terms: Sequence[str], doc_ids: Sequence[int]) -> dict[int, dict[str, set[str]]]:
        """Which of the word-index ``terms`` each of ``doc_ids`` holds, and in which columns
        (``"text"``, ``"context"``): ``{doc id: {term: columns}}``. The cost grows with how many
        items hold each term (its occurrences are read), so callers pass affordable terms only."""
        out: dict[int, dict[str, set[str]]] = {}
        if not terms or not doc_ids:
            return out
        conn = self.db.conn
        ids = sorted(set(doc_ids))
        try:
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_words_instance USING"
                         " fts5vocab(main, search_words, 'instance')")
            for term in dict.fromkeys(terms):
                for start in range(0, len(ids), 500):
                    part = ids[start:start + 500]
                    rows = conn.execute("SELECT doc, col FROM temp.tiermem_words_instance WHERE term = ?"
                                        f" AND doc IN ({', '.join('?' for _ in part)})", [term, *part]).fetchall()
                    for doc, col in rows:
                        out.setdefault(int(doc), {}).setdefault(term, set()).add(str(col))
        except sqlite3.Error as exc:
            raise StorageError(f"search query failed: {exc}") from exc
        return out

    def text_doc_freqs(self, terms: Sequence[str]) -> dict[str, int]:
        """How many items hold each word-index term in their own text (not only in the context
        of neighbours), all scopes."""
        found: dict[str, int] = {}
        conn = self.db.conn
        try:
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_words_columns USING"
                         " fts5vocab(main, search_words, 'col')")
            for term in dict.fromkeys(terms):
                row = conn.execute("SELECT doc FROM temp.tiermem_words_columns WHERE term = ? AND col = 'text'",
                                   (term,)).fetchone()
                found[term] = int(row[0]) if row else 0
        except sqlite3.Error as exc:
            raise StorageError(f"search query failed: {exc}") from exc
        return found

    def total(self) -> int:
        """How many items the index holds, all scopes."""
        return int(self._rows("SELECT COUNT(*) FROM search_docs", [])[0][0])

    def doc_freqs(self, table: str, terms: Sequence[str]) -> dict[str, int]:
        """How many items hold each of ``terms`` (index terms: stems or trigrams), all scopes."""
        if table not in ("search_words", "search_grams"):
            raise ValueError(f"unknown FTS table {table!r}")
        unique = list(dict.fromkeys(terms))
        found: dict[str, int] = {}
        for term in unique:
            rows = self._rows(f"SELECT doc FROM {table}_vocab WHERE term = ?", [term])
            found[term] = int(rows[0][0]) if rows else 0
        return found

    # --- items -----------------------------------------------------------------------------
    def docs(self, ids: Sequence[int]) -> dict[int, DocRow]:
        """The rows of ``ids`` that still exist (with path and lines for chunks)."""
        out: dict[int, DocRow] = {}
        for start in range(0, len(ids), 500):
            part = list(ids[start:start + 500])
            sql = ("SELECT d.id, d.source, d.ref, d.tier, d.category, d.at, d.text, c.path, c.line_start,"
                   " c.line_end FROM search_docs d LEFT JOIN chunks c ON d.source = 'chunk'"
                   " AND c.id = CAST(d.ref AS INTEGER)"
                   f" WHERE d.id IN ({', '.join('?' for _ in part)})")
            for r in self._rows(sql, part):
                out[int(r[0])] = DocRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9])
        return out

    def files_of(self, doc_ids: Sequence[int]) -> list[tuple[str, str]]:
        """The ``(user_id, path)`` of the Markdown files the chunk items ``doc_ids`` belong to."""
        found: set[tuple[str, str]] = set()
        for start in range(0, len(doc_ids), 500):
            part = list(doc_ids[start:start + 500])
            rows = self._rows(
                "SELECT DISTINCT c.user_id, c.path FROM search_docs d JOIN chunks c ON c.id = CAST(d.ref AS INTEGER)"
                f" WHERE d.source = 'chunk' AND d.id IN ({', '.join('?' for _ in part)})", part)
            found.update((str(r[0]), str(r[1])) for r in rows)
        return sorted(found)

    def file_items(self, user_id: str, path: str) -> list[tuple[int, str, str | None, str]]:
        """``(doc id, text, day, context)`` of a file's chunks in line order."""
        rows = self._rows(
            "SELECT d.id, c.text, c.day, d.context FROM chunks c JOIN search_docs d ON d.source = 'chunk'"
            " AND d.ref = CAST(c.id AS TEXT) WHERE c.user_id = ? AND c.path = ? ORDER BY c.line_start",
            [user_id, path])
        return [(int(r[0]), str(r[1]), r[2], str(r[3])) for r in rows]

    def count(self, scope: Scope) -> int:
        where, args = _scope_sql(scope)
        return int(self._rows(f"SELECT COUNT(*) FROM search_docs d WHERE {where}", args)[0][0])

    # --- change tracking -------------------------------------------------------------------
    def high_water(self) -> tuple[int, int]:
        """``(largest doc id, largest removal seq)`` ever used: cheap "did anything change?"."""
        rows = self._rows("SELECT name, seq FROM sqlite_sequence WHERE name IN ('search_docs', 'search_removed')",
                          [])
        seqs = {str(r[0]): int(r[1]) for r in rows}
        return seqs.get("search_docs", 0), seqs.get("search_removed", 0)

    def removed_since(self, user_id: str, seq: int) -> tuple[list[int], bool]:
        """Doc ids of ``user_id`` removed after ``seq``; ``False`` if the log no longer reaches back
        that far (the caller must reload)."""
        row = self.db.conn.execute("SELECT value FROM meta WHERE key = ?", (_PRUNED_KEY,)).fetchone()
        if row is not None and seq < int(row[0]):
            return [], False
        rows = self._rows("SELECT doc_id FROM search_removed WHERE seq > ? AND user_id = ?", [seq, user_id])
        return [int(r[0]) for r in rows], True

    def prune_removed_log(self, keep: int = REMOVED_LOG_KEEP) -> None:
        """Drop all but the newest ``keep`` removal-log rows (call now and then, on writes)."""
        _, top = self.high_water()
        below = top - keep
        if below <= 0:
            return
        with self.db.transaction() as conn:
            cur = conn.execute("DELETE FROM search_removed WHERE seq <= ?", (below,))
            if cur.rowcount:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value ="
                    " MAX(CAST(value AS INTEGER), CAST(excluded.value AS INTEGER))",
                    (_PRUNED_KEY, str(below)),
                )
