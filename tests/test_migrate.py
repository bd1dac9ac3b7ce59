"""``tiermem init`` and ``tiermem migrate --to`` on PostgreSQL, export/import across backends, and
credentials: a database password never shows in a message, a log, ``stats``, ``doctor`` or an export.

These tests make their own schemas (``pg_helpers.fresh_schema``): a SQLite source and a PostgreSQL
target live side by side in one test.
"""

from __future__ import annotations

import json
import logging
import shutil
import sqlite3
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
from click.testing import CliRunner, Result
from pg_helpers import fresh_schema, server_url
from transfer_helpers import START, fill, observe, open_memory

from tiermem import ConfigError, Memory, StorageError
from tiermem.cli.main import cli
from tiermem.testing import FakeClock, HashEmbedder

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
SECRET = "Sup3r-Secret-pw"  # the trust-authenticated test server accepts any password
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite store with something in every section (see transfer_helpers.fill)."""
    root = tmp_path_factory.mktemp("sqlite") / "source"
    fill(root, FakeClock(START))
    return root


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + timedelta(days=1))


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


def run(root: Path, *args: str, env: dict[str, str | None] | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], env={**ENV, **(env or {})})


def sqlite_state(root: Path) -> tuple[dict[str, bytes], list[str]]:
    """Every file under the root (lock files aside) and every row of its tiermem.db."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
             if p.is_file() and not p.name.startswith(("tiermem.db", "."))}
    with sqlite3.connect(root / "tiermem.db") as conn:
        rows = list(conn.iterdump())
    conn.close()
    return files, rows


# --- migrate ---------------------------------------------------------------------------------------
def test_migrate_copies_every_tier_and_scope(filled: Path, tmp_path: Path, url: str, clock: FakeClock) -> None:
    source = Path(shutil.copytree(filled, tmp_path / "source"))
    before = sqlite_state(source)
    result = run(source, "migrate", "--to", url)
    assert result.exit_code == 0, result.output
    assert result.output.startswith(f"migrated {source / 'tiermem.db'} to postgresql://")
    assert "3 facts" in result.output and "files" in result.output
    files, rows = sqlite_state(source)
    mark = files.pop("tiermem.postgres")  # the root names its database now: no open without the URL
    assert mark.startswith(b"postgresql://") and (files, rows) == before  # the SQLite store is only read
    (source / "tiermem.postgres").unlink()  # the documented way back to the SQLite store
    with open_memory(source, clock) as original, open_memory(tmp_path / "elsewhere", clock, database_url=url) as copy:
        assert copy.export() == original.export()
        for user in ("default", "bob"):
            seen, expected = observe(copy.for_scope(user)), observe(original.for_scope(user))
            assert {**seen, "search": None, "inject_query": None} == {**expected, "search": None,
                                                                       "inject_query": None}
            for query, hits in expected["search"].items():  # the same best hit, by the shared score formula
                assert [h[1:] for h in seen["search"][query][:1]] == [h[1:] for h in hits[:1]], query
        assert copy.stats()["queue_pending"] == original.stats()["queue_pending"] == 1
        assert copy.facts.add("works at initech", "context", origin="extraction") is None  # the tombstone came too


