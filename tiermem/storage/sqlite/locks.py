"""Named cross-process locks of a SQLite store: lock files under the memory root.

A lock's name is its file's path relative to the root, ``/``-separated — the names tiermem has
always used (``.dream.lock``, ``users/bob/.core.lock``, ``users/bob/memory/.journal.lock``) — so
processes of an older version and this one exclude each other. The file is created with its
folder (``0700``/``0600``); a folder on the way that is a link leading out of the root is refused
(:class:`~tiermem.errors.UnsafePath`) unless the store allows symlinks.
"""

from __future__ import annotations

import os
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

from tiermem.errors import UnsafePath
from tiermem.paths import make_dirs
from tiermem.storage.sql import check_lock_name

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

POLL_SECONDS = 0.002
FILE_MODE = 0o600


class _FileStore(Protocol):
    path: Path  # tiermem.db, at the root of the store
    allow_symlinks: bool


def lock(db: Database, name: str, timeout: float) -> AbstractContextManager[Any]:
    """The lock file ``name`` under the store's root; waits at most ``timeout`` seconds (0: one
    try, negative: no limit), then raises ``TimeoutError`` (``filelock.Timeout``)."""
    from filelock import FileLock

    path = lock_path(db, name)
    return FileLock(path, timeout=timeout, poll_interval=POLL_SECONDS, mode=FILE_MODE)


def lock_path(db: Database, name: str) -> Path:
    """The real path of lock ``name``, its folder created; see the module docstring."""
    store = cast(_FileStore, db)
    base = Path(os.path.realpath(store.path.parent))
    rel = check_lock_name(name)
    path = base / rel
    real_parent = Path(os.path.realpath(path.parent))
    if not (store.allow_symlinks or real_parent == base or real_parent.is_relative_to(base)):
        raise UnsafePath(f"{rel.parent.as_posix()} leads outside the memory root {base} (to {real_parent}) through a"
                         " symbolic link; tiermem does not follow it: remove the link, or set allow_symlinks = true"
                         " (TIERMEM_ALLOW_SYMLINKS=1)", path.parent)
    make_dirs(real_parent)
    return real_parent / path.name
