"""Keyword search (R45): any text is a safe query, CJK of any length matches, substrings match."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem import InvalidInput, Memory
from tiermem.search import fts
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

BEES = "The user keeps bees behind the garden shed"
DARK = "The user prefers dark mode in every editor"
CJK = "我喜欢养蜜蜂和种花"
WP = "The blog runs on WordPress with a custom theme"


@pytest.fixture
def kw(root: Path, clock: FakeClock) -> Iterator[Memory]:
    """A memory whose search uses keywords only, so every hit must come from FTS or the scan."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", search_vector_weight=0.0) as memory:
        for content in (BEES, DARK, CJK, WP):
            memory.facts.add(content)
        yield memory


def texts(hits: list) -> list[str]:  # type: ignore[type-arg]
    return [hit.text for hit in hits]


# --- query parsing (pure) ---------------------------------------------------------------------
def test_every_term_is_quoted_and_or_combined() -> None:
    query = fts.parse('bees AND NOT "honey" NEAR(x, hive) OR col:value*^')
    assert query.words_match == '"bees" OR "honey" OR "near" OR "x" OR "hive" OR "col" OR "value"'


def test_stop_words_are_dropped_unless_nothing_else_is_left() -> None:
    assert fts.parse("What does the user think about bees?").words == ("user", "think", "bees")
    assert fts.parse("what is it").words == ("what", "is", "it")


def test_unsegmented_scripts_become_trigrams_or_short_terms() -> None:
    query = fts.parse("我喜欢蜜蜂 猫 tower")
    assert query.grams == ("我喜欢", "喜欢蜜", "欢蜜蜂")
    assert query.short == ("猫",)
    assert query.words == ("tower",)


def test_control_characters_never_reach_fts() -> None:
    query = fts.parse("be\x00es\x1b[31m honey\u200b")
    assert all(ord(c) >= 32 for term in query.words for c in term)
    assert "honey" in query.words


# --- safe queries end to end --------------------------------------------------------------------
@pytest.mark.parametrize("query", [
    "bees AND", "bees OR", "NOT bees", "bees NEAR honey", "NEAR(bees honey, 2)", "bees*", "^bees", "text:bees",
    '"bees', 'bees"', '"bees"', "(bees", "bees)", "{bees}", "bees + -honey", "'bees'", "bees;", "bees --",
    "bees\\", "bees\x00", "\x07bees\x1b", "bees\u200b", "bees\ud800",
    "bees & honey", "bees | honey", "!bees", "bees <-> honey", "bees:*", "bees:AB", "'bees':*", "bees\\'",
])
def test_fts_syntax_and_junk_are_plain_text(kw: Memory, query: str) -> None:
    assert texts(kw.search(query, min_score=0))[0] == BEES  # the floor aside: junk words weaken the score


@pytest.mark.parametrize("query", ["AND", "OR NOT", "NEAR", "*", '"', "()", "^", ":", "-", '""', "NEAR()",
                                   "&", "|", "!", "<->", ":*", "'", "\\"])
def test_queries_made_only_of_syntax_are_safe(kw: Memory, query: str) -> None:
    assert isinstance(kw.search(query), list)  # no FTS error; nothing of them is in the facts


@pytest.mark.parametrize("query", ["", "   ", "\n\t", "\x00", "\x00\x01\x1b", "\u200b"])
def test_empty_query_is_invalid_input(kw: Memory, query: str) -> None:
    with pytest.raises(InvalidInput):
        kw.search(query)


def test_non_string_query_is_invalid_input(kw: Memory) -> None:
    with pytest.raises(InvalidInput):
        kw.search(b"bees")  # type: ignore[arg-type]


def test_oversized_query_is_invalid_input(kw: Memory) -> None:
    with pytest.raises(InvalidInput):
        kw.search("bees " * 1000)


def test_long_pasted_paragraph_is_fine(kw: Memory) -> None:
    paragraph = " ".join(f"word{i}" for i in range(100)) + " bees"
    assert texts(kw.search(paragraph, min_score=0))[0] == BEES
    assert kw.search(paragraph) == []  # one word of 101: too little evidence to clear the floor


# --- CJK and substrings -------------------------------------------------------------------------
@pytest.mark.parametrize("query", ["蜂", "蜜蜂", "种花", "花"])
def test_one_and_two_character_cjk_queries_match(kw: Memory, query: str) -> None:
    assert texts(kw.search(query)) == [CJK]


@pytest.mark.parametrize("query", ["喜欢养蜜", "我喜欢养蜜蜂", "养蜜蜂和种花的人"])
def test_longer_cjk_queries_match_through_trigrams(kw: Memory, query: str) -> None:
    assert texts(kw.search(query))[0] == CJK


def test_cjk_query_without_match_finds_nothing(kw: Memory) -> None:
    assert kw.search("猫") == []
    assert kw.search("今天天气") == []


def test_substring_of_a_word_matches_through_trigrams(kw: Memory) -> None:
    assert texts(kw.search("ordpres")) == [WP]
    assert texts(kw.search("arden")) == [BEES]


def test_english_words_match_by_stem(kw: Memory) -> None:
    assert texts(kw.search("editors preferring"))[0] == DARK


def test_mixed_script_query_finds_both(kw: Memory) -> None:
    found = texts(kw.search("蜜蜂 WordPress"))
    assert set(found) == {CJK, WP}


def test_terms_too_common_for_the_budget_are_dropped_rarest_kept(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_vector_weight=0.0,
                search_keyword_budget=12) as mem:
        for i in range(20):
            mem.facts.add(f"the user mentioned item number {i}")
        zebra = mem.facts.add("the user saw a zebra at the zoo")
        assert zebra is not None
        assert [h.ref for h in mem.search("user zebra", k=50)] == [zebra.id]  # "user" (21 items) dropped
        assert mem.search("user", k=50) == []  # nothing affordable: no keyword list at all
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_vector_weight=0.0) as mem:
        assert len(mem.search("user zebra", k=50)) == 21  # the default budget keeps both
