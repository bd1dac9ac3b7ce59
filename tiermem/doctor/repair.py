"""``tiermem doctor --repair``: rebuild what can be rebuilt, never touch user text.

A damaged (or emptied, or missing) database is rebuilt **beside** the old one, in
``tiermem.db.repair-<time>``: the schema of the old file's version, the rows that can still be
read from it (facts, plans, audit, summaries, queue, dream state, digests, embeddings, marks ...,
see :mod:`.salvage`), then the remaining migrations, then the search index cut again from every
user's Daily files and ``MEMORY.md``. Only then is it swapped in: the old file (with its
``-wal``/``-shm``) is renamed ``tiermem.db.damaged-<time>`` and kept; nothing is deleted.

On a sound database the repairs are made in place: the index rebuilt from the files, claims of
stopped processes handed back to the queue, damaged consolidation marks dropped, file modes
tightened. Vectors are then computed for the items that lack one (with the store's embedder; if
it cannot run now, the next search does it).

Stop other tiermem processes on the root (MCP server, agents) before repairing: a process that
keeps the old file open keeps writing to it after the swap.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import tempfile
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from tiermem.clock import Clock, SystemClock
from tiermem.config import load_settings
from tiermem.doctor.check import check
from tiermem.doctor.contents import mark_fault
from tiermem.doctor.files import fix_modes, users
from tiermem.doctor.report import MARKS, MODES, QUEUE, REBUILD, REINDEX, DoctorReport, RepairReport
from tiermem.doctor.salvage import salvage_into
from tiermem.errors import StorageError, TiermemError
from tiermem.memory import Memory
from tiermem.models.protocols import Embedder
from tiermem.paths import UserPaths
from tiermem.plural import counted
from tiermem.queue.worker import lease_seconds
from tiermem.redact import Redactor
from tiermem.storage.backend import DB_FILE
from tiermem.storage.chunks import ChunkRepository
from tiermem.storage.outbox import OutboxRepository
from tiermem.storage.sqlite import integrity
from tiermem.storage.sqlite.db import Database
from tiermem.storage.sqlite.migrations import MIGRATIONS
from tiermem.tiers.indexer import FileIndexer

log = logging.getLogger(__name__)


def repair(root: str | Path, *, embedder: Embedder | str | None = None, clock: Clock | None = None) -> RepairReport:
    """Repair the store at ``root`` (see the module text); returns what was done and doctor's
    check afterwards. Raises :class:`StorageError` when there is nothing it may repair (no store,
    a schema newer than this tiermem)."""
    base = Path(root).expanduser().resolve()
    clock = clock if clock is not None else SystemClock()
    before = check(base, clock=clock)
    if before.database:
        return _repair_server(base, before, clock)
    if before.schema_too_new or ("integrity" not in before.checked and REBUILD not in before.repairs):
        raise StorageError(f"cannot repair {base}: {before.unchecked[0]}")
    result = RepairReport(base, before, before)
    state = before
    if REBUILD in before.repairs:
        rebuild(base, clock.now(), result)
        state = check(base, clock=clock)
    _in_place(base, state, clock.now(), result)
    if result.rebuilt or REINDEX in state.repairs:
        _embed(base, embedder, result)
    result.after = check(base, clock=clock)
    return result


def _repair_server(base: Path, before: DoctorReport, clock: Clock) -> RepairReport:
    """A store in a database server: hand stuck queue claims back, tighten the local files' modes
    (the server keeps its own data safe; nothing there is rebuilt from files)."""
    from tiermem.storage.backend import open_database

    if before.schema_too_new or "schema" not in before.checked:
        reason = before.unchecked[0] if before.unchecked else "the database could not be checked"
        raise StorageError(f"cannot repair {before.database.get('database', base)}: {reason}")
    result = RepairReport(base, before, before)
    if QUEUE in before.repairs:
        settings = load_settings(base)
        db = open_database(base, settings)
        try:
            count = OutboxRepository(db).recover(clock.now(), lease_seconds(settings), settings.queue_max_attempts)
        finally:
            db.close()
        result.actions.append(f"handed {counted(count, 'stuck queue item')} back to the queue")
    if MODES in before.repairs and base.is_dir():
        changed = fix_modes(base)
        if changed:
            result.actions.append(f"set owner-only modes on {counted(changed, 'file or folder', 'files and folders')}")
    result.after = check(base, clock=clock)
    return result


# --- a new database beside the old one ------------------------------------------------------------
def rebuild(root: Path, now: datetime, result: RepairReport) -> None:
    """Build a new database from the readable rows of the old one and the files, then swap it in."""
    db_path = root / DB_FILE
    stamp = now.astimezone(UTC).strftime("%Y%m%dT%H%M%SZ")
    new = _free(db_path.with_name(f"{DB_FILE}.repair-{stamp}"))
    version = integrity.header_version(db_path) if db_path.is_file() else None
    start = version if version is not None and version <= len(MIGRATIONS) else len(MIGRATIONS)
    try:
        _build(root, db_path, new, start, result)
    except BaseException:
        for leftover in (new, Path(f"{new}-wal"), Path(f"{new}-shm")):
            leftover.unlink(missing_ok=True)  # our own half-built file, never user data
        raise
    result.damaged_copy = _swap(db_path, new, stamp)
    result.rebuilt = True
    if result.damaged_copy is not None:
        result.actions.append(f"rebuilt the database beside the damaged one and swapped it in; the damaged file "
                              f"is kept as {result.damaged_copy.name}")
    else:
        result.actions.append("created the missing database and indexed the files")


def _build(root: Path, db_path: Path, new: Path, start: int, result: RepairReport) -> None:
    with closing(sqlite3.connect(new, isolation_level=None)) as conn:
        conn.execute("BEGIN")
        for step in MIGRATIONS[:start]:
            step(conn)
        conn.execute(f"PRAGMA user_version = {start}")
        with tempfile.TemporaryDirectory(dir=root, prefix=".tiermem-salvage-") as folder:
            found = salvage_into(db_path, Path(folder), conn)
        conn.execute("COMMIT")
    result.salvaged = {t: n for t, n in found.rows.items() if n}
    result.unreadable = found.unreadable
    if found.rows:
        total = sum(found.rows.values())
        result.actions.append(f"read back {counted(total, 'row')} from the damaged database"
                              + (f" ({found.rejected} half-read rows left out)" if found.rejected else ""))
    if found.unreadable:
        result.actions.append(f"could not read all of: {', '.join(found.unreadable)}")
    db = open_store(root, new)  # the migrations after the old file's version
    try:
        files = _reindex(root, db)
    finally:
        db.close()
    result.actions.append(f"indexed {files} Markdown files")
    if Path(f"{new}-wal").exists():
        raise StorageError(f"{new}: the new database did not close cleanly; the damaged one was left in place")


def open_store(root: Path, path: Path) -> Database:
    """The database at ``path`` opened as the store at ``root`` opens it (its redaction, its links rule)."""
    settings = load_settings(root)
    return Database(path, redactor=Redactor(settings.redact_secrets), allow_symlinks=settings.allow_symlinks)


def _free(path: Path) -> Path:
    """``path``, or ``path-1``, ``path-2`` ... whichever does not exist yet."""
    candidate, n = path, 0
    while candidate.exists() or Path(f"{candidate}-wal").exists():
        n += 1
        candidate = path.with_name(f"{path.name}-{n}")
    return candidate


def _swap(db_path: Path, new: Path, stamp: str) -> Path | None:
    """Rename the old file (and its -wal/-shm) aside, the new one into place; returns the kept name."""
    kept: Path | None = None
    if db_path.exists():
        kept = _free(db_path.with_name(f"{DB_FILE}.damaged-{stamp}"))
        os.rename(db_path, kept)
        for suffix in ("-wal", "-shm", "-journal"):
            side = Path(f"{db_path}{suffix}")
            if side.exists():
                os.rename(side, Path(f"{kept}{suffix}"))
    os.rename(new, db_path)
    _sync_folder(db_path.parent)
    return kept


def _sync_folder(folder: Path) -> None:
    if os.name != "posix":
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _reindex(root: Path, db: Database) -> int:
    """Cut the search index of every user's Markdown files again; returns the file count."""
    chunks = ChunkRepository(db)
    return sum(FileIndexer(chunks, UserPaths.for_user(root, user)).reindex() for user in users(root))


