"""The Markdown tiers in an export: each user's ``MEMORY.md``, Daily files and dream diaries.

A file travels whole, as ``{"user_id", "path", "text"}`` — or ``"base64"`` instead of ``"text"``
when its bytes are not UTF-8 — so the export survives ``json.dumps`` and comes back byte for byte.
``path`` is relative to the user's directory (the root for the default user, ``users/<id>/``
otherwise) and must be one of ``MEMORY.md``, ``memory/YYYY-MM-DD.md`` or
``memory/dreams/YYYY-MM-DD.md``.

Import plans every write before making one: a file that exists with other content is an
:class:`~tiermem.errors.ImportConflict` unless ``replace``; an equal file is left alone. Writes are
atomic per file (temp file, fsync, rename) and undone when a later step of the import fails.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from tiermem import validate
from tiermem.errors import ImportConflict, InvalidInput, StorageError
from tiermem.tiers.paths import (
    CORE_FILE,
    DAILY_DIR,
    DEFAULT_USER,
    DREAMS_DIR,
    USERS_DIR,
    UserPaths,
    day_of,
    read_file,
)
from tiermem.transfer import schema as s
from tiermem.transfer.schema import where
from tiermem.transfer.section import Restore, Row
from tiermem.types import Scope

SECTION = "files"
FIELDS = {"user_id": s.name, "path": s.text()}


@dataclass(frozen=True)
class FileEntry:
    """One file of an export, decoded (and redacted by the target's rules)."""

    user_id: str
    path: str  # relative to the user's directory, forward slashes
    data: bytes


@dataclass(frozen=True)
class FileWrite:
    """A planned write: ``old`` is the current content (``None``: no file yet)."""

    target: Path
    data: bytes
    old: bytes | None


def is_transfer_path(rel: str) -> bool:
    """``MEMORY.md``, ``memory/YYYY-MM-DD.md`` or ``memory/dreams/YYYY-MM-DD.md``."""
    parts = rel.split("/")
    if parts == [CORE_FILE]:
        return True
    if len(parts) == 2 and parts[0] == DAILY_DIR:
        return day_of(parts[1]) is not None
    return len(parts) == 3 and parts[:2] == [DAILY_DIR, DREAMS_DIR] and day_of(parts[2]) is not None


def _day_files(directory: Path, prefix: str) -> list[tuple[str, Path]]:
    try:
        entries = sorted(directory.iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [(f"{prefix}/{e.name}", e) for e in entries if day_of(e.name) is not None and e.is_file()]


def user_files(paths: UserPaths) -> list[tuple[str, Path]]:
    """``(path relative to the user's directory, file)`` of every file an export carries."""
    found = [(CORE_FILE, paths.core)] if paths.core.is_file() else []
    found += _day_files(paths.daily_dir, DAILY_DIR)
    found += _day_files(paths.dreams_dir, f"{DAILY_DIR}/{DREAMS_DIR}")
    return found


def file_users(base: Path) -> list[str]:
    """Users that may have files under ``base``: the default user and every valid ``users/<id>``."""
    found = [DEFAULT_USER]
    try:
        entries = sorted((base / USERS_DIR).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return found
    for entry in entries:
        try:
            found.append(validate.name(entry.name, "user_id"))
        except InvalidInput:
            continue  # not a directory tiermem made
    return [u for u in found if u == DEFAULT_USER or (base / USERS_DIR / u).is_dir()]


def encode(user_id: str, rel: str, data: bytes) -> Row:
    try:
        return {"user_id": user_id, "path": rel, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"user_id": user_id, "path": rel, "base64": base64.b64encode(data).decode("ascii")}


def export_files(base: Path, scope: Scope | None, scrub: Callable[[str], str] | None = None,
                 allow_symlinks: bool = False) -> list[Row]:
    """The files of ``scope``'s user (every user's for ``None``), sorted by user and path, with
    the store's redaction ``scrub`` applied (a secret typed into a file by hand is not exported;
    bytes that are not UTF-8 are kept around the redacted text). A file or folder that is a
    symlink out of the root raises :class:`~tiermem.errors.UnsafePath` unless ``allow_symlinks``."""
    users = [scope.user_id] if scope is not None else file_users(base)
    rows: list[Row] = []
    for user in users:
        paths = UserPaths.for_user(base, user, allow_symlinks)
        for rel, path in user_files(paths):
            try:
                data = read_file(paths.inside(path))
            except OSError as exc:
                raise StorageError(f"cannot read {path}: {exc}") from exc
            if scrub is not None:
                data = scrub(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
            rows.append(encode(user, rel, data))
    return rows


def _check_path(index: int, rel: str) -> None:
    pure = PurePosixPath(rel)
    if pure.is_absolute() or "\\" in rel or (len(rel) > 1 and rel[1] == ":"):
        raise InvalidInput(f"{where(SECTION, index, 'path')}: {rel[:80]!r} is an absolute path")
    if ".." in pure.parts:
        raise InvalidInput(f"{where(SECTION, index, 'path')}: {rel[:80]!r} leaves the user's directory ('..')")
    if not is_transfer_path(rel):
        raise InvalidInput(f"{where(SECTION, index, 'path')}: {rel[:80]!r} is not a tiermem file (MEMORY.md,"
                           " memory/YYYY-MM-DD.md or memory/dreams/YYYY-MM-DD.md)")


def _data(index: int, row: Row) -> bytes:
    has_text, has_b64 = "text" in row, "base64" in row
    if has_text == has_b64:
        raise InvalidInput(f"{where(SECTION, index)}: needs exactly one of 'text' and 'base64'")
    field = "text" if has_text else "base64"
    problem = s.text()(row[field]) if has_text else s.base64_bytes(row[field])
    if problem is not None:
        raise InvalidInput(f"{where(SECTION, index, field)}: {problem}")
    if not has_text:
        return base64.b64decode(row["base64"])
    try:
        return str(row["text"]).encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInput(f"{where(SECTION, index, 'text')}: holds lone surrogates (use 'base64')") from None


def parse_files(rows: Any, how: Restore) -> list[FileEntry]:
    """Check the files section and decode it, applying the target's redaction (bytes that are
    not UTF-8 are kept as they are around the redacted text)."""
    s.check_rows(SECTION, rows, None)
    entries: list[FileEntry] = []
    seen: set[tuple[str, str]] = set()
    for index, row in enumerate(rows):
        for field, check in FIELDS.items():
            problem = check(row.get(field)) if field in row else "missing"
            if problem is not None:
                raise InvalidInput(f"{where(SECTION, index, field)}: {problem}")
        unknown = sorted(set(row) - {*FIELDS, "text", "base64"})
        if unknown:
            raise InvalidInput(f"{where(SECTION, index, unknown[0])}: unknown field")
        _check_path(index, row["path"])
        if (row["user_id"], row["path"]) in seen:
            raise InvalidInput(f"{where(SECTION, index, 'path')}: {row['path']!r} of user {row['user_id']!r}"
                               " appears twice")
        seen.add((row["user_id"], row["path"]))
        data = _data(index, row)
        if how.scrub is not None:
            data = how.scrub(data.decode("utf-8", "surrogateescape")).encode("utf-8", "surrogateescape")
        entries.append(FileEntry(row["user_id"], row["path"], data))
    return entries


def plan_writes(base: Path, entries: Sequence[FileEntry], replace: bool) -> list[FileWrite]:
    """The writes an import makes; raises before any write when one would overwrite other content
    (unless ``replace``) or leave the root."""
    writes: list[FileWrite] = []
    for entry in entries:
        paths = UserPaths.for_user(base, entry.user_id)
        target = paths.root / entry.path
        if not Path(os.path.realpath(target)).is_relative_to(paths.root):
            raise InvalidInput(f"{entry.path} of user {entry.user_id!r} resolves outside its directory ({target})")
        try:
            old: bytes | None = target.read_bytes()
        except FileNotFoundError:
            old = None
        except OSError as exc:
            raise StorageError(f"cannot read {target}: {exc}") from exc
        if old == entry.data:
            continue
        if old is not None and not replace:
            raise ImportConflict(f"{target} exists with other content; use --replace to overwrite it")
        writes.append(FileWrite(target, entry.data, old))
    return writes


def lock_users(base: Path, users: Iterable[str], reading: bool = False) -> ExitStack:
    """The journal and core locks of each user whose directory exists (entered, in name order);
    a user without a directory has no writer to keep out. ``reading``: a lock this process may
    not create (a read-only store, where nobody can write either) is skipped."""
    from tiermem.tiers.core import LOCK_FILE as CORE_LOCK
    from tiermem.tiers.daily import LOCK_FILE as JOURNAL_LOCK
    from tiermem.tiers.daily import file_lock

    stack = ExitStack()
    try:
        for user in sorted(set(users)):
            paths = UserPaths.for_user(base, user)
            for folder, name in ((paths.root, CORE_LOCK), (paths.daily_dir, JOURNAL_LOCK)):
                if not folder.is_dir():
                    continue
                try:
                    stack.enter_context(file_lock(folder / name))
                except PermissionError:
                    if not reading:
                        raise
    except BaseException:
        stack.close()
        raise
    return stack


def write_files(writes: Sequence[FileWrite]) -> None:
    """Make every write; on a failure, undo the ones made and raise."""
    from tiermem.tiers.core import atomic_write

    done: list[FileWrite] = []
    try:
        for write in writes:
            atomic_write(write.target, write.data)
            done.append(write)
    except BaseException:
        undo(done)
        raise


def undo(writes: Sequence[FileWrite]) -> None:
    """Put back what ``writes`` replaced (best effort: this runs while another error is raised)."""
    from tiermem.tiers.core import atomic_write

    for write in reversed(writes):
        try:
            if write.old is None:
                write.target.unlink(missing_ok=True)
            else:
                atomic_write(write.target, write.old)
        except (OSError, StorageError):
            continue