def test_migrate_json_counts(filled: Path, tmp_path: Path, url: str) -> None:
    source = Path(shutil.copytree(filled, tmp_path / "source"))
    result = run(source, "migrate", "--to", url, "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["source"] == str(source / "tiermem.db") and report["target"].startswith("postgresql://")
    assert report["counts"]["facts"] == 3 and report["counts"]["files"] >= 5 and report["counts"]["embeddings"]


def test_migrate_refuses_a_target_that_holds_memory_unless_replace(filled: Path, tmp_path: Path, url: str,
                                                                    clock: FakeClock) -> None:
    source = Path(shutil.copytree(filled, tmp_path / "source"))
    with open_memory(tmp_path / "other", clock, database_url=url) as other:
        other.facts.add("Likes tea", "preference", 0.9)
    refused = run(source, "migrate", "--to", url)
    assert refused.exit_code == 1 and "already holds a tiermem store" in refused.output
    assert "--replace" in refused.output and "Traceback" not in refused.output
    with open_memory(tmp_path / "other", clock, database_url=url) as other:
        assert [f.content for f in other.facts.list()] == ["Likes tea"]  # nothing was copied
    done = run(source, "migrate", "--to", url, "--replace")
    assert done.exit_code == 0, done.output
    with open_memory(tmp_path / "other", clock, database_url=url) as other:
        assert {f.content for f in other.facts.list()} == {"Likes tea", "Prefers dark mode"}
        assert "Lisbon" in other.core.read()


def test_migrate_into_a_fresh_target_twice_is_refused_the_second_time(filled: Path, tmp_path: Path, url: str) -> None:
    source = Path(shutil.copytree(filled, tmp_path / "source"))
    assert run(source, "migrate", "--to", url).exit_code == 0
    again = run(source, "migrate", "--to", url)
    assert again.exit_code == 1 and "already holds" in again.output


def test_migrate_needs_a_sqlite_store_and_a_known_scheme(tmp_path: Path, url: str) -> None:
    missing = run(tmp_path / "none", "migrate", "--to", url)
    assert missing.exit_code == 1 and "no SQLite store" in missing.output
    with open_memory(tmp_path / "src", FakeClock(START)) as mem:
        mem.facts.add("x")
    unknown = run(tmp_path / "src", "migrate", "--to", f"mysql://root:{SECRET}@localhost/db")
    assert unknown.exit_code == 1 and "the migration target (--to) must start with" in unknown.output
    assert SECRET not in unknown.output


@pytest.mark.parametrize("target", ["sqlite:///{tmp}/elsewhere.db", "sqlite://", "", " "])
def test_migrate_refuses_a_target_that_is_not_a_postgresql_url(filled: Path, tmp_path: Path, target: str) -> None:
    source = Path(shutil.copytree(filled, tmp_path / "source"))
    before = sqlite_state(source)
    result = run(source, "migrate", "--to", target.format(tmp=tmp_path), "--replace")
    assert result.exit_code == 1, result.output
    assert result.output.startswith("Error: the migration target (--to) must start with one of postgresql://, postgres://")
    assert len(result.output.strip().splitlines()) == 1 and "migrated" not in result.output
    assert sqlite_state(source) == before and not (tmp_path / "elsewhere.db").exists()


def test_a_sqlite_url_is_no_database_url(tmp_path: Path) -> None:
    """The SQLite store has no URL: a ``sqlite://`` one used to open the root's file, whatever it named."""
    with pytest.raises(ConfigError, match="the SQLite store under the root needs no URL"):
        Memory(tmp_path / "mem", embedder=HashEmbedder(), database_url=f"sqlite:///{tmp_path}/elsewhere.db")
    assert not (tmp_path / "mem").exists() and not (tmp_path / "elsewhere.db").exists()


def test_a_store_written_by_0_1_0_migrates(tmp_path: Path, url: str, clock: FakeClock) -> None:
    root = Path(shutil.copytree(FIXTURES / "store_v0_1_0", tmp_path / "old"))
    assert run(root, "migrate", "--to", url).exit_code == 0
    with open_memory(tmp_path / "new", clock, database_url=url) as mem:
        assert [f.content for f in mem.facts.list()] == ["Prefers dark mode"]
        assert "moving to Lisbon in August" in mem.daily.read("2026-03-14")
        assert mem.core.items() == ["Works as a backend engineer at Acme Corp.", "Is moving to Lisbon in August."]
        assert mem.stats()["queue_pending"] == 1 and mem.stats()["queue_dead"] == 1
        assert "Sicilian" in mem.for_scope("bob").daily.read("2026-03-14")
        hits = mem.search("Lisbon August")
        assert hits and {h.tier for h in hits} >= {"daily", "core"}


# --- export and import across backends -------------------------------------------------------------
def test_export_from_postgres_imports_into_sqlite_and_back(filled: Path, tmp_path: Path, url: str,
                                                           clock: FakeClock) -> None:
    with open_memory(filled, clock) as original:
        data = json.loads(json.dumps(original.export()))
    with open_memory(tmp_path / "pg", clock, database_url=url) as pg:
        pg.import_(data)
        from_pg = json.loads(json.dumps(pg.export()))
        # ids the import wrote explicitly are behind the ones the database hands out next
        assert pg.facts.add("Plays the cello", "preference", 0.9) is not None
        assert pg.facts.history()[-1].content == "Plays the cello"
        kept = len(pg.dream_versions())
        pg.core.write("- Plays the cello\n")  # a new version row
        assert len(pg.dream_versions()) == kept + 1 and pg.core.read() == "- Plays the cello\n"
    assert max(row["id"] for row in data["audit"]) > 1 and len(data["core_versions"]) >= 1
    assert from_pg == data
    with open_memory(tmp_path / "sqlite", clock) as back:
        back.import_(from_pg)
        assert back.export() == data
        assert (tmp_path / "sqlite" / "memory" / "2026-03-14.md").read_bytes() == (
            filled / "memory" / "2026-03-14.md").read_bytes()


# --- init ------------------------------------------------------------------------------------------
def test_init_creates_the_schema_in_postgres(tmp_path: Path, url: str) -> None:
    root = tmp_path / "mem"
    result = run(root, "init", env={"TIERMEM_DATABASE_URL": url})
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[0] == f"initialised {root}"
    assert result.output.splitlines()[1].startswith("store: postgresql://")
    assert not (root / "tiermem.db").exists() and (root / "tiermem.toml").is_file()
    report = json.loads(run(root, "doctor", "--json", env={"TIERMEM_DATABASE_URL": url}).output)
    assert report["database"]["schema_version"] >= 1 and report["database"]["vector_extension"]


@pytest.mark.parametrize("bad", ["mysql://root@localhost/db", "postgresql://tiermem@127.0.0.1:1/memory?connect_timeout=2"])
@pytest.mark.parametrize("there", [False, True])
def test_a_failed_init_leaves_the_root_as_it_was(tmp_path: Path, bad: str, there: bool) -> None:
    root = tmp_path / "parent" / "mem"
    if there:
        root.mkdir(parents=True)
        (root / "notes.txt").write_text("mine")
    result = run(root, "init", env={"TIERMEM_DATABASE_URL": bad})
    assert result.exit_code == 1 and "Traceback" not in result.output, result.output
    if there:
        assert [p.name for p in root.iterdir()] == ["notes.txt"]
    else:
        assert not (tmp_path / "parent").exists()


@contextmanager
def database_without_vector() -> Iterator[str]:
    """A URL of a database without pgvector (the server's template1, where only its owner may create
    anything) for a new role that may not create extensions (nothing gets written there)."""
    import psycopg

    base = server_url()
    role = f"tm_role_{uuid.uuid4().hex[:8]}"
    try:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE ROLE {role} LOGIN PASSWORD '{SECRET}'")
    except psycopg.Error as exc:
        pytest.skip(f"the test server does not let this user create a role: {exc}")
    parts = urlsplit(base)
    host = parts.netloc.rsplit("@", 1)[-1]
    url = urlunsplit((parts.scheme, f"{role}:{quote(SECRET)}@{host}", "/template1", parts.query, ""))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            if conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone():
                pytest.skip("pgvector is installed in template1 of the test server")
        yield url
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP ROLE IF EXISTS {role}")


def test_init_names_the_vector_extension_when_it_cannot_be_created(tmp_path: Path) -> None:
    with database_without_vector() as url:
        result = run(tmp_path / "mem", "init", env={"TIERMEM_DATABASE_URL": url})
    assert result.exit_code == 1 and "Traceback" not in result.output
    line = result.output.strip()
    assert "'vector'" in line and "pgvector" in line and "CREATE EXTENSION vector" in line
    assert SECRET not in line and len(line.splitlines()) == 1
    assert not (tmp_path / "mem").exists()  # a failed init leaves no root behind


# --- credentials -----------------------------------------------------------------------------------
def with_password(url: str) -> tuple[str, str]:
    """``url`` with a password, and that password (the URL's own, when it has one)."""
    parts = urlsplit(url)
    if parts.password:
        return url, parts.password
    user_host = parts.netloc.rsplit("@", 1)
    user, host = (user_host[0].split(":", 1)[0], user_host[1]) if len(user_host) == 2 else ("postgres", parts.netloc)
    return urlunsplit((parts.scheme, f"{user}:{quote(SECRET)}@{host}", parts.path, parts.query, "")), SECRET


def test_a_password_never_shows_in_stats_doctor_exports_or_logs(tmp_path: Path, url: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    secret_url, secret = with_password(url)
    env: dict[str, str | None] = {"TIERMEM_DATABASE_URL": secret_url}
    root = tmp_path / "mem"
    caplog.set_level(logging.DEBUG)
    with Memory(root, embedder=HashEmbedder(), database_url=secret_url) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.9)
        mem.daily.append("Note", ["a note"])
        assert mem.search("dark mode")
        assert secret not in json.dumps(mem.stats()) and secret not in json.dumps(mem.export())
        assert secret not in mem.db.label and "***" in mem.db.label
    outputs = [run(root, *args, env=env) for args in (["stats"], ["stats", "--json"], ["doctor"], ["doctor", "--json"],
                                                      ["export"], ["--debug", "facts", "list"])]
    for result in outputs:
        assert result.exit_code == 0, result.output
        assert secret not in result.output
    assert "***" in outputs[2].output  # doctor names the database, without its password
    assert secret not in caplog.text


@pytest.mark.parametrize("where", ["refused", "no database"])
def test_a_failed_connection_names_the_database_without_its_password(tmp_path: Path, where: str,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    if where == "refused":
        bad = f"postgresql://tiermem:{quote(SECRET)}@127.0.0.1:1/memory?connect_timeout=2"
    else:
        good, _ = with_password(server_url())
        parts = urlsplit(good)
        bad = urlunsplit((parts.scheme, parts.netloc, "/no_such_database_here", parts.query, ""))
    caplog.set_level(logging.DEBUG)
    with pytest.raises(StorageError) as info:
        Memory(tmp_path / "mem", embedder=HashEmbedder(), database_url=bad)
    assert SECRET not in str(info.value) and "***" in str(info.value)
    env: dict[str, str | None] = {"TIERMEM_DATABASE_URL": bad}
    for args in (["remember", "x"], ["stats"], ["init"], ["doctor"], ["doctor", "--json"], ["purge", "--user", "bob",
                                                                                             "--yes"]):
        result = run(tmp_path / "mem", *args, env=env)
        assert result.exit_code in (1, 2) and "Traceback" not in result.output, (args, result.output)
        assert SECRET not in result.output, args
    migrated = run(tmp_path / "mem", "migrate", "--to", bad)
    assert migrated.exit_code == 1 and SECRET not in migrated.output
    assert SECRET not in caplog.text
