"""The Deep Dream request: a system prompt (package data ``tiermem/prompts/dream.md``, rendered
with today's date from the caller's clock and the size budget) and one user message holding the
current ``MEMORY.md`` and the daily records of the window, each under its date (R36).

Pure: no files, no clock of its own; the caller reads the sources and passes today's date.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime
from functools import lru_cache
from importlib import resources

from tiermem.errors import InvalidInput

PROMPT_RESOURCE = "prompts/dream.md"


@dataclass(frozen=True)
class DailySource:
    """The text of one daily file and its date."""

    day: date
    text: str


@dataclass(frozen=True)
class DreamBudget:
    """The size budgets: of the new ``MEMORY.md`` (the prompt demands it, the guards enforce it
    unless forced) and of the Daily text one call reads (:mod:`tiermem.dream.window`)."""

    max_bullets: int = 100
    max_tokens: int = 2000
    input_tokens: int = 12_000  # the most Daily text one call reads (``dream_input_tokens``; dream.window)

    def __post_init__(self) -> None:
        if self.max_bullets < 1 or self.max_tokens < 1 or self.input_tokens < 1:
            raise InvalidInput("the dream budget needs at least one bullet and one token")


@lru_cache(maxsize=1)
def prompt_template() -> str:
    """The raw template (placeholders ``{{today}}``, ``{{max_bullets}}``, ``{{max_tokens}}``)."""
    return resources.files("tiermem").joinpath(PROMPT_RESOURCE).read_text(encoding="utf-8")


def prompt_sha256() -> str:
    """SHA-256 of the template, to notice prompt changes next to stored reply fixtures."""
    return hashlib.sha256(prompt_template().encode("utf-8")).hexdigest()


def render_system_prompt(today: date, budget: DreamBudget) -> str:
    """The system prompt for ``today`` (a ``datetime`` is reduced to its date)."""
    if isinstance(today, datetime):
        today = today.date()
    if not isinstance(today, date):
        raise InvalidInput(f"today must be a date, got {type(today).__name__}")
    return (
        prompt_template()
        .replace("{{today}}", f"{today.isoformat()} ({today:%A})")
        .replace("{{max_bullets}}", str(budget.max_bullets))
        .replace("{{max_tokens}}", str(budget.max_tokens))
    )


def day_header(day: date) -> str:
    """The line that opens a day's records in the request: ``=== 2026-03-14 (Saturday) ===``."""
    return f"=== {day.isoformat()} ({day:%A}) ==="


def build_dream_messages(
    memory_text: str,
    dailies: Sequence[DailySource],
    today: date,
    budget: DreamBudget | None = None,
) -> list[dict[str, str]]:
    """``[{"role": "system", ...}, {"role": "user", ...}]`` for one Deep Dream.

    ``memory_text``: the current ``MEMORY.md`` ("" when there is none). ``dailies``: the daily
    files of the window with text (any order; sent oldest first).
    """
    if not dailies or not any(d.text.strip() for d in dailies):
        raise InvalidInput("a dream needs at least one daily record with text")
    budget = budget or DreamBudget()
    parts = ["CURRENT MEMORY.md", memory_text.strip() or "(empty)", "", "DAILY RECORDS"]
    for source in sorted(dailies, key=lambda d: d.day):
        if source.text.strip():
            parts += [day_header(source.day), source.text.strip(), ""]
    parts.append("Reply with the [MEMORY] and [DREAM] sections only.")
    return [
        {"role": "system", "content": render_system_prompt(today, budget)},
        {"role": "user", "content": "\n".join(parts)},
    ]
