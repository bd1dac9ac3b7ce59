"""The Core file ``MEMORY.md`` (R13): ``- `` bullets, optionally grouped under ``## `` headings.

It is read fresh on every call, so a person's edits are seen at once; :meth:`CoreFile.write`
replaces it atomically (temp file in the same directory, fsync, rename, fsync of the directory),
so a crash leaves either the old or the new file, never half of one. The file is ``0600``.

With a ``scrub`` (the store's redaction, R68) what :meth:`CoreFile.write` writes is redacted, and
so is what :meth:`CoreFile.read` returns: a secret a person typed into ``MEMORY.md`` by hand stays
in their file but not in anything tiermem derives from it (the injection text, the Deep Dream's
input and output, kept versions; the index and exports redact on their own). A ``MEMORY.md``
that is a symlink leading outside the memory root is refused (see :mod:`tiermem.tiers.paths`).
"""

from __future__ import annotations

import logging
import os
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from tiermem import validate
from tiermem.errors import InvalidInput, StorageError
from tiermem.tiers.daily import file_lock
from tiermem.tiers.markdown import fold, parse_records
from tiermem.tiers.paths import UserPaths, make_dirs, read_file

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

    def __init__(self, paths: UserPaths, listener: CoreListener | None = None,
                 scrub: Callable[[str], str] | None = None) -> None:
        self.paths = paths
        self.listener = listener
        self.scrub = scrub  # e.g. tiermem.redact.redact; None: text is kept as it is

    def clean(self, text: str) -> str:
        """``text`` redacted by this file's ``scrub`` (the dream diary uses it too)."""
        return self.scrub(text) if self.scrub is not None else text

    @property
    def path(self) -> Path:
        return self.paths.core

    def read(self) -> str:
        """The file's text, redacted by ``scrub``; ``""`` when it does not exist yet."""
        try:
            data = read_file(self.paths.inside(self.path))
        except FileNotFoundError:
            return ""
        return self.clean(data.decode("utf-8", errors="replace"))

    def sections(self) -> list[CoreSection]:
        return parse_core(self.read())

    def items(self) -> list[str]:
        """Every bullet's text, in file order; headings dropped."""
        return [item for section in self.sections() for item in section.items]

    def write(self, text: str) -> Path:
        """Replace ``MEMORY.md`` with ``text`` (redacted by ``scrub``) atomically and re-index it."""
        if not isinstance(text, str):
            raise InvalidInput(f"MEMORY.md text must be a string, got {type(text).__name__}")
        if len(text) > MAX_CORE_CHARS:
            raise InvalidInput(f"MEMORY.md text is {len(text)} characters; the limit is {MAX_CORE_CHARS}")
        if "\x00" in text:
            raise InvalidInput("MEMORY.md text contains NUL characters")
        validate.unicode_text(text, "MEMORY.md text")
        text = self.clean(text)
        if text and not text.endswith("\n"):
            text += "\n"
        with file_lock(self.paths.inside(self.paths.root / LOCK_FILE)):
            atomic_write(self.paths.inside(self.path), text.encode("utf-8"))
        if self.listener is not None:
            try:
                self.listener.rewritten(self.path)
            except Exception as exc:  # the file is the truth; refresh_index heals the index
                log.warning("index update for %s failed (refresh_index will retry): %s", self.path, exc)
        return self.path


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory, fsync, rename. The file
    is ``0600`` (``mkstemp``'s mode), whatever it was; missing folders are created ``0700``. A
    symlink at ``path`` is replaced, not followed (callers pass :meth:`UserPaths.inside` paths)."""
    try:
        make_dirs(path.parent)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise StorageError(f"cannot write {path}: {exc}") from exc
    try:
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
