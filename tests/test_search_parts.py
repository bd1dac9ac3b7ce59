"""Sentence vectors (multi-vector, max-sim): a question about one sentence of a long record finds it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tiermem import Memory
from tiermem.search.parts import label_of, sentence_parts
from tiermem.search.vectors import NO_CATEGORY, TIER_CODE, VectorFilter, VectorIndex
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

LONG = ("Alice: We talked about the weather for a while. Then the garden needed water and weeding. "
        "The cat slept all day on the sofa. My sister plays the violin in the city orchestra.")
SHORT = "Bob: The violin and the orchestra."
QUERY = "sister plays violin orchestra"


def test_sentences_keep_the_speaker_label() -> None:
    assert label_of(LONG) == "Alice: "
    assert sentence_parts(LONG) == [
        "Alice: We talked about the weather for a while.", "Alice: Then the garden needed water and weeding.",
        "Alice: The cat slept all day on the sofa.", "Alice: My sister plays the violin in the city orchestra."]
    assert sentence_parts("- **User**: Hello there. How are you?") == ["- **User**: Hello there.",
                                                                   "- **User**: How are you?"]


def test_single_sentences_and_long_lists() -> None:
    assert sentence_parts("Bob: Just one sentence here.") == []
    assert sentence_parts("No label, one sentence") == []
    assert sentence_parts("Is it. A. B.") == []  # fragments join the sentence before them
    parts = sentence_parts(" ".join(f"Sentence {i}." for i in range(12)), max_parts=4)
    assert len(parts) == 4 and parts[-1] == "Sentence 3. " + " ".join(f"Sentence {i}." for i in range(4, 12))


def unit(v: list[float]) -> np.ndarray:
    a = np.array(v, np.float32)
    return (a / np.linalg.norm(a)).astype(np.float32)


def index_of_three(max_parts: int = 100) -> VectorIndex:
    index = VectorIndex(4, max_parts=max_parts)
    vectors = np.stack([unit([1, 0, 0, 0]), unit([1, 1, 0, 0]), unit([0, 0, 1, 0])])
    index.add(np.array([1, 2, 3], np.int64), vectors, np.array([TIER_CODE["fact"]] * 2 + [TIER_CODE["daily"]], np.int8),
              np.full(3, NO_CATEGORY, np.int8), np.zeros(3, np.int64))
    return index


def test_an_item_scores_by_its_best_part() -> None:
    index = index_of_three()
    q = unit([0, 1, 0, 0])
    assert index.search(q, 3)[0][0] == 2  # nearest by the items' own vectors
    index.add_parts(np.array([3, 3], np.int64), np.stack([unit([0, 0, 1, 1]), unit([0, 1, 0, 0])]))
    assert index.parts == 2
    hits = index.search(q, 2)
    assert hits == [(3, pytest.approx(1.0)), (2, pytest.approx(2 ** -0.5))]
    assert [doc for doc, _ in index.search(q, 3, VectorFilter(tiers=(TIER_CODE["fact"],)))] == [2, 1]


def test_parts_go_with_their_item() -> None:
    index = index_of_three()
    index.add_parts(np.array([3, 1, 99], np.int64), np.stack([unit([0, 1, 0, 0]), unit([0, 0, 0, 1]),
                                                                unit([0, 1, 0, 0])]))
    assert index.parts == 2  # 99 is not in the index
    index.remove([1])  # item 3 moves into row 0: its part follows it
    assert index.parts == 1
    assert index.search(unit([0, 1, 0, 0]), 1) == [(3, pytest.approx(1.0))]
    index.add(np.array([3], np.int64), unit([0, 0, 1, 0])[None, :], np.array([TIER_CODE["daily"]], np.int8),
              np.array([NO_CATEGORY], np.int8), np.zeros(1, np.int64))  # replaced: its parts are gone
    assert index.parts == 0
    assert index.search(unit([0, 1, 0, 0]), 1)[0][0] == 2


def test_too_many_parts_are_dropped() -> None:
    index = index_of_three(max_parts=2)
    index.add_parts(np.array([1, 2, 3], np.int64), np.stack([unit([0, 1, 0, 0])] * 3))
    assert index.parts == 0 and index.parts_dropped
    assert index.search(unit([0, 1, 0, 0]), 1)[0][0] == 2


@pytest.mark.parametrize("enabled", [True, False])
def test_memory_finds_a_sentence_of_a_long_record(root: Path, clock: FakeClock, enabled: bool) -> None:
    # vectors alone, and no floor: the order is the point (without sentence vectors the best hit,
    # the short fact at cosine 0.35, scores 0.39, under the hash embedder's floor of 0.58)
    settings = {"search_sentence_vectors": enabled, "search_keyword_weight": 0.0, "search_min_score": 0.0}
    with Memory(root, embedder=HashEmbedder(), clock=clock, **settings) as mem:
        long_fact = mem.facts.add(LONG)
        short_fact = mem.facts.add(SHORT)
        assert long_fact is not None and short_fact is not None
        expected = long_fact.id if enabled else short_fact.id
        assert mem.search(QUERY, k=2)[0].ref == expected
    with Memory(root, embedder=HashEmbedder(), clock=clock, **settings) as mem:  # loaded from the database
        assert mem.search(QUERY, k=2)[0].ref == expected
