"""The search index as the search engine sees it, whichever database holds it.

Every searchable item (a fact, a ``MEMORY.md`` bullet, a daily record) is one row of
``search_docs``, kept in sync with ``facts`` and ``chunks`` by triggers. Queries are always
confined to one scope: facts of (user, agent) and the user's Markdown chunks (``agent_name = '*'``).

:class:`SearchIndex` is what the engine needs: keyword lists, index terms and their document
frequencies, the items themselves and a cheap "did anything change?". The keyword index itself
differs per backend (FTS5 on SQLite: :mod:`tiermem.storage.sqlite.search`; ``tsvector`` columns
with GIN indexes on PostgreSQL: :mod:`tiermem.storage.postgres.search`); :class:`SearchRepository`
holds the portable part both share. Terms always reach the database as quoted literals or
parameters, so no user text is ever read as query syntax.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import TYPE_CHECKING, Any, Protocol

from tiermem.storage.chunks import SHARED_AGENT
from tiermem.storage.sql import PLAN_EACH_RUN, ROWS
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

#: Removal-log rows kept; older ones are pruned (an index that fell further behind reloads).
REMOVED_LOG_KEEP = 50_000
PRUNED_KEY = "search_removed_pruned_below"

#: Scripts written without spaces between words: a "word" there is a whole phrase, so the word
#: index cannot find its parts; grams can (:mod:`tiermem.search.fts` splits queries by them).
UNSEGMENTED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0E00, 0x0EFF),  # Thai, Lao
    (0x1000, 0x109F),  # Myanmar
    (0x1100, 0x11FF),  # Hangul Jamo
    (0x1780, 0x17FF),  # Khmer
    (0x2E80, 0x2FDF),  # CJK radicals
    (0x3040, 0x30FF),  # Hiragana, Katakana
    (0x3100, 0x31FF),  # Bopomofo, Hangul compatibility Jamo, Katakana extensions
    (0x3400, 0x4DBF),  # CJK extension A
    (0x4E00, 0x9FFF),  # CJK unified ideographs
    (0xA960, 0xA97F),  # Hangul Jamo extended A
    (0xAC00, 0xD7FF),  # Hangul syllables (+ Jamo extended B)
    (0xF900, 0xFAFF),  # CJK compatibility ideographs
    (0xFF66, 0xFF9F),  # half-width Katakana
    (0x20000, 0x3FFFF),  # CJK extensions B and later
)


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
class DfTerm:
    """A term whose document frequency is asked: a query word (or gram) as the query has it, and
    its index terms (:meth:`SearchIndex.index_terms`; the gram itself for a gram). An item holds
    a word when it holds all of its index terms."""

    text: str
    keys: tuple[str, ...]


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


def scope_sql(scope: Scope, alias: str = "d") -> tuple[str, list[Any]]:
    """The condition (and its arguments) confining rows aliased ``alias`` to ``scope``."""
    return (f"{alias}.user_id = ? AND {alias}.agent_name IN (?, ?)",
            [scope.user_id, scope.agent_name, SHARED_AGENT])


def filter_sql(flt: DocFilter, alias: str = "d") -> tuple[str, list[Any]]:
    """``AND ...`` clauses (possibly empty) for ``flt`` over rows with the columns of
    ``search_docs`` (``tier``, ``category``, ``at``) aliased ``alias``."""
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


@dataclass(frozen=True)
class FileWindow:
    """Consecutive items of one Markdown file, in line order (:meth:`SearchIndex.file_windows`): each
    ``(doc id, text, day, keyword context)``; ``asked``: the positions in ``items`` of the items asked about."""

    user_id: str
    path: str
    items: list[tuple[int, str, str | None, str]]
    asked: list[int]


Ranked = list[tuple[int, float]]  # (doc id, score) best first

#: What a process compares to learn whether a scope's items changed (:meth:`SearchRepository.version`):
#: ``(items of the scope and of its user's shared ones added or removed, the removal log's prune mark)``.
ScopeVersion = tuple[int, int]


class SearchIndex(Protocol):
    """The search index of one store (one implementation per backend)."""

    # --- keyword lists: (doc id, score) best first, at most ``limit`` --------------------------
    def match_words(self, words: Sequence[str], keys: Sequence[Sequence[str]], scope: Scope, flt: DocFilter,
                    limit: int, context_weight: float) -> Ranked:
        """Items holding any of ``words`` (each with its index terms ``keys``, from
        :meth:`index_terms`), ranked by relevance; the ``context`` column counts
        ``context_weight`` times the text."""
        ...

    def match_grams(self, grams: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> Ranked:
        """Items holding any of the 3-character ``grams`` (runs of unsegmented scripts)."""
        ...

    def match_substrings(self, substrings: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> Ranked:
        """Items whose text holds any of ``substrings`` (casefolded, 3+ characters) anywhere."""
        ...

    def scan(self, needles: Sequence[str], scope: Scope, flt: DocFilter, limit: int) -> list[tuple[int, str]]:
        """``(doc id, text)`` of items holding any of ``needles`` (one- or two-character runs of
        unsegmented scripts), in id order, at most ``limit``."""
        ...

    # --- terms and their statistics ---------------------------------------------------------
    def index_terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The terms the word index makes of each of ``texts``, in order."""
        ...

    def held_terms(self, terms: Sequence[str], doc_ids: Sequence[int]) -> dict[int, dict[str, set[str]]]:
        """Which of the word-index ``terms`` each of ``doc_ids`` holds, and in which columns
        (``"text"``, ``"context"``): ``{doc id: {term: columns}}``."""
        ...

    def doc_freqs(self, index: str, terms: Sequence[DfTerm], scope: Scope | None,
                  cap: int | None = None) -> list[int]:
        """How many items of ``scope`` hold each of ``terms`` (per scope: one user's data never
        moves another's statistics). ``index``: ``"text"`` (a query word in the item's own
        text), ``"words"`` (in its text or its keyword context) or ``"grams"`` (a casefolded
        3-character gram). With ``cap`` the index may stop counting past it: a count above ``cap``
        then means "more than ``cap``". ``scope`` ``None``: the whole store, for a store that holds
        one scope only (:meth:`only_scope`), which counts the same items faster."""
        ...

    def word_counts(self, terms: Sequence[DfTerm], scope: Scope | None, cap: int) -> list[tuple[int, int | None]]:
        """For each of ``terms``: its :meth:`doc_freqs` ``"words"`` count (stopping past ``cap``)
        and, when that is at most ``cap``, its exact ``"text"`` count (else ``None``): the counts
        a query word costs the keyword budget and, when it is afforded, weighs it by."""
        ...

    # --- reads sent ahead (:meth:`Database.prefetch`: in a read batch they travel with the next read)
    def prefetch_terms(self, texts: Sequence[str]) -> None:
        """Send :meth:`index_terms`' read of ``texts`` ahead, where it is a read."""
        ...

    def prefetch_doc_freqs(self, index: str, terms: Sequence[DfTerm], scope: Scope | None) -> None:
        """Send :meth:`doc_freqs`' read (no cap) ahead, where it is one read."""
        ...

    def prefetch_start(self, scope: Scope) -> None:
        """Send ahead the reads a search of ``scope`` starts with: :meth:`version` and :meth:`only_scope`."""
        ...

    def only_scope(self, scope: Scope) -> bool: ...

    # --- items and change tracking (portable: :class:`SearchRepository`) --------------------
    def total(self) -> int: ...

    def count(self, scope: Scope) -> int: ...

    def docs(self, ids: Sequence[int]) -> dict[int, DocRow]: ...

    def docs_holding(self, ids: Sequence[int],
                     terms: Sequence[str]) -> tuple[dict[int, DocRow], dict[int, dict[str, set[str]]]]:
        """:meth:`docs` and :meth:`held_terms` of ``terms`` for them, read together where the
        backend can (a search's candidates and what their keyword coverage needs)."""
        ...

    def file_windows(self, doc_ids: Sequence[int], before: int, after: int) -> list[FileWindow]:
        """The items around the chunk items ``doc_ids`` in their Markdown files (:class:`FileWindow`)."""
        ...

    def high_water(self) -> tuple[int, int]: ...

    def version(self, scope: Scope) -> ScopeVersion: ...

    def removed_since(self, user_id: str, seq: int) -> tuple[list[int], bool]: ...

    def prune_removed_log(self, keep: int = REMOVED_LOG_KEEP) -> None: ...


