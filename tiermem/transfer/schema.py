"""Checks of an export's rows before anything is written: each field's type and shape.

A failed check is one :class:`~tiermem.errors.InvalidInput` that names the section, the row
(0-based, as it stands in the file) and the field, e.g.
``export section 'facts', row 3, field 'confidence': expected a number, got str``.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
from collections.abc import Callable, Mapping
from datetime import date
from typing import Any

from tiermem import validate
from tiermem.clock import parse_utc
from tiermem.errors import InvalidInput

#: A field check: ``None`` when the value is acceptable, else what is wrong with it.
Check = Callable[[Any], "str | None"]
SCALARS = (str, int, float, type(None))
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")
_DAY_RE = re.compile(r"^\d{4}-\d\d-\d\d$")


def where(section: str, row: int | None = None, field: str | None = None) -> str:
    """``export section 'facts', row 3, field 'id'`` (as much of it as is known)."""
    text = f"export section {section!r}"
    if row is not None:
        text += f", row {row}"
    if field is not None:
        text += f", field {field!r}"
    return text


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _unicode(value: str) -> str | None:
    """What is wrong with a string no database or file can store (lone surrogates)."""
    try:
        validate.unicode_text(value, "the text")
    except InvalidInput:
        return "holds lone surrogates (text that is not valid Unicode)"
    return None


def text(nullable: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        return _unicode(value) if isinstance(value, str) else f"expected a string, got {_kind(value)}"

    return check


def _validated(check: Callable[[Any], Any], nullable: bool = False) -> Check:
    """A field check made of a :mod:`tiermem.validate` function (its message becomes the problem)."""

    def field_check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        try:
            check(value)
        except InvalidInput as exc:
            return str(exc)
        return None

    return field_check


#: The text of a fact (what ``facts.add`` accepts).
content = _validated(validate.content)
#: A fact, plan or thread id: printable, at most 256 characters.
identifier = _validated(lambda value: validate.identifier(value, "the id"))


def integer(value: Any) -> str | None:
    """An integer SQLite can hold (64 bits, signed)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {_kind(value)}"
    if not -(2**63) <= value < 2**63:
        return f"{value} does not fit in 64 bits"
    return None


def count(value: Any) -> str | None:
    """A non-negative integer (a row id, a number of attempts, a flag)."""
    problem = integer(value)
    return problem if problem is not None or value >= 0 else f"expected a number >= 0, got {value}"


def number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"expected a finite number, got {_kind(value)}"
    try:
        finite = math.isfinite(value)
    except OverflowError:  # an int too large for a float
        finite = False
    return None if finite else f"expected a finite number, got {value!r:.40}"


def name(value: Any) -> str | None:
    """A user id or agent name (used in file names)."""
    try:
        validate.name(value, "the name")
    except InvalidInput as exc:
        return str(exc)
    return None


def timestamp(value: Any) -> str | None:
    """A time as the store writes them, in UTC: ``2026-03-14T10:00:00.000000Z`` (the store
    compares and sorts these as text, so no other spelling of the same time is accepted)."""
    if not isinstance(value, str):
        return f"expected an ISO-8601 time, got {_kind(value)}"
    if _TIMESTAMP_RE.match(value) is None:
        return f"{value[:40]!r} is not a UTC time as tiermem writes them (2026-03-14T10:00:00.000000Z)"
    try:
        parse_utc(value)
    except (ValueError, OverflowError):
        return f"{value[:40]!r} is not a date and time that exists"
    return None if value >= "1000" else f"{value!r} is before the year 1000"


def day(value: Any) -> str | None:
    """A calendar day, ``YYYY-MM-DD``."""
    if not isinstance(value, str):
        return f"expected a date (YYYY-MM-DD), got {_kind(value)}"
    if _DAY_RE.match(value) is None:
        return f"{value[:40]!r} is not a date (YYYY-MM-DD)"
    try:
        date.fromisoformat(value)
    except ValueError:
        return f"{value[:40]!r} is not a date that exists"
    return None


def sha256(value: Any) -> str | None:
    """A SHA-256 digest in lowercase hex (64 characters)."""
    if not isinstance(value, str):
        return f"expected a SHA-256 in hex, got {_kind(value)}"
    if len(value) != 64 or value.strip("0123456789abcdef"):
        return f"{value[:40]!r} is not a SHA-256 in lowercase hex"
    return None


def day_list(value: Any) -> str | None:
    """Days joined by commas (``2026-03-13,2026-03-14``), or empty."""
    if not isinstance(value, str):
        return f"expected days joined by commas, got {_kind(value)}"
    for part in (p for p in value.split(",") if p):
        problem = day(part)
        if problem is not None:
            return problem
    return None


def one_of(*allowed: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in allowed else f"expected one of {', '.join(allowed)}, got {value!r}"

    return check


def json_list(value: Any) -> str | None:
    return None if isinstance(value, list) else f"expected a list, got {_kind(value)}"


def base64_bytes(value: Any) -> str | None:
    if not isinstance(value, str):
        return f"expected base64 text, got {_kind(value)}"
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return "not valid base64"
    return None


def check_rows(section: str, rows: Any, fields: Mapping[str, Check] | None,
               extra: frozenset[str] = frozenset()) -> None:
    """Every row is an object with every field of ``fields`` passing its check; other keys are
    allowed only if named in ``extra`` and scalar (columns a newer schema added). ``fields=None``:
    objects whose fields the section checks itself."""
    if not isinstance(rows, list):
        raise InvalidInput(f"{where(section)}: expected a list of rows, got {_kind(rows)}")
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise InvalidInput(f"{where(section, index)}: expected an object, got {_kind(row)}")
        if fields is None:
            continue
        for field, check in fields.items():
            if field not in row:
                raise InvalidInput(f"{where(section, index, field)}: missing")
            problem = check(row[field])
            if problem is not None:
                raise InvalidInput(f"{where(section, index, field)}: {problem}")
        for field in row.keys() - fields.keys():
            if field not in extra:
                raise InvalidInput(f"{where(section, index, str(field))}: unknown field")
            if not isinstance(row[field], SCALARS) or isinstance(row[field], bool):
                raise InvalidInput(f"{where(section, index, str(field))}: expected a plain value")
            problem = _plain(row[field])
            if problem is not None:
                raise InvalidInput(f"{where(section, index, str(field))}: {problem}")


def _plain(value: Any) -> str | None:
    """What is wrong with a plain value of a column a newer schema added."""
    if isinstance(value, str):
        return _unicode(value)
    if isinstance(value, int):
        return integer(value)
    return number(value) if isinstance(value, float) else None
