"""``Memory.calls``: read the LLM call log of a scope, and wrap the Memory's models so they write it.

``since`` (here and in ``tiermem calls --since``) takes a datetime, an ISO-8601 date or datetime
(UTC when it names no zone), or a span back from now: ``30m``, ``24h``, ``7d``, ``2w``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from tiermem.calls.recorder import CallRecorder
from tiermem.calls.records import CALL_OUTCOMES, CALL_PURPOSES, CallRecord, CallTotals
from tiermem.calls.wrap import wrap_embedder, wrap_llm
from tiermem.clock import utc_iso
from tiermem.errors import InvalidInput
from tiermem.storage.call_log import CallFilter, CallLogRepository

if TYPE_CHECKING:
    from tiermem.clock import Clock
    from tiermem.config import Settings
    from tiermem.models.protocols import ChatModel, Embedder
    from tiermem.storage.sql import Database
    from tiermem.types import Scope

MAX_LIMIT = 100_000
_SPAN = re.compile(r"^\s*(\d{1,6})\s*([mhdw])\s*$")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class CallLog:
    """The call log of one scope (user, agent): ``list`` and ``totals`` read it; ``wrap_llm`` and
    ``wrap_embedder`` make a model write to it (``Memory`` does this for its own models)."""

    def __init__(self, db: Database, settings: Settings, clock: Clock, scope: Scope) -> None:
        self.clock = clock
        self.recorder = CallRecorder(db, settings, clock, scope)
        self._repo = CallLogRepository(db, scope)

    def list(self, purpose: str | None = None, model: str | None = None, outcome: str | None = None,
             since: str | datetime | None = None, limit: int = 100) -> list[CallRecord]:
        """Rows newest first. ``model``: ``provider:model`` or the bare model name."""
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
            raise InvalidInput(f"limit must be an integer from 1 to {MAX_LIMIT}, got {limit!r}")
        return self._repo.list(self._filter(purpose, model, outcome, since), limit)

    def totals(self, since: str | datetime | None = None) -> CallTotals:
        """Calls (rows), tokens, cost and counts by purpose and outcome, since ``since`` (all by default)."""
        return self._repo.totals(self._filter(None, None, None, since))

    def wrap_llm(self, model: ChatModel | None) -> ChatModel | None:
        return wrap_llm(model, self.recorder)

    def wrap_embedder(self, embedder: Embedder) -> Embedder:
        return wrap_embedder(embedder, self.recorder)

    # --- internals ---------------------------------------------------------------------------
    def _filter(self, purpose: str | None, model: str | None, outcome: str | None,
                since: str | datetime | None) -> CallFilter:
        if purpose is not None and purpose not in CALL_PURPOSES:
            raise InvalidInput(f"purpose must be one of {', '.join(CALL_PURPOSES)}, got {purpose!r}")
        if outcome is not None and outcome not in CALL_OUTCOMES:
            raise InvalidInput(f"outcome must be one of {', '.join(CALL_OUTCOMES)}, got {outcome!r}")
        if model is not None and (not isinstance(model, str) or not model.strip() or len(model) > 512):
            raise InvalidInput(f"model must be a model name such as 'openai:gpt-4o-mini', got {model!r}")
        return CallFilter(purpose, None if model is None else model.strip(), outcome,
                          None if since is None else utc_iso(parse_since(since, self.clock.now())))


def parse_since(value: object, now: datetime) -> datetime:
    """``value`` as an aware UTC datetime (see the module docstring); :class:`InvalidInput` otherwise,
    also for a moment the calendar cannot hold (``999999d``: before the year 1)."""
    try:
        return _moment(value, now).astimezone(UTC)
    except OverflowError as exc:
        raise InvalidInput(f"since: {value!r} reaches back before the year 1; give a later date or a shorter span"
                           ) from exc


def _moment(value: object, now: datetime) -> datetime:
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=UTC)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"since must be a datetime, an ISO date or time, or a span like 24h or 7d, got {value!r}")
    span = _SPAN.match(value)
    if span:
        return now - timedelta(**{_UNITS[span.group(2)]: int(span.group(1))})
    try:
        moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
    except ValueError as exc:
        raise InvalidInput(f"since: {value!r} is neither an ISO date or time nor a span like 24h or 7d") from exc
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)