def open_search_index(db: Database) -> SearchIndex:
    """The search index of ``db``, as its backend implements it."""
    return db.parts.search_index(db)


_CHUNK_ID = "CASE WHEN d.source = 'chunk' THEN CAST(d.ref AS BIGINT) END"  # never casts a fact id
_VERSION = ("SELECT (SELECT COALESCE(SUM(value), 0) FROM change_epochs WHERE user_id = ? AND agent_name IN (?, ?)"
            " AND topic = 'search'), (SELECT value FROM meta WHERE key = ?)")
_ONLY_SCOPE = ("SELECT (SELECT MIN(user_id) FROM search_docs), (SELECT MAX(user_id) FROM search_docs),"
               " (SELECT MIN(agent_name) FROM search_docs WHERE user_id = ?),"
               " (SELECT MAX(agent_name) FROM search_docs WHERE user_id = ?),"
               " (SELECT MIN(agent_name) FROM search_docs WHERE user_id = ? AND agent_name > ?)")


def _only_args(scope: Scope) -> list[Any]:
    """:data:`_ONLY_SCOPE`'s arguments for ``scope``."""
    return [scope.user_id, scope.user_id, scope.user_id, min(scope.agent_name, SHARED_AGENT)]

#: :meth:`SearchRepository.file_windows`: per file of the asked chunk items (``{among}``), the first and
#: last line of the window (the line ``OFFSET ?`` + 1 items before the first asked item and after the
#: last, else past the file's start or end: lines count from 1), by seeks of ``chunks_file_start``;
#: then the items between. A plain ``SELECT`` (no ``WITH``: the retry and the pipeline take it for a
#: read); planned at each run (:data:`PLAN_EACH_RUN`: a plan made while the tables were small would
#: scan them); the files' bounds under a ``LIMIT`` (one row per file: PostgreSQL would otherwise fold
#: them into the join and seek them again for every chunk of the file).
_FILE_WINDOWS = (
    PLAN_EACH_RUN + "SELECT s.user_id, s.path, d.id, c.text, c.day, d.context FROM (SELECT a.user_id, a.path,"
    " COALESCE((SELECT b.line_start FROM chunks b WHERE b.user_id = a.user_id AND b.path = a.path"
    " AND b.line_start < a.lo ORDER BY b.line_start DESC LIMIT 1 OFFSET ?), 0) AS first_line,"
    " COALESCE((SELECT b.line_start FROM chunks b WHERE b.user_id = a.user_id AND b.path = a.path"
    " AND b.line_start > a.hi ORDER BY b.line_start LIMIT 1 OFFSET ?), 2147483647) AS last_line"
    " FROM (SELECT c.user_id, c.path, MIN(c.line_start) AS lo, MAX(c.line_start) AS hi"
    f" FROM search_docs d JOIN chunks c ON c.id = {_CHUNK_ID} WHERE {{among}} GROUP BY c.user_id, c.path) a"
    " LIMIT ?) s JOIN chunks c ON c.user_id = s.user_id AND c.path = s.path"
    " AND c.line_start BETWEEN s.first_line AND s.last_line"
    " JOIN search_docs d ON d.source = 'chunk' AND d.ref = CAST(c.id AS TEXT)"
    " ORDER BY s.user_id, s.path, c.line_start"
)


