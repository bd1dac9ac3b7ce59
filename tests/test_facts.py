"""The fact-memory seed: CRUD, dedup, threshold, max facts (R14-R19, R26, R27)."""

from __future__ import annotations

import logging
import math
import re
import uuid
from pathlib import Path

import pytest

from tiermem import FactNotFound, InvalidInput, Memory, TiermemError
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


def reopen(root: Path, clock: FakeClock, **settings: object) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)


def test_create_assigns_id_timestamps_and_persists(mem: Memory, root: Path, clock: FakeClock) -> None:
    fact = mem.facts.add("Prefers dark mode", "preference", 0.95, source="thread-1")
    assert fact is not None
    assert re.fullmatch(r"fact_[0-9a-f]{8}", fact.id)
    assert fact.created_at == clock.now() and fact.created_at.tzinfo is not None
    data = fact.to_dict()
    assert data["createdAt"].endswith("Z") and data["createdAt"].startswith("2026-03-14T09:30:00")
    assert data["content"] == "Prefers dark mode" and data["source"] == "thread-1"
    with reopen(root, clock) as again:
        assert again.facts.get(fact.id) == fact


def test_ids_redrawn_on_collision(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    same = uuid.UUID("11111111-0000-4000-8000-000000000000")
    values = iter([same, same, uuid.UUID("22222222-0000-4000-8000-000000000000")])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(values))
    first = mem.facts.add("one")
    second = mem.facts.add("two")
    assert first is not None and second is not None
    assert (first.id, second.id) == ("fact_11111111", "fact_22222222")
    assert len(mem.facts.list()) == 2


def test_update_changes_only_given_fields(mem: Memory, root: Path, clock: FakeClock) -> None:
    fact = mem.facts.add("Uses vim", "preference", 0.8)
    assert fact is not None
    clock.advance(60)
    updated = mem.facts.update(fact.id, confidence=0.9)
    assert (updated.content, updated.category, updated.confidence) == ("Uses vim", "preference", 0.9)
    assert updated.created_at == fact.created_at and updated.updated_at > fact.updated_at
    with reopen(root, clock) as again:
        assert again.facts.get(fact.id).confidence == 0.9


def test_update_unknown_and_duplicate_content(mem: Memory) -> None:
    a = mem.facts.add("alpha")
    mem.facts.add("beta")
    assert a is not None
    with pytest.raises(KeyError):
        mem.facts.update("fact_deadbeef", content="x")
    with pytest.raises(InvalidInput):
        mem.facts.update(a.id, content="BETA")
    assert mem.facts.get(a.id).content == "alpha"


def test_delete_and_unknown_id_is_keyerror(mem: Memory, root: Path, clock: FakeClock) -> None:
    fact = mem.facts.add("Lives in Lisbon", "context")
    assert fact is not None
    mem.facts.delete(fact.id)
    with reopen(root, clock) as again:
        assert again.facts.list() == []
    with pytest.raises(KeyError) as info:
        mem.facts.delete(fact.id)
    assert isinstance(info.value, FactNotFound) and isinstance(info.value, TiermemError)


@pytest.mark.parametrize("variant", ["Prefers dark mode", "prefers DARK mode", "  Prefers   dark\tmode "])
def test_duplicates_skipped_existing_unchanged(mem: Memory, variant: str, caplog: pytest.LogCaptureFixture) -> None:
    original = mem.facts.add("Prefers dark mode", "preference", 0.6)
    assert original is not None
    with caplog.at_level(logging.INFO, logger="tiermem"):
        assert mem.facts.add(variant, "knowledge", 0.99) is None
    assert mem.facts.list() == [original]
    assert "duplicate" in caplog.text
    assert mem.facts.history()[-1].action == "skipped"


def test_low_confidence_not_persisted_and_logged(mem: Memory, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="tiermem"):
        assert mem.facts.add("Maybe likes jazz", "preference", 0.49) is None
    assert mem.facts.list() == []
    assert "below threshold" in caplog.text
    assert mem.facts.add("Likes jazz", "preference", 0.5) is not None


def test_threshold_is_configurable(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, fact_confidence_threshold=0.9) as m:
        assert m.facts.add("x", confidence=0.8) is None
        assert m.facts.add("y", confidence=0.95) is not None


