"""Running a multi-statement SQL script inside the current transaction (the schema steps)."""

from __future__ import annotations

import sqlite3


def run_script(conn: sqlite3.Connection, script: str) -> None:
    """Execute ``script`` statement by statement inside the current transaction.

    (``executescript`` would COMMIT first.) Statements are split where
    ``sqlite3.complete_statement`` says one ends, so trigger bodies stay whole.
    """
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            conn.execute(buffer)
            buffer = ""
    if buffer.strip():
        raise ValueError(f"incomplete SQL statement in migration: {buffer[:80]!r}")
