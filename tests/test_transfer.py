"""Export then import into an empty root reproduces the store exactly (R69)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import ImportConflict, InvalidInput, Memory
from tiermem.testing import FakeClock, HashEmbedder


def _fill(m: Memory, clock: FakeClock) -> None:
    m.facts.add("Prefers dark mode", "preference", 0.95, source="t1")
    clock.advance(5)
    gone = m.facts.add("Works at Acme", "context", 0.9)
    assert gone is not None
    m.facts.delete(gone.id)
    m.facts.add("low", "knowledge", 0.1)  # skipped, audited
    m.facts.set_summaries({"topOfMind": "Moving house"})


def test_round_trip_is_exact(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    _fill(mem, clock)
    with Memory(tmp_path / "other", embedder=HashEmbedder(), clock=clock, user_id="bob") as bob:
        bob.facts.add("Bob likes chess", "preference", 0.7)
    exported = mem.export()
    assert len(exported["facts"]) == 1 and exported["tombstones"] and exported["audit"]
    text = json.dumps(exported)
    with Memory(tmp_path / "restored", embedder=HashEmbedder(), clock=clock) as restored:
        counts = restored.import_(json.loads(text))
        assert counts["facts"] == 1
        assert restored.export() == exported
        assert restored.facts.list() == mem.facts.list()
        assert restored.facts.summaries() == {"topOfMind": "Moving house"}
        assert restored.facts.add("works at acme", "context", origin="extraction") is None  # tombstone kept


def test_import_restores_without_readmission(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    for i in range(5):
        mem.facts.add(f"fact {i}", confidence=0.6)
    data = mem.export()
    with Memory(tmp_path / "small", embedder=HashEmbedder(), clock=clock, max_facts=2,
                fact_confidence_threshold=0.9) as small:
        small.import_(data)
        assert len(small.facts.list()) == 5


def test_conflicting_id_is_an_error_unless_replace(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    fact = mem.facts.add("original", confidence=0.8)
    assert fact is not None
    data = mem.export()
    data["facts"][0]["content"] = "changed"
    with pytest.raises(ImportConflict):
        mem.import_(data)
    assert mem.facts.get(fact.id).content == "original"
    mem.import_(data, replace=True)
    assert mem.facts.get(fact.id).content == "changed"


@pytest.mark.parametrize("bad", [[], {"format": "other"}, {"format": "tiermem-export", "version": 99},
                                 {"format": "tiermem-export", "version": 1, "facts": [{"id": "x"}]},
                                 {"format": "tiermem-export", "version": 1, "facts": "nope"}])
def test_malformed_export_changes_nothing(mem: Memory, bad: object) -> None:
    mem.facts.add("keep me")
    before = mem.export()
    with pytest.raises(InvalidInput):
        mem.import_(bad)
    assert mem.export() == before


def test_memory_md_versions_and_dream_state_round_trip(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    from tiermem.storage.dreams import DreamRepository

    repo = DreamRepository(mem.db)
    repo.save_version("default", "- old bullet\n", True, "dream", clock.now())
    data = mem.export()
    assert [v["content"] for v in data["core_versions"]] == ["- old bullet\n"]
    with Memory(tmp_path / "restored", embedder=HashEmbedder(), clock=clock) as restored:
        restored.import_(json.loads(json.dumps(data)))
        assert [v.content for v in restored.dream_versions()] == ["- old bullet\n"]
        assert restored.export() == data
