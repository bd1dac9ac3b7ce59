"""The database files this process holds open through SQLite.

Closing any descriptor of a file drops every POSIX lock the process holds on that file, SQLite's
among them (sqlite.org/howtocorrupt.html, section 2.2). In WAL mode each connection keeps a shared
lock on the database file; without it, another process whose last connection closes checkpoints
and deletes the ``-wal`` and ``-shm`` files this process still uses, and what it writes afterwards
is lost to every other process. Opening a store reads the file's header with plain file I/O
(:func:`~tiermem.storage.sqlite.integrity.check_file`), so that read is done only while this
process holds no connection to the file: :func:`hold` checks a file the first time and counts it
until every :class:`~tiermem.storage.sqlite.db.Database` on it has closed (several stores on one
file, such as a person's and a project's, are common).
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path

_lock = threading.Lock()
_held: Counter[str] = Counter()


def key(path: Path) -> str:
    """The file's identity for this registry: its resolved path (links followed)."""
    return os.path.realpath(path)


def hold(path: Path, check: Callable[[Path], None]) -> str:
    """Count ``path`` as open in this process, running ``check(path)`` first when no store of this
    process holds it yet (a check that raises holds nothing). Returns the key for :func:`release`."""
    held = key(path)
    with _lock:
        if not _held[held]:
            check(path)
        _held[held] += 1
    return held


def release(held: str) -> None:
    """One store on the file has closed (its connections are closed)."""
    with _lock:
        _held[held] -= 1
        if _held[held] <= 0:
            del _held[held]


def is_held(path: Path) -> bool:
    """True while a store of this process has ``path`` open."""
    with _lock:
        return _held[key(path)] > 0
