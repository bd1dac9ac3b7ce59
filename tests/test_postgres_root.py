"""A root that mirrors a PostgreSQL store is not taken for an empty SQLite store when a process opens it
without the URL (an MCP client passes the server only the environment its config names): the open
fails, saying which database the root belongs to, and creates nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from click.testing import CliRunner  # noqa: E402
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
