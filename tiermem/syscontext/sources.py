"""The built-in system-context sources: memory injection, the active plan, recent daily notes.

Each factory takes plain callables, so a source works with any store (and with test doubles);
:mod:`tiermem.syscontext.defaults` wires them to a ``Memory``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from datetime import date, timedelta

from tiermem import validate
from tiermem.syscontext.builder import ContextSource
from tiermem.tokens import count_tokens, truncate_to_tokens

PLAN_HEADING = "Current Plan:"
DAILY_HEADING = "Recent Daily Notes:"
TRUNCATION_MARK = "\n..."


def memory_source(render: Callable[[], str], epoch: Callable[[], object], name: str = "memory") -> ContextSource:
    """The memory injection text (summaries, ``Core Memory:`` from ``MEMORY.md``, facts); ``epoch``
    e.g. a change counter plus a digest of ``MEMORY.md``."""
    return ContextSource(name, "memory", render, epoch)


def plan_source(
    active_version: Callable[[], object],
    continuation: Callable[[], str | None],
    name: str = "plan",
) -> ContextSource:
    """The active plan as ``Current Plan:`` and its continuation prompt; epoch ``(id, revision)``."""

    def render() -> str:
        prompt = continuation()
        return f"{PLAN_HEADING}\n{prompt}" if prompt else ""

    return ContextSource(name, "plan", render, active_version)


def daily_source(
    read: Callable[[date], str],
    today: Callable[[], date],
    days: int = 2,
    max_tokens: int = 1000,
    stamp: Callable[[date], object] | None = None,
    name: str = "daily",
) -> ContextSource:
    """The daily files of the last ``days`` days (newest first) under ``max_tokens``.

    ``read(day)`` returns a day's Markdown ("" when there is none). The epoch is the dates plus
    ``stamp(day)`` of each when given (a cheap key that changes whenever the day's text may have,
    e.g. ``DailyJournal.stamp``: no read), else a hash of what ``read`` returns.
    """
    validate.positive_int(days, "days", 366)
    validate.positive_int(max_tokens, "max_tokens")

    def window() -> list[date]:
        last = today()
        return [last - timedelta(days=back) for back in range(days)]

    def epoch() -> object:
        dates = window()
        if stamp is not None:
            return tuple((day.isoformat(), stamp(day)) for day in dates)
        digest = hashlib.sha256()
        for day in dates:
            digest.update(day.isoformat().encode() + b"\0" + read(day).encode("utf-8") + b"\0")
        return digest.hexdigest()

    def render() -> str:
        parts = [text.strip() for text in (read(day) for day in window()) if text.strip()]
        if not parts:
            return ""
        text = DAILY_HEADING + "\n\n" + "\n\n".join(parts)
        if count_tokens(text) <= max_tokens:
            return text
        room = max(max_tokens - count_tokens(TRUNCATION_MARK), 0)
        return truncate_to_tokens(text, room) + TRUNCATION_MARK

    return ContextSource(name, "daily", render, epoch)
