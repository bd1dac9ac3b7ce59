"""Wires the built-in sources to a ``Memory``: memory injection, active plan, recent daily notes.

The memory source is ``Memory.format_for_injection()`` without a query: summaries, ``Core
Memory:`` (the ``MEMORY.md`` bullets in file order, when ``inject_core``) and facts; no relevant
notes (there is no query), the recent daily files have their own source.

Epochs: memory = (the scope's fact/summary change counter kept by database triggers, the sha256
of the stored ``MEMORY.md`` bytes, so a dream, a write on another host and a hand edit all move
it; on PostgreSQL a hand edit of the mirror is imported first, as reading Core does); plan =
(active plan id, revision); daily = (dates of the window, the journal's stamps of those days:
file stat on SQLite, the day's revision in the database on PostgreSQL). All of them follow writes
of other processes and hosts; none renders, redacts or tokenises anything; the memory epoch
reads ``MEMORY.md`` to hash it (~0.1 ms for 130 KB).
"""

from __future__ import annotations

import hashlib
from typing import TYPE_CHECKING

from tiermem.paths import CORE_FILE
from tiermem.storage.epochs import memory_epoch
from tiermem.syscontext.builder import ContextSource, SystemContext
from tiermem.syscontext.sources import daily_source, memory_source, plan_source

if TYPE_CHECKING:
    from tiermem.memory import Memory

DAILY_DAYS = 2
DAILY_MAX_TOKENS = 1000


def memory_sources(mem: Memory, daily_days: int = DAILY_DAYS,
                   daily_max_tokens: int = DAILY_MAX_TOKENS) -> list[ContextSource]:
    """The three built-in sources of ``mem``'s scope, in system-prompt order."""
    journal, core = mem.daily, mem.core

    def injection_epoch() -> object:
        core.sync()  # PostgreSQL: a hand edit of the mirrored MEMORY.md becomes the stored text first
        return memory_epoch(mem.db, mem.scope), bytes_digest(core.files.read(CORE_FILE))

    def continuation() -> str | None:
        plan = mem.plans.active()
        return plan.continuation_prompt() if plan is not None else None

    return [
        memory_source(mem.format_for_injection, injection_epoch),
        plan_source(mem.plans.active_version, continuation),
        daily_source(journal.read, journal.today, daily_days, daily_max_tokens, stamp=journal.stamp),
    ]


def bytes_digest(data: bytes | None) -> str | None:
    """sha256 of a file's bytes (``None``: no file): moves on every edit, even one that keeps the size."""
    return None if data is None else hashlib.sha256(data).hexdigest()


def memory_system_context(mem: Memory) -> SystemContext:
    """A :class:`SystemContext` with ``mem``'s built-in sources; add custom ones with ``add_source``."""
    return SystemContext(memory_sources(mem))
