"""Search arguments (R44, R66): tier, category and date filters, and validation of everything."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidInput, Memory
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture
def filled(root: Path) -> Iterator[Memory]:
    """Facts created on March 10 and 14, daily records of March 9 and 14, a MEMORY.md bullet -
    all about gardening."""
    clock = FakeClock(datetime(2026, 3, 10, 8, 0, tzinfo=UTC))
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.facts.add("gardening: the user prefers raised beds", "preference")
        mem.facts.add("gardening: the user knows about compost", "knowledge")
        clock.set(datetime(2026, 3, 14, 18, 0, tzinfo=UTC))
        mem.facts.add("gardening: the user wants a greenhouse", "goal")
        mem.daily.append("Notes", ["gardening talk about seedlings"], at=datetime(2026, 3, 9, 10, 0, tzinfo=UTC))
        mem.daily.append("Notes", ["gardening talk about tomatoes"], at=datetime(2026, 3, 14, 10, 0, tzinfo=UTC))
        mem.core.write("- gardening is the user's main hobby\n")
        yield mem


def found(mem: Memory, **kwargs: Any) -> set[str]:
    return {hit.text for hit in mem.search("gardening", k=100, **kwargs)}


def test_without_filters_every_tier_is_searched(filled: Memory) -> None:
    hits = filled.search("gardening", k=100)
    assert {h.tier for h in hits} == {"fact", "daily", "core"}
    assert len(hits) == 6


def test_tier_filter(filled: Memory) -> None:
    assert found(filled, tier="core") == {"gardening is the user's main hobby"}
    assert found(filled, tier="daily") == {"gardening talk about seedlings", "gardening talk about tomatoes"}
    assert all(h.tier == "fact" for h in filled.search("gardening", k=100, tier="fact"))
    assert len(found(filled, tier="fact")) == 3


def test_category_filter_returns_only_facts_of_that_category(filled: Memory) -> None:
    hits = filled.search("gardening", k=100, category="preference")
    assert [(h.text, h.category) for h in hits] == [("gardening: the user prefers raised beds", "preference")]
    assert found(filled, category="goal", tier="fact") == {"gardening: the user wants a greenhouse"}
    assert filled.search("gardening", category="correction") == []


@pytest.mark.parametrize("since", [date(2026, 3, 14), "2026-03-14", datetime(2026, 3, 14, 0, 0, tzinfo=UTC),
                                   "2026-03-14T00:00:00Z", datetime(2026, 3, 14, 0, 0)])
def test_since_accepts_dates_datetimes_and_iso_strings(filled: Memory, since: Any) -> None:
    assert found(filled, since=since) == {"gardening: the user wants a greenhouse", "gardening talk about tomatoes"}


def test_until_is_inclusive_for_a_date(filled: Memory) -> None:
    assert found(filled, until=date(2026, 3, 10)) == {
        "gardening: the user prefers raised beds", "gardening: the user knows about compost",
        "gardening talk about seedlings"}


def test_window_with_datetimes(filled: Memory) -> None:
    start, end = datetime(2026, 3, 10, 7, 0, tzinfo=UTC), datetime(2026, 3, 14, 17, 59, tzinfo=UTC)
    assert found(filled, since=start, until=end) == {
        "gardening: the user prefers raised beds", "gardening: the user knows about compost",
        "gardening talk about tomatoes"}
    assert found(filled, since=start, until=end + timedelta(minutes=1)) == {
        "gardening: the user prefers raised beds", "gardening: the user knows about compost",
        "gardening talk about tomatoes", "gardening: the user wants a greenhouse"}


def test_aware_datetimes_in_other_zones_are_compared_in_utc(filled: Memory) -> None:
    tokyo = timezone(timedelta(hours=9))
    assert "gardening: the user wants a greenhouse" in found(filled, since=datetime(2026, 3, 15, 2, 0, tzinfo=tokyo))
    assert "gardening: the user wants a greenhouse" not in found(
        filled, since=datetime(2026, 3, 15, 4, 0, tzinfo=tokyo), tier="fact")


def test_date_window_leaves_out_undated_memory_bullets(filled: Memory) -> None:
    assert "gardening is the user's main hobby" not in found(filled, since="2000-01-01")


def test_filters_with_keywords_only_and_vectors_only(root: Path, filled: Memory) -> None:
    # vectors alone, the facts (cosine 0.41 to "gardening") score 0.48, under the hash embedder's
    # floor of 0.58: no floor there, so the filters alone decide
    for weights in ({"search_vector_weight": 0.0}, {"search_keyword_weight": 0.0, "search_min_score": 0.0}):
        with Memory(root, embedder=HashEmbedder(), timezone="UTC", **weights) as mem:
            assert found(mem, tier="daily", since="2026-03-14") == {"gardening talk about tomatoes"}
            assert found(mem, category="knowledge") == {"gardening: the user knows about compost"}


@pytest.mark.parametrize("kwargs", [
    {"k": 0}, {"k": 1001}, {"k": -1}, {"k": "3"}, {"k": 2.0}, {"k": True}, {"k": None},
    {"tier": "facts"}, {"tier": "FACT"}, {"tier": 1},
    {"category": "hobby"}, {"category": "Preference"},
    {"category": "goal", "tier": "daily"},
    {"since": "yesterday"}, {"since": 20260314}, {"until": "2026-13-01"}, {"since": object()},
    {"since": "2026-03-15", "until": "2026-03-14"},
    {"include_pending": "yes"}, {"include_pending": 1},
])
def test_bad_arguments_are_invalid_input(filled: Memory, kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        filled.search("gardening", **kwargs)


def test_k_limits_the_number_of_hits(filled: Memory) -> None:
    assert len(filled.search("gardening", k=2)) == 2
    assert len(filled.search("gardening", k=1000)) == 6


def test_hits_describe_where_they_come_from(filled: Memory) -> None:
    hits = filled.search("gardening", k=100)
    for hit in hits:
        assert 0.0 < hit.score <= 1.0
        assert hit.provisional is False
        if hit.tier == "fact":
            assert filled.facts.get(hit.ref).content == hit.text
            assert hit.category is not None and hit.date is not None
        else:
            path, _, lines = hit.ref.partition("#")
            start, end = (int(x) for x in lines.removeprefix("L").split("-L"))
            file_lines = (filled.root / path).read_text(encoding="utf-8").splitlines()
            assert hit.text in "\n".join(file_lines[start - 1:end])
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
