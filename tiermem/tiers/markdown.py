"""The one Markdown reader of the file tiers: records with their line ranges.

A *record* is a ``- `` (or ``* ``/``+ ``) bullet together with the lines that continue it (lines
that are neither blank, a heading nor a new bullet), or a plain paragraph a person wrote. Headings
(``#`` ... ``######``) are not records; the nearest ``## `` heading above a record is kept with it.
``MEMORY.md`` items and daily records are both read with :func:`parse_records`, and the search
index cuts its chunks along the same records, so a hit's line range is the record's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_BULLET_RE = re.compile(r"^\s{0,3}[-*+][ \t]+(.*\S)\s*$")
_EMPTY_BULLET_RE = re.compile(r"^\s{0,3}[-*+]\s*$")
_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")


@dataclass(frozen=True)
class Record:
    """One record; lines are 1-based and inclusive."""

    line_start: int
    line_end: int
    text: str  # the bullet's text (no marker), continuation lines joined with single spaces
    bullet: bool
    heading: str | None = None  # the nearest "## " (or deeper) heading above, if any


def _heading(line: str) -> tuple[int, str] | None:
    match = _HEADING_RE.match(line)
    if not match:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


def parse_records(text: str, first_line: int = 1) -> list[Record]:
    """The records of ``text``; ``first_line`` is the number of its first line in the file."""
    records: list[Record] = []
    heading: str | None = None
    current: list[str] = []
    start = end = 0
    bullet = False

    def close() -> None:
        nonlocal current
        if current:
            records.append(Record(start, end, " ".join(current), bullet, heading))
        current = []

    for number, line in enumerate(text.splitlines(), start=first_line):
        stripped = line.strip()
        found = _heading(line) if stripped.startswith("#") else None
        if not stripped or found is not None or _EMPTY_BULLET_RE.match(line):
            close()
            if found is not None and found[0] >= 2:
                heading = found[1] or None
            elif found is not None:
                heading = None
            continue
        match = _BULLET_RE.match(line)
        if match is not None:
            close()
            current, start, end, bullet = [" ".join(match.group(1).split())], number, number, True
            continue
        if current:
            current.append(" ".join(stripped.split()))
            end = number
            continue
        current, start, end, bullet = [" ".join(stripped.split())], number, number, False
    close()
    return records


def fold(text: str) -> str:
    """One line: runs of whitespace (newlines included) become single spaces."""
    return " ".join(text.split())
