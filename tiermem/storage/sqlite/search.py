"""The search index on SQLite: two FTS5 tables over ``search_docs`` (see the migration).

``search_words`` (``porter unicode61``, columns ``text`` and ``context``) answers words by stem;
``search_grams`` (``trigram``) answers 3-character grams and substrings. ``search_words`` also
indexes ``scope_key``, one token per (user, agent), so a term's document frequency is counted
within a scope (:meth:`FtsSearch.doc_freqs`). Every term reaches FTS5
as a double-quoted string (:func:`tiermem.search.fts.quote`), so no user text is FTS5 syntax.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

from tiermem.errors import StorageError
from tiermem.storage.chunks import SHARED_AGENT
from tiermem.storage.search import DfTerm, DocFilter, Ranked, SearchRepository, filter_sql, scope_sql
from tiermem.storage.sql import Database
from tiermem.types import Scope

_DF_COLUMNS = {"text": "text", "words": "{text context}", "grams": "text"}
WORD_TOKENIZER = "porter unicode61 remove_diacritics 2"  # search_words' (migration step 12)
#: The items a word search may find (its user's, of the agents its filter lets through) under this
#: share of the store are matched through their ``scope_key`` tokens (FTS5 then ranks them only);
#: more are cheaper filtered after the match.
SCOPED_MATCH_SHARE = 0.25
_SMALLS_KEPT = 10_000  # (user, agents) answers of FtsSearch._small kept per store


def scope_token(user_id: str, agent_name: str) -> str:
    """The word that the ``scope_key`` column of ``search_words`` holds for items of (user, agent):
    what the generated column ``search_docs.scope_key`` computes, ``'s' || hex(user_id) || 'x' ||
    hex(agent_name) || '0'`` (one token for ``unicode61``, and porter leaves a word ending in a
    digit alone)."""
    return f"s{user_id.encode().hex()}x{agent_name.encode().hex()}0"


def scope_tokens(scope: Scope) -> tuple[str, str]:
    """The scope's own token and that of the user's shared Markdown items."""
    return scope_token(scope.user_id, scope.agent_name), scope_token(scope.user_id, SHARED_AGENT)


def _agents(scope: Scope, flt: DocFilter) -> tuple[str, ...]:
    """The agent names whose items ``flt`` can let through: a fact is its scope's own agent's, a
    Markdown chunk (``MEMORY.md``, Daily) the user's shared one (:data:`SHARED_AGENT`)."""
    if flt.category is not None or (flt.tiers is not None and set(flt.tiers) == {"fact"}):
        return (scope.agent_name,)
    if flt.tiers is not None and "fact" not in flt.tiers:
        return (SHARED_AGENT,)
    return (scope.agent_name, SHARED_AGENT)


def quote(term: str) -> str:
    """``term`` as an FTS5 string literal: whatever it holds, FTS5 reads it as text."""
    return '"' + term.replace('"', '""') + '"'


def match_expression(terms: Sequence[str]) -> str:
    """``"a" OR "b" ...`` for FTS5 MATCH (empty when there are no terms)."""
    return " OR ".join(quote(term) for term in terms)


