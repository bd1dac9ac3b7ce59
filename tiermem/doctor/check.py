"""``tiermem doctor``: is the store under a root sound? Looks, never writes.

Checks, in order: the database file (present, not emptied beside Markdown memory, a sound header,
``PRAGMA quick_check``, a schema version this tiermem knows and the tables it expects), then its
contents (stuck queue claims, the search index against the files, consolidation marks), then the
files (modes, symlinks out of the root). See :class:`~tiermem.doctor.report.DoctorReport` for
what the result means.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from tiermem import validate
from tiermem.clock import Clock, SystemClock
from tiermem.config import Settings, load_settings
from tiermem.doctor import contents
from tiermem.doctor.database import check_database
from tiermem.doctor.files import check_links, check_modes, users
from tiermem.doctor.report import DoctorReport
from tiermem.errors import ConfigError
from tiermem.memory import DB_FILE
from tiermem.queue.worker import lease_seconds


def check(root: str | Path, *, user_id: str | None = None, clock: Clock | None = None) -> DoctorReport:
    """Check the store at ``root``; ``user_id`` limits the index and marks checks to one user."""
    base = Path(root).expanduser().resolve()
    report = DoctorReport(base)
    if not base.is_dir():
        report.unchecked.append(f"no tiermem store at {base} (run `tiermem init`, or check --root)")
        return report
    scope = [validate.name(user_id, "user_id")] if user_id is not None else users(base)
    now = (clock if clock is not None else SystemClock()).now()
    settings = _settings(base, report)

    def database_contents(conn: sqlite3.Connection, found: DoctorReport) -> None:
        contents.check_queue(conn, found, now, lease_seconds(settings))
        contents.check_index(conn, found, base, scope)
        contents.check_marks(conn, found, base, user_id)

    check_database(base / DB_FILE, report, database_contents)
    check_modes(base, report)
    check_links(base, report, settings.allow_symlinks)
    return report


def _settings(root: Path, report: DoctorReport) -> Settings:
    """The store's settings (``tiermem.toml``, ``TIERMEM_*``); the defaults when they cannot be read."""
    try:
        return load_settings(root)
    except ConfigError as exc:
        report.problem(f"the configuration cannot be read: {exc}")
        return Settings()
