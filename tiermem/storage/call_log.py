"""SQL of the LLM call log (table ``call_log``, SQLite step 15 / PostgreSQL step 7): one text for
both backends. The rows are written by :class:`tiermem.calls.recorder.CallRecorder` and read
through :class:`tiermem.calls.log.CallLog`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tiermem.calls.records import CallRecord, CallTotals
from tiermem.storage.sql import ROWS, Database, Row
from tiermem.types import Scope

_COLUMNS = ("id, at, purpose, provider, model, prompt_tokens, completion_tokens, tokens_counted, latency_ms,"
            " outcome, attempt, error, cost, prompt, completion")


@dataclass(frozen=True)
class CallFilter:
    """Which rows a read wants (``None``: any). ``model`` matches ``provider:model`` or the bare model."""

    purpose: str | None = None
    model: str | None = None
    outcome: str | None = None
    since: str | None = None  # utc_iso; rows at or after it

    def where(self, scope: Scope) -> tuple[str, list[Any]]:
        parts, args = ["user_id = ?", "agent_name = ?"], [scope.user_id, scope.agent_name]
        if self.purpose is not None:
            parts.append("purpose = ?")
            args.append(self.purpose)
        if self.model is not None:
            parts.append("(provider || ':' || model = ? OR model = ?)")
            args += [self.model, self.model]
        if self.outcome is not None:
            parts.append("outcome = ?")
            args.append(self.outcome)
        if self.since is not None:
            parts.append("at >= ?")
            args.append(self.since)
        return " AND ".join(parts), args


def _record(row: Row) -> CallRecord:
    cost = row["cost"]
    return CallRecord(int(row["id"]), str(row["at"]), str(row["purpose"]), str(row["provider"]), str(row["model"]),
                      int(row["prompt_tokens"]), int(row["completion_tokens"]), bool(row["tokens_counted"]),
                      float(row["latency_ms"]), str(row["outcome"]), int(row["attempt"]), row["error"],
                      None if cost is None else float(cost), row["prompt"], row["completion"])


class CallLogRepository:
    """Rows of one scope (user, agent) of the call log."""

    def __init__(self, db: Database, scope: Scope) -> None:
        self.db = db
        self.scope = scope

    def insert(self, calls: Sequence[CallRecord]) -> list[int]:
        """Insert ``calls`` (their ``id`` unused: the database gives one) in one transaction; their
        ids, in order."""
        ids: list[int] = []
        with self.db.transaction(ROWS) as conn:
            for c in calls:
                row = conn.execute(
                    "INSERT INTO call_log (at, user_id, agent_name, purpose, provider, model, prompt_tokens,"
                    " completion_tokens, tokens_counted, latency_ms, outcome, attempt, error, cost, prompt, completion)"
                    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (c.at, self.scope.user_id, self.scope.agent_name, c.purpose, c.provider, c.model, c.prompt_tokens,
                     c.completion_tokens, int(c.tokens_counted), c.latency_ms, c.outcome, c.attempt, c.error, c.cost,
                     c.prompt, c.completion)).fetchone()
                ids.append(int(row[0]))
        return ids

    def set_outcome(self, row_id: int, outcome: str, error: str | None) -> None:
        with self.db.transaction(ROWS) as conn:
            conn.execute("UPDATE call_log SET outcome = ?, error = ? WHERE id = ?", (outcome, error, row_id))

    def prune(self, before: str) -> int:
        """Delete the rows (of every scope) written before ``before``; how many."""
        with self.db.transaction(ROWS) as conn:
            return int(conn.execute("DELETE FROM call_log WHERE at < ?", (before,)).rowcount or 0)

    def list(self, where: CallFilter, limit: int) -> list[CallRecord]:
        """Newest first."""
        sql, args = where.where(self.scope)
        rows = self.db.rows(f"SELECT {_COLUMNS} FROM call_log WHERE {sql} ORDER BY at DESC, id DESC LIMIT ?",
                            [*args, limit], "reading the call log")
        return [_record(r) for r in rows]

    def totals(self, where: CallFilter) -> CallTotals:
        sql, args = where.where(self.scope)
        rows = self.db.rows(
            "SELECT purpose, outcome, COUNT(*) AS n, SUM(prompt_tokens) AS p, SUM(completion_tokens) AS c,"
            f" SUM(cost) AS cost, COUNT(cost) AS priced FROM call_log WHERE {sql} GROUP BY purpose, outcome",
            args, "summing the call log")
        by_purpose: dict[str, int] = {}
        by_outcome: dict[str, int] = {}
        prompt = completion = priced = 0
        cost = 0.0
        for r in rows:
            n = int(r["n"])
            by_purpose[str(r["purpose"])] = by_purpose.get(str(r["purpose"]), 0) + n
            by_outcome[str(r["outcome"])] = by_outcome.get(str(r["outcome"]), 0) + n
            prompt += int(r["p"] or 0)
            completion += int(r["c"] or 0)
            priced += int(r["priced"] or 0)
            cost += float(r["cost"] or 0.0)
        return CallTotals(sum(by_outcome.values()), prompt, completion, cost if priced else None,
                          dict(sorted(by_purpose.items())), dict(sorted(by_outcome.items())))
