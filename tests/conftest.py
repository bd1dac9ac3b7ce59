from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pg_helpers  # noqa: F401  (reads TIERMEM_TEST_DATABASE_URL before any test clears TIERMEM_*)
import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's TIERMEM_* settings or writes the real cache."""
    import os

    for key in list(os.environ):
        if key.startswith("TIERMEM_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("TIERMEM_CACHE_DIR", str(tmp_path / "_cache"))


@pytest.fixture(params=["sqlite", "postgres"])
def backend(request: pytest.FixtureRequest, _isolated_env: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Run the test on both backends: for ``postgres`` every Memory and CLI call of the test uses a
    fresh schema of the session's PostgreSQL server (``TIERMEM_DATABASE_URL``). A module opts in with
    ``pytestmark = pytest.mark.usefixtures("backend")``; ``@pytest.mark.sqlite_only`` skips one test
    on Postgres (say why in a comment)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    if request.node.get_closest_marker("sqlite_only"):
        pytest.skip("SQLite-only by nature")
    from pg_helpers import fresh_schema

    with fresh_schema() as url:
        monkeypatch.setenv("TIERMEM_DATABASE_URL", url)
        yield "postgres"


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 14, 9, 30, tzinfo=UTC))


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return tmp_path / "mem"


@pytest.fixture
def mem(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as memory:
        yield memory
