"""The filters of a search: tier, fact category and a date range, validated once (R44).

``since``/``until`` accept a ``date``, a ``datetime`` (naive ones are read in the configured time
zone) or an ISO-8601 string of either. A date means the whole day: ``until=date(2026, 3, 14)``
includes everything of March 14. Facts are filtered by ``created_at``, daily records by their
day; ``MEMORY.md`` bullets have no date, so a date range leaves them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta, tzinfo
from typing import Any

from tiermem import validate
from tiermem.clock import utc_iso
from tiermem.errors import InvalidInput
from tiermem.search.vectors import CATEGORY_CODE, TIER_CODE, VectorFilter
from tiermem.storage.search import DocFilter

_EPOCH_DAY = date(1970, 1, 1)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class SearchFilters:
    """Validated filters. ``start``/``end`` bound fact times (``[start, end)``), ``first_day``/
    ``last_day`` bound daily records (inclusive)."""

    tiers: tuple[str, ...] | None = None
    category: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    first_day: date | None = None
    last_day: date | None = None

    def for_sql(self) -> DocFilter:
        return DocFilter(
            tiers=self.tiers,
            category=self.category,
            fact_from=utc_iso(self.start) if self.start else None,
            fact_to=utc_iso(self.end) if self.end else None,
            day_from=self.first_day.isoformat() if self.first_day else None,
            day_to=self.last_day.isoformat() if self.last_day else None,
        )

    def for_vectors(self) -> VectorFilter | None:
        if self == SearchFilters():
            return None
        return VectorFilter(
            tiers=tuple(TIER_CODE[t] for t in self.tiers) if self.tiers is not None else None,
            category=CATEGORY_CODE[self.category] if self.category is not None else None,
            fact_from=epoch_micros(self.start) if self.start else None,
            fact_to=epoch_micros(self.end) if self.end else None,
            day_from=epoch_days(self.first_day) if self.first_day else None,
            day_to=epoch_days(self.last_day) if self.last_day else None,
        )


def epoch_micros(moment: datetime) -> int:
    return (moment - _EPOCH) // timedelta(microseconds=1)


def epoch_days(day: date) -> int:
    return (day - _EPOCH_DAY).days


def _moment(value: Any, what: str, tz: tzinfo) -> date | datetime:
    if isinstance(value, str):
        text = value.strip()
        try:
            value = date.fromisoformat(text) if len(text) == 10 else datetime.fromisoformat(text)
        except ValueError as exc:
            raise InvalidInput(f"{what} {value[:40]!r} is not an ISO-8601 date or datetime") from exc
    if isinstance(value, datetime):
        return value if value.tzinfo is not None else value.replace(tzinfo=tz)
    if isinstance(value, date):
        return value
    raise InvalidInput(f"{what} must be a date, a datetime or an ISO-8601 string, got {type(value).__name__}")


def build_filters(category: Any = None, tier: Any = None, since: Any = None, until: Any = None,
                  tz: tzinfo = UTC) -> SearchFilters:
    """Validate the filter arguments of ``search``; bad ones raise :class:`InvalidInput`."""
    tiers = (validate.tier(tier),) if tier is not None else None
    if category is not None:
        validate.category(category)
        if tiers is not None and tiers != ("fact",):
            raise InvalidInput(f"category filters facts; it cannot be combined with tier={tier!r}")
        tiers = ("fact",)
    start = first_day = end = last_day = None
    if since is not None:
        lo = _moment(since, "since", tz)
        if isinstance(lo, datetime):
            start, first_day = lo, lo.astimezone(tz).date()
        else:
            start, first_day = datetime.combine(lo, time(0), tz), lo
    if until is not None:
        hi = _moment(until, "until", tz)
        if isinstance(hi, datetime):
            end, last_day = hi + timedelta(microseconds=1), hi.astimezone(tz).date()
        else:
            end, last_day = datetime.combine(hi + timedelta(days=1), time(0), tz), hi
    if start is not None and end is not None and start >= end:
        raise InvalidInput("since must not be later than until")
    return SearchFilters(tiers, category, start, end, first_day, last_day)
