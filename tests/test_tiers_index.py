"""One index over the file tiers: chunks with line ranges, kept fresh, hand edits noticed (R43, R44)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import InvalidInput, Memory
from tiermem.paths import UserPaths
from tiermem.storage.chunks import EMPTY_SHA256, Chunk, ChunkRepository
from tiermem.testing import FakeClock
from tiermem.tiers.indexer import chunks_of

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 14, 30, tzinfo=UTC)


def open_memory(root: Path, user_id: str = "default") -> Memory:
    return Memory(root, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC", user_id=user_id)


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    memory = open_memory(tmp_path)
    yield memory
    memory.close()


def chunks(mem: Memory, path: str | None = None) -> list[Chunk]:
    return ChunkRepository(mem.db).chunks(mem.scope.user_id, path)


def test_daily_records_are_indexed_with_their_line_ranges(mem: Memory) -> None:
    mem.daily.append("Note", ["User adopted a cat named Miso", "User went hiking in Sintra"])
    mem.daily.append("Session Notes", "user: the cat likes tuna")
    lines = mem.daily.read().splitlines()

    found = chunks(mem, "memory/2026-03-14.md")
    assert [(c.line_start, c.line_end, c.text) for c in found] == [
        (4, 4, "User adopted a cat named Miso"), (5, 5, "User went hiking in Sintra"),
        (8, 8, "user: the cat likes tuna")]
    for chunk in found:
        assert lines[chunk.line_start - 1] == "- " + chunk.text
        assert chunk.tier == "daily" and chunk.day == "2026-03-14"
    assert found[0].ref == "memory/2026-03-14.md#L4-L4"


def test_appended_chunks_equal_a_full_reindex(mem: Memory) -> None:
    for i in range(5):
        mem.daily.append(f"Block {i}", [f"record {i} a", f"record {i} b\nfolded"])
    incremental = chunks(mem)
    assert mem.reindex() == 1
    assert chunks(mem) == incremental
    assert len(incremental) == 10


def test_memory_md_bullets_are_one_chunk_each(mem: Memory) -> None:
    mem.core.write("# Memory\n\n## Work\n- Works as a nurse\n  on night shifts\n- Lives in Porto\n")
    found = chunks(mem, "MEMORY.md")
    assert [(c.tier, c.line_start, c.line_end, c.text) for c in found] == [
        ("core", 4, 5, "Works as a nurse on night shifts"), ("core", 6, 6, "Lives in Porto")]


def test_a_hand_edit_of_memory_md_is_found_by_the_next_search(mem: Memory) -> None:
    mem.core.write("- Likes green tea\n")
    assert all("bicycle" not in h.text for h in mem.search("red bicycle", tier="core"))
    mem.core.path.write_text("- Likes green tea\n- Rides a red bicycle to work\n", encoding="utf-8")

    hits = mem.search("red bicycle", k=3, tier="core")

    assert hits and hits[0].text == "Rides a red bicycle to work"
    assert hits[0].ref == "MEMORY.md#L2-L2"
    assert [c.text for c in chunks(mem, "MEMORY.md")] == ["Likes green tea", "Rides a red bicycle to work"]


def test_refresh_notices_hand_edits_of_memory_md(mem: Memory) -> None:
    mem.core.write("- Likes green tea\n")
    assert mem.refresh_index() == []
    mem.core.path.write_text("- Likes coffee now\n", encoding="utf-8")
    assert mem.refresh_index() == ["MEMORY.md"]
    assert [c.text for c in chunks(mem, "MEMORY.md")] == ["Likes coffee now"]
    assert mem.refresh_index() == []


# SQLite only: it hand-edits Daily files and expects them read back (on PostgreSQL they are a mirror)
@pytest.mark.sqlite_only
def test_edits_made_while_no_process_ran_are_caught_on_the_next_open(tmp_path: Path) -> None:
    with open_memory(tmp_path) as mem:
        mem.daily.append("Note", "User owns a blue kayak")
        mem.core.write("- Likes green tea\n")
    daily = tmp_path / "memory" / "2026-03-14.md"
    daily.write_text(daily.read_text(encoding="utf-8").replace("blue kayak", "yellow canoe"), encoding="utf-8")
    (tmp_path / "memory" / "2026-03-10.md").write_text("# Daily Memory: 2026-03-10\n\n- typed by hand\n",
                                                       encoding="utf-8")
    (tmp_path / "MEMORY.md").unlink()
    (tmp_path / "memory" / "dreams").mkdir()
    (tmp_path / "memory" / "dreams" / "2026-03-14.md").write_text("- a dream diary line\n", encoding="utf-8")

    with open_memory(tmp_path) as mem:
        changed = mem.refresh_index()
        assert sorted(changed) == ["MEMORY.md", "memory/2026-03-10.md", "memory/2026-03-14.md"]
        texts = {c.text: c.path for c in chunks(mem)}
        assert texts == {"User owns a yellow canoe": "memory/2026-03-14.md",
                         "typed by hand": "memory/2026-03-10.md"}  # dream diaries are not indexed


def test_the_append_that_creates_a_file_is_indexed_from_its_block(mem: Memory) -> None:
    repo = ChunkRepository(mem.db)
    rel = "memory/2026-03-14.md"
    block = [Chunk("daily", rel, 3, 3, "first record", "2026-03-14")]
    assert repo.append_chunks("default", rel, EMPTY_SHA256, "sha-after", block) is True  # never indexed: empty
    assert repo.file_hash("default", rel) == "sha-after"
    assert repo.append_chunks("default", rel, EMPTY_SHA256, "sha-2", block) is False  # the index holds more now
    assert [c.text for c in chunks(mem, rel)] == ["first record"]


# SQLite only: it hand-edits a Daily file and expects it read back (on PostgreSQL the file is a mirror)
@pytest.mark.sqlite_only
def test_an_edit_between_appends_forces_a_full_reindex(mem: Memory) -> None:
    path = mem.daily.append("Note", "first record")
    path.write_text(path.read_text(encoding="utf-8").replace("first record", "edited record"), encoding="utf-8")
    mem.daily.append("Note", "second record")
    assert [c.text for c in chunks(mem)] == ["edited record", "second record"]


def test_same_size_edit_with_a_new_mtime_is_noticed(mem: Memory) -> None:
    mem.core.write("- likes cats\n")
    mem.refresh_index()
    mem.core.path.write_text("- likes dogs\n", encoding="utf-8")
    stat = mem.core.path.stat()
    os.utime(mem.core.path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert mem.refresh_index() == ["MEMORY.md"]
    assert [c.text for c in chunks(mem)] == ["likes dogs"]


def test_users_have_their_own_roots_and_index(tmp_path: Path) -> None:
    with open_memory(tmp_path) as alice_default, open_memory(tmp_path, "bob") as bob:
        alice_default.daily.append("Note", "default user record")
        path = bob.daily.append("Note", "bob's record")
        bob.core.write("- Bob likes jazz\n")
        assert path == tmp_path / "users" / "bob" / "memory" / "2026-03-14.md"
        assert bob.core.path == tmp_path / "users" / "bob" / "MEMORY.md"
        assert [c.text for c in chunks(bob)] == ["Bob likes jazz", "bob's record"]
        assert [c.text for c in chunks(alice_default)] == ["default user record"]
        assert chunks(bob)[1].ref == "memory/2026-03-14.md#L4-L4"  # relative to the user's root


@pytest.mark.parametrize("user_id", ["../evil", "a/b", "a\\b", "..", ".", ".hidden", "x" * 65, "", "a..b",
                                     "/abs", "nul\x00"])
def test_path_tricks_in_user_ids_are_rejected(tmp_path: Path, user_id: str) -> None:
    with pytest.raises(InvalidInput):
        open_memory(tmp_path, user_id)
    with pytest.raises(InvalidInput):
        UserPaths.for_user(tmp_path, user_id)
    assert not (tmp_path.parent / "evil").exists()


def test_a_symlink_under_users_cannot_lead_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "root"
    (root / "users").mkdir(parents=True)
    (root / "users" / "mallory").symlink_to(outside)
    with pytest.raises(InvalidInput):
        UserPaths.for_user(root, "mallory")


def test_chunking_of_a_block_matches_the_whole_file() -> None:
    text = "# Daily Memory: 2026-03-14\n\n## A (10:00)\n- one\n- two\n  more\n\n## B (11:00)\n- three\n"
    whole = chunks_of("memory/2026-03-14.md", text)
    tail = chunks_of("memory/2026-03-14.md", "## B (11:00)\n- three\n", first_line=8)
    assert whole[-1] == tail[0]
    assert [(c.line_start, c.line_end, c.text) for c in whole] == [(4, 4, "one"), (5, 6, "two\nmore"),
                                                                   (9, 9, "three")]