def test_max_facts_evicts_lowest_confidence_oldest_first(
    root: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    with reopen(root, clock, max_facts=3) as m:
        m.facts.add("high", confidence=0.9)
        clock.advance(1)
        old_low = m.facts.add("old low", confidence=0.6)
        clock.advance(1)
        m.facts.add("new low", confidence=0.6)
        clock.advance(1)
        with caplog.at_level(logging.INFO, logger="tiermem"):
            m.facts.add("newest", confidence=0.7)
        contents = sorted(f.content for f in m.facts.list())
        assert contents == ["high", "new low", "newest"]
        assert old_low is not None and "evicted" in caplog.text
        assert any(e.action == "evicted" and e.fact_id == old_low.id for e in m.facts.history())


def test_max_facts_is_per_scope(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=2) as a, Memory(root, embedder=HashEmbedder(), clock=clock,
                                                        user_id="bob", max_facts=2) as b:
        a.facts.add("a1")
        a.facts.add("a2")
        b.facts.add("b1")
        b.facts.add("b2")
        assert len(a.facts.list()) == 2 and len(b.facts.list()) == 2
        assert {f.content for f in b.facts.list()} == {"b1", "b2"}


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"content": "x", "category": "opinion"}, "category"),
        ({"content": "x", "confidence": math.nan}, "confidence"),
        ({"content": "x", "confidence": 1.5}, "confidence"),
        ({"content": "x", "confidence": -0.1}, "confidence"),
        ({"content": "x", "confidence": "0.9"}, "confidence"),
        ({"content": "x", "confidence": True}, "confidence"),
        ({"content": ""}, "empty"),
        ({"content": "   "}, "empty"),
        ({"content": 42}, "string"),
        ({"content": None}, "string"),
        ({"content": "bin\x00ary\x07junk"}, "control"),
        ({"content": "x" * 5000}, "limit"),
        ({"content": "x", "source": 7}, "source"),
        ({"content": "x", "source": "t" * 100_000}, "source"),
        ({"content": "x", "source": "thread\x00\x01"}, "source"),
    ],
)
def test_bad_input_is_rejected_and_changes_nothing(mem: Memory, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInput, match=message):
        mem.facts.add(**kwargs)  # type: ignore[arg-type]
    assert mem.facts.list() == []
    assert mem.facts.history() == []


def test_numpy_confidence_is_accepted_as_a_float(mem: Memory) -> None:
    import numpy as np

    fact = mem.facts.add("Scored by a numpy model", "knowledge", np.float32(0.75))  # type: ignore[arg-type]
    assert fact is not None and fact.confidence == 0.75 and type(fact.confidence) is float
    assert mem.facts.add("Another numpy score", "knowledge", np.float64(0.2)) is None  # below threshold


def test_update_bad_input_changes_nothing(mem: Memory) -> None:
    fact = mem.facts.add("stable", "knowledge", 0.7)
    assert fact is not None
    for kwargs in ({"confidence": math.nan}, {"category": "nope"}, {"content": ""}):
        with pytest.raises(InvalidInput):
            mem.facts.update(fact.id, **kwargs)  # type: ignore[arg-type]
    assert mem.facts.get(fact.id) == fact


def test_list_by_category_sorted_by_confidence(mem: Memory) -> None:
    mem.facts.add("b", "goal", 0.6)
    mem.facts.add("a", "goal", 0.9)
    mem.facts.add("c", "context", 1.0)
    assert [f.content for f in mem.facts.list("goal")] == ["a", "b"]
    with pytest.raises(InvalidInput):
        mem.facts.list("goals")


def test_deleted_content_is_tombstoned_for_extraction_only(mem: Memory) -> None:
    fact = mem.facts.add("Works at Acme", "context")
    assert fact is not None
    mem.facts.delete(fact.id)
    assert mem.facts.add("works at ACME", "context", origin="extraction") is None
    assert "tombstoned" in mem.facts.history()[-1].reason
    again = mem.facts.add("Works at Acme", "context")  # a person may add it back explicitly
    assert again is not None


def test_scopes_do_not_leak(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock) as a, Memory(root, embedder=HashEmbedder(), clock=clock, agent_name="coder") as b:
        fact = a.facts.add("secret of default agent")
        assert fact is not None
        assert b.facts.list() == []
        with pytest.raises(FactNotFound):
            b.facts.get(fact.id)
        with pytest.raises(FactNotFound):
            b.facts.delete(fact.id)
        assert b.facts.add("secret of default agent") is not None  # no cross-scope dedup


@pytest.mark.parametrize("bad", ["../evil", "a/b", "a\\b", "", "x" * 65, "..", ".hidden/../x"])
def test_scope_ids_with_path_tricks_rejected(root: Path, bad: str) -> None:
    with pytest.raises(InvalidInput):
        Memory(root, user_id=bad, embedder=HashEmbedder())
    with pytest.raises(InvalidInput):
        Memory(root, agent_name=bad, embedder=HashEmbedder())


def test_update_with_no_fields_changes_nothing(mem: Memory, clock: FakeClock) -> None:
    fact = mem.facts.add("steady", "knowledge", 0.7)
    assert fact is not None
    clock.advance(60)
    assert mem.facts.update(fact.id) == fact
    assert [e.action for e in mem.facts.history()] == ["added"]
    with pytest.raises(FactNotFound):
        mem.facts.update("fact_00000000")
