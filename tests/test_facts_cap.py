"""The ``max_facts`` cap (R18, issue 14 items 5 and 14): a new fact competes with the kept ones on
confidence, for every origin but import, and admitting a batch costs the same per fact whatever
the scope's size."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.facts.store import NewFact
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")


def reopen(root: Path, clock: FakeClock, llm: ScriptedChatModel | None = None, **settings: object) -> Memory:
    return Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)


def contents(mem: Memory) -> list[str]:
    return sorted(f.content for f in mem.facts.list())


def test_a_weaker_new_fact_is_skipped_instead_of_evicting_a_stronger_one(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=2) as mem:
        strong = mem.facts.add("Works at Acme", confidence=0.90)
        clock.advance(1)
        mem.facts.add("Lives in Lisbon", confidence=0.95)
        clock.advance(1)
        assert strong is not None
        assert mem.facts.add("Might like jazz", confidence=0.55) is None  # the old code evicted the 0.90 fact
        assert contents(mem) == ["Lives in Lisbon", "Works at Acme"]
        last = mem.facts.history()[-1]
        assert (last.action, last.fact_id, last.content) == ("skipped", None, "Might like jazz")
        assert last.reason == (f"max_facts 2 reached; confidence 0.55 is below every kept fact"
                               f" (weakest: {strong.id}, confidence 0.90)")
        assert not any(e.action == "evicted" for e in mem.facts.history())
        [admission] = mem.facts.admit([NewFact("Might like jazz", confidence=0.55)])
        assert admission.fact is None and admission.reason == last.reason  # what `remember` prints


def test_extraction_competes_too(root: Path, clock: FakeClock) -> None:
    empty = {"summary": "", "shouldUpdate": False}
    reply = json.dumps({
        "user": {"workContext": empty, "personalContext": empty, "topOfMind": empty},
        "history": {"recentMonths": empty, "earlierContext": empty, "longTermBackground": empty},
        "newFacts": [{"content": "Maybe owns a bike", "category": "context", "confidence": 0.6},
                     {"content": "Moved to Porto in May", "category": "context", "confidence": 0.93}],
        "factsToRemove": []})
    model = ScriptedChatModel([reply])
    with reopen(root, clock, model, max_facts=2) as mem:
        keep = mem.facts.add("Works at Acme", confidence=0.95)
        clock.advance(1)
        weak = mem.facts.add("Drinks tea", confidence=0.8)
        clock.advance(1)
        assert keep is not None and weak is not None
        report = mem.extract([{"role": "user", "content": "We moved to Porto in May. I may own a bike."}], "t1")
        assert model.remaining == []
        assert [f.content for f in report.added] == ["Moved to Porto in May"]
        assert report.skipped == [("Maybe owns a bike", f"max_facts 2 reached; confidence 0.60 is below every"
                                                        f" kept fact (weakest: {weak.id}, confidence 0.80)")]
        assert contents(mem) == ["Moved to Porto in May", "Works at Acme"]
        evicted = [e for e in mem.facts.history() if e.action == "evicted"]
        assert [e.fact_id for e in evicted] == [weak.id]
        assert evicted[0].reason == ("max_facts 2 reached; lowest confidence 0.80, made room for a fact of"
                                     " confidence 0.93")


def test_a_tie_evicts_the_oldest_weakest_fact(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=3) as mem:
        mem.facts.add("high", confidence=0.9)
        clock.advance(1)
        older = mem.facts.add("older 0.6", confidence=0.6)
        clock.advance(1)
        mem.facts.add("newer 0.6", confidence=0.6)
        clock.advance(1)
        assert mem.facts.add("also 0.6", confidence=0.6) is not None  # equal is not weaker: it competes
        assert older is not None
        assert contents(mem) == ["also 0.6", "high", "newer 0.6"]
        assert [e.fact_id for e in mem.facts.history() if e.action == "evicted"] == [older.id]


def test_within_one_timestamp_insertion_order_decides(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=3) as mem:  # one add_many: every fact gets the same created_at
        first, second, third = mem.facts.add_many([NewFact(f"fact {i}", confidence=0.7) for i in range(3)])
        assert first is not None and second is not None and third is not None
        mem.facts.add_many([NewFact("fact 3", confidence=0.7), NewFact("fact 4", confidence=0.7)])
        assert [e.fact_id for e in mem.facts.history() if e.action == "evicted"] == [first.id, second.id]
        assert contents(mem) == ["fact 2", "fact 3", "fact 4"]


def test_a_batch_keeps_the_strongest_facts(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=3) as mem:
        results = mem.facts.add_many([NewFact(f"c{c}", confidence=c) for c in (0.6, 0.9, 0.7, 0.55, 0.95, 0.65)])
        assert [r is not None for r in results] == [True, True, True, False, True, False]
        assert contents(mem) == ["c0.7", "c0.9", "c0.95"]
        assert mem.facts.count() == 3


def test_a_lowered_cap_keeps_the_strongest_of_kept_and_new(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock) as mem:
        mem.facts.add_many([NewFact(f"c{c}", confidence=c) for c in (0.5, 0.6, 0.7, 0.8, 0.9)])
    with reopen(root, clock, max_facts=3) as mem:
        assert mem.facts.add("c0.75", confidence=0.75) is not None
        assert contents(mem) == ["c0.75", "c0.8", "c0.9"]  # the three weakest made room, one by one
        assert mem.facts.add("c0.7 again", confidence=0.7) is None
    with reopen(root, clock, max_facts=2) as mem:  # three kept: the top two of kept and new stay
        assert mem.facts.add("c0.76", confidence=0.76) is None  # 0.75 made room, then 0.8 was stronger
        assert contents(mem) == ["c0.8", "c0.9"]
        assert mem.facts.add("c0.7 once more", confidence=0.7) is None  # below every kept fact
        assert contents(mem) == ["c0.8", "c0.9"]


def test_import_origin_does_not_compete(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=1) as mem:
        mem.facts.add("kept", confidence=0.9)
        restored = mem.facts.add("restored", confidence=0.6, origin="import")
        assert restored is not None and contents(mem) == ["kept", "restored"]


@contextmanager
def sqlite_work(mem: Memory) -> Iterator[list[int]]:
    """Counts SQLite virtual-machine steps (in thousands) and ``COUNT(*)`` statements run on
    this thread's connection — the work done, independent of the machine's speed."""
    counter = [0, 0]

    def step() -> int:
        counter[0] += 1
        return 0

    def statement(sql: str) -> None:
        counter[1] += "COUNT(*)" in sql.upper()

    conn = mem.db.conn
    conn.set_progress_handler(step, 1000)
    conn.set_trace_callback(statement)
    try:
        yield counter
    finally:
        conn.set_progress_handler(None, 0)
        conn.set_trace_callback(None)


def _batch_work(mem: Memory, tag: str, n: int) -> list[int]:
    with sqlite_work(mem) as work:
        mem.facts.add_many([NewFact(f"{tag} fact number {i}", confidence=0.8) for i in range(n)])
    return work


# counts SQLite virtual-machine steps (its progress handler): a measure only SQLite has
@pytest.mark.sqlite_only
def test_add_many_work_per_fact_does_not_grow_with_the_scope(root: Path, clock: FakeClock) -> None:
    """Issue 14 item 14: the old ``_admit`` counted the scope's facts for every new fact, so
    1,000 facts into a scope of 100k took minutes."""
    with reopen(root, clock, max_facts=100_000) as mem:
        small = _batch_work(mem, "early", 100)
        mem.facts.add_many([NewFact(f"filler fact {i} for a large scope", confidence=0.9) for i in range(2000)])
        large = _batch_work(mem, "late", 100)
        assert small[1] == large[1] == 1  # the scope is counted once per batch
        assert large[0] < 1.5 * small[0] + 20, (small, large)  # old code: 5x at 2k facts, 100x at 100k


# counts SQLite virtual-machine steps (its progress handler): a measure only SQLite has
@pytest.mark.sqlite_only
def test_eviction_work_per_fact_does_not_grow_with_the_scope(root: Path, clock: FakeClock) -> None:
    with reopen(root, clock, max_facts=100) as mem:
        mem.facts.add_many([NewFact(f"first {i}", confidence=0.5) for i in range(100)])
        small = _batch_work(mem, "small", 100)  # each evicts one
    with reopen(root / "big", clock, max_facts=2000) as mem:
        mem.facts.add_many([NewFact(f"first {i}", confidence=0.5) for i in range(2000)])
        large = _batch_work(mem, "large", 100)
        assert mem.facts.count() == 2000
    assert large[0] < 1.5 * small[0] + 20, (small, large)
