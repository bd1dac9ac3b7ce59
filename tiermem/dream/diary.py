"""The dream diary: ``memory/dreams/YYYY-MM-DD.md`` under ``# Dream Diary: YYYY-MM-DD`` (R37).

One ``## Dream (HH:MM)`` entry per written dream; a second dream on the same day appends to the
same file. Each entry holds the model's ``[DREAM]`` text and what tiermem decided: the days read,
the bullet counts, the version that keeps the old ``MEMORY.md``, the older records the input
budget left out (if any), the bullets dropped as
unsupported by the sources (R40) and, for a forced rewrite, the prior bullets it lost.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from datetime import date, datetime
from pathlib import Path

from tiermem.errors import StorageError
from tiermem.tiers.markdown import fold
from tiermem.tiers.paths import make_dirs, open_private

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


def append_diary(directory: Path, day: date, entry: str) -> Path:
    """Append ``entry`` to the diary of ``day`` (created with its title); returns its path."""
    path = directory / f"{day.isoformat()}.md"
    try:
        make_dirs(directory)  # 0700 folders, a 0600 file, never written through a symlink
        flags = os.O_RDWR | os.O_CREAT | os.O_APPEND
        with os.fdopen(open_private(path, flags), "a+", encoding="utf-8") as handle:
            handle.seek(0)
            old = handle.read()
            prefix = f"{DIARY_TITLE.format(day=day.isoformat())}\n\n" if not old else (
                "\n" if old.endswith("\n") else "\n\n")
            handle.write(prefix + entry)
            handle.flush()
    except OSError as exc:
        raise StorageError(f"cannot write the dream diary {path}: {exc}") from exc
    return path
