"""The Journal page: the Daily records, day by day, newest day first, grouped by their blocks.

Records are read with the one Markdown reader (:func:`tiermem.tiers.markdown.parse_records`), so
a block heading (``## Session Notes (09:30)``) and each record show as the journal holds them.
``days`` days per page; ``before`` pages back. A page holds at most :data:`PAGE_RECORDS` records:
a day with more (or the day the page's share runs out in) shows its first ones and a link to the
rest, which is the day on its own page (``day``), :data:`PAGE_RECORDS` records at a time from
``start``.
"""

from __future__ import annotations

from datetime import date, timedelta

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.tiers.markdown import Record, parse_records
from tiermem.ui.html import View, esc

DEFAULT_DAYS = 7
PAGE_RECORDS = 500


def _int(view: View, name: str, default: int) -> int:
    return max(1, validate.whole_number(view.param(name, str(default)), name))


def _date(view: View, name: str) -> date:
    try:
        return date.fromisoformat(view.param(name))
    except ValueError as exc:
        raise InvalidInput(f"{name} must be a date (YYYY-MM-DD)") from exc


def render(view: View) -> str:
    journal = view.mem.daily
    if view.param("day"):
        return _one_day(view, _date(view, "day"))
    days = sorted(journal.days(), reverse=True)
    before = view.param("before")
    if before:
        limit = _date(view, "before")
        days = [d for d in days if d < limit]
    count = _int(view, "days", DEFAULT_DAYS)
    sections: list[str] = []
    budget = PAGE_RECORDS
    for day in days[:count]:
        if budget == 0:
            break
        records = parse_records(journal.read(day))
        sections.append(_day(view, day, records, 0, budget))
        budget -= min(budget, len(records))
    if not sections:
        return "<p class=muted>No daily records" + (" before that day." if before else " yet.") + "</p>"
    zone = view.mem.settings.timezone or "local"
    parts = [f"<p class=muted>{len(journal.days())} days with a file; time zone {esc(zone)}</p>", *sections]
    if len(days) > len(sections):
        last = days[len(sections) - 1]
        parts.append(f'<p><a href="{view.url("/journal", before=last.isoformat(), days=count)}">older days</a>'
                     "</p>")
    return "".join(parts)


def _one_day(view: View, day: date) -> str:
    """One day's records from ``start``, :data:`PAGE_RECORDS` of them, with links on both sides."""
    records = parse_records(view.mem.daily.read(day))
    start = validate.whole_number(view.param("start", "0"), "start")
    if records and start >= len(records):
        raise InvalidInput(f"start must be below {len(records)}, the records of {day.isoformat()}")
    after = (day + timedelta(days=1)).isoformat() if day < date.max else None
    links = [f'<a href="{view.url("/journal", before=after)}">the journal from {day.isoformat()} on</a>']
    if start:
        links.append(f'<a href="{view.url("/journal", day=day.isoformat(), start=max(0, start - PAGE_RECORDS))}">'
                     "earlier records</a>")
    return "<p>" + " · ".join(links) + "</p>" + _day(view, day, records, start, PAGE_RECORDS)


def _day(view: View, day: date, records: list[Record], start: int, limit: int) -> str:
    """The section of ``day``: its records from ``start``, at most ``limit``, and a link to the next ones."""
    shown = records[start:start + limit]
    body: list[str] = []
    heading: str | None = None
    for record in shown:
        if record.heading != heading:
            heading = record.heading
            body.append(f"<div class=heading>{esc(heading or '')}</div>")
        body.append(_record(record))
    end = start + len(shown)
    count = (f"{len(records)} records" if start == 0 and end == len(records)
             else f"records {start + 1}-{end} of {len(records)}")
    more = (f'<p><a href="{view.url("/journal", day=day.isoformat(), start=end)}">later records of this day</a></p>'
            if end < len(records) else "")
    return (f'<section class=day id="d{day.isoformat()}"><h2>{day:%A} {day.isoformat()} '
            f'<span class=muted>{count}</span></h2>{"".join(body)}{more}</section>')


def _record(record: Record) -> str:
    return f'<div class=record>{esc(record.text).replace(chr(10), "<br>")}</div>'
