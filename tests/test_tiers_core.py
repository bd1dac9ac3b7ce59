"""The Core file MEMORY.md: bullets under optional headings, hand edits, atomic writes (R13)."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import InvalidInput, Memory, StorageError
from tiermem.testing import FakeClock
from tiermem.tiers.core import CoreSection, parse_core, render_core

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
