"""Scores with meaning (issue 13): evidence in [0, 1], comparable across queries and stores, and
the score floor that says "nothing relevant" (R44)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidInput, Memory
from tiermem.search.evidence import (
    MODEL_CALIBRATIONS,
    UNKNOWN_MODEL_CALIBRATION,
    Blend,
    Calibration,
    QueryTerms,
    Term,
    default_calibration,
    idf,
)
from tiermem.search.floor import UNKNOWN_MODEL_MIN_SCORE, default_min_score
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

FACTS = [
    "The user prefers dark mode in every editor",
    "The user's daughter is allergic to peanuts",
    "The user keeps bees and harvests honey every August",
    "The user works as a nurse in Berlin",
    "The user plays chess on Sunday evenings",
]
OFF_TOPIC = ["quantum chromodynamics lattice", "Kubernetes pod eviction policy under memory pressure",
             "derivative of the arctangent function", "IFRS 16 lease accounting for lessees"]


@pytest.fixture
def facts(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        for content in FACTS:
            mem.facts.add(content)
        yield mem


def filler(i: int) -> str:
    """A fact that shares no word with the queries of these tests."""
    return f"Item {i}: the user logged invoice number {1000 + i} for contract {i * 7}"


# --- the definition ---------------------------------------------------------------------------
def test_keyword_coverage_is_the_idf_weighted_share_of_the_query_terms() -> None:
    terms = QueryTerms((Term("bees", 3.0, ("bee",)), Term("honey", 1.0, ("honei",)), Term("蜜蜂", 2.0)),
                       context_credit=0.75)
    assert terms.coverage("x", {"bee": {"text"}, "honei": {"text"}}) == pytest.approx(4 / 6)
    assert terms.coverage("x", {"honei": {"text"}, "bee": {"context"}}) == pytest.approx((1 + 0.75 * 3) / 6)
    assert terms.coverage("x", {"bee": {"context"}}) == 0.0  # context supports an item, never stands in for it
    assert terms.coverage("x", {"bee": {"text", "context"}}) == pytest.approx(3 / 6)
    assert terms.coverage("我喜欢养蜜蜂", {}) == pytest.approx(2 / 6)
    assert terms.coverage("Beeswax candles", {}) == pytest.approx(0.5 * 3 / 6)  # substring only: half
    assert terms.coverage("nothing", {}) == 0.0
    assert QueryTerms().coverage("anything", {}) == 0.0


def test_rare_terms_weigh_more_and_a_small_store_does_not_swing_the_weights() -> None:
    assert idf(100, 1) > idf(100, 10) > idf(100, 90) > 0
    assert idf(4, 1) / idf(4, 2) == pytest.approx(idf(300, 1) / idf(300, 2), rel=0.01)


def test_the_score_is_the_noisy_or_of_the_calibrated_evidence() -> None:
    cal = Calibration(keyword_centre=0.3, keyword_slope=8.0, vector_centre=0.4, vector_slope=12.0)
    k, v = cal.keyword(0.5), cal.vector(0.3)
    assert Blend(1.0, 1.0, cal).score(0.5, 0.3) == pytest.approx(1 - (1 - k) * (1 - v))
    assert cal.keyword(0.0) == cal.vector(0.0) == 0.0 and cal.keyword(1.0) == cal.vector(1.0) == 1.0
    assert 0 < cal.vector(0.3) < cal.vector(0.4) < cal.vector(0.5) < 1  # a curve, rising
    assert cal.vector(0.4) == pytest.approx(0.5, abs=0.01)  # through its centre at about one half
    # meaning alone, or words alone, can score high; both together score higher than either
    blend = Blend(1.0, 1.0, cal)
    assert blend.score(0.0, 0.6) > 0.9 and blend.score(1.0, 0.0) == 1.0
    assert blend.score(0.5, 0.45) > max(blend.score(0.5, 0.0), blend.score(0.0, 0.45))
    # a weight is how far that evidence is trusted: over the larger weight
    assert Blend(2.0, 1.0, cal).score(0.0, 0.6) == pytest.approx(0.5 * cal.vector(0.6))
    assert Blend(1.0, 1.0, cal).score(0.0, -0.4) == 0.0  # a negative cosine is no evidence, not negative evidence
    assert Blend(0.0, 1.0, cal).score(1.0, 0.25) == pytest.approx(cal.vector(0.25))
    assert Blend(0.0, 0.0, cal).score(1.0, 1.0) == 0.0


def test_each_model_has_its_calibration() -> None:
    assert default_calibration("all-MiniLM-L6-v2-int8@53aa5117") == MODEL_CALIBRATIONS["all-MiniLM-L6-v2"]
    assert default_calibration("hash-256") == MODEL_CALIBRATIONS["hash-"]
    assert default_calibration("someone:else") == UNKNOWN_MODEL_CALIBRATION


# --- scores on real stores --------------------------------------------------------------------
@pytest.mark.parametrize("query", ["bees", "honey bees in August", "What does the user do on Sunday?", "nurse",
                                   "dark mode editor", *OFF_TOPIC, "蜜蜂", "a"])
def test_scores_lie_in_zero_one_and_come_best_first(facts: Memory, query: str) -> None:
    hits = facts.search(query, k=10, min_score=0)
    assert all(0.0 <= hit.score <= 1.0 for hit in hits)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_an_off_topic_query_finds_nothing_at_the_default_floor(facts: Memory) -> None:
    floor = facts._search.min_score()
    assert floor == default_min_score("hash-256") > 0
    for query in OFF_TOPIC:
        assert facts.search(query) == [], query
        assert all(hit.score < floor for hit in facts.search(query, min_score=0)), query


def test_an_on_topic_query_finds_its_answer_above_the_floor(facts: Memory) -> None:
    floor = facts._search.min_score()
    for query, answer in (("bees", FACTS[2]), ("When does the user harvest honey?", FACTS[2]),
                          ("chess", FACTS[4]), ("Where does the user work as a nurse?", FACTS[3])):
        hits = facts.search(query)
        assert hits and hits[0].text == answer, query
        assert hits[0].score >= floor


def test_unrelated_hits_do_not_tie_at_one(facts: Memory) -> None:
    for query in OFF_TOPIC:
        hits = facts.search(query, min_score=0)
        assert hits and max(hit.score for hit in hits) < 0.5, query
    hits = facts.search("bees", min_score=0)
    assert hits[0].score > 0.5 and all(hit.score < 0.25 for hit in hits[1:])


def test_the_same_item_scores_the_same_in_a_store_of_3_or_300_other_items(root: Path, tmp_path: Path,
                                                                          clock: FakeClock) -> None:
    item = "The user keeps bees and harvests honey every August"
    queries = ("bees", "honey bees", "bees in winter", "When does the user harvest honey?")

    def scores(where: Path, others: int) -> dict[str, float]:
        with Memory(where, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            for i in range(others):
                mem.facts.add(filler(i))
            mem.facts.add(item)
            return {q: next(h.score for h in mem.search(q, k=5, min_score=0) if h.text == item) for q in queries}

    small, large = scores(root, 3), scores(tmp_path / "large", 300)
    for query in queries:
        assert small[query] == pytest.approx(large[query], abs=0.01), query
    assert small["bees"] == pytest.approx(large["bees"], abs=1e-6)  # every query term held: exactly equal


# --- journal records and their context ----------------------------------------------------------
JOURNAL = [  # (when, records): a short version of the demo's chat
    ("2026-03-10T09:00", ["user: Morning! I'm Maya. I just joined Fernhill as a backend engineer on the payments team.",
                          "assistant: Welcome, Maya! Congratulations on the new role. What are you working on first?",
                          "user: My first project is migrating the invoice service from Python 3.9 to 3.12."]),
    ("2026-03-10T19:40", ["user: Different topic: I'm moving from Berlin to Lisbon in June, and I'm learning Czech.",
                          "assistant: Exciting! How are you learning, classes or an app?"]),
    ("2026-03-12T09:30", ["user: Canary deploy of the invoice service on 3.12 is live at 5% of traffic.",
                          "assistant: Nice result. If errors stay flat for 24 hours, roll out to 100%."]),
    ("2026-03-12T11:45", ["user: Correction: I'm moving to Lisbon in August, not June, the apartment fell through.",
                          "assistant: Sorry about the apartment. August it is; want a checklist for the move?"]),
]


@pytest.fixture
def journal(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        for when, records in JOURNAL:
            mem.daily.append("Conversation", records, at=datetime.fromisoformat(when).replace(tzinfo=UTC))
        yield mem


def test_the_answer_outranks_a_rare_name_and_the_answers_neighbours(journal: Memory) -> None:
    hits = journal.search("When is Maya moving to Lisbon?", k=3)
    answer = next(hit for hit in hits if "moving to Lisbon in August" in hit.text)
    assert all("Morning! I'm Maya" not in hit.text for hit in hits)  # one rare word is not the answer
    after = next(hit for hit in journal.search("When is Maya moving to Lisbon?", k=10, min_score=0)
                 if "August it is" in hit.text)
    assert after.score < answer.score  # the record after the answer holds none of the terms itself


def test_context_supports_a_record_but_never_stands_in_for_it(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Notes", ["user: Maya is moving to Lisbon in August", "user: I had pizza for lunch"],
                         at=datetime(2026, 3, 14, 9, 30, tzinfo=UTC))
        hits = mem.search("When is Maya moving to Lisbon?", min_score=0)
        assert [h.text for h in hits] == ["user: Maya is moving to Lisbon in August", "user: I had pizza for lunch"]
        assert hits[0].score > 0.5 and hits[1].score < 0.1  # the pizza record only sits next to the answer
        assert mem.search("Maya's lunch")[0].text == "user: I had pizza for lunch"  # "lunch", and "Maya" nearby


# --- the floor argument -----------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, -1, -0.01, 1.5, math.inf, "x", "0.3", True, False, [0.2]])
def test_bad_min_score_is_invalid_input(facts: Memory, bad: Any) -> None:
    with pytest.raises(InvalidInput):
        facts.search("bees", min_score=bad)


def test_min_score_zero_returns_every_candidate_and_one_only_perfect_matches(facts: Memory) -> None:
    everything = facts.search("bees", k=10, min_score=0)
    assert {hit.text for hit in everything} == set(FACTS)
    assert [hit.text for hit in facts.search("bees", k=10, min_score=0.5)] == [FACTS[2]]
    assert [hit.text for hit in facts.search("bees", k=10, min_score=1)] == [FACTS[2]]  # holds every query term
    partial = "bees in winter"  # the bees fact holds some of its terms, no fact all
    assert facts.search(partial, k=10, min_score=0)[0].text == FACTS[2]
    assert facts.search(partial, k=10, min_score=1) == []
    assert len(facts.search("bees", k=2, min_score=0)) == 2


def test_the_setting_overrides_the_model_default(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_min_score=0.0) as mem:
        for content in FACTS:
            mem.facts.add(content)
        assert mem._search.min_score() == 0.0
        assert len(mem.search("quantum chromodynamics lattice", k=10)) == len(FACTS)


def test_default_floors_by_model() -> None:
    assert default_min_score("all-MiniLM-L6-v2@53aa5117") == default_min_score("all-MiniLM-L6-v2-int8@1") == 0.54
    assert default_min_score("hash-256") == default_min_score("hash-64") == 0.58
    assert default_min_score("openai:text-embedding-3-small") == UNKNOWN_MODEL_MIN_SCORE
    assert default_min_score("openai:text-embedding-3-large@256d") == UNKNOWN_MODEL_MIN_SCORE
    assert default_min_score("some-other-model") == UNKNOWN_MODEL_MIN_SCORE
    assert UNKNOWN_MODEL_MIN_SCORE == 0.30
    # conservative: under the measured models' floors, and a cosine of about 0.19 alone clears it
    assert 0 < UNKNOWN_MODEL_MIN_SCORE < min(default_min_score("all-MiniLM-L6-v2"), default_min_score("hash-256"))
    assert UNKNOWN_MODEL_CALIBRATION.vector(0.19) == pytest.approx(UNKNOWN_MODEL_MIN_SCORE, abs=0.01)


# --- provisional hits -------------------------------------------------------------------------
def test_provisional_hits_are_scored_on_the_same_scale_and_obey_the_floor(root: Path, clock: FakeClock) -> None:
    message = "My sister Ana is visiting from Porto next week"
    with Memory(root, llm=ScriptedChatModel([]), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                shutdown_flush_seconds=0) as mem:
        for content in FACTS:
            mem.facts.add(content)
        mem.queue.add("t1", [{"role": "user", "content": message}, {"role": "assistant", "content": "Noted."}])
        floor = mem._search.min_score()

        hits = mem.search("sister Ana visiting Porto", include_pending=True)
        assert [h.text for h in hits if h.provisional] == [f"user: {message}"]  # "Noted." is below the floor
        vectors = HashEmbedder().embed(["sister Ana visiting Porto", f"user: {message}"])
        blend = Blend(1.0, 1.0, default_calibration(HashEmbedder().model_id))
        expected = blend.score(1.0, float(vectors[0] @ vectors[1]))  # every query term held
        assert hits[0].score == pytest.approx(expected) and hits[0].score >= floor

        for query in OFF_TOPIC:
            assert mem.search(query, include_pending=True) == [], query
        weak = [h for h in mem.search("quantum chromodynamics lattice", include_pending=True, min_score=0)
                if h.provisional]
        assert weak and all(h.score < floor for h in weak)


def test_search_floor_is_the_setting_else_the_models_default(tmp_path: Path) -> None:
    with Memory(tmp_path / "a", embedder=HashEmbedder(), timezone="UTC") as mem:
        assert mem.search_floor() == default_min_score(HashEmbedder().model_id) > 0
    with Memory(tmp_path / "b", embedder=HashEmbedder(), timezone="UTC", search_min_score=0.4) as mem:
        assert mem.search_floor() == 0.4


class CountingEmbedder(HashEmbedder):
    """The hash embedder, counting the texts it was asked to embed."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> Any:
        self.texts.extend(texts)
        return super().embed(texts)


def test_one_prompt_embeds_its_query_once(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    with Memory(tmp_path / "m", embedder=embedder, timezone="UTC") as mem:
        mem.facts.add("Keeps bees on the roof")
        mem.core.write("- Lives in Porto\n")
        mem.daily.append("Note", "user: the bees swarmed today")
        mem.search("warm up the index")
        embedder.texts.clear()
        text = mem.format_for_injection(query="What about the bees?")
        assert "Keeps bees on the roof" in text and "bees swarmed" in text
        assert embedder.texts.count("What about the bees?") == 1  # three tiers searched, one embedding
