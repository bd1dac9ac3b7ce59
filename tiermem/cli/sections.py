"""The sections of an export in words a user knows (``tiermem import``, ``tiermem migrate``).

The export's sections are named after tables (``consolidated_prefix``, ``flush_hashes``); what
the CLI prints says "facts", "history entries", "vectors", and counts tiermem's own bookkeeping
(the digests of journaled and extracted messages, the dream marks) together.
"""

from __future__ import annotations

from collections.abc import Mapping

from tiermem.plural import counted

#: section -> (one, many)
WORDS: dict[str, tuple[str, str]] = {
    "facts": ("fact", "facts"),
    "summaries": ("user-context summary", "user-context summaries"),
    "tombstones": ("deleted-fact mark", "deleted-fact marks"),
    "audit": ("history entry", "history entries"),
    "plans": ("plan", "plans"),
    "core_versions": ("MEMORY.md version", "MEMORY.md versions"),
    "store_items": ("LangGraph store item", "LangGraph store items"),
    "agent_sessions": ("agent session", "agent sessions"),
    "session_items": ("agent session item", "agent session items"),
    "outbox": ("queued conversation", "queued conversations"),
    "embeddings": ("vector", "vectors"),
    "files": ("Markdown file", "Markdown files"),
    "consolidated_days": ("whole-day dream mark of an older export", "whole-day dream marks of an older export"),
}
#: sections of tiermem's own bookkeeping, counted as one
BOOKKEEPING = frozenset({"dream_state", "consolidated_prefix", "flush_hashes", "extracted_hashes"})
#: why rows of a section are refused (the sections an older export holds and this store drops)
REFUSED_BECAUSE = {"consolidated_days": "they cannot say which bytes the dream read; those days wait for the next "
                                        "Deep Dream"}


def describe(counts: Mapping[str, int]) -> str:
    """``3 facts, 12 history entries, 40 vectors, 9 bookkeeping records``; ``nothing`` for no count."""
    parts = [counted(n, *WORDS.get(name, (name.replace("_", " "), name.replace("_", " "))))
             for name, n in counts.items() if n and name not in BOOKKEEPING]
    bookkeeping = sum(n for name, n in counts.items() if name in BOOKKEEPING)
    if bookkeeping:
        parts.append(counted(bookkeeping, "bookkeeping record"))
    return ", ".join(parts) or "nothing"


def refused_line(counts: Mapping[str, int]) -> str:
    """What an import refused, and why."""
    reasons = [REFUSED_BECAUSE[name] for name, n in counts.items() if n and name in REFUSED_BECAUSE]
    return describe(counts) + (f" ({'; '.join(reasons)})" if reasons else "")
