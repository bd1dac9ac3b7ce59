"""A new fact's id is never one a fact already has, whichever way the batch reads the store
(one query for a small batch, one per kind for a large one)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.facts.store import FactStore, NewFact
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


def _drawing(ids: list[str]) -> Iterator[str]:
    yield from ids
    n = 0
    while True:
        n += 1
        yield f"fact_{n:08x}"


@pytest.mark.parametrize("size", [1, 3, 600])
def test_a_drawn_id_that_is_taken_is_drawn_again(root: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch,
                                                 size: int) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", max_facts=1000) as mem:
        _check(mem, monkeypatch, size)


def _check(mem: Memory, monkeypatch: pytest.MonkeyPatch, size: int) -> None:
    first = mem.facts.add("the first fact")
    assert first is not None
    draws = _drawing([first.id] * 2)  # the first draws hit the stored fact's id
    monkeypatch.setattr(FactStore, "_new_id", staticmethod(lambda: next(draws)))
    added = mem.facts.add_many([NewFact(f"another fact number {i}") for i in range(size)])
    ids = [f.id for f in added if f is not None]
    assert len(ids) == size and len(set(ids)) == size and first.id not in ids
    assert mem.facts.get(first.id).content == "the first fact"
    assert mem.facts.count() == size + 1
