"""Symlinks never carry a read or a write out of the memory root (issue 14, item 7).

The root itself may be a link; a link *inside* it that leads outside is refused with
``UnsafePath`` (nothing read, nothing written) unless ``allow_symlinks = true``; a link that stays
inside the root is followed. Each test checks the file outside the root is untouched.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory, TiermemError, UnsafePath
from tiermem.cli.main import cli
from tiermem.paths import open_private, read_file
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
DAY = "2026-03-14"  # the fake clock's day
OUTSIDE_TEXT = "# not tiermem's\n- the outside file\n"


def open_memory(root: Path, clock: FakeClock, **settings: object) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **settings)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the root with a file in it, which nothing may change."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / f"{DAY}.md").write_text(OUTSIDE_TEXT, encoding="utf-8")
    (folder / "MEMORY.md").write_text(OUTSIDE_TEXT, encoding="utf-8")
    return folder


def untouched(folder: Path) -> bool:
    return all(p.read_text(encoding="utf-8") == OUTSIDE_TEXT for p in folder.iterdir() if p.is_file()) \
        and sorted(p.name for p in folder.iterdir()) == sorted(["MEMORY.md", f"{DAY}.md"])


def test_a_linked_user_folder_is_refused(root: Path, clock: FakeClock, outside: Path) -> None:
    (root / "users").mkdir(parents=True)
    (root / "users" / "bob").symlink_to(outside, target_is_directory=True)
    with open_memory(root, clock, user_id="bob") as mem, pytest.raises(UnsafePath, match="users/bob") as caught:
        mem.daily.append("Note", "hello")
    assert "allow_symlinks" in str(caught.value) and isinstance(caught.value, TiermemError)
    assert untouched(outside)


# SQLite only: it reads a Daily file back through a link (on PostgreSQL the files are rows; writing
# the mirror through the link is refused, as test_the_cli_says_it_in_one_line shows)
@pytest.mark.sqlite_only
def test_a_linked_memory_folder_of_a_user_is_refused(root: Path, clock: FakeClock, outside: Path) -> None:
    (root / "users" / "bob").mkdir(parents=True)
    (root / "users" / "bob" / "memory").symlink_to(outside, target_is_directory=True)
    with open_memory(root, clock, user_id="bob") as mem:
        with pytest.raises(UnsafePath, match="outside the memory root"):
            mem.daily.append("Note", "hello")
        with pytest.raises(UnsafePath):
            mem.daily.read(DAY)
        with pytest.raises(UnsafePath):
            mem.search("outside file")
        mem.core.write("- Bob plays chess\n")  # his MEMORY.md is not behind the link
    assert untouched(outside)
    assert (root / "users" / "bob" / "MEMORY.md").read_text(encoding="utf-8") == "- Bob plays chess\n"


# SQLite only: it reads a Daily file back through a link (on PostgreSQL the files are rows; writing
# the mirror through the link is refused, as test_the_cli_says_it_in_one_line shows)
@pytest.mark.sqlite_only
def test_a_linked_daily_file_is_neither_read_nor_appended(root: Path, clock: FakeClock, outside: Path) -> None:
    with open_memory(root, clock) as mem:
        mem.daily.append("Note", "yesterday's note", at=clock.now().replace(day=13))
        (root / "memory" / f"{DAY}.md").symlink_to(outside / f"{DAY}.md")
        with pytest.raises(UnsafePath, match=f"memory/{DAY}.md"):
            mem.daily.append("Note", "today's note")
        with pytest.raises(UnsafePath):
            mem.daily.read(DAY)
        with pytest.raises(UnsafePath):
            mem.search("outside file")  # the index refuses to read it too
        with pytest.raises(UnsafePath):
            mem.export()
    assert untouched(outside)
    assert (root / "memory" / f"{DAY}.md").is_symlink()


def test_a_linked_memory_md_is_neither_read_nor_replaced(root: Path, clock: FakeClock, outside: Path) -> None:
    root.mkdir()
    (root / "MEMORY.md").symlink_to(outside / "MEMORY.md")
    with open_memory(root, clock) as mem:
        with pytest.raises(UnsafePath, match="MEMORY.md"):
            mem.core.read()
        with pytest.raises(UnsafePath):
            mem.core.write("- new text\n")
        with pytest.raises(UnsafePath):
            mem.format_for_injection()
    assert untouched(outside) and (root / "MEMORY.md").is_symlink()


def test_a_linked_dream_diary_folder_stops_the_dream_before_it_writes(root: Path, clock: FakeClock,
                                                                      outside: Path) -> None:
    llm = ScriptedChatModel(["[MEMORY]\n- Works at Acme\n\n[DREAM]\nFirst dream.\n"])
    with open_memory(root, clock, llm=llm) as mem:
        mem.daily.append("Note", "user: I work at Acme")
        (root / "memory" / "dreams").symlink_to(outside, target_is_directory=True)
        with pytest.raises(UnsafePath, match="dreams"):
            mem.deep_dream()
        assert not (root / "MEMORY.md").exists() and mem.dream_versions() == []
    assert untouched(outside)


# SQLite only: the journal lock is a lock file there (on PostgreSQL an advisory lock)
@pytest.mark.sqlite_only
def test_a_linked_lock_file_is_refused(root: Path, clock: FakeClock, outside: Path) -> None:
    with open_memory(root, clock) as mem:
        mem.daily.append("Note", "first")
        lock = root / "memory" / ".journal.lock"
        lock.unlink(missing_ok=True)
        lock.symlink_to(outside / f"{DAY}.md")
        with pytest.raises(UnsafePath):
            mem.daily.append("Note", "second")
    assert untouched(outside)


# SQLite only: the database file tiermem.db
@pytest.mark.sqlite_only
def test_a_linked_database_is_refused(root: Path, clock: FakeClock, tmp_path: Path) -> None:
    with open_memory(tmp_path / "elsewhere", clock) as other:
        other.facts.add("Stored elsewhere")
    root.mkdir()
    (root / "tiermem.db").symlink_to(tmp_path / "elsewhere" / "tiermem.db")
    before = (tmp_path / "elsewhere" / "tiermem.db").read_bytes()
    with pytest.raises(UnsafePath, match="tiermem.db"):
        open_memory(root, clock)
    assert (tmp_path / "elsewhere" / "tiermem.db").read_bytes() == before
    with open_memory(root, clock, allow_symlinks=True) as mem:
        assert [f.content for f in mem.facts.list()] == ["Stored elsewhere"]


def test_the_root_itself_may_be_a_link(tmp_path: Path, clock: FakeClock) -> None:
    real = tmp_path / "synced" / "tiermem"
    real.mkdir(parents=True)
    link = tmp_path / "mem"
    link.symlink_to(real, target_is_directory=True)
    with open_memory(link, clock) as mem:
        mem.daily.append("Note", "kept in the synced folder")
        mem.core.write("- Works at Acme\n")
        mem.facts.add("Prefers tea")
        assert mem.search("synced folder")
        assert json.dumps(mem.export())
    assert (real / "memory" / f"{DAY}.md").is_file() and (real / "MEMORY.md").is_file()


def test_a_link_that_stays_inside_the_root_is_followed(root: Path, clock: FakeClock) -> None:
    (root / "users" / "robert" / "memory").mkdir(parents=True)
    (root / "users" / "bob").symlink_to(root / "users" / "robert", target_is_directory=True)
    with open_memory(root, clock, user_id="bob") as mem:
        mem.daily.append("Note", "inside the root")
        assert "inside the root" in mem.daily.read(DAY)
    assert "inside the root" in (root / "users" / "robert" / "memory" / f"{DAY}.md").read_text(encoding="utf-8")


# SQLite only: it reads the Daily files behind a link (on PostgreSQL they are rows)
@pytest.mark.sqlite_only
def test_allow_symlinks_follows_links_out_of_the_root(root: Path, clock: FakeClock, outside: Path) -> None:
    (root / "users" / "bob").mkdir(parents=True)
    (root / "users" / "bob" / "memory").symlink_to(outside, target_is_directory=True)
    with open_memory(root, clock, user_id="bob", allow_symlinks=True) as mem:
        mem.daily.append("Note", "written through the link")
        assert "the outside file" in mem.daily.read(DAY)
    assert "written through the link" in (outside / f"{DAY}.md").read_text(encoding="utf-8")


# SQLite only: it reads the Daily files behind a link (on PostgreSQL they are rows)
@pytest.mark.sqlite_only
def test_the_setting_comes_from_the_environment_and_the_toml(root: Path, clock: FakeClock, outside: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    (root / "users" / "bob").mkdir(parents=True)
    (root / "users" / "bob" / "memory").symlink_to(outside, target_is_directory=True)
    (root / "tiermem.toml").write_text("[tiermem]\nallow_symlinks = true\n", encoding="utf-8")
    with open_memory(root, clock, user_id="bob") as mem:
        assert "the outside file" in mem.daily.read(DAY)
    monkeypatch.setenv("TIERMEM_ALLOW_SYMLINKS", "false")
    with open_memory(root, clock, user_id="bob") as mem, pytest.raises(UnsafePath):
        mem.daily.read(DAY)


def test_the_cli_says_it_in_one_line(root: Path, outside: Path) -> None:
    today = datetime.now(UTC).date().isoformat()  # the CLI runs on the real clock
    (root / "memory").mkdir(parents=True)
    (root / "memory" / f"{today}.md").symlink_to(outside / f"{DAY}.md")
    result = CliRunner().invoke(cli, ["--root", str(root), "note", "more"], env=ENV)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "symbolic link" in result.output and "allow_symlinks" in result.output
    assert untouched(outside)


def test_files_are_opened_without_following_a_final_link(tmp_path: Path, outside: Path) -> None:
    """A link swapped in after the check (a race) is refused by O_NOFOLLOW itself."""
    if not getattr(os, "O_NOFOLLOW", 0):
        pytest.skip("no O_NOFOLLOW on this platform")
    link = tmp_path / "link.md"
    link.symlink_to(outside / f"{DAY}.md")
    with pytest.raises(UnsafePath):
        open_private(link, os.O_WRONLY | os.O_APPEND)
    with pytest.raises(UnsafePath):
        read_file(link)
    assert untouched(outside)


def test_an_import_does_not_write_through_a_link(root: Path, clock: FakeClock, tmp_path: Path,
                                                 outside: Path) -> None:
    with open_memory(tmp_path / "src", clock) as src:
        src.daily.append("Note", "from the backup")
        data = src.export()
    root.mkdir()
    (root / "memory").symlink_to(outside, target_is_directory=True)
    with open_memory(root, clock) as mem, pytest.raises(TiermemError):
        mem.import_(data)
    assert untouched(outside)
