"""A damaged database is refused when the store opens, with one line that says what is wrong and
how to recover, in the library and the CLI; the damaged file is never written to; a zero-byte
database beside Markdown memory is not silently recreated empty (issue 14, item 12)."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from tiermem import Memory, StorageError, StoreDamaged
from tiermem.cli.main import cli
from tiermem.facts.store import NewFact
from tiermem.storage.sqlite import integrity
from tiermem.storage.sqlite.migrations import MIGRATIONS
from tiermem.testing import FakeClock, HashEmbedder

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
NOW = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
FACTS = 60  # with long texts: the facts table spans many pages


def build_store(root: Path, facts: int = FACTS, user: str = "default") -> list[str]:
    """A store with a Daily note and ``facts`` facts; returns the fact texts."""
    texts = [f"Fact {i:03d}: the project codename {i * 7} is stored here " + "x" * 180 for i in range(facts)]
    with Memory(root, embedder=HashEmbedder(), clock=FakeClock(NOW), timezone="UTC", user_id=user) as mem:
        mem.daily.append("Note", "Maya is moving to Lisbon in August")
        mem.facts.add_many([NewFact.checked(t, "knowledge", 0.9, None) for t in texts])
    return texts


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def truncate(db: Path) -> None:
    with db.open("r+b") as handle:
        handle.truncate(db.stat().st_size // 2)


def random_bytes(db: Path) -> None:
    size = db.stat().st_size
    db.write_bytes(os.urandom(size))


def empty(db: Path) -> None:
    db.write_bytes(b"")


def corrupt_table(db: Path, table: str = "facts") -> None:
    """Overwrite the root page of ``table`` with garbage (header and size stay right)."""
    with sqlite3.connect(db) as conn:
        page = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0])
        size = int(conn.execute("PRAGMA page_size").fetchone()[0])
    conn.close()
    with db.open("r+b") as handle:
        handle.seek((page - 1) * size)
        handle.write(b"\xff" * size)


def newer_schema(db: Path) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute("PRAGMA user_version = 999")
    conn.close()


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated": (truncate, "is truncated"),
    "random bytes": (random_bytes, "not a SQLite database"),
    "zero bytes beside a Daily file": (empty, "is empty (0 bytes) while its root holds 1 Daily file"),
    "a damaged page": (corrupt_table, "database disk image is malformed"),
}


def invoke(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], env=ENV)


@pytest.fixture(scope="session")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store built per test session; each test gets a copy."""
    root = tmp_path_factory.mktemp("template") / "mem"
    build_store(root)
    return root


@pytest.fixture
def store(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    shutil.copytree(template, root, symlinks=True)
    return root


# --- the library ----------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", DAMAGE, ids=str)
def test_a_damaged_database_is_refused_with_one_line_and_left_untouched(store: Path, kind: str) -> None:
    damage, words = DAMAGE[kind]
    db = store / "tiermem.db"
    damage(db)
    before, names = digest(db), sorted(os.listdir(store))
    with pytest.raises(StoreDamaged) as caught:
        Memory(store, embedder=HashEmbedder())
    message = str(caught.value)
    assert "\n" not in message and words in message and "tiermem doctor --repair" in message
    assert caught.value.path == db and caught.value.reason
    assert digest(db) == before and sorted(os.listdir(store)) == names  # not written, nothing created


def test_a_zero_byte_database_beside_another_users_core_file_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with Memory(root, embedder=HashEmbedder(), user_id="bob") as mem:
        mem.core.write("- Bob likes tea\n")
    assert not (root / "MEMORY.md").exists() and not (root / "memory").exists()  # only bob's file
    empty(root / "tiermem.db")
    with pytest.raises(StoreDamaged, match=r"holds MEMORY\.md"):
        Memory(root, embedder=HashEmbedder())
    assert (root / "tiermem.db").stat().st_size == 0


def test_a_zero_byte_database_in_an_otherwise_empty_root_starts_a_new_store(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.mkdir()
    empty(root / "tiermem.db")
    (root / "tiermem.toml").write_text("[tiermem]\n", encoding="utf-8")
    with Memory(root, embedder=HashEmbedder()) as mem:
        fact = mem.facts.add("Prefers dark mode", category="preference")
        assert mem.facts.get(fact.id).content == "Prefers dark mode"  # type: ignore[union-attr]


def test_a_store_written_by_a_newer_tiermem_is_refused_and_not_migrated(store: Path) -> None:
    db = store / "tiermem.db"
    newer_schema(db)
    before = digest(db)
    with pytest.raises(StorageError, match=r"newer tiermem \(schema version 999") as caught:
        Memory(store, embedder=HashEmbedder())
    assert not isinstance(caught.value, StoreDamaged) and "\n" not in str(caught.value)
    assert digest(db) == before


def test_damage_met_inside_a_write_rolls_it_back(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the checks made at open (a store too big for quick_check), a write that meets a damaged
    page raises StoreDamaged and writes nothing."""
    monkeypatch.setattr(integrity, "QUICK_CHECK_MAX_BYTES", 0)
    db = store / "tiermem.db"
    corrupt_table(db)
    with (Memory(store, embedder=HashEmbedder()) as mem,
          pytest.raises(StoreDamaged, match="is damaged: database disk image is malformed")):
        mem.facts.add("A new fact that cannot be stored", category="knowledge")
    with sqlite3.connect(f"{db.resolve().as_uri()}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT count(*) FROM audit WHERE content LIKE 'A new fact%'").fetchone()[0] == 0
    conn.close()


def test_header_checks_need_no_sqlite_and_accept_a_healthy_file(store: Path) -> None:
    db = store / "tiermem.db"
    assert integrity.header_damage(db) is None
    assert integrity.header_version(db) == len(MIGRATIONS)
    with db.open("r+b") as handle:  # a whole page short of what the header records
        handle.truncate(db.stat().st_size - 4096)
    assert integrity.header_damage(db) == f"it is truncated ({db.stat().st_size} of {db.stat().st_size + 4096} bytes)"
    with db.open("r+b") as handle:  # not a whole number of pages
        handle.truncate(db.stat().st_size - 10)
    assert "not a whole number of 4096-byte pages" in (integrity.header_damage(db) or "")


# --- the CLI --------------------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["search", "Lisbon"], ["facts", "list"], ["reindex"], ["remember", "x y z"]],
                         ids=" ".join)
@pytest.mark.parametrize("kind", DAMAGE, ids=str)
def test_cli_commands_on_a_damaged_store_print_one_line(store: Path, kind: str, command: list[str]) -> None:
    damage, words = DAMAGE[kind]
    db = store / "tiermem.db"
    damage(db)
    before = digest(db)
    result = invoke(store, *command)
    assert result.exit_code == 1 and "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"Error: the database {db} is damaged: ") and words in lines[0]
    assert digest(db) == before  # `reindex` no longer writes into the damaged file


def test_cli_on_a_newer_schema_prints_one_line(store: Path) -> None:
    newer_schema(store / "tiermem.db")
    result = invoke(store, "stats")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [f"Error: {store / 'tiermem.db'} was written by a newer tiermem (schema "
                                          f"version 999; this tiermem knows up to {len(MIGRATIONS)}): upgrade "
                                          "tiermem (pip install -U tiermem); nothing was changed"]


def test_cli_damage_met_after_open_is_one_line_too(store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(integrity, "QUICK_CHECK_MAX_BYTES", 0)
    corrupt_table(store / "tiermem.db")
    result = invoke(store, "facts", "list")
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.stderr.splitlines() == ["Error: the database is damaged: database disk image is malformed; "
                                          f"{integrity.REPAIR_HINT}"]
