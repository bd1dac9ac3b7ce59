"""What a key-value store adapter accepts, and how it matches: namespaces, keys, JSON values,
value filters and namespace patterns. Pure functions, no framework imported (the LangGraph store,
:mod:`tiermem.integrations.langgraph`, is built on them).

A value must come back exactly as it was put, so it is checked before anything is written and
stored as its JSON text: a mapping with string keys whose leaves are ``None``, booleans, integers,
finite floats and strings (lists and tuples hold them; a tuple comes back as a list, as JSON has
no tuples). NaN and infinities, other types (bytes, sets, dates, objects), lone surrogates,
control characters other than tab and line breaks, nesting deeper than
:data:`tiermem.validate.MAX_JSON_DEPTH` and JSON text longer than :data:`MAX_VALUE_CHARS` are an
:class:`~tiermem.errors.InvalidInput`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.search import fts

MAX_VALUE_CHARS = 1_000_000  # one item's JSON text: a memory, a profile, a document - not a data set
MAX_TEXT_CHARS = 8000  # one search text (a field's text, or the whole value's) as embedded and scored
MAX_LABEL_CHARS = 256
MAX_DEPTH = 32  # labels in a namespace
SEPARATOR = "."  # labels never hold it (LangGraph's own rule), so the joined text is unambiguous
_CONTROL_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # Cc but tab/LF/CR
_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")


# --- namespaces and keys --------------------------------------------------------------------------
def label(value: Any, where: str = "namespace") -> str:
    """One namespace label: a non-empty printable string without ``.``, ``/`` or ``\\`` (labels are
    joined with ``.``; no label can pass for a path)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{where} labels must be strings, got {type(value).__name__}")
    if not value:
        raise InvalidInput(f"{where} labels must not be empty")
    if len(value) > MAX_LABEL_CHARS:
        raise InvalidInput(f"a {where} label is {len(value)} characters; the limit is {MAX_LABEL_CHARS}")
    validate.identifier(value, f"{where} label")  # printable: no control characters, no lone surrogates
    if any(c in value for c in "./\\"):
        raise InvalidInput(f"{where} label {value[:40]!r} must not contain '.', '/' or '\\'")
    return value


