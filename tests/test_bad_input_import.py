"""Import checks every field before it writes anything (issue 14, item 4, the validation half).

A row with a mistyped field — a date that is not a date, a confidence that is a string or NaN, a
category or status not in its set, text no database can store, a number SQLite cannot hold — is
one :class:`~tiermem.errors.InvalidInput` naming the section, the row and the field; the store
is left exactly as it was, and every later command still works.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from transfer_helpers import START, fill, open_memory, separate_stores, snapshot  # noqa: F401

from tiermem import InvalidInput
from tiermem.testing import FakeClock

Case = tuple[str, int, str, Any, str]  # section, row, field, value, what the message says
pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The export of a filled store (made on SQLite: the checks are the same whatever the target)."""
    root = tmp_path_factory.mktemp("source") / "mem"
    saved = os.environ.pop("TIERMEM_DATABASE_URL", None)  # made before any test's backend is chosen
    try:
        fill(root, FakeClock(START))
        with open_memory(root, FakeClock(START + timedelta(days=1))) as mem:
            data = mem.export()
    finally:
        if saved is not None:
            os.environ["TIERMEM_DATABASE_URL"] = saved
    return dict(json.loads(json.dumps(data)))  # as a file holds it


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + timedelta(days=1))


def row_index(data: dict[str, Any], section: str, where: Callable[[dict[str, Any]], bool]) -> int:
    return next(i for i, row in enumerate(data[section]) if where(row))


CASES: list[Case] = [
    # dates that are not dates, or times spelled so that the store would sort them wrongly
    ("facts", 0, "created_at", "2026-02-30T10:00:00.000000Z", "not a date and time that exists"),
    ("facts", 0, "updated_at", "yesterday", "not a UTC time as tiermem writes them"),
    ("facts", 0, "created_at", "2026-03-14T10:00:00+02:00", "not a UTC time as tiermem writes them"),
    ("facts", 0, "created_at", "0999-03-14T10:00:00.000000Z", "before the year 1000"),
    ("audit", 2, "at", 20260314, "expected an ISO-8601 time, got int"),
    ("plans", 0, "createdAt", "0001-01-01T00:00:00.000000Z", "before the year 1000"),
    ("plans", 0, "updatedAt", "2026-13-01T00:00:00.000000Z", "month must be in 1..12"),
    ("dream_state", 0, "days", "2026-03-13,someday", "not a date (YYYY-MM-DD)"),
    ("consolidated_prefix", 0, "day", "2026-02-30", "not a date that exists"),
    ("outbox", 0, "not_before", "2026-03-14 10:00", "not a UTC time as tiermem writes them"),
    # numbers
    ("facts", 0, "confidence", "high", "expected a finite number, got str"),
    ("facts", 0, "confidence", math.nan, "expected a finite number"),
    ("facts", 0, "confidence", math.inf, "expected a finite number"),
    ("facts", 0, "confidence", 10**400, "expected a finite number"),
    ("facts", 0, "confidence", 1.5, "must be within [0, 1]"),
    ("audit", 0, "id", 2**70, "does not fit in 64 bits"),
    ("audit", 0, "id", -1, "expected a number >= 0"),
    ("outbox", 0, "attempts", True, "expected an integer, got bool"),
    ("plans", 0, "revision", 2**64, "does not fit in 64 bits"),
    ("core_versions", 0, "existed", "yes", "expected an integer, got str"),
    ("embeddings", 0, "dim", -4, "expected a number >= 0"),
    # members of a closed set
    ("facts", 0, "category", "hobby", "expected one of preference, knowledge"),
    ("summaries", 0, "key", "mood", "expected one of workContext"),
    ("outbox", 0, "status", "processing", "expected one of pending, dead"),
    ("plans", 0, "status", "someday", "status"),
    # text a database cannot store, or the library would never accept
    ("facts", 0, "content", "likes \ud800 tea", "not valid Unicode"),
    ("facts", 0, "content", "", "content must not be empty"),
    ("facts", 0, "content", "x" * 4001, "the limit is 4000"),
    ("facts", 0, "id", "fact\x00one", "control characters"),
    ("facts", 0, "source", "t\udcff", "not valid Unicode"),
    ("summaries", 0, "summary", "busy\udcff", "not valid Unicode"),
    ("tombstones", 0, "content", "\udc80", "not valid Unicode"),
    ("audit", 0, "reason", "\ud800", "not valid Unicode"),
    ("outbox", 0, "thread_id", "t\udc80", "not valid Unicode"),
    ("outbox", 0, "messages", [{"role": "user", "content": "hi \ud800"}], "not valid Unicode"),
    ("extracted_hashes", 0, "thread_id", "", "must not be empty"),
    ("flush_hashes", 0, "digest", "\udcff", "not valid Unicode"),
    ("embeddings", 0, "model", "hash\ud800", "not valid Unicode"),
    ("plans", 0, "title", "Move\udcff", "not valid Unicode"),
]


@pytest.mark.parametrize(("section", "row", "field", "value", "expected"), CASES,
                         ids=[f"{c[0]}.{c[2]}={str(c[3])[:20]!r}" for c in CASES])
def test_a_mistyped_field_names_its_place_and_writes_nothing(
        exported: dict[str, Any], tmp_path: Path, clock: FakeClock,
        section: str, row: int, field: str, value: Any, expected: str) -> None:
    bad = copy.deepcopy(exported)
    bad[section][row][field] = value
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.facts.add("keep me")
        before = snapshot(target)
        with pytest.raises(InvalidInput) as info:
            mem.import_(bad)
    message = str(info.value)
    assert "\n" not in message
    place = f"export section {section!r}, row {row}" + (f", field {field!r}" if section != "plans" else "")
    assert message.startswith(place), message
    assert expected in message, message
    assert snapshot(target) == before


def test_the_same_export_with_the_field_fixed_imports_and_answers(exported: dict[str, Any], tmp_path: Path,
                                                                   clock: FakeClock) -> None:
    """The refusals above are about the field, not the file: put it back and the import works."""
    bad = copy.deepcopy(exported)
    bad["facts"][0]["created_at"] = "2026-03-14T10:00:00+02:00"
    with open_memory(tmp_path / "target", clock) as mem:
        with pytest.raises(InvalidInput):
            mem.import_(bad)
        bad["facts"][0]["created_at"] = exported["facts"][0]["created_at"]
        mem.import_(bad)
        assert mem.search("dark mode")
        assert mem.plans.list() and mem.dream_versions()
        assert json.loads(json.dumps(mem.export()))["facts"] == exported["facts"]


def test_a_column_a_newer_schema_added_must_hold_a_storable_value(exported: dict[str, Any], tmp_path: Path,
                                                                   clock: FakeClock) -> None:
    bad = copy.deepcopy(exported)
    bad["summaries"][0]["mood"] = "fine"  # not a column of this store: refused by name
    with open_memory(tmp_path / "target", clock) as mem, pytest.raises(InvalidInput) as info:
        mem.import_(bad)
    assert str(info.value) == "export section 'summaries', row 0, field 'mood': unknown field"
