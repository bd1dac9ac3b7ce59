"""Doctor's checks of ``tiermem.db`` itself: present, not emptied, not damaged, a schema it knows.

Doctor never writes to the database: it reads it through a read-only connection (``immutable``
when no write-ahead log is pending, so not even a ``-shm`` file is created). The contents checks
(queue, search index, consolidation marks) run on the same connection: :mod:`.contents`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from contextlib import closing
from functools import cache
from pathlib import Path

from tiermem.doctor.report import REBUILD, DoctorReport
from tiermem.storage.sqlite import integrity
from tiermem.storage.sqlite.migrations import MIGRATIONS, migrate

KNOWN_VERSION = len(MIGRATIONS)
REBUILD_HINT = ("`tiermem doctor --repair` rebuilds it beside the damaged file (which is kept) from the Daily files, "
                "MEMORY.md and the rows it can still read")
NOT_CHECKED = "queue, search index and consolidation marks: not checked while the database is damaged"

ContentsCheck = Callable[[sqlite3.Connection, DoctorReport], None]


def open_readonly(path: Path) -> sqlite3.Connection:
    """A connection that cannot write ``path`` (nor create files beside it when no log is pending)."""
    pending = Path(f"{path}-wal").exists()
    query = "mode=ro" if pending else "mode=ro&immutable=1"
    conn = sqlite3.connect(f"{path.resolve().as_uri()}?{query}", uri=True, timeout=5.0, isolation_level=None)
    conn.row_factory = sqlite3.Row
    return conn


@cache
def expected_columns() -> dict[str, frozenset[str]]:
    """Every table (with FTS shadow tables) and its columns, as this tiermem's migrations make them."""
    with closing(sqlite3.connect(":memory:", isolation_level=None)) as conn:
        conn.execute("BEGIN")
        migrate(conn)
        conn.execute("COMMIT")
        return table_columns(conn)


def table_columns(conn: sqlite3.Connection) -> dict[str, frozenset[str]]:
    """``{table: columns}`` of a database's ordinary tables (virtual tables left out)."""
    names = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"
                                        " AND name NOT LIKE 'sqlite_%' AND sql NOT LIKE 'CREATE VIRTUAL%'")]
    return {name: frozenset(r[1] for r in conn.execute(f'PRAGMA table_info("{name}")')) for name in names}


def check_database(db_path: Path, report: DoctorReport, contents: ContentsCheck) -> None:
    """Check the database file; when it is sound, run ``contents`` on a read-only connection."""
    if not _file_state(db_path, report):
        return
    report.checked.append("integrity")
    damage = integrity.header_damage(db_path)
    if damage is not None:
        report.problem(f"the database is damaged: {damage}: {REBUILD_HINT}", REBUILD)
        report.unchecked.append(NOT_CHECKED)
        return
    version = integrity.header_version(db_path)
    if version is not None and version > KNOWN_VERSION:
        _too_new(report, version)
        return
    try:
        with closing(open_readonly(db_path)) as conn:
            if _sound(conn, report):
                contents(conn, report)
    except sqlite3.Error as exc:
        if integrity.is_damage(exc):
            report.problem(f"the database is damaged: {exc}: {REBUILD_HINT}", REBUILD)
            report.unchecked.append(NOT_CHECKED)
        else:
            report.unchecked.append(f"the database could not be read: {exc} (is another program holding it?)")


def _file_state(db_path: Path, report: DoctorReport) -> bool:
    """Is there a non-empty database file to open? Says what is wrong when not."""
    files = integrity.markdown_beside(db_path)
    if not db_path.exists():
        if files:
            report.problem(f"there is no database beside {integrity.describe_files(files)}: facts, plans and the "
                           "search index are missing; `tiermem doctor --repair` creates it and indexes the files "
                           "(or `tiermem import` a backup)", REBUILD)
        else:
            report.unchecked.append(f"no tiermem store at {report.root} (run `tiermem init`, or check --root)")
        return False
    if not db_path.is_file():
        report.unchecked.append(f"{db_path} is not a file")
        return False
    if db_path.stat().st_size > 0:
        return True
    report.checked.append("integrity")
    if files:
        report.problem(f"the database is empty (0 bytes) beside {integrity.describe_files(files)}: the facts, plans "
                       "and queue it held are lost; `tiermem doctor --repair` rebuilds the store from the files "
                       "(the empty file is kept), or `tiermem import` a backup", REBUILD)
    else:
        report.notices.append("the database is empty (0 bytes) and there are no Daily files or MEMORY.md: "
                              "the next write starts a new store")
    return False


def _too_new(report: DoctorReport, version: int) -> None:
    report.schema_too_new = True
    report.unchecked.append(f"the database was written by a newer tiermem (schema version {version}; this tiermem "
                            f"knows up to {KNOWN_VERSION}): upgrade tiermem (pip install -U tiermem) to check it")


def _sound(conn: sqlite3.Connection, report: DoctorReport) -> bool:
    """``quick_check`` and the schema; False (with a problem or an unchecked line) when the
    contents cannot be trusted or read."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > KNOWN_VERSION:
        _too_new(report, version)
        return False
    failure = integrity.quick_check(conn)
    if failure is not None:
        report.problem(f"the database is damaged: {failure}: {REBUILD_HINT}", REBUILD)
        report.unchecked.append(NOT_CHECKED)
        return False
    report.checked.append("schema")
    if version < KNOWN_VERSION:
        report.notices.append(f"schema version {version} < {KNOWN_VERSION}: tiermem upgrades it the next time it "
                              "opens the store for writing")
        return True
    have = table_columns(conn)
    missing: list[str] = []
    for table, columns in sorted(expected_columns().items()):
        missing += [f"{table}.{c}" for c in sorted(columns - have[table])] if table in have else [table]
    if missing:
        report.problem(f"the database lacks {', '.join(missing[:5])} of schema version {version}: {REBUILD_HINT}",
                       REBUILD)
        return False
    return True
