"""The PostgreSQL database layer itself: URLs, placeholders, errors, lost connections, timeouts."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema, server_url, with_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.errors import ConfigError, StorageError  # noqa: E402
from tiermem.storage.postgres.conninfo import safe_url  # noqa: E402
from tiermem.storage.postgres.db import PgDatabase, to_pg  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


@pytest.fixture
def db(url: str) -> Iterator[PgDatabase]:
    database = PgDatabase(url)
    yield database
    database.close()


def test_safe_url_hides_the_password_everywhere() -> None:
    assert safe_url("postgresql://ann:s3cret@db.example:5432/mem") == "postgresql://ann:***@db.example:5432/mem"
    assert "s3cret" not in safe_url("postgresql://db/mem?user=ann&password=s3cret&sslmode=require")
    assert safe_url("postgresql://db.example/mem") == "postgresql://db.example/mem"


def test_placeholders_and_literal_percent_signs(db: PgDatabase) -> None:
    assert to_pg("SELECT ? WHERE x LIKE 'a%'") == "SELECT %s WHERE x LIKE 'a%%'"
    db.conn.execute("INSERT INTO meta (key, value) VALUES (?, ?)", ("k%", "50%"))
    assert db.rows("SELECT value FROM meta WHERE key LIKE 'k%' AND value = ?", ["50%"])[0]["value"] == "50%"
    assert db.rows("SELECT value FROM meta WHERE key LIKE 'k%'")[0][0] == "50%"


def test_rows_read_like_sqlite_rows(db: PgDatabase) -> None:
    db.conn.execute("INSERT INTO plans (id, user_id, agent_name, status, revision, created_at, updated_at, data)"
                    " VALUES (?, 'u', 'a', 'active', 1, 't', 't', ?)", ("p1", '{"title": "x"}'))
    row = db.rows("SELECT id, data, revision, SUM(revision) AS total FROM plans GROUP BY id, data, revision")[0]
    assert row["id"] == row[0] == "p1"
    assert isinstance(row["data"], str) and '"title"' in row["data"]  # jsonb reads back as text
    assert isinstance(row["total"], float | int) and row["total"] == 1  # numeric is not a Decimal
    assert row.keys() == ["id", "data", "revision", "total"]
    assert dict(zip(row.keys(), row, strict=True))["revision"] == 1


def test_a_violation_fails_the_whole_transaction(db: PgDatabase) -> None:
    db.conn.execute("INSERT INTO meta (key, value) VALUES ('a', '1')")
    with pytest.raises(db.IntegrityError), db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('b', '2')")
        conn.execute("INSERT INTO meta (key, value) VALUES ('a', '3')")
    assert [tuple(r) for r in db.rows("SELECT key, value FROM meta ORDER BY key")] == [("a", "1")]
    with db.transaction() as conn:  # the connection went back clean
        conn.execute("INSERT INTO meta (key, value) VALUES ('c', '4')")
    assert db.rows("SELECT COUNT(*) FROM meta")[0][0] == 2


def test_two_stores_of_one_url_nest_their_writes_on_one_thread(url: str) -> None:
    first, second = PgDatabase(url), PgDatabase(url)
    try:
        with first.transaction() as conn:
            conn.execute("INSERT INTO meta (key, value) VALUES ('x', '1')")
            with second.transaction() as inner:  # would wait for the write lock if it were another transaction
                inner.execute("INSERT INTO meta (key, value) VALUES ('y', '2')")
        assert second.rows("SELECT COUNT(*) FROM meta")[0][0] == 2
    finally:
        first.close()
        second.close()


def test_a_write_survives_a_dropped_pooled_connection(db: PgDatabase, url: str) -> None:
    import psycopg

    db.rows("SELECT 1")
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()"
                      " AND pid <> pg_backend_pid() AND backend_type = 'client backend'")
    with db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('after', 'drop')")
    assert db.rows("SELECT value FROM meta WHERE key = 'after'")[0][0] == "drop"


def test_an_error_rolls_the_whole_transaction_back(db: PgDatabase) -> None:
    with pytest.raises(RuntimeError), db.transaction() as conn:
        conn.execute("INSERT INTO meta (key, value) VALUES ('gone', '1')")
        raise RuntimeError("boom")
    assert db.rows("SELECT COUNT(*) FROM meta")[0][0] == 0


def test_writers_take_turns_across_connections(url: str) -> None:
    """Two stores on one schema: a read-check-write in each never interleaves (the write lock)."""
    first, second = PgDatabase(url), PgDatabase(url + "&application_name=second")
    try:
        first.conn.execute("INSERT INTO meta (key, value) VALUES ('n', '0')")

        def bump(db: PgDatabase) -> None:
            for _ in range(50):
                with db.transaction() as conn:
                    value = int(conn.execute("SELECT value FROM meta WHERE key = 'n'").fetchone()[0])
                    conn.execute("UPDATE meta SET value = ? WHERE key = 'n'", (str(value + 1),))

        threads = [threading.Thread(target=bump, args=(db,)) for db in (first, second, first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert first.rows("SELECT value FROM meta WHERE key = 'n'")[0][0] == "200"
    finally:
        first.close()
        second.close()


def test_a_read_survives_a_lost_connection(db: PgDatabase, url: str) -> None:
    import psycopg

    assert db.rows("SELECT 1")[0][0] == 1
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'tiermem'"
                      " OR (datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client"
                      " backend')")
    assert db.rows("SELECT 2")[0][0] == 2


def test_the_statement_timeout_surfaces_as_a_storage_error(url: str) -> None:
    db = PgDatabase(url, statement_timeout=0.2)
    try:
        with pytest.raises(StorageError, match="statement timeout|canceling statement"):
            db.rows("SELECT pg_sleep(2)")
    finally:
        db.close()


def test_bad_credentials_and_names_never_show_the_password(tmp_path: Path) -> None:
    base = server_url()
    bad_db = base.replace("/postgres?", "/no_such_db?") if "/postgres?" in base else base + "_nope"
    with pytest.raises(StorageError) as caught:
        Memory(tmp_path / "a", embedder=HashEmbedder(), database_url=bad_db.replace("postgres:@", "postgres:hunter2@"))
    assert "hunter2" not in str(caught.value) and "no_such_db" in str(caught.value)
    with pytest.raises(ConfigError, match="database_url must start with"):
        Memory(tmp_path / "b", embedder=HashEmbedder(), database_url="mysql://root:hunter2@localhost/x")


def test_a_newer_schema_is_refused(url: str) -> None:
    from tiermem.storage.postgres.pool import SharedPool

    PgDatabase(url).close()
    SharedPool.close_all(url)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("INSERT INTO tiermem_schema (version) VALUES (99)")
    with pytest.raises(StorageError, match="newer than this tiermem"):
        PgDatabase(url)


def test_two_processes_worth_of_stores_share_one_pool(url: str, tmp_path: Path) -> None:
    from tiermem.storage.postgres.pool import SharedPool

    with Memory(tmp_path / "a", embedder=HashEmbedder(), database_url=url) as a, \
            Memory(tmp_path / "b", embedder=HashEmbedder(), database_url=url) as b:
        assert a.db._pool is b.db._pool  # type: ignore[attr-defined]
    assert url not in SharedPool._all


def test_search_path_schema_url_helper() -> None:
    assert with_schema("postgresql://h/db", "s1").endswith("?options=-csearch_path%3Ds1%2Cpublic")


def test_a_schema_the_url_names_that_does_not_exist_is_refused(url: str, tmp_path: Path) -> None:
    """A misspelt schema in ``search_path`` would otherwise put the store in the next schema listed
    (``public`` in the documented URL), beside another store's data."""
    import psycopg

    fallback = url.split("%3D", 1)[1].split("%2C", 1)[0]  # the fresh schema: where the store would land
    missing = with_schema(server_url(), f"no_such_schema%2C{fallback}").replace("%252C", "%2C")
    assert f"no_such_schema%2C{fallback}%2Cpublic" in missing
    with pytest.raises(StorageError, match="schema 'no_such_schema' .*does not exist.*CREATE SCHEMA no_such_schema"):
        Memory(tmp_path / "a", embedder=HashEmbedder(), database_url=missing)
    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute("SELECT count(*) FROM information_schema.tables WHERE table_schema = %s",
                              (fallback,)).fetchone()
    assert tables == (0,)
    with pytest.raises(StorageError, match="schema 'no_such_schema' .*does not exist"):  # the only one listed
        only = server_url() + ("&" if "?" in server_url() else "?") + "options=-csearch_path%3Dno_such_schema"
        Memory(tmp_path / "b", embedder=HashEmbedder(), database_url=only)


