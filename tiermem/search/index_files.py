"""The vector index files of one store: where they are, what they must match, and the checks
that keep a stale file from answering a search.

The format and the atomic write are :mod:`tiermem.search.vector_file`; this module ties them to
the database:

- a **store id** (a random value kept in ``meta``, written with the first file) is part of every
  file's key: a file beside a different ``tiermem.db`` (replaced, recreated) is not used;
- a loaded file is **checked against the rows** (:meth:`IndexFiles.matches`): once the removal
  log is applied, the items it holds up to its ``doc_seq`` must be exactly the scope's items up to
  that id in the database (their count and the sum of their ids), which catches a database
  restored from a backup, items that gained a vector since (``tiermem reindex``) and any
  bookkeeping slip; anything else is rebuilt;
- files are written and deleted under the store's ``.vectors/.lock``, and only when no item was
  removed since the rows were read (:meth:`IndexFiles.save`), so a purge that deletes a user's
  files (:func:`drop_user_files`) is never followed by a file holding what it purged.

Only stores whose vectors are searched in this process and that live in a folder (SQLite) have
files; the setting ``search_index_file = false`` turns them off.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.errors import StorageError
from tiermem.search import vector_file
from tiermem.search.vector_file import FileKey, Saved
from tiermem.storage.chunks import SHARED_AGENT
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.config import Settings
    from tiermem.search.vectors import VectorIndex
    from tiermem.storage.sql import Database

log = logging.getLogger(__name__)

STORE_ID_KEY = "search_index_store_id"
LOCK_TIMEOUT_SECONDS = 5.0
#: ``search_*`` settings that do not change what an index holds (:func:`index_shape`).
QUERY_ONLY = frozenset({"search_keyword_weight", "search_vector_weight", "search_recency_half_life_days",
                        "search_mmr_lambda", "search_fusion", "search_min_score", "search_candidates",
                        "search_keyword_budget", "search_context_weight", "search_shortlist", "search_index_file",
                        "search_reply_support", "search_next_support", "search_inject_min_score"})


class IndexFiles:
    """The index files of the store in ``db`` (see the module docstring)."""

    def __init__(self, db: Database, folder: Path, shape: str) -> None:
        self.db = db
        self.folder = folder
        self.shape = shape
        self._store_id: str | None = None

    @classmethod
    def for_store(cls, db: Database, settings: Settings) -> IndexFiles | None:
        """The store's index files, or ``None`` where there are none (no local folder, or off)."""
        path = getattr(db, "path", None)
        if not settings.search_index_file or not isinstance(path, Path):
            return None
        return cls(db, path.parent / vector_file.FOLDER, index_shape(settings))

    # --- identity --------------------------------------------------------------------------
    def key(self, scope: Scope, model: str, dim: int, create: bool = False) -> FileKey | None:
        store_id = self._store(create)
        if store_id is None:
            return None
        return FileKey(store_id, scope.user_id, scope.agent_name, model, dim, self.shape)

    def _store(self, create: bool) -> str | None:
        if self._store_id is None:
            rows = self.db.rows("SELECT value FROM meta WHERE key = ?", [STORE_ID_KEY], "reading the store id")
            if not rows and create and not self.db.read_only:
                with self.db.transaction() as conn:
                    conn.execute("INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO NOTHING",
                                 (STORE_ID_KEY, secrets.token_hex(16)))
                rows = self.db.rows("SELECT value FROM meta WHERE key = ?", [STORE_ID_KEY], "reading the store id")
            self._store_id = str(rows[0][0]) if rows else None
        return self._store_id

    def path(self, scope: Scope) -> Path | None:
        """The scope's file, or ``None`` when its folder is a link leading out of the root (not
        followed unless ``allow_symlinks``)."""
        path = vector_file.index_path(self.folder, scope)
        if self.db.allow_symlinks:
            return path
        base = os.path.realpath(self.folder.parent)
        real = os.path.realpath(path.parent)
        if real != base and not real.startswith(base + os.sep):
            log.warning("%s leads outside the memory root through a symbolic link: vector index files not used",
                        path.parent)
            return None
        return path

    # --- reading and checking --------------------------------------------------------------
    def load(self, scope: Scope, model: str, dim: int, **options: Any) -> Saved | None:
        key, path = self.key(scope, model, dim), self.path(scope)
        if key is None or path is None:
            return None
        return vector_file.load(path, key, **options)

    def matches(self, scope: Scope, index: VectorIndex, doc_seq: int, whole_store: bool = False) -> bool:
        """Whether ``index`` holds exactly the scope's items with id <= ``doc_seq`` (by count and
        id sum; items above ``doc_seq`` are the caller's to add). ``whole_store``: the caller saw
        the store hold the scope's items only, none above ``doc_seq``; then the store's items are
        counted first, without a test of each (14 instead of 23 ms of CPU at 100k items), and by
        the scope's only if that differs (an item written meanwhile)."""
        import numpy as np

        held = index.arrays()["ids"]
        held = held[held <= doc_seq]
        expected = (len(held), int(held.sum(dtype=np.int64)))
        if whole_store and self._count_and_sum("", []) == expected:
            return True
        return self._count_and_sum(" WHERE user_id = ? AND agent_name IN (?, ?) AND id <= ?",
                                   [scope.user_id, scope.agent_name, SHARED_AGENT, doc_seq]) == expected

    def _count_and_sum(self, where: str, args: list[Any]) -> tuple[int, int]:
        rows = self.db.rows(f"SELECT COUNT(*), COALESCE(SUM(id), 0) FROM search_docs{where}", args,
                            "checking a vector index file")
        return int(rows[0][0]), int(rows[0][1])

    # --- writing and deleting --------------------------------------------------------------
    def save(self, scope: Scope, model: str, dim: int, index: VectorIndex, doc_seq: int, removed_seq: int,
             removed_now: Any) -> bool:
        """Write the scope's file unless an item was removed since ``removed_seq`` (``removed_now()``
        gives the current value, read under the lock). True when written."""
        key, path = self.key(scope, model, dim, create=True), self.path(scope)
        if key is None or path is None or self.db.read_only:
            return False

        def commit(rename: Any) -> bool:
            with self.db.parts.lock(self.db, vector_file.LOCK_NAME, LOCK_TIMEOUT_SECONDS):
                if removed_now() != removed_seq:
                    return False
                rename()
                return True

        try:
            return vector_file.save(path, key, index, doc_seq, removed_seq, commit)
        except (OSError, TimeoutError) as exc:
            log.info("could not write the vector index file %s: %s", path, exc)
            return False

    def drop_all(self) -> None:
        """Delete every index file of the store (after ``reindex``: vectors changed under them)."""
        try:
            with self.db.parts.lock(self.db, vector_file.LOCK_NAME, LOCK_TIMEOUT_SECONDS):
                vector_file.drop_all(self.folder)
        except (OSError, TimeoutError) as exc:
            log.warning("could not delete the vector index files in %s: %s", self.folder, exc)


def index_shape(settings: Settings) -> str:
    """The settings that may change what a scope's index holds: every ``search_*`` setting but
    those only a query reads (a new setting invalidates files until it is listed here)."""
    from dataclasses import fields

    return ",".join(f"{f.name}={getattr(settings, f.name)!r}" for f in fields(settings)
                    if f.name.startswith("search_") and f.name not in QUERY_ONLY)


def drop_user_files(db: Database, user_id: str) -> None:
    """Delete the index files of ``user_id`` (every agent) under the store's lock; for a purge.
    A no-op for stores without files."""
    path = getattr(db, "path", None)
    if not isinstance(path, Path):
        return
    folder = path.parent / vector_file.FOLDER
    if not folder.exists():
        return
    try:
        with db.parts.lock(db, vector_file.LOCK_NAME, LOCK_TIMEOUT_SECONDS):
            vector_file.drop_user(folder, user_id)
    except (OSError, TimeoutError) as exc:
        raise StorageError(f"could not delete the vector index files of user {user_id!r} in {folder}: {exc};"
                           " run the purge again") from exc
