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
            fact_from=_iso(self.start) if self.start else None,
            fact_to=_iso(self.end) if self.end else None,
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


def _iso(moment: datetime) -> str:
    """``moment`` as the store writes times (``2026-03-14T10:00:00.000000Z``), compared as text in
    SQL; unlike ``strftime("%Y")``, ``isoformat`` pads years before 1000 to four digits."""
    return moment.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


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


def _lower_bound(value: Any, tz: tzinfo) -> tuple[datetime | None, date]:
    """``since`` as (first moment, first day); a moment before the first representable time in UTC
    (``0001-01-01`` in a zone east of UTC) bounds nothing."""
    lo = _moment(value, "since", tz)
    try:
        if isinstance(lo, datetime):
            return lo.astimezone(UTC), lo.astimezone(tz).date()
        return datetime.combine(lo, time(0), tz).astimezone(UTC), lo
    except OverflowError:
        if lo.year <= 1:
            return None, date.min
        raise InvalidInput(f"since {value!r} is beyond the last representable time (9999-12-31)") from None


def _upper_bound(value: Any, tz: tzinfo) -> tuple[datetime | None, date]:
    """``until`` as (first moment after it, last day); ``until`` at the end of the representable
    range (``9999-12-31``) bounds nothing."""
    hi = _moment(value, "until", tz)
    try:
        if isinstance(hi, datetime):
            return (hi + timedelta(microseconds=1)).astimezone(UTC), hi.astimezone(tz).date()
        return datetime.combine(hi + timedelta(days=1), time(0), tz).astimezone(UTC), hi
    except OverflowError:
        if hi.year >= 9999:
            return None, date.max
        raise InvalidInput(f"until {value!r} is before the first representable time (0001-01-01)") from None


def build_filters(category: Any = None, tier: Any = None, since: Any = None, until: Any = None,
                  tz: tzinfo = UTC) -> SearchFilters:
    """Validate the filter arguments of ``search``; bad ones raise :class:`InvalidInput`. Dates at
    the ends of the calendar work: ``until="9999-12-31"`` and ``since="0001-01-01"`` bound nothing."""
    tiers = (validate.tier(tier),) if tier is not None else None
    if category is not None:
        validate.category(category)
        if tiers is not None and tiers != ("fact",):
            raise InvalidInput(f"category filters facts; it cannot be combined with tier={tier!r}")
        tiers = ("fact",)
    start = end = None
    first_day = last_day = None
    if since is not None:
        start, first_day = _lower_bound(since, tz)
    if until is not None:
        end, last_day = _upper_bound(until, tz)
    if first_day is not None and last_day is not None and first_day > last_day:
        raise InvalidInput("since must not be later than until")
    if start is not None and end is not None and start >= end:
        raise InvalidInput("since must not be later than until")
    if first_day == date.min:
        first_day = None
    if last_day == date.max:
        last_day = None
    return SearchFilters(tiers, category, start, end, first_day, last_day)
