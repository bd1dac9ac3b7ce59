from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

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
