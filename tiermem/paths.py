"""Where a user's Markdown tiers live, and how tiermem opens files under the memory root.

A ground-floor module (it needs only :mod:`tiermem.validate` and :mod:`tiermem.errors`): storage,
the tiers, the doctor and the coding-agent hooks all open their files through it.

The default user keeps ``MEMORY.md`` and ``memory/`` at the root; any other user under
``users/<user_id>/``. User ids are validated (no separators, no ``..``).

**Symlinks.** The root itself may be a symlink (people keep it in a synced folder): it is resolved
once. A link *inside* it — ``users/bob``, ``users/bob/memory``, a Daily file, ``MEMORY.md`` — that
leads outside the root is refused with :class:`~tiermem.errors.UnsafePath` before anything is
read or written, unless the setting ``allow_symlinks = true``; a link that stays inside the root
is followed. :meth:`UserPaths.inside` does that check and returns the real path to open; files are
then opened with ``O_NOFOLLOW`` (where the platform has it), so a link swapped in after the check
is refused too.

**File modes.** Folders tiermem creates get ``0700`` (:func:`make_dirs`) and files it writes
``0600`` (:func:`open_private`; a file that exists with looser bits is tightened on the next
write): a memory store holds what people told their agents. Existing folders are left alone.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from tiermem import validate
from tiermem.errors import StorageError, UnsafePath

DEFAULT_USER = "default"
USERS_DIR = "users"
CORE_FILE = "MEMORY.md"
DAILY_DIR = "memory"
DREAMS_DIR = "dreams"
FILE_MODE = 0o600  # every file tiermem writes
DIR_MODE = 0o700  # every folder tiermem creates
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)  # 0 where the platform has no such flag (Windows)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_BINARY = getattr(os, "O_BINARY", 0)
_DAY_FILE_RE = re.compile(r"^(\d{4}-\d{2}-\d{2})\.md$")
_HINT = "remove the link, or set allow_symlinks = true (TIERMEM_ALLOW_SYMLINKS=1) to follow links out of the root"


@dataclass(frozen=True)
class UserPaths:
    """The files of one user: ``root/MEMORY.md``, ``root/memory/YYYY-MM-DD.md``, ``root/memory/dreams/``."""

    base: Path  # the Memory root, resolved
    user_id: str
    root: Path  # the directory holding this user's MEMORY.md and memory/
    allow_symlinks: bool = False  # follow links that lead outside ``base``

    @classmethod
    def for_user(cls, base: Path, user_id: str, allow_symlinks: bool = False) -> UserPaths:
        validate.name(user_id, "user_id")
        base = base.resolve()
        root = base if user_id == DEFAULT_USER else base / USERS_DIR / user_id
        resolved = root.resolve()
        inside = resolved == base if user_id == DEFAULT_USER else resolved != base and resolved.is_relative_to(base)
        if not inside and not allow_symlinks:
            raise UnsafePath(f"user_id {user_id!r}: {root.relative_to(base).as_posix()} resolves outside the memory"
                             f" root {base} (to {resolved}); {_HINT}", root)
        return cls(base, user_id, resolved, allow_symlinks)

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

    def store_name(self, rel: str) -> str:
        """``rel`` (relative to this user's root) relative to the memory root, built from the user
        id, not from resolved paths: ``memory/.journal.lock`` or ``users/bob/memory/.journal.lock``
        (the names of named locks, :attr:`tiermem.storage.sql.Backend.lock`)."""
        return rel if self.user_id == DEFAULT_USER else f"{USERS_DIR}/{self.user_id}/{rel}"

    def relative(self, path: Path) -> str:
        """``path`` relative to the user's root with forward slashes, as index refs use it."""
        return path.relative_to(self.root).as_posix()

    def inside(self, path: Path) -> Path:
        """The real path to open for ``path`` (a file or folder under this user's root, existing
        or not): links are resolved, and one that leads outside the memory root raises
        :class:`UnsafePath` unless ``allow_symlinks``."""
        real = Path(os.path.realpath(path))
        if self.allow_symlinks or real == self.base or real.is_relative_to(self.base):
            return real
        try:
            shown = path.relative_to(self.base).as_posix()
        except ValueError:
            shown = str(path)
        raise UnsafePath(f"{shown} leads outside the memory root {self.base} (to {real}) through a symbolic link;"
                         f" tiermem does not follow it: {_HINT}", path)

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


def make_dirs(path: Path) -> None:
    """Create ``path`` and its missing parents, each ``0700``; folders that exist are left as they
    are, and so are those another process makes meanwhile (errors as ``Path.mkdir(parents=True,
    exist_ok=True)`` raises them)."""
    try:
        _make_dir(path)
    except FileNotFoundError:
        if path.parent == path:
            raise
        make_dirs(path.parent)  # missing when tried, or made by another process since
        _make_dir(path)  # still not found: no folder can be made there (e.g. under /proc)


def _make_dir(path: Path) -> None:
    try:
        path.mkdir(mode=DIR_MODE)
    except FileNotFoundError:
        raise
    except OSError:
        if path.is_dir():  # there already (or made by someone else meanwhile)
            return
        raise
    with contextlib.suppress(OSError):
        os.chmod(path, DIR_MODE)  # mkdir's mode passes through the umask


@contextlib.contextmanager
def made_dirs(path: Path) -> Iterator[None]:
    """:func:`make_dirs` for a body that may fail: when it raises, the folders this created are
    removed again (those still empty), so bad input leaves no new root behind."""
    missing = [folder for folder in (path, *path.parents) if not folder.exists()]  # deepest first
    make_dirs(path)
    try:
        yield
    except BaseException:
        for folder in missing:
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def open_private(path: Path, flags: int) -> int:
    """``os.open`` of a file tiermem writes: created ``0600``, never through a final symlink
    (``O_NOFOLLOW``), an existing file with bits for others tightened to ``0600``. ``ELOOP``
    (a link appeared) becomes :class:`UnsafePath`; other ``OSError`` propagate."""
    try:
        fd = os.open(path, flags | NOFOLLOW | _CLOEXEC | _BINARY, FILE_MODE)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (NOFOLLOW and exc.errno == errno.EMLINK):
            raise UnsafePath(f"{path} is a symbolic link; tiermem does not write through it: {_HINT}", path) from exc
        raise
    try:
        tighten(fd)
    except OSError:
        os.close(fd)
        raise
    return fd


def tighten(fd: int) -> None:
    """Set ``0600`` on an open regular file whose mode lets others read or write it."""
    if os.name != "posix":
        return
    info = os.fstat(fd)
    if stat.S_ISREG(info.st_mode) and info.st_mode & 0o077:
        os.fchmod(fd, FILE_MODE)


def read_file(path: Path) -> bytes:
    """The bytes of ``path`` (already checked by :meth:`UserPaths.inside`), opened without
    following a final symlink; ``FileNotFoundError`` propagates, other failures are ``StorageError``."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | _CLOEXEC | _BINARY)
    except FileNotFoundError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafePath(f"{path} is a symbolic link; tiermem does not read through it: {_HINT}", path) from exc
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with os.fdopen(fd, "rb") as handle:
        try:
            return handle.read()
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc


def write_private(path: Path, data: bytes) -> None:
    """Create or replace ``path`` with ``data`` (``0600``, not through a final symlink); for
    small files tiermem owns (``tiermem.toml``). ``MEMORY.md`` and imports use
    :func:`atomic_write`."""
    fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


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
    sync_dir(path.parent)


def sync_dir(folder: Path) -> None:
    """fsync a folder (a rename or a new file in it is on disk); a no-op where folders cannot be
    opened (Windows: the rename is still atomic)."""
    flags = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    try:
        dir_fd = os.open(folder, flags)
    except OSError:
        return
    try:
        os.fsync(dir_fd)
    except OSError:
        pass
    finally:
        os.close(dir_fd)
