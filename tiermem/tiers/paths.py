"""Where a user's Markdown tiers live.

The default user keeps ``MEMORY.md`` and ``memory/`` at the root; any other user under
``users/<user_id>/``. User ids are validated (no separators, no ``..``) and the resolved
directory must stay inside the root, so no id — and no symlink planted under ``users/`` — can
point a write outside it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from tiermem import validate
from tiermem.errors import InvalidInput

DEFAULT_USER = "default"
USERS_DIR = "users"
CORE_FILE = "MEMORY.md"
DAILY_DIR = "memory"
DREAMS_DIR = "dreams"
_DAY_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")


@dataclass(frozen=True)
class UserPaths:
    """The files of one user: ``root/MEMORY.md``, ``root/memory/YYYY-MM-DD.md``, ``root/memory/dreams/``."""

    base: Path  # the Memory root
    user_id: str
    root: Path  # the directory holding this user's MEMORY.md and memory/

    @classmethod
    def for_user(cls, base: Path, user_id: str) -> UserPaths:
        validate.name(user_id, "user_id")
        base = base.resolve()
        root = base if user_id == DEFAULT_USER else base / USERS_DIR / user_id
        resolved = root.resolve()
        if resolved != base and not resolved.is_relative_to(base / USERS_DIR):
            raise InvalidInput(f"user_id {user_id!r} resolves outside the memory root")
        return cls(base, user_id, resolved)

    @property
    def core(self) -> Path:
        return self.root / CORE_FILE

    @property
    def daily_dir(self) -> Path:
        return self.root / DAILY_DIR

    @property
    def dreams_dir(self) -> Path:
        return self.daily_dir / DREAMS_DIR

    def daily(self, day: date) -> Path:
        return self.daily_dir / f"{day.isoformat()}.md"

    def relative(self, path: Path) -> str:
        """``path`` relative to the user's root with forward slashes, as index refs use it."""
        return path.relative_to(self.root).as_posix()

    def daily_files(self) -> list[tuple[date, Path]]:
        """The existing daily files (not dream diaries), oldest first."""
        if not self.daily_dir.is_dir():
            return []
        found: list[tuple[date, Path]] = []
        for entry in self.daily_dir.iterdir():
            day = day_of(entry.name)
            if day is not None and entry.is_file():
                found.append((day, entry))
        return sorted(found)


def day_of(file_name: str) -> date | None:
    """The date of a daily file name (``2026-03-14.md``), or None for any other name."""
    match = _DAY_FILE_RE.match(file_name)
    if not match:
        return None
    try:
        return date.fromisoformat(match.group(1))
    except ValueError:
        return None
