"""Time as a seam: everything that needs "now" asks a :class:`Clock`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """Source of the current time; ``now()`` returns an aware datetime."""

    def now(self) -> datetime: ...


class SystemClock:
    """The real clock (aware UTC)."""

    def now(self) -> datetime:
        return datetime.now(UTC)


def utc_iso(moment: datetime) -> str:
    """ISO-8601 in UTC with a trailing ``Z`` and microseconds, e.g. ``2026-03-14T10:00:00.000000Z``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_utc(text: str) -> datetime:
    """Parse what :func:`utc_iso` wrote (or any ISO-8601 string) into an aware UTC datetime."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
