"""Open a store's database: SQLite under the root (the default) or PostgreSQL at ``database_url``.

Backends register by URL scheme; the rest of tiermem only sees the :class:`~tiermem.storage.sql.Database`
protocol and its :attr:`~tiermem.storage.sql.Database.parts`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.errors import ConfigError

if TYPE_CHECKING:
    from tiermem.config import Settings
    from tiermem.storage.sql import Database

DB_FILE = "tiermem.db"
POSTGRES_MARK = "tiermem.postgres"  # in a root that mirrors a PostgreSQL store: which database (no password)

Opener = Callable[[Path, "Settings"], "Database"]
NEEDS_EXTRA = "database_url names PostgreSQL, which needs the postgres extra: pip install 'tiermem[postgres]'"
DEFAULT = "sqlite"  # no database_url: the SQLite file under the root (no URL names it)
_SCHEME = re.compile(r"[a-z][a-z0-9+.-]{0,30}")  # what a URL scheme looks like: only such a name is quoted back


def _sqlite(root: Path, settings: Settings) -> Database:
    _not_a_mirror(root)
    from tiermem.redact import Redactor
    from tiermem.storage.sqlite.db import Database as SqliteDatabase

    return SqliteDatabase(root / DB_FILE, redactor=Redactor(settings.redact_secrets),
                          allow_symlinks=settings.allow_symlinks, synchronous=settings.sqlite_synchronous)


def _postgres(root: Path, settings: Settings) -> Database:
    try:
        from tiermem.storage.postgres.db import PgDatabase
    except ImportError as exc:
        raise ConfigError(NEEDS_EXTRA) from exc
    from tiermem.redact import Redactor

    assert settings.database_url is not None
    db = PgDatabase(settings.database_url, redactor=Redactor(settings.redact_secrets),
                    allow_symlinks=settings.allow_symlinks, pool_size=settings.postgres_pool_size,
                    statement_timeout=settings.postgres_statement_timeout_seconds)
    if settings.mirror_files:
        mark_mirror(root, db.label)
    return db


def mark_mirror(root: Path, label: str) -> None:
    """Write :data:`POSTGRES_MARK` in ``root`` (once): the root mirrors the store at ``label``
    (written by every open with the URL, and by ``tiermem migrate`` once it has copied the root's store)."""
    from tiermem.paths import write_private

    mark = root / POSTGRES_MARK
    text = (f"{label}\n\nThis root mirrors the tiermem store in the PostgreSQL database above. Open it with that"
            " database_url (TIERMEM_DATABASE_URL, or database_url in tiermem.toml). Delete this file to use a"
            f" SQLite store here instead (a {DB_FILE} here, such as the one `tiermem migrate` copied, holds none"
            " of what was written to the PostgreSQL store).\n")
    try:
        if not mark.is_file() or mark.read_text(encoding="utf-8", errors="replace") != text:
            write_private(mark, text.encode("utf-8"))
    except OSError:  # a root this process may not write: its mirror is not written either
        pass


def _not_a_mirror(root: Path) -> None:
    """Refuse to open a SQLite store in a root that mirrors a PostgreSQL store (a process started
    without the URL, such as an MCP server whose client passed only the environment its config names):
    a new one, or the stale ``tiermem.db`` that ``tiermem migrate`` copied from and left in place."""
    mark = root / POSTGRES_MARK
    if not mark.is_file():
        return
    try:
        label = mark.read_text(encoding="utf-8", errors="replace").split("\n", 1)[0].strip()
    except OSError:
        label = "a PostgreSQL database"
    raise ConfigError(f"{root} mirrors the tiermem store in {label} ({mark}), but no database_url is set: set"
                      " TIERMEM_DATABASE_URL (in an MCP client's config: its \"env\") or database_url in"
                      f" {root / 'tiermem.toml'}; {_sqlite_instead(root, mark)}")


def _sqlite_instead(root: Path, mark: Path) -> str:
    """What deleting the mark would open instead."""
    db = root / DB_FILE
    if db.exists():
        return (f"delete {mark} to use the older SQLite store {db} instead (what was written to the PostgreSQL"
                " store is not in it)")
    return f"delete {mark} to start a separate SQLite store here"


OPENERS: dict[str, Opener] = {
    "sqlite": _sqlite,
    "postgresql": _postgres,
    "postgres": _postgres,
}


def scheme(settings: Settings) -> str:
    """The backend's registry name: the URL scheme of ``database_url``, or :data:`DEFAULT` without one."""
    url = settings.database_url
    return url_scheme(url, "database_url") if url else DEFAULT


def url_scheme(url: str, what: str) -> str:
    """The registry name of a database server ``url``; a :class:`ConfigError` naming ``what`` for
    anything else: the SQLite store has no URL, and a key/value connection string is not one (the
    message quotes a scheme, never the rest of ``url``, which may hold a password)."""
    name = url.split("://", 1)[0].split("+", 1)[0].lower() if "://" in url else ""
    if name in OPENERS and name != DEFAULT:
        return name
    known = ", ".join(s + "://" for s in OPENERS if s != DEFAULT)
    got = (f"a URL with scheme {name!r}" if _SCHEME.fullmatch(name) else
           "no URL: key/value connection strings are not accepted" if url.strip() else "an empty URL")
    hint = "; the SQLite store under the root needs no URL" if name == DEFAULT else ""
    raise ConfigError(f"{what} must start with one of {known} (got {got}{hint})")


def open_database(root: Path, settings: Settings) -> Database:
    """The store's database for ``root`` under ``settings`` (migrated to the current schema)."""
    return OPENERS[scheme(settings)](root, settings)


def _sqlite_exists(root: Path, settings: Settings) -> bool:
    _not_a_mirror(root)
    return (root / DB_FILE).is_file()


def _postgres_exists(root: Path, settings: Settings) -> bool:
    """Whether the schema holds a tiermem store (read without creating or migrating anything)."""
    try:
        import psycopg
    except ImportError as exc:
        raise ConfigError(NEEDS_EXTRA) from exc
    from tiermem.errors import StorageError
    from tiermem.storage.postgres.conninfo import check_url, safe_url, scrub
    from tiermem.storage.postgres.pool import CONNECT_TIMEOUT
    from tiermem.storage.postgres.schema import version

    url = settings.database_url
    assert url is not None
    check_url(url)
    try:
        with psycopg.connect(url, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT)) as conn:
            return version(conn) > 0
    except psycopg.Error as exc:
        raise StorageError(f"cannot connect to {safe_url(url)}: {scrub(str(exc).strip(), url)}") from exc


EXISTS: dict[str, Callable[[Path, Settings], bool]] = {
    "sqlite": _sqlite_exists,
    "postgresql": _postgres_exists,
    "postgres": _postgres_exists,
}


def store_exists(root: Path, settings: Settings) -> bool:
    """Whether the store of ``root`` under ``settings`` was created (commands that only read
    must not create one): the SQLite file, or the tiermem tables in the PostgreSQL schema."""
    return EXISTS[scheme(settings)](root, settings)


def store_label(root: Path, settings: Settings) -> str:
    """Where the store is, for messages: the root, or the database URL without its password."""
    if not settings.database_url:
        return str(root)
    from tiermem.storage.postgres.conninfo import safe_url

    return safe_url(settings.database_url)
