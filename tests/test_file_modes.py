"""Files tiermem writes are 0600 and folders it creates 0700, whatever the umask (issue 14, item 8).

Tests run as root, which ignores modes when it opens files; the modes are still what ``stat``
shows and what other users would meet.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
DREAM = "[MEMORY]\n- Works at Acme\n\n[DREAM]\nNoted the job.\n"


@pytest.fixture(autouse=True)
def _umask_022() -> Iterator[None]:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def loose(root: Path) -> list[str]:
    """Everything under ``root`` (and the root) that others may read, write or enter."""
    found = [root, *root.rglob("*")]
    return [f"{p.relative_to(root.parent)} {mode(p):04o}" for p in found if mode(p) & 0o077]


def test_a_new_store_is_private_everywhere(tmp_path: Path, clock: FakeClock) -> None:
    root = tmp_path / "new" / "mem"  # two folders tiermem creates
    llm = ScriptedChatModel([DREAM])
    with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.facts.add("Prefers tea")
        mem.daily.append("Note", "user: I work at Acme")
        mem.core.write("- Works at Acme\n")
        assert mem.deep_dream().status == "written"  # MEMORY.md again, a dream diary, the dream lock
        mem.for_scope("bob").daily.append("Note", "Bob's note")  # users/bob/memory/...
        mem.queue.add("t1", [{"role": "user", "content": "hello"}])
        mem.queue.flush()
        assert (root / "tiermem.db-wal").exists() and (root / "tiermem.db-shm").exists()
        assert loose(tmp_path) == []  # -wal and -shm while open
        names = {p.relative_to(root).as_posix() for p in root.rglob("*")}
        assert {"tiermem.db", "MEMORY.md", "memory/2026-03-14.md", "memory/dreams/2026-03-14.md",
                "memory/.journal.lock", "users/bob/memory/2026-03-14.md"} <= names
    assert mode(tmp_path / "new") == 0o700 and mode(root) == 0o700
    assert loose(tmp_path) == []


def test_an_older_store_is_tightened_as_it_is_written(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Note", "first")
        mem.core.write("- Works at Acme\n")
    for path in (root / "tiermem.db", root / "MEMORY.md", root / "memory" / "2026-03-14.md"):
        os.chmod(path, 0o644)  # as tiermem 0.1.0 left them
    os.chmod(root, 0o755)
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        assert mode(root / "tiermem.db") == 0o600  # on open
        mem.daily.append("Note", "second")
        mem.core.write("- Works at Acme\n- Likes tea\n")
    assert [mode(p) for p in (root / "memory" / "2026-03-14.md", root / "MEMORY.md")] == [0o600, 0o600]
    assert mode(root) == 0o755  # a folder it did not create is left as the person set it


def test_cli_init_and_export_write_private_files(tmp_path: Path) -> None:
    root = tmp_path / "cli"
    runner = CliRunner()
    assert runner.invoke(cli, ["--root", str(root), "init"], env=ENV).exit_code == 0
    assert runner.invoke(cli, ["--root", str(root), "note", "hello"], env=ENV).exit_code == 0
    backup = tmp_path / "backup.json"
    result = runner.invoke(cli, ["--root", str(root), "export", str(backup)], env=ENV)
    assert result.exit_code == 0, result.output
    assert mode(root / "tiermem.toml") == 0o600 and mode(backup) == 0o600 and mode(root) == 0o700
    assert json.loads(backup.read_text(encoding="utf-8"))["format"] == "tiermem-export"
    backup.chmod(0o644)
    assert runner.invoke(cli, ["--root", str(root), "export", str(backup)], env=ENV).exit_code == 0
    assert mode(backup) == 0o600  # an export replaces the file; the new one is private too
    assert loose(root) == []


def test_import_writes_private_files(tmp_path: Path, clock: FakeClock) -> None:
    with Memory(tmp_path / "src", embedder=HashEmbedder(), clock=clock, timezone="UTC") as src:
        src.daily.append("Note", "from the backup")
        src.core.write("- Works at Acme\n")
        src.for_scope("bob").core.write("- Plays chess\n")
        data = src.export()
    with Memory(tmp_path / "dst", embedder=HashEmbedder(), clock=clock, timezone="UTC") as dst:
        dst.import_(data)
    assert (tmp_path / "dst" / "users" / "bob" / "MEMORY.md").is_file()
    assert loose(tmp_path / "dst") == []