class FtsSearch(SearchRepository):
    """Keyword search over the FTS5 tables, plus the portable item lookups."""

    def __init__(self, db: Database) -> None:
        super().__init__(db)
        #: :meth:`_small`'s answers: (user, agents) -> (small, the store's last doc id when counted)
        self._smalls: dict[tuple[str, tuple[str, ...]], tuple[bool, int]] = {}

    def count(self, scope: Scope) -> int:
        """Items in ``scope``; in a store that holds that scope only (:meth:`only_scope`), the
        store's count, which SQLite takes from the table's pages without reading each item (a
        scope's count reads each of its index entries: 10-40 ms at 100k items)."""
        if self.only_scope(scope):
            return self.total()
        return super().count(scope)

    def match_words(self, words: Sequence[str], keys: Sequence[Sequence[str]], scope: Scope, flt: DocFilter,
                    limit: int, context_weight: float) -> Ranked:
        """Where the items the filter allows are a small part of the store
        (:data:`SCOPED_MATCH_SHARE`) the MATCH itself is confined to them through their
        ``scope_key`` tokens (weight 0 in BM25, so the scores are those of the plain match): the
        other items are never ranked."""
        expression = match_expression(words)
        agents = _agents(scope, flt)
        if expression and self._small(scope.user_id, agents):
            tokens = " OR ".join(quote(scope_token(scope.user_id, agent)) for agent in agents)
            rank = f"bm25(search_words, 1.0, {float(context_weight)!r}, 0.0)"
            expression = f"scope_key : ({tokens}) AND {{text context}} : ({expression})"
            return self._match("search_words", rank, expression, scope, flt, limit)
        rank = f"bm25(search_words, 1.0, {float(context_weight)!r})"
        return self._match("search_words", rank, expression, scope, flt, limit)

    def _small(self, user_id: str, agents: Sequence[str]) -> bool:
        """Whether the items of ``user_id`` and ``agents`` are under :data:`SCOPED_MATCH_SHARE` of
        the store's (counted no further than that share: a few index entries for a small scope, a
        quarter of the store's for a large one). The answer only picks the plan (both find the same
        items with the same scores), so it is kept until the store's ids moved by more than 1%."""
        top = self.high_water()[0]
        key = (user_id, tuple(agents))
        known = self._smalls.get(key)
        if known is not None and abs(top - known[1]) <= max(50, top // 100):
            return known[0]
        limit = int(top * SCOPED_MATCH_SHARE)
        held = self._rows("SELECT COUNT(*) FROM (SELECT 1 FROM search_docs WHERE user_id = ? AND agent_name IN"
                          f" ({', '.join('?' for _ in agents)}) LIMIT ?)", [user_id, *agents, limit])
        small = int(held[0][0]) < limit
        if len(self._smalls) > _SMALLS_KEPT:
            self._smalls.clear()
        self._smalls[key] = (small, top)
        return small

    def match_grams(self, grams: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> Ranked:
        return self._match("search_grams", "bm25(search_grams)", match_expression(grams), scope, flt, limit)

    def match_substrings(self, substrings: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> Ranked:
        # a quoted string of 3+ characters is a phrase of trigrams: a substring match
        return self._match("search_grams", "bm25(search_grams)", match_expression(substrings), scope, flt, limit)

    def _match(self, table: str, rank: str, expression: str, scope: Scope, flt: DocFilter, limit: int) -> Ranked:
        """``(doc id, score)`` best first for an FTS5 MATCH; score = -bm25 (higher is better)."""
        if not expression:
            return []
        where, args = scope_sql(scope)
        extra, extra_args = filter_sql(flt)
        sql = (f"SELECT d.id, {rank} AS rank FROM {table} JOIN search_docs d ON d.id = {table}.rowid"
               f" WHERE {table} MATCH ? AND {where}{extra} ORDER BY rank LIMIT ?")
        rows = self._rows(sql, [expression, *args, *extra_args, limit])
        return [(int(r[0]), -float(r[1])) for r in rows]

    def scan(self, needles: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> list[tuple[int, str]]:
        """A plain ``instr`` scan of the scope (the terms are too short for the trigram index), in the
        order of the scope index."""
        if not needles:
            return []
        where, args = scope_sql(scope)
        extra, extra_args = filter_sql(flt)
        anyof = " OR ".join("instr(d.text, ?) > 0" for _ in needles)
        sql = f"SELECT d.id, d.text FROM search_docs d WHERE {where}{extra} AND ({anyof}) LIMIT ?"
        rows = self._rows(sql, [*args, *extra_args, *needles, limit])
        return [(int(r[0]), str(r[1])) for r in rows]

    def index_terms(self, texts: Sequence[str]) -> list[list[str]]:
        """Porter stems, in order, using a scratch FTS5 table in ``temp``: what the word index
        would hold for each text."""
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
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_query USING fts5(text,"
                     f" tokenize='{WORD_TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_query_terms USING"
                     " fts5vocab(temp, tiermem_query, 'instance')")

    def held_terms(self, terms: Sequence[str], doc_ids: Sequence[int]) -> dict[int, dict[str, set[str]]]:
        """The items' text and context tokenized again by the word index's tokenizer, in a scratch
        FTS5 table: the cost grows with the items asked, not with how often the store holds each
        term (the index's own occurrence lists of a common term span every scope)."""
        out: dict[int, dict[str, set[str]]] = {}
        if not terms or not doc_ids:
            return out
        conn = self.db.conn
        ids = sorted(set(doc_ids))
        wanted = list(dict.fromkeys(terms))
        try:
            conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_held USING fts5(text, context,"
                         f" tokenize='{WORD_TOKENIZER}', detail=column)")
            conn.execute("CREATE VIRTUAL TABLE IF NOT EXISTS temp.tiermem_held_terms USING"
                         " fts5vocab(temp, tiermem_held, 'instance')")
            for start in range(0, len(ids), 500):
                part = ids[start:start + 500]
                conn.execute("INSERT INTO temp.tiermem_held (rowid, text, context) SELECT id, text, context"
                             f" FROM search_docs WHERE id IN ({', '.join('?' for _ in part)})", part)
            rows = conn.execute("SELECT doc, col, term FROM temp.tiermem_held_terms"
                                f" WHERE term IN ({', '.join('?' for _ in wanted)})", wanted).fetchall()
            conn.execute("DELETE FROM temp.tiermem_held")
        except sqlite3.Error as exc:
            raise StorageError(f"search query failed: {exc}") from exc
        for doc, col, term in rows:
            out.setdefault(int(doc), {}).setdefault(str(term), set()).add(str(col))
        return out

    def doc_freqs(self, index: str, terms: Sequence[DfTerm], scope: Scope | None,
                  cap: int | None = None) -> list[int]:
        """Counted in the scope: words through the ``scope_key`` column of the word index (one
        token per scope, so FTS5 intersects two posting lists), grams by checking each matching
        item's scope; with ``scope`` ``None``, in the whole store. Counting stops past ``cap``."""
        if index not in _DF_COLUMNS:
            raise ValueError(f"unknown index {index!r}")
        limit = -1 if cap is None else cap + 1
        if index == "grams":
            sql = "SELECT COUNT(*) FROM (SELECT rowid FROM search_grams WHERE search_grams MATCH ? LIMIT ?)"
            args: list[object] = []
            if scope is not None:
                # CROSS JOIN: the gram's matches first, each then checked for the scope (never a
                # MATCH per item of the scope)
                where, args = scope_sql(scope)
                sql = ("SELECT COUNT(*) FROM (SELECT 1 FROM search_grams g CROSS JOIN search_docs d"
                       f" ON d.id = g.rowid WHERE search_grams MATCH ? AND {where} LIMIT ?)")
            return [int(self._rows(sql, [quote(t.text), *args, limit])[0][0]) for t in terms]
        scoped = ""
        if scope is not None:
            scoped = "scope_key : (" + " OR ".join(quote(token) for token in scope_tokens(scope)) + ") AND "
        sql = "SELECT COUNT(*) FROM (SELECT rowid FROM search_words WHERE search_words MATCH ? LIMIT ?)"
        return [int(self._rows(sql, [f"{scoped}{_DF_COLUMNS[index]} : {quote(t.text)}", limit])[0][0])
                if t.keys else 0 for t in terms]

    def high_water(self) -> tuple[int, int]:
        """From ``sqlite_sequence`` (AUTOINCREMENT never reuses an id): one cheap read."""
        rows = self._rows("SELECT name, seq FROM sqlite_sequence WHERE name IN ('search_docs', 'search_removed')",
                          [])
        seqs = {str(r[0]): int(r[1]) for r in rows}
        return seqs.get("search_docs", 0), seqs.get("search_removed", 0)


def search_index(db: Database) -> FtsSearch:
    """The ``Backend.search_index`` factory."""
    return FtsSearch(db)
