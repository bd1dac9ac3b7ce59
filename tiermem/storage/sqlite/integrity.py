"""Is the database file damaged? Checks run when a store opens, and the words used to say so.

Opening a store checks, before anything is written:

- a **zero-byte** ``tiermem.db`` beside Markdown memory (``MEMORY.md``, Daily files, of any user)
  is a lost database, not a new one: recreating it empty would make the user's facts, plans and
  queue vanish without a word. (A zero-byte file in an otherwise empty root starts a new store.)
- the **header**: SQLite's magic string, a valid page size, a file size that is a whole number of
  pages and, when no write-ahead log is pending, not smaller than the page count the header
  records (a truncated copy or download);
- the **schema version**: a store written by a newer tiermem is refused (upgrade tiermem);
- ``PRAGMA quick_check`` for files up to :data:`QUICK_CHECK_MAX_BYTES` (about 50 ms at that size);
  bigger stores rely on ``tiermem doctor`` and on the write path: damage met inside a write rolls
  it back and raises :class:`~tiermem.errors.StoreDamaged`.

A damaged file is never written to in place; ``tiermem doctor --repair`` rebuilds the store
beside it and keeps it as ``tiermem.db.damaged-<time>``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from tiermem.errors import StorageError, StoreDamaged

SQLITE_MAGIC = b"SQLite format 3\x00"
HEADER_SIZE = 100
QUICK_CHECK_MAX_BYTES = 32 * 1024 * 1024
#: SQLite's primary result codes that mean "this file is damaged" (SQLITE_CORRUPT, SQLITE_NOTADB).
DAMAGE_CODES = frozenset({11, 26})
#: Where Markdown memory lives under a root (the layout of :mod:`tiermem.paths`).
MARKDOWN_GLOBS = ("MEMORY.md", "memory/*.md", "users/*/MEMORY.md", "users/*/memory/*.md")
REPAIR_HINT = "run `tiermem doctor --repair` to rebuild it beside the damaged file"


def header_damage(path: Path) -> str | None:
    """What is wrong with the file's header and size, or None (also for a missing or empty file).

    Reads the first 100 bytes only; never opens the file with SQLite."""
    try:
        size = path.stat().st_size
        if size == 0:
            return None
        with path.open("rb") as handle:
            head = handle.read(HEADER_SIZE)
    except FileNotFoundError:
        return None
    if len(head) < HEADER_SIZE or not head.startswith(SQLITE_MAGIC):
        return "it is not a SQLite database (its first bytes are not SQLite's header)"
    raw = int.from_bytes(head[16:18], "big")
    page_size = 65536 if raw == 1 else raw
    if page_size < 512 or page_size & (page_size - 1):
        return f"its header is damaged (page size {raw})"
    if size % page_size:
        return f"it is truncated ({size} bytes is not a whole number of {page_size}-byte pages)"
    pages = int.from_bytes(head[28:32], "big")
    header_valid = head[24:28] == head[92:96] and pages > 0
    if header_valid and pages * page_size > size and not _wal_pending(path):
        return f"it is truncated ({size} of {pages * page_size} bytes)"
    return None


def _wal_pending(path: Path) -> bool:
    """A non-empty ``-wal`` beside the file: the header may describe pages still in the log."""
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def header_version(path: Path) -> int | None:
    """``PRAGMA user_version`` as the header stores it (bytes 60-63), or None when unreadable."""
    try:
        with path.open("rb") as handle:
            head = handle.read(HEADER_SIZE)
    except OSError:
        return None
    if len(head) < HEADER_SIZE or not head.startswith(SQLITE_MAGIC):
        return None
    return int.from_bytes(head[60:64], "big")


def markdown_beside(path: Path) -> list[Path]:
    """The Markdown memory files (``MEMORY.md``, Daily files, of every user) in the database's root."""
    root = path.parent
    found: list[Path] = []
    for pattern in MARKDOWN_GLOBS:
        try:
            found += [p for p in sorted(root.glob(pattern)) if p.is_file()]
        except OSError:
            continue
    return found


def describe_files(files: list[Path]) -> str:
    """``MEMORY.md and 3 Daily files`` (what a lost database leaves behind)."""
    cores = sum(1 for f in files if f.name == "MEMORY.md")
    days = len(files) - cores
    parts = ([f"{cores} MEMORY.md" if cores > 1 else "MEMORY.md"] if cores else []) + (
        [f"{days} Daily file{'s' if days != 1 else ''}"] if days else [])
    return " and ".join(parts)


def damaged(path: Path, reason: str) -> StoreDamaged:
    """The one-line error for a damaged database file."""
    return StoreDamaged(f"the database {path} is damaged: {reason}. Nothing was written to it; {REPAIR_HINT} "
                        "(the damaged file is kept; Daily files and MEMORY.md are not changed)",
                        path=path, reason=reason)


def check_file(path: Path) -> None:
    """Raise :class:`StoreDamaged` when the file at ``path`` must not be opened as a store:
    a damaged header, a truncation, or zero bytes beside Markdown memory."""
    try:
        empty = path.stat().st_size == 0
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if empty:
        files = markdown_beside(path)
        if files:
            reason = (f"it is empty (0 bytes) while its root holds {describe_files(files)}, so the facts, plans "
                      "and queue it held are lost")
            raise StoreDamaged(f"the database {path} is damaged: {reason}. Nothing was written to it; run "
                               "`tiermem doctor --repair` to rebuild the store from the files (or `tiermem import` "
                               "a backup); the empty file is kept", path=path, reason=reason)
        return
    problem = header_damage(path)
    if problem is not None:
        raise damaged(path, problem)


def is_damage(exc: BaseException) -> bool:
    """Is ``exc`` SQLite saying the file is corrupt or not a database?"""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(exc, sqlite3.DatabaseError) and isinstance(code, int):
        return code & 0xFF in DAMAGE_CODES
    return False


def quick_check(conn: sqlite3.Connection) -> str | None:
    """The first problem ``PRAGMA quick_check`` reports, or None when the file passes."""
    rows = conn.execute("PRAGMA quick_check(20)").fetchall()
    messages = [str(r[0]) for r in rows]
    if messages == ["ok"]:
        return None
    lines = [line for m in messages for line in m.splitlines() if not line.startswith("***")]
    more = "" if len(lines) <= 1 else f" (and {len(lines) - 1}{' or more' if len(rows) >= 20 else ''} more)"
    return f"sqlite's integrity check failed: {lines[0] if lines else 'no details'}{more}"


def check_opened(conn: sqlite3.Connection, path: Path, known_version: int) -> int:
    """On a fresh connection: refuse a newer schema, run ``quick_check`` on files up to
    :data:`QUICK_CHECK_MAX_BYTES`; returns the schema version. Raises :class:`StoreDamaged` or
    :class:`StorageError` (newer schema)."""
    try:
        version = int(conn.execute("PRAGMA user_version").fetchone()[0])
        check_version(path, version, known_version)
        if _size(path) <= QUICK_CHECK_MAX_BYTES:
            problem = quick_check(conn)
            if problem is not None:
                raise damaged(path, problem)
    except sqlite3.Error as exc:
        if is_damage(exc):
            raise damaged(path, str(exc)) from exc
        raise StorageError(f"cannot read {path}: {exc}") from exc
    return version


def check_version(path: Path, version: int, known_version: int) -> None:
    """A store written by a newer tiermem is refused before anything reads or writes it."""
    if version > known_version:
        raise StorageError(f"{path} was written by a newer tiermem (schema version {version}; this tiermem knows "
                           f"up to {known_version}): upgrade tiermem (pip install -U tiermem); nothing was changed")


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0
