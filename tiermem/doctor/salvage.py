"""Reading back what a damaged database still holds, into a new database.

The damaged file is never opened for writing: it is copied (with its ``-wal``) into a private
folder, the copy is padded with empty pages up to the size its header records (a truncated file
then opens, and only the missing pages fail), and each table is read in rowid order. A read that
hits a damaged page skips ahead (by 1, 2, 4, ... rowids) and carries on, so the rows on either
side of the damage are kept. Rows are written with ``INSERT OR IGNORE``: a row that breaks a
constraint (a half-read one) is left out and counted.

Only tables that hold something only the store knows are read back; the derived ones (search
index, counters, :data:`~tiermem.transfer.rows.NOT_EXPORTED`) are rebuilt from the files and
the salvaged rows instead.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

from tiermem.storage.sqlite.integrity import HEADER_SIZE, SQLITE_MAGIC
from tiermem.transfer.rows import NOT_EXPORTED

_MAX_SKIPS = 62  # a skip of 2**62 rowids passes any damage
_MAX_ROWID = 2**63 - 1
_MAX_PAD = 1 << 34  # never pad a copy beyond 16 GiB whatever a damaged header says


@dataclass
class Salvaged:
    """What was read back: rows per table, tables not read whole, rows that could not be stored."""

    rows: dict[str, int] = field(default_factory=dict)
    unreadable: list[str] = field(default_factory=list)
    rejected: int = 0


def salvageable(conn: sqlite3.Connection) -> dict[str, list[str]]:
    """``{table: columns}`` of the tables whose rows a repair reads back (no derived tables, no
    virtual tables nor their shadow tables)."""
    tables = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
    listed = [(str(name), str(sql or "")) for name, sql in tables]
    virtual = [name for name, sql in listed if sql.upper().startswith("CREATE VIRTUAL")]
    keep = [name for name, _ in listed if name not in NOT_EXPORTED and name not in virtual
            and not any(name.startswith(f"{v}_") for v in virtual)]
    return {name: [str(r[1]) for r in conn.execute(f'PRAGMA table_info("{name}")')] for name in keep}


def readable_copy(db_path: Path, folder: Path) -> Path:
    """A copy of the damaged file (and its write-ahead log) in ``folder``, padded to whole pages
    and to the page count its header records."""
    copy = folder / "damaged.db"
    shutil.copyfile(db_path, copy)
    wal = Path(f"{db_path}-wal")
    if wal.is_file():
        shutil.copyfile(wal, Path(f"{copy}-wal"))
    with copy.open("r+b") as handle:
        head = handle.read(HEADER_SIZE)
        if len(head) < HEADER_SIZE or not head.startswith(SQLITE_MAGIC):
            return copy
        raw = int.from_bytes(head[16:18], "big")
        page = 65536 if raw == 1 else raw
        if page < 512 or page & (page - 1):
            return copy
        size = handle.seek(0, 2)
        wanted = max(-(-size // page) * page, int.from_bytes(head[28:32], "big") * page)
        if size < wanted <= _MAX_PAD:
            handle.truncate(wanted)  # extends with zero bytes
    return copy


class TableReader:
    """The rows of one table, in rowid order, skipping the parts that cannot be read.
    ``complete`` turns False when something was skipped."""

    def __init__(self, conn: sqlite3.Connection, table: str, columns: list[str]) -> None:
        self.conn = conn
        self.table = table
        self.columns = ", ".join(f'"{c}"' for c in columns)
        self.complete = True

    def __iter__(self) -> Iterator[tuple[object, ...]]:
        try:
            self.conn.execute(f'SELECT rowid FROM "{self.table}" LIMIT 0')
        except sqlite3.OperationalError:  # WITHOUT ROWID: read in key order until the damage
            yield from self._plain()
            return
        except sqlite3.DatabaseError:
            self.complete = False
            return
        yield from self._by_rowid()

    def _plain(self) -> Iterator[tuple[object, ...]]:
        try:
            for row in self.conn.execute(f'SELECT {self.columns} FROM "{self.table}"'):
                yield tuple(row)
        except sqlite3.DatabaseError:
            self.complete = False

    def _by_rowid(self) -> Iterator[tuple[object, ...]]:
        sql = f'SELECT rowid, {self.columns} FROM "{self.table}" WHERE rowid > ? ORDER BY rowid'
        after, skips = 0, 0
        while True:
            try:
                for rowid, *values in self.conn.execute(sql, (after,)):
                    after, skips = int(rowid), 0
                    yield tuple(values)
                return
            except sqlite3.DatabaseError:
                self.complete = False
                step = 1 << skips
                if skips >= _MAX_SKIPS or after > _MAX_ROWID - step:
                    return
                after, skips = after + step, skips + 1


def copy_rows(source: sqlite3.Connection, target: sqlite3.Connection) -> Salvaged:
    """Read every salvageable table of ``source`` into the same table of ``target`` (inside the
    caller's transaction): the columns both have."""
    found = Salvaged()
    try:
        have = salvageable(source)
    except sqlite3.DatabaseError as exc:
        found.unreadable.append(f"every table (the schema cannot be read: {exc})")
        return found
    for table, columns in salvageable(target).items():
        if table not in have:
            continue
        shared = [c for c in columns if c in have[table]]
        reader = TableReader(source, table, shared)
        insert = (f'INSERT OR IGNORE INTO "{table}" ({reader.columns}) VALUES ({", ".join("?" * len(shared))})')
        count = 0
        for values in reader:
            try:
                count += target.execute(insert, values).rowcount
            except sqlite3.Error:
                found.rejected += 1
        found.rows[table] = count
        if not reader.complete:
            found.unreadable.append(table)
    return found


def salvage_into(db_path: Path, folder: Path, target: sqlite3.Connection) -> Salvaged:
    """Copy the readable rows of the damaged database at ``db_path`` into ``target``."""
    if not db_path.is_file() or db_path.stat().st_size == 0:
        return Salvaged()
    copy = readable_copy(db_path, folder)
    try:
        with closing(sqlite3.connect(copy, isolation_level=None)) as source:
            return copy_rows(source, target)
    except sqlite3.Error as exc:
        return Salvaged(unreadable=[f"every table ({exc})"])
