"""The Markdown files of the PostgreSQL backend: rows in the shared database, mirrored locally.

Every host shares one journal and one ``MEMORY.md`` per user, so they live in the database:

- ``memory_files`` — one row per file (user, relative path): its length in bytes and a
  *revision*, a number from one sequence taken by every change (the cheap change key
  :class:`~tiermem.storage.files.FileStat` gives the index).
- ``memory_blocks`` — the file's bytes as the blocks appended to it, keyed by the byte offset
  where each starts. An append inserts one block (a day is never one growing value); a replace
  is one block at offset 0; cutting a torn tail deletes or shortens the last blocks. An append to
  a file read in the same transaction with :data:`COMPACT_BLOCKS` blocks or more writes it back as
  one block instead, so reading a day costs a few rows however many appends it took.

Every change runs in a database transaction (joining the caller's: inside
:meth:`PgFiles.writing`, a journal append, the digests that record it and the index update are
one transaction — exactly-once journaling). After the outermost transaction commits, the files
this thread changed are rewritten in the local mirror (temp file and rename, so a reader never
sees half a file), unless ``mirror_files = false``. :meth:`PgFiles.refresh` — when the store
opens, and ``tiermem mirror`` — brings the whole mirror up to date with the database (others'
writes). A mirrored Daily file is never read back: a hand edit of it is overwritten by the next
write of that day. ``MEMORY.md`` is the exception: Core compares its mirror with the versions it
kept and imports a hand edit (:mod:`tiermem.tiers.core`), so :meth:`PgFiles.refresh` never
overwrites an existing ``MEMORY.md`` mirror — Core rewrites it once it has looked. A local file
the database does not hold is left alone.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.errors import StorageError, TiermemError
from tiermem.paths import CORE_FILE, UserPaths, make_dirs, read_file
from tiermem.storage.files import FileStat, MemoryFiles
from tiermem.storage.sql import WriteKey, user_key

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

log = logging.getLogger(__name__)
_UNKNOWN = object()

#: Blocks a file may hold before an append that knows its content (read in its transaction) writes
#: it back as one: a day of 4,000 appends read as 4,000 rows by each append cost the server and
#: psycopg more than the rest of the append (bench/README.md, issue 25).
COMPACT_BLOCKS = 64

READ_BACK = frozenset({CORE_FILE})  # mirrors a person may edit: Core reads them back (tiers/core.py)

_SCHEMA = """
CREATE SEQUENCE memory_file_revisions;

CREATE TABLE memory_files (
    user_id TEXT NOT NULL,
    rel TEXT NOT NULL,
    size BIGINT NOT NULL,
    revision BIGINT NOT NULL,
    PRIMARY KEY (user_id, rel)
);

