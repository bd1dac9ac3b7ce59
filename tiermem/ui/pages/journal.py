"""The Journal page: the Daily records, day by day, newest day first, grouped by their blocks.

Records are read with the one Markdown reader (:func:`tiermem.tiers.markdown.parse_records`), so
a block heading (``## Session Notes (09:30)``) and each record show as the journal holds them.
``days`` days per page; ``before`` pages back.
"""

from __future__ import annotations

from datetime import date

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.tiers.markdown import Record, parse_records
from tiermem.ui.html import View, esc

DEFAULT_DAYS = 7


def _int(view: View, name: str, default: int) -> int:
    return max(1, validate.whole_number(view.param(name, str(default)), name))


def render(view: View) -> str:
    journal = view.mem.daily
    days = sorted(journal.days(), reverse=True)
    before = view.param("before")
    if before:
        try:
            limit = date.fromisoformat(before)
        except ValueError as exc:
            raise InvalidInput("before must be a date (YYYY-MM-DD)") from exc
        days = [d for d in days if d < limit]
    count = _int(view, "days", DEFAULT_DAYS)
    shown, rest = days[:count], days[count:]
    if not shown:
        return "<p class=muted>No daily records" + (" before that day." if before else " yet.") + "</p>"
    zone = view.mem.settings.timezone or "local"
    parts = [f"<p class=muted>{len(journal.days())} days with a file; time zone {esc(zone)}</p>"]
    parts += [_day(day, journal.read(day)) for day in shown]
    if rest:
        parts.append(f'<p><a href="{view.url("/journal", before=shown[-1].isoformat(), days=count)}">older days</a>'
                     "</p>")
    return "".join(parts)


def _day(day: date, text: str) -> str:
    records = parse_records(text)
    body: list[str] = []
    heading: str | None = None
    for record in records:
        if record.heading != heading:
            heading = record.heading
            body.append(f"<div class=heading>{esc(heading or '')}</div>")
        body.append(_record(record))
    return (f'<section class=day id="d{day.isoformat()}"><h2>{day:%A} {day.isoformat()} '
            f'<span class=muted>{len(records)} records</span></h2>{"".join(body)}</section>')


def _record(record: Record) -> str:
    return f'<div class=record>{esc(record.text).replace(chr(10), "<br>")}</div>'
