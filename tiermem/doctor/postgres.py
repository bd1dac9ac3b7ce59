"""``tiermem doctor`` on a PostgreSQL store: a short report instead of the SQLite file checks.

It connects with its own read-only session (it never migrates or writes), then reports: the
connection, the schema version (against the steps this tiermem knows), the ``vector``
extension, the rows of each table, and stuck queue claims (the same rule as on SQLite). Messages
name the database by its URL without the password, and a driver message has every spelling of
the password replaced (:mod:`tiermem.storage.postgres.conninfo`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from tiermem.doctor import contents
from tiermem.doctor.report import DoctorReport
from tiermem.errors import ConfigError
from tiermem.storage.postgres.conninfo import check_url, safe_url, scrub

CONNECT_TIMEOUT_SECONDS = 10
STATEMENT_TIMEOUT_MS = 30_000


def check_postgres(url: str, report: DoctorReport, now: datetime, lease_seconds: float) -> None:
    """Fill ``report`` for the store at ``url`` (see the module docstring)."""
    label = safe_url(url)
    report.database = {"backend": "postgres", "database": label}
    try:
        import psycopg
        from psycopg.rows import dict_row
    except ImportError:
        report.unchecked.append("database_url names PostgreSQL, which needs the postgres extra:"
                                " pip install 'tiermem[postgres]'")
        return
    try:
        check_url(url)
    except ConfigError as exc:
        report.unchecked.append(f"cannot connect to {label}: {exc}")
        return
    try:
        conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS, row_factory=dict_row)
    except (psycopg.Error, ValueError) as exc:
        report.unchecked.append(f"cannot connect to {label}: {_reason(exc, url)}")
        return
    try:
        with conn:
            conn.execute("SET default_transaction_read_only = on")
            conn.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            report.checked.append("connection")
            if _schema(conn, report, label):
                _extension(conn, report)
                _rows(conn, report)
                contents.find_vector_model(conn, report, _columns)
                contents.check_queue(conn, report, now, lease_seconds, _columns)
    except psycopg.Error as exc:
        report.unchecked.append(f"the database {label} could not be read: {_reason(exc, url)}")


def _reason(exc: BaseException, url: str) -> str:
    diag = getattr(exc, "diag", None)
    text = getattr(diag, "message_primary", None) or str(exc) or type(exc).__name__
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return scrub(" ".join(lines) or type(exc).__name__, url)


def _schema(conn: Any, report: DoctorReport, label: str) -> bool:
    """The schema version; False when there is no store (or a newer one) to look into."""
    from tiermem.storage.postgres.schema import MIGRATIONS

    known = len(MIGRATIONS)
    where = conn.execute("SELECT current_schema() AS s").fetchone()["s"]
    report.database["schema"] = where
    if not conn.execute("SELECT to_regclass('tiermem_schema') IS NOT NULL AS found").fetchone()["found"]:
        report.unchecked.append(f"no tiermem store in {label} (schema {where}): run `tiermem init`, or check"
                                " database_url")
        return False
    version = int(conn.execute("SELECT COALESCE(MAX(version), 0) AS v FROM tiermem_schema").fetchone()["v"])
    report.database["schema_version"] = version
    report.checked.append("schema")
    if version > known:
        report.schema_too_new = True
        report.unchecked.append(f"the database was written by a newer tiermem (schema version {version}; this"
                                f" tiermem knows up to {known}): upgrade tiermem (pip install -U tiermem) to check it")
        return False
    if version < known:
        report.notices.append(f"schema version {version} < {known}: tiermem upgrades it the next time it opens"
                              " the store")
    return True


def _extension(conn: Any, report: DoctorReport) -> None:
    report.checked.append("extension")
    row = conn.execute("SELECT extversion AS v FROM pg_extension WHERE extname = 'vector'").fetchone()
    report.database["vector_extension"] = row["v"] if row is not None else None
    if row is None:
        report.problem("the PostgreSQL extension 'vector' (pgvector) is not installed in this database: install"
                       " pgvector on the server and run CREATE EXTENSION vector (or ask your database administrator)")


def _tables(conn: Any) -> list[str]:
    rows = conn.execute("SELECT table_name AS t FROM information_schema.tables WHERE table_schema ="
                        " current_schema() AND table_type = 'BASE TABLE' AND table_name <> 'tiermem_schema'"
                        " ORDER BY table_name").fetchall()
    return [str(r["t"]) for r in rows]


def _columns(conn: Any, table: str) -> set[str]:
    rows = conn.execute("SELECT column_name AS c FROM information_schema.columns WHERE table_schema ="
                        " current_schema() AND table_name = %s", [table]).fetchall()
    return {str(r["c"]) for r in rows}


def _rows(conn: Any, report: DoctorReport) -> None:
    report.checked.append("rows")
    report.database["rows"] = {table: int(conn.execute(f'SELECT count(*) AS n FROM "{table}"').fetchone()["n"])
                               for table in _tables(conn)}
