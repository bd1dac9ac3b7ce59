"""The injection text of R21 (format, order, budget) and its byte-stability (R22)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.extract.guard import strip_injected_memory
from tiermem.facts.injection import (
    NOTE_MAX_CHARS,
    TRUNCATION_MARK,
    CoreItem,
    Note,
    citation,
    clip,
    core_by_relevance,
    notes_from_hits,
    render_injection,
)
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tokens import count_tokens
from tiermem.types import Fact, SearchHit

pytestmark = pytest.mark.usefixtures("backend")


def test_all_sections_in_order(mem: Memory) -> None:
    mem.facts.set_summaries({
        "workContext": "Backend engineer at Acme",
        "personalContext": "Lives in Lisbon",
        "topOfMind": "Shipping tiermem",
        "recentMonths": "Moved teams in March",
        "earlierContext": "Studied physics",
        "longTermBackground": "Grew up in Porto",
    })
    mem.facts.add("Prefers dark mode", "preference", 0.95)
    mem.facts.add("Uses vim", "preference", 0.7)
    mem.facts.add("Goal: run a marathon", "goal", 0.85)
    assert mem.format_for_injection() == (
        "User Context:\n"
        "- Work: Backend engineer at Acme\n"
        "- Personal: Lives in Lisbon\n"
        "- Current Focus: Shipping tiermem\n"
        "\n"
        "History:\n"
        "- Recent: Moved teams in March\n"
        "- Earlier: Studied physics\n"
        "- Background: Grew up in Porto\n"
        "\n"
        "Facts:\n"
        "- [preference | 0.95] Prefers dark mode\n"
        "- [goal | 0.85] Goal: run a marathon\n"
        "- [preference | 0.70] Uses vim"
    )


def test_empty_sections_left_out(mem: Memory) -> None:
    assert mem.format_for_injection() == ""
    mem.facts.set_summaries({"topOfMind": "Tax return"})
    assert mem.format_for_injection() == "User Context:\n- Current Focus: Tax return"
    mem.facts.add("Has a cat", "context", 0.8)
    assert mem.format_for_injection() == (
        "User Context:\n- Current Focus: Tax return\n\nFacts:\n- [context | 0.80] Has a cat"
    )


def test_budget_drops_lowest_confidence_first(mem: Memory) -> None:
    for i in range(40):
        mem.facts.add(f"Fact number {i} about the user's many hobbies and habits", "knowledge", 0.5 + i / 100)
    text = mem.format_for_injection(max_tokens=100)
    assert count_tokens(text) <= 100
    assert not text.endswith(TRUNCATION_MARK)
    kept = [line for line in text.splitlines() if line.startswith("- [")]
    assert 0 < len(kept) < 40
    confidences = [float(line.split("|")[1].split("]")[0]) for line in kept]
    assert confidences == sorted(confidences, reverse=True)
    assert min(confidences) >= 0.5 + (40 - len(kept)) / 100 - 1e-9  # the highest ones stayed


def test_over_budget_after_dropping_facts_is_cut_with_mark(mem: Memory) -> None:
    mem.facts.set_summaries({"workContext": "word " * 400})
    mem.facts.add("A fact that cannot fit", "knowledge", 0.9)
    text = mem.format_for_injection(max_tokens=50)
    assert text.endswith("\n...")
    assert text.startswith("User Context:\n- Work: word word")
    assert "Facts:" not in text
    assert count_tokens(text) <= 52  # a token-edge cut; the mark may merge differently


def test_default_budget_is_2000_tokens(mem: Memory) -> None:
    mem.facts.add_many([])
    for i in range(500):
        mem.facts.add(f"Remembered detail {i}: the user mentioned project codename {i * 7919}", "knowledge", 0.9)
    text = mem.format_for_injection()
    assert 1900 <= count_tokens(text) <= 2000


def test_byte_stable_while_memory_unchanged(mem: Memory, clock: FakeClock) -> None:
    mem.facts.add("Prefers tea", "preference", 0.8)
    mem.facts.add("Prefers green tea", "preference", 0.8)
    first = mem.format_for_injection()
    clock.advance(3600)
    assert mem.format_for_injection() == first


# --- Core Memory and Relevant notes (R21, issue 13) -----------------------------------------------
FLOOR = 0.3  # an explicit injection floor through the setting the injection text reads (search_inject_min_score)
CORE_MD = """## Work
- Works as a marine biologist in Porto