class SearchRepository:
    """The portable part of :class:`SearchIndex`: items, counts and the removal log (one SQL text
    for both backends). Backends subclass it with their keyword index."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def _rows(self, sql: str, args: Sequence[Any]) -> list[Any]:
        return self.db.rows(sql, args, "search query")

    def prefetch_terms(self, texts: Sequence[str]) -> None:
        """:meth:`SearchIndex.prefetch_terms`: the backend's keyword index (a subclass) may."""

    def prefetch_doc_freqs(self, index: str, terms: Sequence[DfTerm], scope: Scope | None) -> None:
        """:meth:`SearchIndex.prefetch_doc_freqs`: the backend's keyword index (a subclass) may."""

    def total(self) -> int:
        """How many items the index holds, all scopes."""
        return int(self._rows("SELECT COUNT(*) FROM search_docs", [])[0][0])

    def count(self, scope: Scope) -> int:
        where, args = scope_sql(scope)
        return int(self._rows(f"SELECT COUNT(*) FROM search_docs d WHERE {where}", args)[0][0])

    def word_counts(self, terms: Sequence[DfTerm], scope: Scope | None, cap: int) -> list[tuple[int, int | None]]:
        """:meth:`SearchIndex.word_counts` by two :meth:`doc_freqs` calls (the text counted only
        for the words within ``cap``)."""
        words = self.doc_freqs("words", terms, scope, cap)
        within = [term for term, count in zip(terms, words, strict=True) if count <= cap]
        text = dict(zip((t.text for t in within), self.doc_freqs("text", within, scope) if within else [],
                        strict=True))
        return [(count, text.get(term.text)) for term, count in zip(terms, words, strict=True)]

    def doc_freqs(self, index: str, terms: Sequence[DfTerm], scope: Scope | None,
                  cap: int | None = None) -> list[int]:
        """:meth:`SearchIndex.doc_freqs`: the backend's keyword index (a subclass) counts."""
        raise NotImplementedError

    def held_terms(self, terms: Sequence[str], doc_ids: Sequence[int]) -> dict[int, dict[str, set[str]]]:
        """:meth:`SearchIndex.held_terms`: the backend's keyword index (a subclass) answers."""
        raise NotImplementedError

    def docs_holding(self, ids: Sequence[int],
                     terms: Sequence[str]) -> tuple[dict[int, DocRow], dict[int, dict[str, set[str]]]]:
        """:meth:`SearchIndex.docs_holding` as two reads."""
        rows = self.docs(ids)
        return rows, self.held_terms(terms, list(rows))

    def only_scope(self, scope: Scope) -> bool:
        """Whether every item of the store is in ``scope`` (then the store's document frequencies
        are the scope's): smallest and largest values read from the scope index, which both
        backends answer with a few index seeks whatever the store's size or plan statistics."""
        low, high = sorted((scope.agent_name, SHARED_AGENT))
        users_low, users_high, agents_low, agents_high, between = self._rows(_ONLY_SCOPE, _only_args(scope))[0]
        if users_low is None:
            return True  # an empty store
        return (users_low == users_high == scope.user_id and agents_low in (low, high)
                and agents_high in (low, high) and between in (None, high))

    def docs(self, ids: Sequence[int]) -> dict[int, DocRow]:
        """The rows of ``ids`` that still exist (with path and lines for chunks)."""
        return {row.id: row for row, _ in self._doc_rows(ids)}

    def _doc_rows(self, ids: Sequence[int], also: str = "") -> list[tuple[DocRow, tuple[Any, ...]]]:
        """:meth:`docs`, each row with the values of the columns ``also`` (``, expr, ...`` over ``d``)."""
        out: list[tuple[DocRow, tuple[Any, ...]]] = []
        for start in range(0, len(ids), 500):
            part = [int(i) for i in ids[start:start + 500]]
            among, args = self.db.parts.ids_in("d.id", part)
            sql = ("SELECT d.id, d.source, d.ref, d.tier, d.category, d.at, d.text, c.path, c.line_start,"
                   f" c.line_end{also} FROM search_docs d LEFT JOIN chunks c ON c.id = {_CHUNK_ID} WHERE {among}")
            out.extend((DocRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9]), tuple(r[10:]))
                       for r in self._rows(sql, args))
        return out

    def file_windows(self, doc_ids: Sequence[int], before: int, after: int) -> list[FileWindow]:
        """Per Markdown file of the chunk items ``doc_ids``: its items from ``before`` items before the
        first of them (or the file's start) to ``after`` items after the last (or its end), every item
        between included (at least one each side where the file has one), so an append reads a few
        rows however long the file grew. One statement per 500 ids, read through the
        ``chunks_file_start`` index; a file with asked items in two of them comes as two windows,
        each with its own ``asked`` (they may overlap)."""
        windows: list[FileWindow] = []
        for start in range(0, len(doc_ids), 500):
            part = [int(i) for i in doc_ids[start:start + 500]]
            among, args = self.db.parts.ids_in("d.id", part)
            rows = self._rows(_FILE_WINDOWS.format(among=among),
                              [max(before - 1, 0), max(after - 1, 0), *args, len(part)])
            asked = set(part)
            for (user_id, path), group in groupby(rows, key=lambda r: (str(r[0]), str(r[1]))):
                items = [(int(r[2]), str(r[3]), r[4], str(r[5])) for r in group]
                windows.append(FileWindow(user_id, path, items, [i for i, it in enumerate(items) if it[0] in asked]))
        return windows

    # --- change tracking -------------------------------------------------------------------
    def high_water(self) -> tuple[int, int]:
        """``(largest doc id, largest removal seq)``: cheap "did anything change?". Ids only grow,
        and one writer at a time commits them in order (:meth:`Database.transaction`)."""
        docs, removed, pruned = self._rows(
            "SELECT (SELECT COALESCE(MAX(id), 0) FROM search_docs), (SELECT COALESCE(MAX(seq), 0) FROM search_removed),"
            " (SELECT value FROM meta WHERE key = ?)", [PRUNED_KEY])[0]
        return int(docs), max(int(removed), int(pruned or 0))

    def version(self, scope: Scope) -> ScopeVersion:
        """The scope's :data:`ScopeVersion`: two primary-key reads. The count moves with every item
        of the scope (or of its user's shared chunks) added or removed, in the writing transaction
        (triggers: ``change_epochs``, topic ``search``), and with nothing else, so a process that
        reads an unchanged version has nothing of the scope to catch up with, whatever other scopes
        wrote; the prune mark moves when the removal log was cut (a purge cuts it whole, and resets
        the user's counts)."""
        changes, pruned = self._rows(_VERSION, [scope.user_id, scope.agent_name, SHARED_AGENT, PRUNED_KEY])[0]
        return int(changes), int(pruned or 0)

    def prefetch_start(self, scope: Scope) -> None:
        """Send :meth:`version`'s and :meth:`only_scope`'s reads ahead (:meth:`Database.prefetch`)."""
        self.db.prefetch(_VERSION, [scope.user_id, scope.agent_name, SHARED_AGENT, PRUNED_KEY])
        self.db.prefetch(_ONLY_SCOPE, _only_args(scope))

    def _pruned_below(self) -> int:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", [PRUNED_KEY])
        return int(rows[0][0]) if rows else 0

    def removed_since(self, user_id: str, seq: int) -> tuple[list[int], bool]:
        """Doc ids of ``user_id`` removed after ``seq``; ``False`` if the log no longer reaches back
        that far (the caller must reload). The prune mark is read after the log: a prune that
        another writer committed between the two would otherwise pass for a complete log."""
        rows = self._rows("SELECT doc_id FROM search_removed WHERE seq > ? AND user_id = ?", [seq, user_id])
        if seq < self._pruned_below():  # only grows, with the rows it dropped, in one transaction
            return [], False
        return [int(r[0]) for r in rows], True

    def prune_removed_log(self, keep: int = REMOVED_LOG_KEEP) -> None:
        """Drop all but the newest ``keep`` removal-log rows (call now and then, on writes)."""
        _, top = self.high_water()
        below = top - keep
        if below <= 0:
            return
        with self.db.transaction(ROWS) as conn:  # the mark only grows (CASE)
            cur = conn.execute("DELETE FROM search_removed WHERE seq <= ?", (below,))
            if cur.rowcount:
                conn.execute(
                    "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = CASE"
                    " WHEN CAST(meta.value AS BIGINT) > CAST(excluded.value AS BIGINT) THEN meta.value"
                    " ELSE excluded.value END",
                    (PRUNED_KEY, str(below)),
                )
