"""Checks of an export's rows before anything is written: each field's type and shape.

A failed check is one :class:`~tiermem.errors.InvalidInput` that names the section, the row
(0-based, as it stands in the file) and the field, e.g.
``export section 'facts', row 3, field 'confidence': expected a number, got str``.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable, Mapping
from typing import Any

from tiermem import validate
from tiermem.clock import parse_utc
from tiermem.errors import InvalidInput

#: A field check: ``None`` when the value is acceptable, else what is wrong with it.
Check = Callable[[Any], "str | None"]
SCALARS = (str, int, float, type(None))


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


def text(nullable: bool = False) -> Check:
    def check(value: Any) -> str | None:
        if value is None and nullable:
            return None
        return None if isinstance(value, str) else f"expected a string, got {_kind(value)}"

    return check


def integer(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, int):
        return f"expected an integer, got {_kind(value)}"
    return None


def number(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return f"expected a finite number, got {_kind(value)}"
    return None


def name(value: Any) -> str | None:
    """A user id or agent name (used in file names)."""
    try:
        validate.name(value, "the name")
    except InvalidInput as exc:
        return str(exc)
    return None


def timestamp(value: Any) -> str | None:
    """An ISO-8601 time as the store writes them (``2026-03-14T10:00:00.000000Z``)."""
    if not isinstance(value, str):
        return f"expected an ISO-8601 time, got {_kind(value)}"
    try:
        parse_utc(value)
    except ValueError:
        return f"{value[:40]!r} is not an ISO-8601 time"
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
