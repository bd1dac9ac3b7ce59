"""The Core file ``MEMORY.md`` (R13): ``- `` bullets, optionally grouped under ``## `` headings.

It is read fresh on every call, so a person's edits are seen at once; :meth:`CoreFile.write`
replaces it atomically (temp file in the same directory, fsync, rename, fsync of the directory),
so a crash leaves either the old or the new file, never half of one.
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tiermem.errors import InvalidInput, StorageError
from tiermem.tiers.daily import file_lock
from tiermem.tiers.markdown import fold, parse_records
from tiermem.tiers.paths import UserPaths

log = logging.getLogger(__name__)

LOCK_FILE = ".core.lock"
_NESTED_BULLET_RE = re.compile(r"^\s*[-*+][ \t]+(.*\S)\s*$")
MAX_CORE_CHARS = 2_000_000


@dataclass(frozen=True)
class CoreSection:
    """Bullets under one heading (``None`` for those before the first heading)."""

    heading: str | None
    items: list[str] = field(default_factory=list)


class CoreListener(Protocol):
    def rewritten(self, path: Path) -> None: ...


def parse_core(text: str) -> list[CoreSection]:
    """The sections of a ``MEMORY.md`` text; text that is not a bullet is not an item. An item is
    one line: a bullet's continuation lines (indented or lazy) are folded onto it, and a nested
    bullet (``  - ...``) is an item of its own."""
    sections: list[CoreSection] = []
    for record in parse_records(text):
        if not record.bullet:
            continue
        items = bullet_items(record.text)
        if not items:
            continue
        if not sections or sections[-1].heading != record.heading:
            sections.append(CoreSection(record.heading))
        sections[-1].items.extend(items)
    return sections


def bullet_items(text: str) -> list[str]:
    """The one-line items of one bullet's text: nested bullets split off, whitespace folded."""
    groups: list[list[str]] = [[]]
    for line in text.split("\n"):
        nested = _NESTED_BULLET_RE.match(line)
        if nested is not None and groups[-1]:
            groups.append([nested.group(1)])
        else:
            groups[-1].append(line)
    return [item for item in (fold(" ".join(group)) for group in groups) if item]


def render_core(sections: Sequence[CoreSection]) -> str:
    """``MEMORY.md`` text for ``sections``: ``## heading`` blocks of ``- `` bullets."""
    blocks: list[str] = []
    for section in sections:
        lines = [f"- {fold(item)}" for item in section.items if fold(item)]
        if section.heading:
            lines.insert(0, f"## {fold(section.heading)}")
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else ""


class CoreFile:
    """One user's ``MEMORY.md``."""

    def __init__(self, paths: UserPaths, listener: CoreListener | None = None) -> None:
        self.paths = paths
        self.listener = listener

    @property
    def path(self) -> Path:
        return self.paths.core

    def read(self) -> str:
        """The file's text; ``""`` when it does not exist yet."""
        try:
            return self.path.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise StorageError(f"cannot read {self.path}: {exc}") from exc

    def sections(self) -> list[CoreSection]:
        return parse_core(self.read())

    def items(self) -> list[str]:
        """Every bullet's text, in file order; headings dropped."""
        return [item for section in self.sections() for item in section.items]

    def write(self, text: str) -> Path:
        """Replace ``MEMORY.md`` with ``text`` atomically and re-index it."""
        if not isinstance(text, str):
            raise InvalidInput(f"MEMORY.md text must be a string, got {type(text).__name__}")
        if len(text) > MAX_CORE_CHARS:
            raise InvalidInput(f"MEMORY.md text is {len(text)} characters; the limit is {MAX_CORE_CHARS}")
        if "\x00" in text:
            raise InvalidInput("MEMORY.md text contains NUL characters")
        if text and not text.endswith("\n"):
            text += "\n"
        with file_lock(self.paths.root / LOCK_FILE):
            atomic_write(self.path, text.encode("utf-8"))
        if self.listener is not None:
            try:
                self.listener.rewritten(self.path)
            except Exception as exc:  # the file is the truth; refresh_index heals the index
                log.warning("index update for %s failed (refresh_index will retry): %s", self.path, exc)
        return self.path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        mode = 0o644
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.chmod(temp, mode)
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise StorageError(f"cannot write {path}: {exc}") from exc
    try:
        dir_fd = os.open(path.parent, os.O_RDONLY)
    except OSError:
        return  # e.g. Windows: directories cannot be opened; the rename is still atomic
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