def namespace(value: Any, where: str = "namespace", *, allow_empty: bool = False) -> tuple[str, ...]:
    """A namespace (tuple or list of labels) as a tuple of checked labels."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise InvalidInput(f"{where} must be a tuple of strings, got {type(value).__name__}")
    labels = tuple(label(part, where) for part in value)
    if not labels and not allow_empty:
        raise InvalidInput(f"{where} must not be empty")
    if len(labels) > MAX_DEPTH:
        raise InvalidInput(f"{where} has {len(labels)} labels; the limit is {MAX_DEPTH}")
    return labels


def pattern(value: Any, where: str) -> tuple[str, ...]:
    """A ``list_namespaces`` prefix or suffix: labels, where ``"*"`` matches any one label."""
    return namespace(value, where, allow_empty=True)


def key(value: Any) -> str:
    """An item key: printable text of at most 256 characters."""
    return validate.identifier(value, "key")


def join(labels: Sequence[str]) -> str:
    return SEPARATOR.join(labels)


def split(text: str) -> tuple[str, ...]:
    return tuple(text.split(SEPARATOR)) if text else ()


def matches(labels: tuple[str, ...], path: tuple[str, ...], suffix: bool = False) -> bool:
    """Whether ``labels`` start (``suffix``: end) with ``path``, label by label; ``"*"`` in ``path``
    matches any one label."""
    if len(labels) < len(path):
        return False
    part = labels[len(labels) - len(path):] if suffix else labels[:len(path)]
    return all(p == "*" or p == label_ for label_, p in zip(part, path, strict=True))


# --- values ---------------------------------------------------------------------------------------
def encode(value: Any) -> str:
    """The JSON text of ``value`` (see the module docstring), or ``InvalidInput``."""
    if not isinstance(value, Mapping):
        raise InvalidInput(f"a value must be a dict (a JSON object), got {type(value).__name__}")
    value = dict(value)
    _check_tree(value)
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInput(f"the value is not JSON: {exc}") from None
    if len(text) > MAX_VALUE_CHARS:
        raise InvalidInput(f"the value is {len(text)} characters of JSON; the limit is {MAX_VALUE_CHARS}")
    return text


def _check_tree(value: dict[str, Any]) -> None:
    """Types, strings and depth of a value, without recursion (a hostile value cannot exhaust the stack)."""
    stack: list[tuple[Any, int, str]] = [(value, 1, "value")]
    while stack:
        item, depth, where = stack.pop()
        if isinstance(item, str):
            _check_string(item, where)
        elif isinstance(item, bool) or item is None or isinstance(item, int):
            continue
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidInput(f"{where} is {item!r}: JSON has no NaN or infinity")
        elif isinstance(item, dict):
            if depth > validate.MAX_JSON_DEPTH:
                raise InvalidInput(f"the value nests deeper than {validate.MAX_JSON_DEPTH} levels")
            for name, child in item.items():
                if not isinstance(name, str):
                    raise InvalidInput(f"{where} has a key of type {type(name).__name__}: JSON keys are strings")
                _check_string(name, f"a key of {where}")
                stack.append((child, depth + 1, f"{where}[{name[:40]!r}]"))
        elif isinstance(item, (list, tuple)):
            if depth > validate.MAX_JSON_DEPTH:
                raise InvalidInput(f"the value nests deeper than {validate.MAX_JSON_DEPTH} levels")
            stack.extend((child, depth + 1, f"{where}[{i}]") for i, child in enumerate(item))
        else:
            raise InvalidInput(f"{where} is a {type(item).__name__}: a value holds only JSON types"
                               " (dict, list, str, int, float, bool, None)")


def _check_string(text: str, where: str) -> None:
    validate.unicode_text(text, where)
    if _CONTROL_RE.search(text):
        raise InvalidInput(f"{where} contains control or binary characters")


def decode(text: str) -> dict[str, Any]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError("a stored value is not a JSON object")
    return value


def string_leaves(value: Any) -> list[str]:
    """The strings of a value (not its keys), in order: what a whole item says."""
    out: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
        elif isinstance(item, (list, tuple)):
            stack.extend(reversed(item))
    return out


def search_texts(texts: Iterable[str]) -> list[str]:
    """What a query search reads of ``texts`` (the value's, or its index fields'): printable, on one
    line, cut at :data:`MAX_TEXT_CHARS`, empty ones and repeats dropped. Not redacted: they come from
    a value the storage layer has redacted already, or go through its redaction."""
    cleaned = (" ".join(fts.clean(t).split())[:MAX_TEXT_CHARS] for t in texts)
    return list(dict.fromkeys(t for t in cleaned if t))


def whole_value_texts(value: Any) -> list[str]:
    """The search text of a whole value (index path ``"$"``): its string leaves, one per line."""
    return search_texts(["\n".join(string_leaves(value))])


# --- filters --------------------------------------------------------------------------------------
def check_filter(flt: Any) -> dict[str, Any]:
    """A value filter: ``{field: value}`` (exact JSON equality; a dotted field reaches into nested
    objects) or ``{field: {"$op": value}}`` with ``$eq $ne $gt $gte $lt $lte``."""
    if flt is None:
        return {}
    if not isinstance(flt, Mapping) or not all(isinstance(k, str) and k for k in flt):
        raise InvalidInput("filter must be a dict of field names to values")
    for name, wanted in flt.items():
        if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted):
            unknown = [k for k in wanted if k not in _OPERATORS]
            if unknown:
                raise InvalidInput(f"filter on {name!r}: unknown operator {unknown[0]!r};"
                                   f" use one of {', '.join(_OPERATORS)}")
    return dict(flt)


def passes(value: dict[str, Any], flt: Mapping[str, Any]) -> bool:
    """Whether a stored value meets every condition of a (checked) filter."""
    return all(_compare(_field(value, name), wanted) for name, wanted in flt.items())


_MISSING = object()


def _field(value: dict[str, Any], name: str) -> Any:
    """``value[name]``, else the nested field a dotted ``name`` names, else a marker."""
    if name in value:
        return value[name]
    current: Any = value
    for part in name.split("."):
        if not isinstance(current, dict) or part not in current:
            return _MISSING
        current = current[part]
    return current


def _compare(found: Any, wanted: Any) -> bool:
    if isinstance(wanted, Mapping):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(found, op, operand) for op, operand in wanted.items())
        return isinstance(found, dict) and all(_compare(found.get(k, _MISSING), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (isinstance(found, list) and len(found) == len(wanted)
                and all(_compare(f, w) for f, w in zip(found, wanted, strict=True)))
    return found is not _MISSING and _same(found, wanted)


def _same(found: Any, wanted: Any) -> bool:
    """JSON equality: ``True`` is not ``1`` (Python says it is)."""
    return isinstance(found, bool) == isinstance(wanted, bool) and found == wanted


def _operator(found: Any, op: str, operand: Any) -> bool:
    if op == "$eq":
        return found is not _MISSING and _same(found, operand)
    if op == "$ne":
        return found is _MISSING or not _same(found, operand)
    if not _number(found) or not _number(operand):
        if isinstance(found, str) and isinstance(operand, str):
            return bool(_ORDER[op](found, operand))
        return False  # no order between a number and text, or with a missing field
    return bool(_ORDER[op](found, operand))  # Python compares int and float exactly


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and not (
        isinstance(value, float) and math.isnan(value))


_ORDER = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}
