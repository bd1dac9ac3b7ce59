"""Conversation-thread support: a journal record is judged with the records around it.

In a journal of a conversation the words of a question are often in one record and its answer in
the next: "Caroline: What do you do to destress?" then "Melanie: Running, it clears my head."
A search for "How does Melanie destress?" scores the question well and the answer poorly, though
the answer is what was asked for. So, for the order of the hits only:

``support = reply_weight * score(record before, if it asks a question)
+ next_weight * score(record after, if it is another speaker's reply)``, and
``order = 1 - (1 - score) * (1 - support)``: the support is more evidence, combined with the
record's own as the score's two pieces are (a noisy-OR, :mod:`tiermem.search.evidence`), so it
moves a weak record more than a strong one

where "before" and "after" are the daily records on the lines right before and after it in the
same file (no blank line or heading between: the same session of the conversation), a record
"asks a question" when its text holds a ``?``, and the record after is a reply when both carry
speaker labels (``Caroline: ...``) that differ. The records next to the candidates join the
candidates, each with its own evidence score. ``SearchHit.score`` stays the record's own evidence
(:mod:`tiermem.search.evidence`) and the floor applies to it, so a reply the floor would reject
is still not shown; the support only moves hits up or down among themselves, like recency decay.

A hit that ranks above a hit with a higher score because of that support says so:
:func:`mark_lifted` sets ``SearchHit.lifted_by_thread``, and the CLI, the demo and the viewer show
:data:`LIFTED_MARK` on it with :data:`LIFTED_LEGEND` under the list.

Measured on LoCoMo (bench/README.md, issue 16): the reply support (0.1) raised R@5 by about 0.02
on both the development and the held-out split; a neighbour bonus without the question condition
lowered both. Weights: ``search_reply_support`` and ``search_next_support``.

Portable: one SQL text over ``chunks`` and ``search_docs`` for both backends, the rest is Python
over rows, so SQLite and PostgreSQL order alike.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from tiermem.search.parts import label_of
from tiermem.storage.search import DocRow
from tiermem.storage.sql import Database
from tiermem.types import Scope, SearchHit

MAX_FILES = 200  # distinct journal files one search reads neighbours from (bounds the query)
SEEKS_PER_QUERY = 100  # records whose neighbours one query looks up
#: The mark of a lifted hit, and the one line under a list of hits that explains it.
LIFTED_MARK = "\u2191"
LIFTED_LEGEND = (f"{LIFTED_MARK} ranked above higher scores: the question before it (or the reply after it) "
                 "in the conversation matches too (docs/search.md, Order)")


@dataclass(frozen=True)
class Neighbours:
    """The records right before and after a record in its file (doc ids), if any."""

    before: int | None = None
    after: int | None = None


@dataclass(frozen=True)
class FileLines:
    """Where some daily records start and end in their journal files: ``(path, line) -> doc id``;
    ``paths``, the files they were read from."""

    starts: Mapping[tuple[str, int], int]
    ends: Mapping[tuple[str, int], int]
    paths: frozenset[str] = frozenset()

    @classmethod
    def read(cls, db: Database, scope: Scope, rows: Mapping[int, DocRow]) -> FileLines:
        """The daily records among ``rows`` and the records right before and after each in its
        file (those of the first :data:`MAX_FILES` files): a few index seeks per record, where
        reading their whole files would read every record of each."""
        daily = [row for row in rows.values() if row.tier == "daily" and row.path]
        paths = list(dict.fromkeys(row.path for row in daily if row.path))[:MAX_FILES]
        known = cls({}, {}, frozenset(paths)).adding(daily)
        found: list[Any] = []
        asked = [row for row in daily if row.path in known.paths and row.line_start is not None
                 and row.line_end is not None]
        for start in range(0, len(asked), SEEKS_PER_QUERY):
            part = asked[start:start + SEEKS_PER_QUERY]
            found += db.rows(
                "SELECT d.id, c.path, c.line_start, c.line_end FROM chunks c JOIN search_docs d"
                " ON d.source = 'chunk' AND d.ref = CAST(c.id AS TEXT) WHERE c.tier = 'daily' AND ("
                + " OR ".join("(c.user_id = ? AND c.path = ? AND c.line_end = ?)"
                              " OR (c.user_id = ? AND c.path = ? AND c.line_start = ?)" for _ in part) + ")",
                [value for row in part for value in (scope.user_id, row.path, int(row.line_start or 0) - 1,
                                                     scope.user_id, row.path, int(row.line_end or 0) + 1)],
                "search neighbours")
        return replace(known, starts={**known.starts, **{(str(r[1]), int(r[2])): int(r[0]) for r in found}},
                       ends={**known.ends, **{(str(r[1]), int(r[3])): int(r[0]) for r in found}})

    def adding(self, rows: Sequence[DocRow] | Mapping[int, DocRow]) -> FileLines:
        """These lines and those of the daily records among ``rows`` in the files read."""
        more = [row for row in (rows.values() if isinstance(rows, Mapping) else rows)
                if row.tier == "daily" and row.path in self.paths and row.line_start is not None
                and row.line_end is not None]
        return replace(self, starts={**self.starts, **{(str(r.path), int(r.line_start or 0)): r.id for r in more}},
                       ends={**self.ends, **{(str(r.path), int(r.line_end or 0)): r.id for r in more}})

    def around(self, rows: Mapping[int, DocRow]) -> dict[int, Neighbours]:
        """For each daily record among ``rows``, its neighbours on the adjacent lines of its file."""
        out: dict[int, Neighbours] = {}
        for row in rows.values():
            if row.tier == "daily" and row.path and row.line_start is not None and row.line_end is not None:
                out[row.id] = Neighbours(self.ends.get((row.path, row.line_start - 1)),
                                         self.starts.get((row.path, row.line_end + 1)))
        return out


def asks(text: str) -> bool:
    """Whether a record asks something (its reply then answers it)."""
    return "?" in text


def replies(text: str, after: str) -> bool:
    """Whether the record ``after`` is someone else's reply to ``text``: both carry a speaker label
    (``Name: ...``, :func:`tiermem.search.parts.label_of`) and the labels differ."""
    mine, theirs = label_of(text).strip().casefold(), label_of(after).strip().casefold()
    return bool(mine and theirs and mine != theirs)


def supported(order: Mapping[int, float], evidence: Mapping[int, float], rows: Mapping[int, DocRow],
              around: Mapping[int, Neighbours], reply_weight: float, next_weight: float) -> dict[int, float]:
    """``order`` with each record's support from its neighbours added (see the module docstring);
    a neighbour without an evidence score adds nothing."""
    out = dict(order)
    for doc_id, near in around.items():
        if doc_id not in out:
            continue
        bonus = 0.0
        if near.before is not None and near.before in rows and asks(rows[near.before].text):
            bonus += reply_weight * evidence.get(near.before, 0.0)
        if near.after is not None and near.after in rows and replies(rows[doc_id].text, rows[near.after].text):
            bonus += next_weight * evidence.get(near.after, 0.0)
        if bonus > 0:  # more evidence, combined as the score's own pieces are (a noisy-OR)
            out[doc_id] = 1.0 - (1.0 - out[doc_id]) * (1.0 - min(bonus, 1.0))
    return out


def extra_ids(around: Mapping[int, Neighbours], known: Sequence[int] | set[int]) -> list[int]:
    """The neighbours not among ``known`` (they join the candidates)."""
    seen = set(known)
    out: dict[int, None] = {}
    for near in around.values():
        for doc_id in (near.before, near.after):
            if doc_id is not None and doc_id not in seen:
                out[doc_id] = None
    return list(out)


def support_of(order: Mapping[int, float], lifted: Mapping[int, float]) -> dict[int, float]:
    """What :func:`supported` added to each record's order (only the records it raised)."""
    return {doc_id: value - order[doc_id] for doc_id, value in lifted.items()
            if doc_id in order and value > order[doc_id]}


def mark_lifted(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """``hits`` (in their order), each that had thread support (``extra["thread"]``) and ranks
    above a hit with a higher score marked ``lifted_by_thread`` - higher as scores are shown, to
    three decimals: a mark must be visible in the list it explains."""
    out = list(hits)
    best_below = float("-inf")
    for index in range(len(out) - 1, -1, -1):
        hit = out[index]
        if hit.extra.get("thread", 0.0) > 0 and round(best_below, 3) > round(hit.score, 3):  # as shown
            out[index] = replace(hit, lifted_by_thread=True)
        best_below = max(best_below, hit.score)
    return out
