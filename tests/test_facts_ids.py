"""A new fact's id is never one a fact already has, whichever way the batch reads the store
(one query for a small batch, one per kind for a large one)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.facts.store import FactStore, NewFact
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Fact

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


class _PausingClock(FakeClock):
    """A clock whose first reading after :meth:`arm` runs ``then`` first: a fact add reads the time
    after it checked its drawn ids and before it inserts them."""

    def __init__(self, start: datetime) -> None:
        super().__init__(start)
        self._then: Callable[[], None] | None = None

    def arm(self, then: Callable[[], None]) -> None:
        self._then = then

    def now(self) -> datetime:
        then, self._then = self._then, None
        if then is not None:
            then()
        return super().now()


def test_two_scopes_drawing_one_id_at_once_both_keep_their_fact(root: Path, clock: FakeClock,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Bob's add has checked its drawn id is free when Alice's add, in another scope (another lock),
    draws the same id and commits it. On PostgreSQL the two run at once, so Bob's insert meets
    Alice's row: it draws again instead of failing. On SQLite Alice's add waits for Bob's write
    lock and then sees the id taken. Either way both facts are stored, each once."""
    lock = threading.Lock()
    draws = _drawing(["fact_0000c011"] * 2)  # Bob's draw, then Alice's

    def draw() -> str:
        with lock:
            return next(draws)

    monkeypatch.setattr(FactStore, "_new_id", staticmethod(draw))
    paused = _PausingClock(clock.now())
    with Memory(root, embedder=HashEmbedder(), clock=paused, timezone="UTC", user_id="bob") as bob, \
            Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="alice") as alice:
        alice_added: list[Fact | None] = []
        other = threading.Thread(target=lambda: alice_added.append(alice.facts.add("alice likes tea")))

        def alice_writes() -> None:
            other.start()
            if bob.db.backend == "postgres":  # writers of two scopes run at once: let Alice commit first
                other.join()

        paused.arm(alice_writes)
        bob_fact = bob.facts.add("bob likes coffee")
        other.join()
        [alice_fact] = alice_added
        assert bob_fact is not None and alice_fact is not None and bob_fact.id != alice_fact.id
        assert [(f.id, f.content) for f in bob.facts.list()] == [(bob_fact.id, "bob likes coffee")]
        assert [(f.id, f.content) for f in alice.facts.list()] == [(alice_fact.id, "alice likes tea")]
        assert [(e.action, e.fact_id) for e in bob.facts.history()] == [("added", bob_fact.id)]
        assert [(e.action, e.fact_id) for e in alice.facts.history()] == [("added", alice_fact.id)]
