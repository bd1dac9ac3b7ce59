"""Shared set-up of the Deep Dream tests: a Memory with a scripted LLM and a fake clock."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
YESTERDAY = NOW - timedelta(days=1)

PRIOR_MEMORY = """## Work
- Works as a backend engineer at Acme Corp.
- Main language at work is Go.

## Personal
- Lives in Lyon with partner Claire.
- Has a cat named Pixel.
"""

YESTERDAY_LINES = ["user: I accepted an offer from Siemens, starting on April 1st as a platform engineer."]
TODAY_LINES = ["user: We are moving from Lyon to Munich at the end of March.",
               "user: Claire found a flat in Schwabing, 3 rooms."]

GOOD_REPLY = """[MEMORY]
## Work
- Works as a backend engineer at Acme Corp.
- Main language at work is Go.
- Accepted an offer from Siemens as a platform engineer, starting April 1.

## Personal
- Lives in Lyon with partner Claire; moving to Munich at the end of March.
- Claire found a flat in Schwabing with 3 rooms.
- Has a cat named Pixel.

[DREAM]
Added the Siemens offer and the move to Munich; kept everything else.
"""


def open_memory(root: Path, clock: FakeClock, replies: list[str | BaseException | type[BaseException]],
                **settings: object) -> tuple[Memory, ScriptedChatModel]:
    llm = ScriptedChatModel(replies)
    mem = Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)
    return mem, llm


def seed(mem: Memory, memory: str | None = PRIOR_MEMORY) -> None:
    """MEMORY.md plus two days of daily records (yesterday and today)."""
    if memory is not None:
        mem.core.write(memory)
    mem.daily.append("Session Notes", YESTERDAY_LINES, at=YESTERDAY)
    mem.daily.append("Session Notes", TODAY_LINES, at=NOW)
