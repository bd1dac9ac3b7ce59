"""One user's Markdown files — the Daily journal (``memory/YYYY-MM-DD.md``) and ``MEMORY.md`` —
wherever the store keeps them.

Paths are relative to the user's root, with forward slashes (``"MEMORY.md"``,
``"memory/2026-01-02.md"``). Two implementations, chosen with the database
(``db.parts.files(db, paths, mirror=...)``):

- **SQLite** (:mod:`tiermem.storage.sqlite.files`): the files under the root *are* the store,
  written as tiermem always wrote them (``0600``, ``O_NOFOLLOW``, links out of the root refused,
  fsync with ``sqlite_synchronous = "full"``). :meth:`MemoryFiles.mirror_path` is the file itself
  and :meth:`MemoryFiles.refresh` does nothing.
- **PostgreSQL** (:mod:`tiermem.storage.postgres.files`): rows in the shared database; a day is
  the blocks appended to it, in order. Each process mirrors the files to its own root so a person
  can read them: rewritten after each of this process's writes (setting ``mirror_files``, on by
  default) and refreshed from the database when the store opens and on ``tiermem mirror``. A
  mirrored file is never read back: the database is the truth.

Either way the bytes a reader gets are the bytes of the (mirrored) file, so line numbers —
citations ``memory/DATE.md#Lx-Ly`` — are the same in both.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from tiermem.paths import UserPaths
    from tiermem.storage.sql import Database, WriteKey


@dataclass(frozen=True)
class FileStat:
    """A file's length in bytes and a cheap key that changes whenever its content may have
    (SQLite: mtime, size and inode; PostgreSQL: the file's revision)."""

    size: int
    key: Hashable


class MemoryFiles(Protocol):
    """One user's Markdown files by relative path (see the module docstring).

    Writers of the Daily journal hold the journal lock around :meth:`append`, :meth:`truncate`
    and :meth:`remove`; :meth:`replace` is atomic on its own. Failures raise
    :class:`~tiermem.errors.StorageError` (a link out of the root:
    :class:`~tiermem.errors.UnsafePath`)."""

    @property
    def paths(self) -> UserPaths:
        """The user's layout under the local root (where the files, or their mirror, are)."""
        ...

    @property
    def durable_files(self) -> bool:
        """True when the local files are the store itself (SQLite), so a hand edit is the truth;
        False when they are a mirror of the database, never read back."""
        ...

    def read(self, rel: str) -> bytes | None:
        """The file's bytes, or None when there is no such file."""
        ...

    def stat(self, rel: str) -> FileStat | None:
        """Length and change key, without reading the content; None when there is no such file."""
        ...

    def prefetch(self, rel: str) -> None:
        """``rel`` will be read soon inside this :meth:`writing` block: send the read ahead, so it
        travels with the block's first read (PostgreSQL; nothing where the files are local)."""
        ...

    def scan(self, folder: str) -> dict[str, FileStat]:
        """``rel -> stat`` of the files directly in ``folder`` ("" is the user's root; dot files
        such as lock files are left out)."""
        ...

    def scan_with(self, folder: str, rels: Sequence[str]) -> dict[str, FileStat]:
        """:meth:`scan` of ``folder`` with the :meth:`stat` of each of ``rels`` that exists, in one
        read on PostgreSQL."""
        ...

    def append(self, rel: str, data: bytes) -> int:
        """Append ``data`` (creating the file); returns the offset where it starts. The caller
        holds the journal lock. A failed append leaves the file as it was."""
        ...

    def truncate(self, rel: str, size: int) -> None:
        """Cut the file back to ``size`` bytes (0 removes it): the torn tail of an interrupted
        append. The caller holds the journal lock."""
        ...

    def replace(self, rel: str, data: bytes) -> None:
        """Create or replace the whole file, atomically (a crash leaves the old or the new)."""
        ...

    def remove(self, rel: str) -> bool:
        """Delete the file; False when there was none."""
        ...

    def mirror_path(self, rel: str) -> Path:
        """The local file a person reads for ``rel`` (under the user's root)."""
        ...

    @property
    def on_refresh(self) -> dict[str, Callable[[], None]]:
        """Hooks :meth:`refresh` runs first, by name (Core imports a hand-edited ``MEMORY.md``
        mirror before the mirror is rewritten)."""
        ...

    def refresh(self, *, full: bool = False) -> list[str]:
        """Run :attr:`on_refresh`, then rewrite the local mirror from the store where it differs
        (nothing more where the files are the store); returns the files rewritten. A mirror file
        of the right length is taken as up to date unless ``full`` (``tiermem mirror``), which
        compares every byte."""
        ...

    def writing(self, key: WriteKey | None = None) -> AbstractContextManager[None]:
        """Group writes: inside it, this thread's writes and the database writes made through
        ``db.transaction()`` commit together where the files live in the database (PostgreSQL:
        one transaction, so a journal append and the record of it are one step); the mirror is
        rewritten when the outermost block ends. On SQLite each write is done at once. ``key``:
        what the transaction locks (:meth:`Database.transaction`), the user's files by default
        (:func:`~tiermem.storage.sql.user_key`); a store-wide caller passes ``STORE``."""
        ...

    def list(self, folder: str) -> list[str]:
        """The relative paths of the files directly in ``folder``, sorted (as :meth:`scan`)."""
        ...


class FilesFactory(Protocol):
    """``db.parts.files``: the :class:`MemoryFiles` of one user of the store ``db``.

    ``mirror``: keep the local mirror up to date (PostgreSQL; setting ``mirror_files``)."""

    def __call__(self, db: Database, paths: UserPaths, *, mirror: bool = True) -> MemoryFiles: ...
