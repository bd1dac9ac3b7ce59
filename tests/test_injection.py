"""The injection text of R21 (format, order, budget) and its byte-stability (R22)."""

from __future__ import annotations

from tiermem import Memory
from tiermem.facts.injection import TRUNCATION_MARK
from tiermem.testing import FakeClock
from tiermem.tokens import count_tokens


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
