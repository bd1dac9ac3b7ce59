"""A root that mirrors a PostgreSQL store is not taken for an empty SQLite store when a process opens it
without the URL (an MCP client passes the server only the environment its config names): the open
fails, saying which database the root belongs to, and creates nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from click.testing import CliRunner, Result  # noqa: E402
from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.cli.main import cli  # noqa: E402
from tiermem.errors import ConfigError  # noqa: E402
from tiermem.storage.postgres.conninfo import safe_url  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


def test_a_postgres_mirror_root_opened_without_the_url_is_refused(url: str, tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with Memory(root, embedder=HashEmbedder(), database_url=url) as mem:
        fact = mem.facts.add("Deploys happen on Fridays")
        mem.daily.append("Note", ["a note"])
    assert fact is not None
    before = sorted(p.name for p in root.iterdir())
    with pytest.raises(ConfigError) as caught:
        Memory(root, embedder=HashEmbedder())
    assert safe_url(url) in str(caught.value) and "TIERMEM_DATABASE_URL" in str(caught.value)
    result = CliRunner().invoke(cli, ["--root", str(root), "remember", "a fact for SQLite"],
                                env={"TIERMEM_EMBEDDER": "hash"})
    assert result.exit_code == 1 and safe_url(url) in result.stderr, result.output
    result = CliRunner().invoke(cli, ["--root", str(root), "facts", "list"], env={"TIERMEM_EMBEDDER": "hash"})
    assert result.exit_code == 1 and safe_url(url) in result.stderr, result.output
    assert sorted(p.name for p in root.iterdir()) == before and not (root / "tiermem.db").exists()
    with Memory(root, embedder=HashEmbedder(), database_url=url) as mem:
        assert [f.id for f in mem.facts.list()] == [fact.id]


def test_a_migrated_root_opened_without_the_url_is_refused(url: str, tmp_path: Path) -> None:
    """``tiermem migrate --to`` leaves the SQLite store where it was: a process opening the root
    without the URL afterwards must not take up that stale copy (the memory would split in two)."""
    root, env = tmp_path / "mem", {"TIERMEM_EMBEDDER": "hash"}

    def run(*args: str, **extra: str) -> Result:
        return CliRunner().invoke(cli, ["--root", str(root), *args], env={**env, **extra})

    assert run("remember", "Deploys happen on Fridays").exit_code == 0
    assert run("migrate", "--to", url).exit_code == 0
    sqlite_before = (root / "tiermem.db").read_bytes()
    before = sorted(p.name for p in root.iterdir())
    assert "tiermem.postgres" in before
    for args in (["remember", "a fact for the stale copy"], ["facts", "list"]):
        refused = run(*args)
        assert refused.exit_code == 1, (args, refused.output)
        assert safe_url(url) in refused.stderr and "TIERMEM_DATABASE_URL" in refused.stderr, refused.stderr
        assert "tiermem.db" in refused.stderr, refused.stderr  # says what deleting the mark would open
    with pytest.raises(ConfigError):
        Memory(root, embedder=HashEmbedder())
    assert sorted(p.name for p in root.iterdir()) == before and (root / "tiermem.db").read_bytes() == sqlite_before
    assert run("remember", "Standups are at 10", TIERMEM_DATABASE_URL=url).exit_code == 0
    assert run("migrate", "--to", url, "--replace").exit_code == 0  # the SQLite store can still be copied again
    listed = run("facts", "list", "--json", TIERMEM_DATABASE_URL=url)
    assert listed.exit_code == 0 and "Deploys happen on Fridays" in listed.output, listed.output
    assert run("export", str(tmp_path / "pg.json"), TIERMEM_DATABASE_URL=url).exit_code == 0
    (root / "tiermem.postgres").unlink()  # back to SQLite (docs/postgres.md): the old store opens again
    assert run("import", "--replace", str(tmp_path / "pg.json")).exit_code == 0
    back = run("facts", "list", "--json")
    assert back.exit_code == 0 and "Standups are at 10" in back.output, back.output
    assert not (root / "tiermem.postgres").exists()
