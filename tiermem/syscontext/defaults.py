"""Wires the built-in sources to a ``Memory``: memory injection, active plan, recent daily notes.

The memory source is ``Memory.format_for_injection()`` without a query: summaries, ``Core
Memory:`` (the ``MEMORY.md`` bullets in file order, when ``inject_core``) and facts; no relevant
notes (there is no query), the recent daily files have their own source.

Epochs: memory = (the scope's fact/summary change counter kept by SQLite triggers, the sha256
of ``MEMORY.md``, so a dream and a hand edit both move it); plan = (active plan id, revision);
daily = (dates of the window, stamps of those daily files). None of them renders or tokenises
anything; the memory epoch reads ``MEMORY.md`` (a small file) to hash it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from tiermem.storage.epochs import memory_epoch
from tiermem.syscontext.builder import ContextSource, SystemContext
from tiermem.syscontext.sources import daily_source, file_digest, memory_source, plan_source

if TYPE_CHECKING:
    from tiermem.memory import Memory

DAILY_DAYS = 2
DAILY_MAX_TOKENS = 1000


def memory_sources(mem: Memory, daily_days: int = DAILY_DAYS,
                   daily_max_tokens: int = DAILY_MAX_TOKENS) -> list[ContextSource]:
    """The three built-in sources of ``mem``'s scope, in system-prompt order."""
    journal, core_path = mem.daily, mem.core.path

    def injection_epoch() -> object:
        return memory_epoch(mem.db, mem.scope), file_digest(core_path)

    def continuation() -> str | None:
        plan = mem.plans.active()
        return plan.continuation_prompt() if plan is not None else None

    return [
        memory_source(mem.format_for_injection, injection_epoch),
        plan_source(mem.plans.active_version, continuation),
        daily_source(journal.read, journal.today, daily_days, daily_max_tokens, path_for=journal.path_for),
    ]


def memory_system_context(mem: Memory) -> SystemContext:
    """A :class:`SystemContext` with ``mem``'s built-in sources; add custom ones with ``add_source``."""
    return SystemContext(memory_sources(mem))
