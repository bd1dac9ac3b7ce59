"""The one Markdown reader (and the record writer) of the file tiers: records with their line ranges.

**The record form** (what the Daily journal writes, :func:`render_record`): a record is ``- ``
followed by its first line; every further line of the record is written indented by two spaces
(``  `` + line), and a blank line of the record becomes an indented empty line (exactly two
spaces). So any text — blank lines, code fences, lines that start with ``- `` or ``#``, leading
and trailing spaces — survives: ``parse_records(render_record(x))[0].text == normalise_text(x)``.
Lines are what ``str.split("\\n")`` gives (never ``splitlines()``, which also splits on
``\\x0b``, ``\\x85``, ``\\u2028`` ...). :func:`normalise_text` is applied before rendering:
``\\r\\n`` and ``\\r`` become ``\\n``; control characters other than ``\\n`` and ``\\t`` (Unicode
category Cc) and lone surrogates are dropped.

**Reading** (:func:`parse_records`) also accepts hand-written Markdown (``MEMORY.md``, daily files
written before the record form, notes typed by a person):

- a record starts at a bullet: ``- `` at the start of a line gives the rest of the line verbatim;
  other bullets (``* ``, ``+ ``, up to three spaces of indentation) give their text stripped;
- while a bullet is open, a line that starts with two spaces continues it (its text is the line
  without those two spaces), and so does a *lazy* continuation line — one that is neither blank,
  a heading nor a bullet (its text is the line stripped);
- a plain paragraph a person wrote (lines not in a bullet) is a record too (``bullet`` False);
- blank lines, ``#`` ... ``######`` headings and lone bullet markers end a record; headings are
  not records, and the nearest ``## `` (or deeper) heading above a record is kept with it.

``Record.text`` is the exact text, newlines kept, one text line per file line of the record.
Consumers that want one line fold it themselves (:func:`fold`). ``MEMORY.md`` items and daily
records are both read here, and the search index cuts its chunks along the same records, so a
hit's line range lies within its record's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RECORD_MARKER = "- "
CONTINUATION = "  "
_BULLET_RE = re.compile(r"^\s{0,3}[-*+][ \t]+(.*\S)\s*$")
_EMPTY_BULLET_RE = re.compile(r"^\s{0,3}[-*+]\s*$")
_HEADING_RE = re.compile(r"^\s{0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t#]*$")
# Unicode categories Cc (U+0000-U+001F, U+007F-U+009F) but tab and newline, and Cs (lone surrogates)
_DROPPED_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")


@dataclass(frozen=True)
class Record:
    """One record; lines are 1-based and inclusive."""

    line_start: int
    line_end: int
    text: str  # the exact text (no marker, no continuation indent); one "\n"-separated line per file line
    bullet: bool
    heading: str | None = None  # the nearest "## " (or deeper) heading above, if any


def normalise_text(text: str) -> str:
    """``text`` as a record holds it: ``\\r\\n`` and ``\\r`` become ``\\n``; other control
    characters but ``\\t`` (and lone surrogates, which UTF-8 cannot store) are dropped."""
    return _DROPPED_RE.sub("", text.replace("\r\n", "\n").replace("\r", "\n"))


def render_record(text: str) -> str:
    """The record form of ``text`` (no trailing newline): ``- `` + first line, then ``  `` + each
    further line. ``text`` is normalised first (:func:`normalise_text`)."""
    first, *rest = normalise_text(text).split("\n")
    return "\n".join([RECORD_MARKER + first, *(CONTINUATION + line for line in rest)])


def _heading(line: str) -> tuple[int, str] | None:
    match = _HEADING_RE.match(line)
    if not match:
        return None
    return len(match.group(1)), (match.group(2) or "").strip()


def _lines(text: str) -> list[str]:
    """``text`` cut at ``\\n`` only; a ``\\r`` ending a line (a CRLF file edited by hand) is dropped."""
    return [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]


def parse_records(text: str, first_line: int = 1) -> list[Record]:
    """The records of ``text``; ``first_line`` is the number of its first line in the file."""
    records: list[Record] = []
    heading: str | None = None
    current: list[str] | None = None  # the open record's text lines
    start = 0
    bullet = False

    def close() -> None:
        nonlocal current
        if current is not None:
            records.append(Record(start, start + len(current) - 1, "\n".join(current), bullet, heading))
        current = None

    for number, line in enumerate(_lines(text), start=first_line):
        if current is not None and bullet and line.startswith(CONTINUATION):
            current.append(line[len(CONTINUATION):])
            continue
        if line.startswith(RECORD_MARKER):
            close()
            current, start, bullet = [line[len(RECORD_MARKER):]], number, True
            continue
        stripped = line.strip()
        found = _heading(line) if stripped.startswith("#") else None
        if not stripped or found is not None or _EMPTY_BULLET_RE.match(line):
            close()
            if found is not None:
                heading = (found[1] or None) if found[0] >= 2 else None
            continue
        match = _BULLET_RE.match(line)
        if match is not None:
            close()
            current, start, bullet = [match.group(1)], number, True
        elif current is not None:
            current.append(stripped)
        else:
            current, start, bullet = [stripped], number, False
    close()
    return records


def fold(text: str) -> str:
    """One line: runs of whitespace (newlines included) become single spaces."""
    return " ".join(text.split())
