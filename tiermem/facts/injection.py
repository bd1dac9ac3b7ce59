"""The injection text of R21/R22: summaries and facts for a system prompt, under a token budget.

The output depends only on what is stored (and the query), never on the time, so it is
byte-stable while memory does not change and prompt caches stay warm.
"""

from __future__ import annotations

from collections.abc import Sequence

from tiermem.tokens import count_tokens, truncate_to_tokens
from tiermem.types import Fact

TRUNCATION_MARK = "\n..."

_USER_LABELS = (("workContext", "Work"), ("personalContext", "Personal"), ("topOfMind", "Current Focus"))
_HISTORY_LABELS = (("recentMonths", "Recent"), ("earlierContext", "Earlier"), ("longTermBackground", "Background"))


def fact_line(fact: Fact) -> str:
    """``- [category | 0.95] content`` (the seed's format)."""
    return f"- [{fact.category} | {fact.confidence:.2f}] {_one_line(fact.content)}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _section(title: str, lines: Sequence[str]) -> str:
    return title + ":\n" + "\n".join(lines) if lines else ""


def _header_sections(summaries: dict[str, str], core_items: Sequence[str]) -> list[str]:
    user = [f"- {label}: {_one_line(summaries[key])}" for key, label in _USER_LABELS if summaries.get(key)]
    history = [f"- {label}: {_one_line(summaries[key])}" for key, label in _HISTORY_LABELS if summaries.get(key)]
    core = [f"- {_one_line(item)}" for item in core_items]
    return [s for s in (_section("User Context", user), _section("History", history),
                        _section("Core Memory", core)) if s]


def rank_facts(facts: Sequence[Fact]) -> list[Fact]:
    """Confidence descending; ties broken by age then id so the order is stable."""
    return sorted(facts, key=lambda f: (-f.confidence, f.created_at, f.id))


def render_injection(
    summaries: dict[str, str],
    facts: Sequence[Fact],
    max_tokens: int,
    core_items: Sequence[str] = (),
    facts_ranked: bool = False,
) -> str:
    """Build the text; over budget, drop facts from the end of the ranking (lowest confidence,
    or least relevant when ``facts_ranked``), then cut characters and append ``"\\n..."``."""
    ordered = list(facts) if facts_ranked else rank_facts(facts)
    header = _header_sections(summaries, core_items)

    def build(keep: int) -> str:
        lines = [fact_line(f) for f in ordered[:keep]]
        if facts_ranked:  # relevance chose which facts stay; show them by confidence
            lines = [fact_line(f) for f in rank_facts(ordered[:keep])]
        return "\n\n".join([*header, _section("Facts", lines)] if lines else header)

    text = build(len(ordered))
    if count_tokens(text) <= max_tokens:
        return text
    low, high = 0, len(ordered)  # the most facts that fit: fits(low) or low == 0
    while low < high:
        mid = (low + high + 1) // 2
        if count_tokens(build(mid)) <= max_tokens:
            low = mid
        else:
            high = mid - 1
    text = build(low)
    if count_tokens(text) <= max_tokens:
        return text
    room = max(max_tokens - count_tokens(TRUNCATION_MARK), 0)
    return truncate_to_tokens(text, room) + TRUNCATION_MARK
