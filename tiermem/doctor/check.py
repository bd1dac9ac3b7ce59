"""``tiermem doctor``: is the store under a root sound? Looks, never writes.

On SQLite (the store is ``tiermem.db`` under the root) it checks, in order: the database file
(present, not emptied beside Markdown memory, a sound header, ``PRAGMA quick_check``, a schema
version this tiermem knows and the tables it expects), then its contents (stuck queue claims, the
search index against the files, consolidation marks), then the files (modes, symlinks out of the
root). On PostgreSQL (``database_url``) it gives a short report instead (:mod:`.postgres`:
connection, schema version, extension, rows, queue claims), then checks the local files (the
mirror) as above. See :class:`~tiermem.doctor.report.DoctorReport` for what the result means.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from tiermem import validate
from tiermem.clock import Clock, SystemClock
from tiermem.config import Settings, load_settings
from tiermem.doctor import contents
from tiermem.doctor.database import check_database
from tiermem.doctor.files import check_links, check_modes, users
from tiermem.doctor.hooks import check_hook_log
from tiermem.doctor.report import DoctorReport
from tiermem.errors import ConfigError
from tiermem.queue.worker import lease_seconds
from tiermem.storage.backend import DB_FILE, scheme


def check(root: str | Path, *, user_id: str | None = None, clock: Clock | None = None) -> DoctorReport:
    """Check the store at ``root``; ``user_id`` limits the index and marks checks to one user."""
    base = Path(root).expanduser().resolve()
    report = DoctorReport(base)
    scope = [validate.name(user_id, "user_id")] if user_id is not None else None
    now = (clock if clock is not None else SystemClock()).now()
    settings = _settings(base, report)
    try:
        kind = scheme(settings)
    except ConfigError as exc:
        report.unchecked.append(str(exc))
        return report
    CHECKS[kind](base, report, settings, now, scope)
    check_hook_log(base, report)
    return report


def _check_file(base: Path, report: DoctorReport, settings: Settings, now: datetime, scope: list[str] | None) -> None:
    """The SQLite store: ``tiermem.db`` and the Markdown files under ``base``."""
    if not base.is_dir():
        report.unchecked.append(f"no tiermem store at {base} (run `tiermem init`, or check --root)")
        return
    user_id = scope[0] if scope is not None else None
    scope = scope if scope is not None else users(base)

    def database_contents(conn: sqlite3.Connection, found: DoctorReport) -> None:
        contents.check_queue(conn, found, now, lease_seconds(settings))
        contents.check_index(conn, found, base, scope)
        contents.check_marks(conn, found, base, user_id)

    check_database(base / DB_FILE, report, database_contents)
    check_modes(base, report)
    check_links(base, report, settings.allow_symlinks)


def _check_server(base: Path, report: DoctorReport, settings: Settings, now: datetime,
                  scope: list[str] | None) -> None:
    """A store in a database server: its short report, then the local mirror's files."""
    from tiermem.doctor.postgres import check_postgres

    assert settings.database_url is not None
    check_postgres(settings.database_url, report, now, lease_seconds(settings))
    if base.is_dir():
        check_modes(base, report)
        check_links(base, report, settings.allow_symlinks)


#: The checks of each backend, by the registry name of :func:`tiermem.storage.backend.scheme`.
CHECKS: dict[str, Callable[[Path, DoctorReport, Settings, datetime, list[str] | None], None]] = {
    "sqlite": _check_file, "postgresql": _check_server, "postgres": _check_server,
}


def _settings(root: Path, report: DoctorReport) -> Settings:
    """The store's settings (``tiermem.toml``, ``TIERMEM_*``); the defaults when they cannot be read."""
    try:
        return load_settings(root)
    except ConfigError as exc:
        report.problem(f"the configuration cannot be read: {exc}")
        return Settings()
