"""The dream diary: ``memory/dreams/YYYY-MM-DD.md`` under ``# Dream Diary: YYYY-MM-DD`` (R37).

One ``## Dream (HH:MM)`` entry per written dream; a second dream on the same day appends to the
same file. Each entry holds the model's ``[DREAM]`` text and what tiermem decided: the days read,
the bullet counts, the version that keeps the old ``MEMORY.md``, the older records the input
budget left out (if any), the bullets dropped as
unsupported by the sources (R40) and, for a forced rewrite, the prior bullets it lost.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from typing import TYPE_CHECKING

from tiermem.paths import DAILY_DIR, DREAMS_DIR
from tiermem.tiers.markdown import fold

if TYPE_CHECKING:
    from tiermem.storage.files import MemoryFiles

DIARY_TITLE = "# Dream Diary: {day}"


def diary_entry(moment: datetime, diary: str, days: Sequence[str], prior: int, after: int, version_id: int,
                dropped: Sequence[tuple[str, str]], lost: Sequence[str], left_out: str = "") -> str:
    """The Markdown of one entry (``moment`` in the user's time zone); ``left_out`` says which
    records the input budget kept from the dream ("" when it read everything)."""
    lines = [
        f"## Dream ({moment:%H:%M})",
        f"Days read: {', '.join(days)}. MEMORY.md: {prior} -> {after} bullets "
        f"(the previous file is version {version_id}; `tiermem rollback {version_id}` restores it).",
        *([f"Left out: {left_out}."] if left_out else []),
        "",
        diary.strip() or "(the model wrote no diary)",
    ]
    if dropped:
        lines += ["", "### Dropped: not supported by the sources"]
        lines += [f"- {fold(text)} — {reason}" for text, reason in dropped]
    if lost:
        lines += ["", "### Prior bullets not kept (forced)"]
        lines += [f"- {fold(text)}" for text in lost]
    return "\n".join(lines) + "\n"


def diary_rel(day: date) -> str:
    """``memory/dreams/YYYY-MM-DD.md``: the diary of ``day`` relative to the user's root."""
    return f"{DAILY_DIR}/{DREAMS_DIR}/{day.isoformat()}.md"


def append_diary(files: MemoryFiles, day: date, entry: str) -> str:
    """Append ``entry`` to the diary of ``day`` (created with its title) among the user's files
    (a ``0600`` file on SQLite, never written through a symlink; rows on PostgreSQL); returns
    its relative path. The caller holds the user's dream lock."""
    rel = diary_rel(day)
    old = files.read(rel) or b""
    prefix = f"{DIARY_TITLE.format(day=day.isoformat())}\n\n" if not old else (
        "\n" if old.endswith(b"\n") else "\n\n")
    files.append(rel, (prefix + entry).encode("utf-8"))
    return rel