@pytest.mark.parametrize("first", ['"$user"', "$USER"])  # quoted as PostgreSQL's default; unquoted is folded
def test_a_search_path_that_starts_with_the_roles_own_schema_as_user_is_used(first: str, tmp_path: Path) -> None:
    """PostgreSQL's secure-schema pattern: a role with a schema of its own name and the default
    ``search_path`` ``"$user", public``; ``$user`` is the role's schema, where the store goes."""
    import psycopg

    from tiermem.storage.postgres.pool import SharedPool

    role = f"tm_role_{uuid.uuid4().hex[:12]}"
    base = server_url()
    url = base + ("&" if "?" in base else "?") + "options=" + quote(f"-crole={role} -csearch_path={first},public")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE ROLE {role}")
        conn.execute(f"CREATE SCHEMA {role} AUTHORIZATION {role}")
    try:
        with Memory(tmp_path / "a", embedder=HashEmbedder(), database_url=url) as memory:
            memory.facts.add("The role's schema holds the store")
        with psycopg.connect(base, autocommit=True) as conn:
            facts = conn.execute(f"SELECT count(*) FROM {role}.facts").fetchone()
        assert facts == (1,)
    finally:
        SharedPool.close_all(url)
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {role} CASCADE")
            conn.execute(f"DROP ROLE {role}")
