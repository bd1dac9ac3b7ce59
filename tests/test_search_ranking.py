"""Hybrid ranking (R44, R48): fusion, recency decay, MMR and the pending-items hook."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Memory, SearchHit
from tiermem.search.engine import PendingQuery
from tiermem.search.hybrid import RankedList, decay, fuse, mmr, ranked
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

FACTS = [
    "The user prefers dark mode in every editor",
    "The user's daughter is allergic to peanuts",
    "The user keeps bees and harvests honey every August",
    "The user works as a nurse in Berlin",
    "The user plays chess on Sunday evenings",
]


@pytest.mark.parametrize("fusion", ["rrf", "weighted"])
@pytest.mark.parametrize("query", ["bees", "What do I know about bees?", "honey bees", "bees and honey harvest"])
def test_fact_about_bees_ranks_first(root: Path, clock: FakeClock, fusion: str, query: str) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_fusion=fusion) as mem:
        for content in FACTS:
            mem.facts.add(content)
        hits = mem.search(query, k=3, min_score=0)
        assert hits[0].text == FACTS[2]
        assert hits[0].score > hits[1].score
        assert [hit.text for hit in mem.search(query, k=3)] == [FACTS[2]]  # the rest is below the floor


def test_injection_with_a_query_puts_relevant_facts_first(mem: Memory) -> None:
    for content in FACTS:
        mem.facts.add(content, confidence=0.9)
    mem.facts.add("Totally unrelated but very certain", confidence=1.0)
    text = mem.format_for_injection(query="What about the bees?", max_tokens=25)  # room for one fact
    facts = [line for line in text.splitlines() if line.startswith("- [")]
    assert facts == ["- [knowledge | 0.90] The user keeps bees and harvests honey every August"]


# --- fusion ---------------------------------------------------------------------------------------
def test_rrf_rewards_items_found_by_both_lists() -> None:
    keyword = RankedList("words", 1.0, [(1, 9.0), (2, 5.0), (3, 1.0)])
    vector = RankedList("vector", 1.0, [(3, 0.9), (2, 0.8), (4, 0.7)])
    order = fuse([keyword, vector], {1: 0.9, 2: 0.1, 3: 0.1, 4: 0.9}, "rrf")
    assert min(order[2], order[3]) > max(order[1], order[4])  # found twice beats found once; scores ignored
    assert set(order) == {1, 2, 3, 4}


def test_weighted_fusion_orders_by_the_evidence_scores() -> None:
    keyword = RankedList("words", 1.0, [(1, 20.0), (2, 10.0), (3, 0.0)])
    vector = RankedList("vector", 1.0, [(3, 0.9), (4, 0.1)])
    evidence = {1: 0.2, 2: 0.7, 3: 0.5, 4: 0.05}
    assert fuse([keyword, vector], evidence, "weighted") == evidence  # list ranks and BM25 values play no part
    assert set(fuse([RankedList("words", 0.0, keyword.items), vector], evidence, "weighted")) == {3, 4}


def test_unknown_fusion_is_rejected() -> None:
    with pytest.raises(ValueError):
        fuse([RankedList("x", 1.0, [(1, 1.0)])], {1: 1.0}, "borda")


def test_decay_halves_per_half_life() -> None:
    assert decay({1: 1.0, 2: 1.0, 3: 1.0}, {1: 0.0, 2: 30.0, 3: None}, 30.0) == {1: 1.0, 2: 0.5, 3: 1.0}


def test_mmr_skips_near_duplicates() -> None:
    import numpy as np

    a = np.array([1.0, 0.0], np.float32)
    b = np.array([0.99, 0.141], np.float32)
    c = np.array([0.0, 1.0], np.float32)
    picked = mmr([(1, 1.0), (2, 0.95), (3, 0.6)], {1: a, 2: b / np.linalg.norm(b), 3: c}, 2, 0.5)
    assert [doc_id for doc_id, _ in picked] == [1, 3]
    assert [doc_id for doc_id, _ in mmr([(1, 1.0), (2, 0.95), (3, 0.6)], {}, 2, 0.5)] == [1, 2]


def test_recency_decay_prefers_newer_items(root: Path) -> None:
    clock = FakeClock(datetime(2026, 1, 1, 9, 0, tzinfo=UTC))
    settings = {"search_recency_half_life_days": 7.0, "search_fusion": "rrf"}
    with Memory(root, embedder=HashEmbedder(), clock=clock, **settings) as mem:
        old = mem.facts.add("The user's favourite tea is green tea")
        clock.advance(60 * 86400)
        new = mem.facts.add("The user's favourite tea is black tea with milk")
        assert old is not None and new is not None
        assert mem.search("favourite tea", k=2)[0].ref == new.id
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_fusion="rrf") as mem:
        assert mem.search("favourite green tea", k=2)[0].ref == old.id  # without decay


def test_mmr_setting_diversifies_results(root: Path, clock: FakeClock) -> None:
    texts = ["bees honey hive", "bees honey hive again", "bees honey hive once more", "bees in winter"]
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_mmr_lambda=0.3) as mem:
        for content in texts:
            mem.facts.add(content)
        top2 = [hit.text for hit in mem.search("bees honey hive", k=2)]
        assert top2[0].startswith("bees honey hive") and top2[1] == "bees in winter"


# --- pending items ----------------------------------------------------------------------------
def test_pending_sources_join_only_when_asked(mem: Memory) -> None:
    mem.facts.add("The user keeps bees")
    asked: list[PendingQuery] = []

    def source(request: PendingQuery) -> list[SearchHit]:
        asked.append(request)
        return [SearchHit("queued: the user just bought a new hive", 2.0, "fact", "outbox:7")]

    def broken(request: PendingQuery) -> list[SearchHit]:
        raise RuntimeError("queue unavailable")

    mem._search.pending_sources.extend([source, broken])
    assert all(not h.provisional for h in mem.search("bees hive"))
    assert asked == []
    hits = mem.search("bees hive", include_pending=True)
    assert hits[0].provisional and hits[0].ref == "outbox:7"
    assert any(not h.provisional for h in hits)
    assert asked[0].query == "bees hive" and asked[0].scope == mem.scope
    assert asked[0].vector.shape == (256,)
    assert len(mem.search("bees hive", k=1, include_pending=True)) == 1


def test_ranked_breaks_ties_by_the_tiebreak_then_by_id() -> None:
    assert ranked({3: 1.0, 1: 1.0, 2: 0.5}, {3: 0.9, 1: 0.2}) == [(3, 1.0), (1, 1.0), (2, 0.5)]
    assert ranked({3: 1.0, 1: 1.0}) == [(1, 1.0), (3, 1.0)]


def test_items_holding_every_query_word_come_in_the_order_of_their_meaning(root: Path, clock: FakeClock) -> None:
    """Both hold every query term, so both score 1.0 (issue 24's noisy-OR); the one whose meaning is
    closer (higher cosine) comes first, whatever was stored first."""
    with Memory(root, embedder=HashEmbedder(), clock=clock) as mem:
        far = mem.facts.add("Bees swarm in spring; honey prices rose at the market in town last year")
        near = mem.facts.add("Keeps bees for honey")
        assert far is not None and near is not None
        hits = mem.search("bees honey", k=2, min_score=0)
        assert [h.score for h in hits] == [1.0, 1.0]
        assert hits[0].extra["vector"] > hits[1].extra["vector"]
        assert [h.ref for h in hits] == [near.id, far.id]