# --- repairs on a sound database ------------------------------------------------------------------
def _in_place(root: Path, state: DoctorReport, now: datetime, result: RepairReport) -> None:
    if state.repairs & {REINDEX, QUEUE, MARKS} and REBUILD not in state.repairs:
        db = open_store(root, root / DB_FILE)
        try:
            if REINDEX in state.repairs and not result.rebuilt:
                result.actions.append(f"rebuilt the search index of {_reindex(root, db)} Markdown files")
            if QUEUE in state.repairs:
                settings = load_settings(root)
                count = OutboxRepository(db).recover(now, lease_seconds(settings), settings.queue_max_attempts)
                result.actions.append(f"handed {counted(count, 'stuck queue item')} back to the queue")
            if MARKS in state.repairs:
                result.actions.append(f"dropped {_drop_bad_marks(root, db)} damaged consolidation marks")
        finally:
            db.close()
    if MODES in state.repairs or result.rebuilt:
        changed = fix_modes(root)
        if changed:
            result.actions.append(f"set owner-only modes on {counted(changed, 'file or folder', 'files and folders')}")


def _drop_bad_marks(root: Path, db: Database) -> int:
    """Delete consolidation marks whose fields cannot be right (retention then keeps those days)."""
    with db.transaction() as conn:
        rows = conn.execute('SELECT rowid, user_id, day, "offset", sha256 FROM consolidated_prefix').fetchall()
        bad = [(r["rowid"],) for r in rows if mark_fault(root, r) is not None]
        conn.executemany("DELETE FROM consolidated_prefix WHERE rowid = ?", bad)
    return len(bad)


def _embed(root: Path, embedder: Embedder | str | None, result: RepairReport) -> None:
    """Give every search item a vector of the store's embedder (reusing stored ones)."""
    try:
        with Memory(root, embedder=embedder, queue_replay=False) as mem:
            done = mem.reindex_vectors()
        result.actions.append(f"computed {counted(done.embedded, 'vector')} with {done.model} ({done.reused} reused)")
    except TiermemError as exc:
        log.warning("vectors not computed during repair: %s", exc)
        result.actions.append(f"vectors not computed now ({str(exc).splitlines()[0]}); the next search computes them")