## Personal
- Has a cat named Pixel
- Maya is a close friend from university
"""
DAY_MD = """# Daily Memory: 2026-03-14

## Session Notes (09:30)
- user: Maya is moving to Lisbon in August
- user: I had pizza for lunch
"""
MAYA_QUERY = "When is Maya moving to Lisbon?"
MAYA_NOTE = "- 2026-03-14 (memory/2026-03-14.md#L4): user: Maya is moving to Lisbon in August"


@pytest.fixture
def floored(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", search_inject_min_score=FLOOR) as memory:
        yield memory


def write_day(mem: Memory, text: str = DAY_MD, day: str = "2026-03-14") -> None:
    """A Daily file as another process left it, written where the store keeps it (the file itself
    on SQLite, rows on PostgreSQL); search re-indexes it on its own."""
    mem.daily.files.replace(mem.daily.rel_for(day), text.encode("utf-8"))


def test_every_section_in_order_with_a_query(floored: Memory) -> None:
    floored.facts.set_summaries({"workContext": "Marine biologist", "recentMonths": "Joined a new lab"})
    floored.facts.add("Prefers dark mode", "preference", 0.95)
    floored.facts.add("Uses vim", "preference", 0.7)
    floored.core.write(CORE_MD)
    write_day(floored)
    assert floored.format_for_injection(query=MAYA_QUERY) == (
        "User Context:\n"
        "- Work: Marine biologist\n"
        "\n"
        "History:\n"
        "- Recent: Joined a new lab\n"
        "\n"
        "Core Memory:\n"
        "- Maya is a close friend from university\n"  # the relevant bullet first, then file order
        "- Works as a marine biologist in Porto\n"
        "- Has a cat named Pixel\n"
        "\n"
        "Facts:\n"
        "- [preference | 0.95] Prefers dark mode\n"
        "- [preference | 0.70] Uses vim\n"
        "\n"
        "Relevant notes:\n"
        f"{MAYA_NOTE}"
    )


def test_without_a_query_core_is_in_file_order_and_there_are_no_notes(floored: Memory) -> None:
    floored.core.write(CORE_MD)
    write_day(floored)
    floored.facts.add("Prefers dark mode", "preference", 0.95)
    assert floored.format_for_injection() == (
        "Core Memory:\n"
        "- Works as a marine biologist in Porto\n"
        "- Has a cat named Pixel\n"
        "- Maya is a close friend from university\n"
        "\n"
        "Facts:\n"
        "- [preference | 0.95] Prefers dark mode"
    )


def test_multi_line_bullets_are_folded_and_hand_edits_show_at_once(mem: Memory) -> None:
    mem.core.write("- Works on\n  coral reefs\n- Speaks Portuguese\n  - and some Spanish\n")
    assert mem.format_for_injection() == (
        "Core Memory:\n- Works on coral reefs\n- Speaks Portuguese\n- and some Spanish")
    assert mem.format_for_injection().splitlines()[1:] == [f"- {item}" for item in mem.core.items()]
    mem.core.path.write_text("- Edited by hand\n", encoding="utf-8")
    assert mem.format_for_injection() == "Core Memory:\n- Edited by hand"


def test_inject_core_false_leaves_core_out(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, inject_core=False) as mem:
        mem.core.write(CORE_MD)
        mem.facts.add("Prefers dark mode", "preference", 0.95)
        assert mem.format_for_injection() == "Facts:\n- [preference | 0.95] Prefers dark mode"
        assert "Core Memory" not in mem.format_for_injection(query="Maya") and "Maya" not in mem.format_for_injection(
            query="Maya")


def test_core_takes_at_most_its_share_and_facts_stay(mem: Memory) -> None:
    mem.core.write("".join(f"- Core detail {i}: the user once mentioned project codename {i * 7919}\n"
                           for i in range(400)))
    for i in range(10):
        mem.facts.add(f"Fact {i} that must stay in the prompt", "knowledge", 0.9)
    text = mem.format_for_injection(max_tokens=1000)
    assert count_tokens(text) <= 1000 and not text.endswith(TRUNCATION_MARK)
    core, facts = text.split("\n\nFacts:\n")
    assert core.startswith("Core Memory:\n- Core detail 0:") and 450 <= count_tokens(core) <= 500
    bullets = core.splitlines()[1:]
    assert bullets == [f"- Core detail {i}: the user once mentioned project codename {i * 7919}"
                       for i in range(len(bullets))]  # a prefix of the file: cut from the end
    assert len(facts.splitlines()) == 10
    share = Memory(mem.root, embedder=HashEmbedder(), clock=FakeClock(datetime(2026, 3, 14, tzinfo=UTC)),
                   inject_core_max_share=0.2)
    with share:
        core_only = share.format_for_injection(max_tokens=1000).split("\n\nFacts:\n")[0]
        assert 150 <= count_tokens(core_only) <= 200


def test_core_bullets_most_relevant_first(floored: Memory) -> None:
    floored.core.write("- Likes hiking\n- Keeps bees in the garden\n- Has a cat\n- Sells honey from the bees\n")
    lines = floored.format_for_injection(query="bees").splitlines()
    assert sorted(lines[1:3]) == ["- Keeps bees in the garden", "- Sells honey from the bees"]
    assert sorted(lines[3:]) == ["- Has a cat", "- Likes hiking"]
    share = count_tokens("Core Memory:\n- Keeps bees in the garden\n- Sells honey from the bees")
    kept = floored.format_for_injection(query="bees", max_tokens=2 * share)  # Core may take half
    assert "bees" in kept and "hiking" not in kept and "cat" not in kept


def test_bullets_the_search_does_not_return_follow_in_file_order() -> None:
    bullets = [CoreItem(1, 1, "one"), CoreItem(2, 3, "two more"), CoreItem(4, 4, "three"), CoreItem(5, 5, "four"),
               CoreItem(6, 6, "five")]
    hits = [SearchHit("four", 0.9, "core", "MEMORY.md#L5-L5"), SearchHit("two more", 0.8, "core", "MEMORY.md#L2-L3"),
            SearchHit("tw", 0.7, "core", "MEMORY.md#L3-L3"), SearchHit("?", 0.6, "core", "chunk:9")]
    assert [b.text for b in core_by_relevance(bullets, hits)] == ["four", "two more", "one", "three", "five"]
    assert [b.text for b in core_by_relevance(bullets, [])] == ["one", "two more", "three", "four", "five"]


def test_relevant_notes_answer_from_the_journal_alone(floored: Memory) -> None:
    write_day(floored)
    assert floored.facts.list() == []
    assert floored.format_for_injection(query=MAYA_QUERY) == "Relevant notes:\n" + MAYA_NOTE
    assert floored.format_for_injection() == ""  # no query: no notes


def test_relevant_notes_cite_line_ranges_and_clip_long_records(floored: Memory) -> None:
    long_tail = " ".join(f"word{i}" for i in range(200))
    write_day(floored, "# Daily Memory: 2026-03-12\n\n## Notes (10:00)\n- Maya is moving\n"
                       "  to Lisbon in August\n- Maya packed boxes " + long_tail + "\n", day="2026-03-12")
    lines = floored.format_for_injection(query="Maya").splitlines()
    assert lines[0] == "Relevant notes:"
    assert "- 2026-03-12 (memory/2026-03-12.md#L4-L5): Maya is moving to Lisbon in August" in lines
    clipped = next(line for line in lines if "packed boxes" in line)
    assert clipped.startswith("- 2026-03-12 (memory/2026-03-12.md#L6): Maya packed boxes word0 word1")
    assert clipped.endswith(" …") and len(clipped) < 460 and "word199" not in clipped


def test_notes_follow_the_inject_notes_limit_and_skip_fact_duplicates(root: Path, clock: FakeClock) -> None:
    day = "# Daily Memory: 2026-03-14\n\n## Notes (09:30)\n" + "".join(f"- Maya detail {i}\n" for i in range(8))
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_inject_min_score=FLOOR, inject_notes=3) as mem:
        write_day(mem, day)
        notes = [line for line in mem.format_for_injection(query="Maya detail").splitlines() if "#L" in line]
        assert len(notes) == 3
        mem.facts.add("maya   DETAIL 0", "knowledge", 0.9)
        text = mem.format_for_injection(query="Maya detail 0")
        assert "- [knowledge | 0.90] maya DETAIL 0" in text and ": Maya detail 0\n" not in text + "\n"
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_inject_min_score=FLOOR, inject_notes=0) as mem:
        assert "Relevant notes:" not in mem.format_for_injection(query="Maya detail")


def test_relevant_notes_are_the_daily_hits_over_the_injection_floor(floored: Memory) -> None:
    write_day(floored)
    assert floored.search_floor("inject") == FLOOR
    for query in (MAYA_QUERY, "pizza", "quantum chromodynamics lattice"):
        hits = floored.search(query, k=floored.settings.inject_notes, tier="daily", min_score=FLOOR)
        text = floored.format_for_injection(query=query)
        notes = text.split("Relevant notes:\n")[1].splitlines() if "Relevant notes:" in text else []
        assert [line.split(": ", 1)[1] for line in notes] == [hit.text for hit in hits], query


def test_no_relevant_notes_for_an_off_topic_query(floored: Memory) -> None:
    write_day(floored)
    floored.facts.add("Prefers dark mode", "preference", 0.95)
    text = floored.format_for_injection(query="quantum chromodynamics lattice")
    assert "Relevant notes:" not in text and text == "Facts:\n- [preference | 0.95] Prefers dark mode"


def test_byte_stable_with_core_and_query(floored: Memory, clock: FakeClock) -> None:
    floored.core.write(CORE_MD)
    write_day(floored)
    floored.facts.add("Prefers dark mode", "preference", 0.95)
    first, plain = floored.format_for_injection(query=MAYA_QUERY), floored.format_for_injection()
    clock.advance(86400 * 3)
    assert floored.format_for_injection(query=MAYA_QUERY).encode() == first.encode()
    assert floored.format_for_injection().encode() == plain.encode()


def test_injected_text_is_never_extracted_again(floored: Memory) -> None:
    floored.facts.set_summaries({"workContext": "Marine biologist"})
    floored.core.write(CORE_MD)
    write_day(floored)
    floored.facts.add("Prefers dark mode", "preference", 0.95)
    text = floored.format_for_injection(query=MAYA_QUERY)
    assert "Core Memory:" in text and "Relevant notes:" in text
    assert strip_injected_memory(text) == ""
    assert strip_injected_memory("Thanks!\n\n" + text + "\n\nSee you") == "Thanks!\n\nSee you"


# --- the budget, step by step (render_injection is pure) -------------------------------------------
def _fact(content: str, confidence: float, n: int) -> Fact:
    at = datetime(2026, 3, 1, tzinfo=UTC)
    return Fact(f"f{n}", content, "knowledge", confidence, at, at)


PIECES_FACTS = [_fact("Fact high", 0.9, 1), _fact("Fact middle", 0.8, 2), _fact("Fact low", 0.7, 3)]
PIECES_NOTES = [Note("2026-03-14", "memory/2026-03-14.md#L4", "best note"),
                Note("2026-03-13", "memory/2026-03-13.md#L2-L3", "second note")]
PIECES_CORE = ["Core one", "Core two", "Core three"]


def _expected(core: int, facts: int, notes: int) -> str:
    parts = ["User Context:\n- Work: Engineer"]
    if core:
        parts.append("Core Memory:\n" + "\n".join(f"- {c}" for c in PIECES_CORE[:core]))
    if facts:
        parts.append("Facts:\n" + "\n".join(f"- [knowledge | {f.confidence:.2f}] {f.content}"
                                            for f in PIECES_FACTS[:facts]))
    if notes:
        lines = ["- 2026-03-14 (memory/2026-03-14.md#L4): best note",
                 "- 2026-03-13 (memory/2026-03-13.md#L2-L3): second note"]
        parts.append("Relevant notes:\n" + "\n".join(lines[:notes]))
    return "\n\n".join(parts)


def test_budget_drops_facts_then_notes_then_core_from_the_end() -> None:
    steps = [(3, 3, 2), (3, 2, 2), (3, 1, 2), (3, 0, 2), (3, 0, 1), (3, 0, 0), (2, 0, 0), (1, 0, 0), (0, 0, 0)]
    seen = []
    for step in steps:
        expected = _expected(*step)
        budget = count_tokens(expected)
        text = render_injection({"workContext": "Engineer"}, list(reversed(PIECES_FACTS)), budget, PIECES_CORE,
                                notes=PIECES_NOTES, core_max_share=1.0)
        assert text == expected, step
        seen.append(budget)
    assert seen == sorted(seen, reverse=True) and len(set(seen)) == len(seen)
    cut = render_injection({"workContext": "Engineer"}, PIECES_FACTS, seen[-1] - 1, PIECES_CORE,
                           notes=PIECES_NOTES, core_max_share=1.0)
    assert cut.endswith(TRUNCATION_MARK) and cut.startswith("User Context:\n-") and count_tokens(cut) < seen[-1]


def test_ranked_facts_drop_the_least_relevant_first_but_show_by_confidence() -> None:
    ranked = [PIECES_FACTS[2], PIECES_FACTS[0], PIECES_FACTS[1]]  # relevance order: low, high, middle
    two = "Facts:\n- [knowledge | 0.90] Fact high\n- [knowledge | 0.70] Fact low"
    assert render_injection({}, ranked, count_tokens(two), facts_ranked=True) == two


def test_core_share_counts_against_the_whole_budget() -> None:
    core = [f"Core bullet number {i}" for i in range(50)]
    text = render_injection({}, [], 100, core, core_max_share=0.5)
    assert text.startswith("Core Memory:\n- Core bullet number 0\n") and count_tokens(text) <= 50
    assert render_injection({}, [], 100, core, core_max_share=0.0) == ""


def test_citations_and_notes_from_hits() -> None:
    assert citation("memory/2026-03-14.md#L12-L12") == "memory/2026-03-14.md#L12"
    assert citation("memory/2026-03-14.md#L12-L14") == "memory/2026-03-14.md#L12-L14"
    assert citation("chunk:7") == "chunk:7"
    hits = [SearchHit("a\n  b", 0.9, "daily", "memory/2026-03-14.md#L3-L4", date="2026-03-14"),
            SearchHit("a b", 0.8, "daily", "memory/2026-03-14.md#L3-L4", date="2026-03-14"),
            SearchHit("a fact", 0.7, "fact", "f1")]
    assert notes_from_hits(hits) == [Note("2026-03-14", "memory/2026-03-14.md#L3-L4", "a b")]
    assert clip("x" * 1000).endswith(" …") and len(clip("x" * 1000)) == NOTE_MAX_CHARS + 2
