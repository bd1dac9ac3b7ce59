"""``add_many`` in bulk (issue 16): a batch reads duplicates and tombstones once and writes its facts
and audit entries in one statement each; the rules of R14-R19/R27 must hold inside one batch
exactly as they do fact by fact."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.facts.store import FactStore, NewFact
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Fact

pytestmark = pytest.mark.usefixtures("backend")

SECRET = "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"


def reopen(root: Path, clock: FakeClock, **settings: object) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)


def test_a_batch_skips_duplicates_of_itself_and_of_stored_facts(mem: Memory) -> None:
    stored = mem.facts.add("Likes green tea")
    assert stored is not None
    results = mem.facts.admit([NewFact("likes  GREEN tea"), NewFact("Owns a bike"), NewFact("owns a BIKE"),
                               NewFact("Owns a bike", confidence=0.1)])
    added = results[1].fact
    assert added is not None and [r.fact is None for r in results] == [True, False, True, True]
    assert results[0].reason == f"duplicate of {stored.id}" and results[2].reason == f"duplicate of {added.id}"
    assert results[3].reason is not None and "below threshold" in results[3].reason
    assert sorted(f.content for f in mem.facts.list()) == ["Likes green tea", "Owns a bike"]
    trail = [(e.action, e.content) for e in mem.facts.history()[1:]]
    assert trail == [("skipped", "likes  GREEN tea"), ("added", "Owns a bike"), ("skipped", "owns a BIKE"),
                     ("skipped", "Owns a bike")]


def test_extraction_batches_respect_tombstones_and_a_person_lifts_them(mem: Memory) -> None:
    gone = mem.facts.add("Works at Acme")
    assert gone is not None
    mem.facts.delete(gone.id)
    extracted = mem.facts.add_many([NewFact("works at acme"), NewFact("Lives in Oslo")], origin="extraction")
    assert extracted[0] is None and extracted[1] is not None
    assert "tombstoned" in mem.facts.history()[-2].reason
    by_user = mem.facts.add_many([NewFact("Works at ACME"), NewFact("Plays chess")])
    assert all(fact is not None for fact in by_user)
    assert mem.facts.repo.tombstones(mem.scope) == []
    mem.facts.delete(by_user[0].id)  # type: ignore[union-attr]
    assert mem.facts.add_many([NewFact("works at acme")], origin="extraction") == [None]


def test_a_full_scope_evicts_a_fact_of_the_same_batch(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=2) as mem:
        weak, strong, newer = mem.facts.add_many([NewFact("Weak guess", confidence=0.6),
                                                  NewFact("Strong fact", confidence=0.9),
                                                  NewFact("Newer fact", confidence=0.8)])
        assert weak is not None and strong is not None and newer is not None
        assert sorted(f.content for f in mem.facts.list()) == ["Newer fact", "Strong fact"]
        trail = [(e.action, e.content) for e in mem.facts.history()]
        assert trail == [("added", "Weak guess"), ("added", "Strong fact"), ("evicted", "Weak guess"),
                         ("added", "Newer fact")]
        assert mem.facts.add("Weak guess", confidence=0.7) is None  # weaker than every kept fact
        assert {h.ref for h in mem.search("fact", k=10, min_score=0)} == {strong.id, newer.id}


def test_batch_listeners_hear_one_commit_once_in_order(mem: Memory) -> None:
    heard: list[list[tuple[str, Fact]]] = []
    store: FactStore = mem.facts
    store.subscribe_batch(heard.append)
    facts = store.add_many([NewFact("Has a cat"), NewFact("has a cat"), NewFact("Drinks coffee")])
    assert heard == [[("added", facts[0]), ("added", facts[2])]]
    assert store.add_many([NewFact("Has a cat")]) == [None] and len(heard) == 1  # nothing changed: no call
    assert mem.vector_status().missing == 0  # the batch was embedded right after the commit


def test_secrets_are_redacted_once_and_before_the_duplicate_check(mem: Memory) -> None:
    first, second = mem.facts.add_many([NewFact(f"API key is {SECRET}", source=f"thread-{SECRET}"),
                                        NewFact("API key is sk-proj-Zz9yXw8vUt7sRq6pOn5mLk4jIh3gFe2d")])
    assert first is not None and second is None  # the same text once redacted
    assert SECRET not in first.content and "[REDACTED:openai_key]" in first.content
    assert first.source is not None and SECRET not in first.source
    stored = mem.facts.get(first.id)
    assert stored.content == first.content and stored.source == first.source
    for entry in mem.facts.history():
        assert SECRET not in (entry.content or "") and SECRET not in (entry.source or "")


def test_ids_are_distinct_and_free_across_a_large_batch(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=5000) as mem:
        facts = mem.facts.add_many([NewFact(f"Fact number {i}") for i in range(600)])  # > one IN (...) slice
        ids = [f.id for f in facts if f is not None]
        assert len(ids) == 600 == len(set(ids)) == mem.facts.count()
        more = mem.facts.add_many([NewFact(f"Fact number {i}") for i in range(595, 605)])
        assert [f is None for f in more] == [True] * 5 + [False] * 5
