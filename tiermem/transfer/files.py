"""The Markdown tiers in an export: each user's ``MEMORY.md``, Daily files and dream diaries.

A file travels whole, as ``{"user_id", "path", "text"}`` — or ``"base64"`` instead of ``"text"``
when its bytes are not UTF-8 — so the export survives ``json.dumps`` and comes back byte for byte.
``path`` is relative to the user's directory (the root for the default user, ``users/<id>/``
otherwise) and must be one of ``MEMORY.md``, ``memory/YYYY-MM-DD.md`` or
``memory/dreams/YYYY-MM-DD.md``.

Files are read and written through the store's :class:`~tiermem.storage.files.MemoryFiles`: the
files under the root on SQLite, the database's rows (and this process's mirror) on PostgreSQL.
Import plans every write before making one: a file that exists with other content is an
:class:`~tiermem.errors.ImportConflict` unless ``replace``; an equal file is left alone. Writes are
atomic per file and undone when a later step of the import fails (where the files are rows, they
are part of the import's transaction and its rollback undoes them).
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable, Iterable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.errors import ImportConflict, InvalidInput, StorageError
from tiermem.paths import (
    CORE_FILE,
    DAILY_DIR,
    DEFAULT_USER,
    DREAMS_DIR,
    USERS_DIR,
    UserPaths,
    day_of,
)
from tiermem.transfer import schema as s
from tiermem.transfer.schema import where
from tiermem.transfer.section import Restore, Row

if TYPE_CHECKING:
    from tiermem.storage.files import MemoryFiles
    from tiermem.storage.sql import Database

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
    """A planned write of ``rel`` in ``files``: ``old`` is the current content (``None``: no file yet)."""

    files: MemoryFiles
    rel: str
    data: bytes
    old: bytes | None

    @property
    def target(self) -> Path:
        return self.files.mirror_path(self.rel)


def open_user(db: Database, base: Path, user_id: str, mirror: bool = True) -> MemoryFiles:
    """The store's files of ``user_id`` (``mirror``: keep this process's local copy up to date)."""
    return db.parts.files(db, UserPaths.for_user(base, user_id, db.allow_symlinks), mirror=mirror)


def is_transfer_path(rel: str) -> bool:
    """``MEMORY.md``, ``memory/YYYY-MM-DD.md`` or ``memory/dreams/YYYY-MM-DD.md``."""
    parts = rel.split("/")
    if parts == [CORE_FILE]:
        return True
    if len(parts) == 2 and parts[0] == DAILY_DIR:
        return day_of(parts[1]) is not None
    return len(parts) == 3 and parts[:2] == [DAILY_DIR, DREAMS_DIR] and day_of(parts[2]) is not None


def user_files(files: MemoryFiles) -> list[str]:
    """The paths (relative to the user's directory) of every file an export carries."""
    found = [CORE_FILE] if files.stat(CORE_FILE) is not None else []
    for folder in (DAILY_DIR, f"{DAILY_DIR}/{DREAMS_DIR}"):
        found += [rel for rel in files.list(folder) if day_of(rel.rsplit("/", 1)[-1]) is not None]
    return found


def file_users(db: Database, base: Path) -> list[str]:
    """Users that may have files: the default user, every valid ``users/<id>`` folder under
    ``base``, and every user the database holds rows of (where the files are rows)."""
    found = {DEFAULT_USER, *_folder_users(base), *_database_users(db)}
    return sorted(found, key=lambda user: (user != DEFAULT_USER, user))


def _folder_users(base: Path) -> list[str]:
    try:
        entries = sorted((base / USERS_DIR).iterdir())
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[str] = []
    for entry in entries:
        try:
            found.append(validate.name(entry.name, "user_id"))
        except InvalidInput:
            continue  # not a directory tiermem made
    return [u for u in found if (base / USERS_DIR / u).is_dir()]


def _database_users(db: Database) -> set[str]:
    users: set[str] = set()
    for table in db.parts.tables(db):
        if "user_id" in db.parts.columns(db, table):
            users.update(str(r[0]) for r in db.rows(f"SELECT user_id FROM {table} GROUP BY user_id",
                                                    what="listing the store's users"))
    valid: set[str] = set()
    for user in users:
        try:
            valid.add(validate.name(user, "user_id"))
        except InvalidInput:
            continue
    return valid


def encode(user_id: str, rel: str, data: bytes) -> Row:
    try:
        return {"user_id": user_id, "path": rel, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"user_id": user_id, "path": rel, "base64": base64.b64encode(data).decode("ascii")}


def export_files(db: Database, base: Path, users: Sequence[str], scrub: Callable[[str], str] | None = None
                 ) -> list[Row]:
    """The files of ``users``, sorted by user and path, with the store's redaction ``scrub``
    applied (a secret typed into a file by hand is not exported; bytes that are not UTF-8 are
    kept around the redacted text). A file or folder that is a symlink out of the root raises
    :class:`~tiermem.errors.UnsafePath` unless the store allows symlinks."""
    rows: list[Row] = []
    for user in users:
        files = open_user(db, base, user, mirror=False)
        for rel in user_files(files):
            data = files.read(rel)
            if data is None:
                continue  # removed since it was listed
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


def plan_writes(db: Database, base: Path, entries: Sequence[FileEntry], replace: bool,
                mirror: bool = True) -> list[FileWrite]:
    """The writes an import makes; raises before any write when one would overwrite other content
    (unless ``replace``) or leave the root."""
    writes: list[FileWrite] = []
    users: dict[str, MemoryFiles] = {}
    for entry in entries:
        if entry.user_id not in users:
            users[entry.user_id] = open_user(db, base, entry.user_id, mirror)
        files = users[entry.user_id]
        target = files.paths.root / entry.path
        if not Path(os.path.realpath(target)).is_relative_to(files.paths.root):
            raise InvalidInput(f"{entry.path} of user {entry.user_id!r} resolves outside its directory ({target})")
        old = files.read(entry.path)
        if old == entry.data:
            continue
        if old is not None and not replace:
            raise ImportConflict(f"{target} exists with other content; use --replace to overwrite it")
        writes.append(FileWrite(files, entry.path, entry.data, old))
    return writes


def lock_users(db: Database, base: Path, users: Iterable[str], reading: bool = False) -> ExitStack:
    """The journal and core locks of each user whose files are local files and whose directory
    exists (entered, in name order); a user without a directory has no writer to keep out. Where
    the files are rows, the database transaction of the export or import keeps writers out.
    ``reading``: a lock this process may not create (a read-only store, where nobody can write
    either) is skipped."""
    from tiermem.tiers.core import LOCK_FILE as CORE_LOCK
    from tiermem.tiers.daily import LOCK_FILE as JOURNAL_LOCK
    from tiermem.tiers.daily import LOCK_TIMEOUT_SECONDS

    stack = ExitStack()
    try:
        for user in sorted(set(users)):
            files = open_user(db, base, user, mirror=False)
            if not files.durable_files:
                continue
            for rel in (CORE_LOCK, f"{DAILY_DIR}/{JOURNAL_LOCK}"):
                if not (files.paths.root / rel).parent.is_dir():
                    continue
                try:
                    stack.enter_context(db.parts.lock(db, files.paths.store_name(rel), LOCK_TIMEOUT_SECONDS))
                except PermissionError:
                    if not reading:
                        raise
    except BaseException:
        stack.close()
        raise
    return stack


def write_files(writes: Sequence[FileWrite]) -> None:
    """Make every write; on a failure, undo the ones made and raise."""
    done: list[FileWrite] = []
    try:
        for write in writes:
            write.files.replace(write.rel, write.data)
            done.append(write)
    except BaseException:
        undo(done)
        raise


def undo(writes: Sequence[FileWrite]) -> None:
    """Put back what ``writes`` replaced where it is still there (best effort: this runs while
    another error is raised; where the files are rows, the rollback has undone them already)."""
    for write in reversed(writes):
        try:
            if write.files.read(write.rel) == write.old:
                continue
            if write.old is None:
                write.files.remove(write.rel)
            else:
                write.files.replace(write.rel, write.old)
        except (OSError, StorageError):
            continue