CREATE TABLE memory_blocks (
    user_id TEXT NOT NULL,
    rel TEXT NOT NULL,
    "offset" BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (user_id, rel, "offset"),
    FOREIGN KEY (user_id, rel) REFERENCES memory_files (user_id, rel) ON DELETE CASCADE
);
"""

_GROW = ("INSERT INTO memory_files (user_id, rel, size, revision) VALUES (?, ?, ?, nextval('memory_file_revisions'))"
         " ON CONFLICT (user_id, rel) DO UPDATE SET size = memory_files.size + excluded.size,"
         " revision = excluded.revision RETURNING size")
_SET = ("INSERT INTO memory_files (user_id, rel, size, revision) VALUES (?, ?, ?, nextval('memory_file_revisions'))"
        " ON CONFLICT (user_id, rel) DO UPDATE SET size = excluded.size, revision = excluded.revision")
_BLOCK = 'INSERT INTO memory_blocks (user_id, rel, "offset", data) VALUES (?, ?, ?, ?)'
_READ = ('SELECT f.size, b.data FROM memory_files f LEFT JOIN memory_blocks b ON b.user_id = f.user_id'
         ' AND b.rel = f.rel WHERE f.user_id = ? AND f.rel = ? ORDER BY b."offset"')


def create_files_schema(conn: Any) -> None:
    """Migration step: the tables of the Daily journal and ``MEMORY.md`` (``conn``: psycopg, in
    the migration's transaction)."""
    conn.execute(_SCHEMA)


def open_files(db: Database, paths: UserPaths, *, mirror: bool = True) -> MemoryFiles:
    """``db.parts.files`` of PostgreSQL."""
    return PgFiles(db, paths, mirror=mirror)


class PgFiles:
    """One user's Markdown files in the database, mirrored under ``paths.root``."""

    durable_files = False

    def __init__(self, db: Database, paths: UserPaths, *, mirror: bool = True) -> None:
        self.db = db
        self._paths = paths
        self.mirror = mirror
        self._on_refresh: dict[str, Callable[[], None]] = {}  # run first by refresh() (Core imports a hand edit)
        self._local = threading.local()  # this thread's writing() block: files changed, contents known

    @property
    def paths(self) -> UserPaths:
        return self._paths

    @property
    def on_refresh(self) -> dict[str, Callable[[], None]]:
        return self._on_refresh

    @property
    def user_id(self) -> str:
        return self._paths.user_id

    def mirror_path(self, rel: str) -> Path:
        return self._paths.root / rel

    # --- reading -------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes | None:
        rows = self.db.rows(_READ, (self.user_id, rel), what=f"reading {rel}")
        data = b"".join(bytes(r[1]) for r in rows if r[1] is not None) if rows else None
        self._know(rel, data, blocks=len(rows))
        return data

    def prefetch(self, rel: str) -> None:
        self.db.prefetch(_READ, (self.user_id, rel))

    def stat(self, rel: str) -> FileStat | None:
        rows = self.db.rows("SELECT size, revision FROM memory_files WHERE user_id = ? AND rel = ?",
                            (self.user_id, rel), what=f"reading {rel}")
        return FileStat(int(rows[0][0]), int(rows[0][1])) if rows else None

    def scan(self, folder: str) -> dict[str, FileStat]:
        return self.scan_with(folder, ())

    def scan_with(self, folder: str, rels: Sequence[str]) -> dict[str, FileStat]:
        prefix = f"{folder.strip('/')}/" if folder.strip("/") else ""
        pattern = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
        sql = "SELECT rel, size, revision FROM memory_files WHERE user_id = ? AND (rel LIKE ? ESCAPE '\\'"
        rows = self.db.rows(f"{sql} OR rel = ANY(?))" if rels else f"{sql})",
                            (self.user_id, pattern, list(rels)) if rels else (self.user_id, pattern),
                            what=f"listing {folder or 'the files'}")
        found: dict[str, FileStat] = {}
        for rel, size, revision in ((str(r[0]), int(r[1]), int(r[2])) for r in rows):
            name = rel[len(prefix):] if rel.startswith(prefix) else "/"
            if ("/" not in name and not name.startswith(".")) or rel in rels:
                found[rel] = FileStat(size, revision)
        return found

    # --- writing -------------------------------------------------------------------------------
    def append(self, rel: str, data: bytes) -> int:
        with self._change(rel, appending=True) as conn:
            known = self._local.known.get(rel)  # read in this transaction, under the user's lock: its length holds
            if known is not None:  # the size is known: no need to wait for it
                start = len(known)
                self.db.defer(_GROW, (self.user_id, rel, len(data)))
            else:
                start = int(conn.execute(_GROW, (self.user_id, rel, len(data))).fetchone()[0]) - len(data)
            blocks = self._local.blocks.get(rel, 0) + bool(data)
            if known is not None and data and blocks > COMPACT_BLOCKS:
                self._compact(rel, known, data)
                blocks = 1
            elif data:
                self.db.defer(_BLOCK, (self.user_id, rel, start, data))
            self._know(rel, known + data if known is not None else _UNKNOWN, blocks)
            self._local.grown.setdefault(rel, start)  # the first append's; -1 after another change
        return start

    def _compact(self, rel: str, known: bytes, data: bytes) -> None:
        """Append ``data`` by writing the day back as one block, ``known + data`` (sent with the
        append's other statements): only when the stored file is ``known`` grown by ``data`` (its size
        says so; a write it could not see - another file object's in this transaction - changed it),
        else ``data`` goes as a block of its own at ``len(known)``, as an append without compaction
        would (a stale view then fails on the block there, rolled back, as it always did)."""
        key, size = (self.user_id, rel), len(known) + len(data)
        self.db.defer('DELETE FROM memory_blocks WHERE user_id = ? AND rel = ? AND (SELECT size FROM memory_files'
                      ' WHERE user_id = ? AND rel = ?) = ?', (*key, *key, size))
        self.db.defer('INSERT INTO memory_blocks (user_id, rel, "offset", data) SELECT ?, ?, 0, ? WHERE NOT EXISTS'
                      ' (SELECT 1 FROM memory_blocks WHERE user_id = ? AND rel = ?)', (*key, known + data, *key))
        self.db.defer('INSERT INTO memory_blocks (user_id, rel, "offset", data) SELECT ?, ?, ?, ? WHERE NOT EXISTS'
                      ' (SELECT 1 FROM memory_blocks WHERE user_id = ? AND rel = ? AND "offset" = 0'
                      ' AND octet_length(data) = ?)', (*key, len(known), data, *key, size))

    def truncate(self, rel: str, size: int) -> None:
        if size <= 0:
            self.remove(rel)
            return
        with self._change(rel) as conn:
            key = (self.user_id, rel)
            conn.execute('DELETE FROM memory_blocks WHERE user_id = ? AND rel = ? AND "offset" >= ?', (*key, size))
            last = conn.execute('SELECT "offset", data FROM memory_blocks WHERE user_id = ? AND rel = ?'
                                ' ORDER BY "offset" DESC LIMIT 1', key).fetchone()
            new_size = 0
            if last is not None:
                start, data = int(last[0]), bytes(last[1])
                if start + len(data) > size:
                    data = data[:size - start]
                    conn.execute('UPDATE memory_blocks SET data = ? WHERE user_id = ? AND rel = ? AND "offset" = ?',
                                 (data, *key, start))
                new_size = start + len(data)
            conn.execute(_SET, (*key, new_size))
            self._know(rel, _UNKNOWN)

    def replace(self, rel: str, data: bytes) -> None:
        with self._change(rel) as conn:
            conn.execute("DELETE FROM memory_blocks WHERE user_id = ? AND rel = ?", (self.user_id, rel))
            conn.execute(_SET, (self.user_id, rel, len(data)))
            if data:
                conn.execute(_BLOCK, (self.user_id, rel, 0, data))
            self._know(rel, data)

    def remove(self, rel: str) -> bool:
        with self._change(rel) as conn:  # the blocks go with the file (ON DELETE CASCADE)
            cur = conn.execute("DELETE FROM memory_files WHERE user_id = ? AND rel = ?", (self.user_id, rel))
            self._know(rel, None)
            return int(cur.rowcount) > 0

    @contextmanager
    def writing(self, key: WriteKey | None = None) -> Iterator[None]:
        state = self._local
        if getattr(state, "dirty", None) is not None:  # inside an outer block: it mirrors at its end
            with self.db.transaction(WriteKey.sharing(*key.shares)) if key is not None and key.shares \
                    else contextlib.nullcontext():  # the named locks the outer block may lack
                yield
            return
        state.dirty, state.known, state.blocks, state.grown = set(), {}, {}, {}
        try:
            with self.db.transaction(user_key(self.user_id) if key is None else key):
                yield
            dirty, known, grown = sorted(state.dirty), state.known, state.grown
        finally:
            state.dirty = state.known = state.blocks = state.grown = None
        self._mirror(dirty, known, grown)

    def _know(self, rel: str, data: bytes | None | object, blocks: int = 1) -> None:
        """Inside a :meth:`writing` block, remember ``rel``'s content as this transaction sees it
        (``None``: no file; :data:`_UNKNOWN`: forget) and how many blocks hold it, so the mirror is
        written without reading the file again and an append knows when to compact it."""
        known = getattr(self._local, "known", None)
        if known is None:
            return
        if data is _UNKNOWN:
            known.pop(rel, None)
            self._local.blocks.pop(rel, None)
        else:
            known[rel] = data
            self._local.blocks[rel] = blocks

    @contextmanager
    def _change(self, rel: str, appending: bool = False) -> Iterator[Any]:
        """One change of ``rel``: in the caller's :meth:`writing` block, or a transaction of its own.
        A mirror that would be written through a link out of the root is refused first
        (:class:`~tiermem.errors.UnsafePath`, nothing changed), as the SQLite files are."""
        if self.mirror:
            self._local_path(rel)
        with self.writing(), self.db.transaction(user_key(self.user_id)) as conn:
            self._local.dirty.add(rel)
            if not appending:  # changed otherwise than appended to in this block: its mirror is rewritten
                self._local.grown[rel] = -1
            yield conn

    # --- the local mirror ---------------------------------------------------------------------
    def refresh(self, *, full: bool = False) -> list[str]:
        """Bring the mirror up to date with the database (hooks in :attr:`on_refresh` first);
        returns the files rewritten. Files whose mirror has the right length are left alone
        unless ``full`` (then they are compared byte for byte)."""
        for hook in list(self.on_refresh.values()):
            hook()
        written: list[str] = []
        if not self.mirror:
            return written
        for rel, found in sorted(self.scan_all().items()):
            local = self._mirrored_size(rel)
            if (local == found.size and not full) or (rel in READ_BACK and local is not None):
                continue  # MEMORY.md: a differing mirror may be a hand edit, Core imports or rewrites it
            data = self.read(rel)
            if data is not None and (local != len(data) or self._mirrored(rel) != data):
                self._write_mirror(rel, data)
                written.append(rel)
        return written

    def scan_all(self) -> dict[str, FileStat]:
        """Every file of the user in the database, in any folder."""
        rows = self.db.rows("SELECT rel, size, revision FROM memory_files WHERE user_id = ?", (self.user_id,),
                            what="listing the files")
        return {str(r[0]): FileStat(int(r[1]), int(r[2])) for r in rows}

    def _mirror(self, rels: Iterable[str], known: dict[str, bytes | None], grown: dict[str, int]) -> None:
        """Rewrite the mirror of ``rels`` as ``known`` has them, else from the database (a failure
        is logged: the database is the truth). A file only appended to since it was ``grown[rel]``
        bytes long gets the new bytes appended when its mirror is that long (a day is not
        rewritten whole by each append)."""
        if not self.mirror:
            return
        for rel in rels:
            try:
                data = known[rel] if rel in known else self.read(rel)
                if data is None:
                    self._remove_mirror(rel)
                elif rel not in grown or not self._append_mirror(rel, data, grown[rel]):
                    self._write_mirror(rel, data)
            except (OSError, TiermemError) as exc:
                log.warning("could not mirror %s to %s (tiermem mirror retries): %s", rel, self.mirror_path(rel), exc)

    def _local_path(self, rel: str) -> Path:
        return self._paths.inside(self.mirror_path(rel))  # a link out of the root: UnsafePath

    def _mirrored_size(self, rel: str) -> int | None:
        try:
            return os.stat(self._local_path(rel)).st_size
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _mirrored(self, rel: str) -> bytes | None:
        try:
            return read_file(self._local_path(rel))
        except (FileNotFoundError, NotADirectoryError):
            return None

    def _write_mirror(self, rel: str, data: bytes) -> None:
        path = self._local_path(rel)
        make_dirs(path.parent)
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(temp, path)
        except OSError as exc:
            Path(temp).unlink(missing_ok=True)
            raise StorageError(f"cannot write {path}: {exc}") from exc

    def _append_mirror(self, rel: str, data: bytes, start: int) -> bool:
        """Append ``data[start:]`` to the mirror of ``rel`` if it holds ``data[:start]`` (else False:
        it is rewritten whole). Reading the mirror is cheap next to rewriting it (a rename over a
        file makes ext4 flush it). A mirror that another process renamed over meanwhile gets the
        bytes in the file it replaced, and is whole already; a torn append differs at the next one."""
        try:
            fd = os.open(self._local_path(rel), os.O_RDWR | os.O_APPEND | getattr(os, "O_NOFOLLOW", 0))
        except (FileNotFoundError, NotADirectoryError):
            return False
        except OSError as exc:
            raise StorageError(f"cannot write {self.mirror_path(rel)}: {exc}") from exc
        with os.fdopen(fd, "r+b") as handle:
            if os.fstat(fd).st_size != start or handle.read(start + 1) != data[:start]:
                return False
            handle.write(data[start:])
        return True

    def _remove_mirror(self, rel: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self._local_path(rel).unlink()

    def list(self, folder: str) -> list[str]:
        return sorted(self.scan(folder))
