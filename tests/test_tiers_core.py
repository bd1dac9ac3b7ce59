"""The Core file MEMORY.md: bullets under optional headings, hand edits, atomic writes (R13)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import InvalidInput, Memory, StorageError
from tiermem.testing import FakeClock
from tiermem.tiers.core import CoreSection, parse_core, render_core

pytestmark = pytest.mark.usefixtures("backend")

MEMORY_MD = """# Memory

- Name is Rui
- Works as a nurse
  on night shifts

## Preferences
- Likes green tea
* Prefers dark mode

Some prose a person wrote.

## Projects
- Building a greenhouse
"""


@pytest.fixture
def mem(tmp_path: Path) -> Memory:
    memory = Memory(tmp_path, llm="none", embedder="hash", clock=FakeClock(datetime(2026, 3, 14, tzinfo=UTC)),
                    timezone="UTC")
    yield memory
    memory.close()


def test_parse_keeps_bullets_under_headings_and_drops_the_rest() -> None:
    assert parse_core(MEMORY_MD) == [
        CoreSection(None, ["Name is Rui", "Works as a nurse on night shifts"]),
        CoreSection("Preferences", ["Likes green tea", "Prefers dark mode"]),
        CoreSection("Projects", ["Building a greenhouse"]),
    ]


def test_render_then_parse_round_trips() -> None:
    sections = parse_core(MEMORY_MD)
    text = render_core(sections)
    assert text == ("- Name is Rui\n- Works as a nurse on night shifts\n\n## Preferences\n- Likes green tea\n"
                    "- Prefers dark mode\n\n## Projects\n- Building a greenhouse\n")
    assert parse_core(text) == sections
    assert render_core([]) == ""


def test_items_are_the_bullets_without_headings(mem: Memory) -> None:
    assert mem.core.path == mem.root / "MEMORY.md"
    assert mem.core.items() == []  # no file yet
    assert not mem.core.path.exists()
    mem.core.path.write_text(MEMORY_MD, encoding="utf-8")
    assert mem.core.items() == ["Name is Rui", "Works as a nurse on night shifts", "Likes green tea",
                                "Prefers dark mode", "Building a greenhouse"]


def test_hand_edits_are_seen_at_once(mem: Memory) -> None:
    mem.core.write("- Likes green tea\n")
    mem.core.path.write_text("- Likes green tea\n- Allergic to cats\n", encoding="utf-8")
    assert mem.core.items() == ["Likes green tea", "Allergic to cats"]


def test_write_replaces_atomically_and_leaves_no_temp_files(mem: Memory) -> None:
    mem.core.write("## A\n- one")
    assert mem.core.path.read_text(encoding="utf-8") == "## A\n- one\n"
    mem.core.write("- two\n")
    assert mem.core.items() == ["two"]
    assert sorted(p.name for p in mem.root.iterdir() if p.name.startswith(".MEMORY")) == []


@pytest.mark.sqlite_only  # the rename is the commit of a local MEMORY.md; on PostgreSQL the database commits
def test_a_crash_before_the_rename_leaves_the_old_file_intact(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.core.write("- the old memory\n")

    def crash(src: object, dst: object) -> None:
        raise OSError("simulated crash before rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(StorageError):
        mem.core.write("- the new memory\n")
    monkeypatch.undo()
    assert mem.core.items() == ["the old memory"]
    assert [p.name for p in mem.root.iterdir() if p.suffix == ".tmp"] == []


@pytest.mark.parametrize("bad", [None, 42, b"- bytes", "- nul \x00 inside"])
def test_bad_text_is_rejected(mem: Memory, bad: object) -> None:
    mem.core.write("- keep me\n")
    with pytest.raises(InvalidInput):
        mem.core.write(bad)  # type: ignore[arg-type]
    assert mem.core.items() == ["keep me"]


def test_a_failed_write_keeps_the_old_text_and_no_version(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.core.write("- the old memory\n")

    def broken(rel: str, data: bytes) -> None:
        raise StorageError("the store went away")

    monkeypatch.setattr(mem.core.files, "replace", broken)
    with pytest.raises(StorageError, match="went away"):
        mem.core.rewrite("- the new memory\n", "edit")  # the kept version and the text are one step
    monkeypatch.undo()
    assert mem.core.items() == ["the old memory"] and mem.dream_versions() == []


def test_rewrite_checks_the_text_it_expects(mem: Memory) -> None:
    from tiermem.tiers.core import CoreChanged

    mem.core.write("- one\n")
    with pytest.raises(CoreChanged):
        mem.core.rewrite("- two\n", "dream", expect="- something else\n")
    assert mem.core.read() == "- one\n" and mem.dream_versions() == []
    done = mem.core.rewrite("- two\n", "dream", expect="- one\n")
    assert (done.before, done.existed) == ("- one\n", True)
    assert [(v.id, v.cause, v.content) for v in mem.dream_versions()] == [(done.version_id, "dream", "- one\n")]


def test_every_text_is_kept_where_memory_md_lives_in_the_database(mem: Memory, backend: str) -> None:
    for text in ("- one\n", "- one\n", "- two\n", "- three\n"):
        mem.core.write(text)
    kept = [(v.cause, v.content) for v in mem.dream_versions()]
    # SQLite: the file is the store, versions are what a dream, rollback or edit replaced;
    # PostgreSQL: every text MEMORY.md held is kept (the same text written twice is one)
    assert kept == ([] if backend == "sqlite" else [("write", "- two\n"), ("write", "- one\n")])


def test_a_hand_edit_is_read_and_on_postgres_imported_as_a_version(mem: Memory, backend: str) -> None:
    key = "sk-proj-" + "Q7" * 16
    mem.core.write("- Likes green tea\n")
    mem.core.path.write_text(f"- Likes green tea\n- Allergic to cats\n- api key {key}", encoding="utf-8")
    assert mem.core.items()[:2] == ["Likes green tea", "Allergic to cats"]
    assert key not in mem.core.read()  # redacted (R68) on both
    if backend == "postgres":  # imported (redacted, with its final newline), the old text kept, the mirror rewritten
        assert [(v.cause, v.content) for v in mem.dream_versions()] == [("hand edit", "- Likes green tea\n")]
        assert mem.core.path.read_text(encoding="utf-8") == mem.core.read()
        assert mem.core.read().endswith("\n") and not mem.core.sync()  # imported once


def test_two_roots_share_one_memory_md_on_postgres(tmp_path: Path, backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("two roots are two stores on SQLite")
    a = Memory(tmp_path / "a", embedder="hash")
    b = Memory(tmp_path / "b", embedder="hash")
    with a, b:
        a.core.write("- v1\n")
        assert b.core.read() == "- v1\n" and (tmp_path / "b" / "MEMORY.md").read_text(encoding="utf-8") == "- v1\n"
        a.core.write("- v2\n")
        assert (tmp_path / "b" / "MEMORY.md").read_text(encoding="utf-8") == "- v1\n"  # stale until B reads
        assert b.core.items() == ["v2"]  # a stale mirror is not a hand edit: nothing imported
        assert (tmp_path / "b" / "MEMORY.md").read_text(encoding="utf-8") == "- v2\n"
        assert [v.content for v in a.dream_versions()] == ["- v1\n"]


def test_without_the_mirror_no_file_is_written_or_read(tmp_path: Path, backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("mirror_files is a PostgreSQL setting: on SQLite the file is the store")
    with Memory(tmp_path, embedder="hash", mirror_files=False) as mem:
        mem.core.write("- in the database only\n")
        assert not mem.core.path.exists()
        mem.core.path.write_text("- a stray file\n", encoding="utf-8")
        assert mem.core.items() == ["in the database only"] and mem.dream_versions() == []


def test_a_search_sees_memory_md_changed_between_searches(tmp_path: Path, backend: str) -> None:
    """Each search looks at MEMORY.md again (PostgreSQL: its revision, read with the daily files', and
    the mirror's bytes; the stored text is read when either moved): a hand edit, and on PostgreSQL
    another root's write, are found by the next search and the mirror follows."""
    a = Memory(tmp_path / "a", embedder="hash", timezone="UTC")
    b = Memory(tmp_path / "b", embedder="hash", timezone="UTC")

    def texts(mem: Memory, query: str) -> set[str]:
        return {h.text for h in mem.search(query, min_score=0, tier="core")}

    with a, b:
        a.core.write("- Keeps bees\n")
        for _ in range(3):  # nothing moved: on PostgreSQL the later searches read no stored text
            assert texts(a, "bees") == {"Keeps bees"}
        a.core.path.write_text("- Keeps bees\n- Grows quinces\n", encoding="utf-8")
        assert texts(a, "quinces") == {"Keeps bees", "Grows quinces"}
        assert texts(a, "quinces") == {"Keeps bees", "Grows quinces"}
        if backend == "postgres":
            b.core.write("- Breeds ferrets\n")
            assert texts(a, "ferrets") == texts(a, "quinces") == {"Breeds ferrets"}
            assert a.core.path.read_text(encoding="utf-8") == "- Breeds ferrets\n"  # a stale mirror, rewritten
            a.core.path.write_text("- Breeds ferrets\n- Reads maps\n", encoding="utf-8")
            assert texts(a, "maps") == texts(b, "maps") == {"Breeds ferrets", "Reads maps"}
