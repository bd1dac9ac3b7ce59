"""Line citations count a file's own lines (issue 14, item 13).

A file's lines are what ``\\n`` separates. ``str.splitlines`` also breaks at U+2028, form feed,
``\\x1c``..``\\x1e``, ``\\x85`` and more; text holding those (a hand edit, ``core.write``, a
journal record) must not shift any ``#Lx-Ly`` a hit, a note or a diff names.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.dream.runner import unified_diff
from tiermem.storage.dreams import CoreVersion
from tiermem.testing import FakeClock

pytestmark = pytest.mark.usefixtures("backend")

#: Characters ``str.splitlines`` breaks at although a file does not.
BREAKS = {"u2028": "\u2028", "formfeed": "\x0c", "fs": "\x1c", "nel": "\x85", "u2029": "\u2029", "vt": "\x0b"}
CORE_TEXT = "# Memory\n\n## Work\n" + "".join(
    f"- core{name}one{sep}core{name}word tail\n" for name, sep in BREAKS.items()) + "- closing coreomegaword line\n"
_REF_RE = re.compile(r"^(?P<path>.+)#L(?P<start>\d+)-L(?P<end>\d+)$")


def line_of(path: Path, word: str) -> int:
    """The 1-based number of the file line (by ``\\n``) holding ``word``; it must be on one line."""
    lines = path.read_bytes().decode("utf-8").split("\n")
    found = [number for number, line in enumerate(lines, start=1) if word in line]
    assert len(found) == 1, (word, found)
    return found[0]


def cited(mem: Memory, word: str, tier: str) -> tuple[Path, int, int, str]:
    """The first hit for ``word`` whose text holds it: its file, cited lines and text."""
    for hit in mem.search(word, k=20, tier=tier, min_score=0):
        if word in hit.text:
            match = _REF_RE.match(hit.ref)
            assert match is not None, hit.ref
            return mem.root / match["path"], int(match["start"]), int(match["end"]), hit.text
    raise AssertionError(f"no {tier} hit holds {word!r}")


def words_of(text: str) -> list[str]:
    return text.split()  # whitespace of any kind, line breaks of every kind included


def assert_cites_its_lines(path: Path, start: int, end: int, text: str) -> None:
    """The cited lines hold exactly the hit's words (bullet markers aside), in order."""
    lines = path.read_bytes().decode("utf-8").split("\n")[start - 1:end]
    file_words = [w for w in words_of("\n".join(lines)) if w not in ("-", "*")]
    assert file_words == words_of(text), (lines, text)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 14, 9, 30, tzinfo=UTC))


def test_core_hits_cite_the_lines_of_memory_md_written_by_core_write(mem: Memory) -> None:
    path = mem.core.write(CORE_TEXT)
    assert path.read_bytes().decode("utf-8") == CORE_TEXT  # the characters reach the file as given
    for name in [*BREAKS, "omega"]:
        word = f"core{name}word"
        file, start, end, text = cited(mem, word, "core")
        assert file == path
        assert start == end == line_of(path, word), name
        assert_cites_its_lines(file, start, end, text)


def test_core_hits_cite_the_lines_of_a_hand_edited_memory_md(mem: Memory) -> None:
    mem.core.write("- placeholder\n")
    path = mem.root / "MEMORY.md"
    path.write_bytes(("\u2028\n" + CORE_TEXT).encode("utf-8"))  # a person's editor, odd breaks and all
    mem.refresh_index()
    for name in BREAKS:
        word = f"core{name}word"
        _, start, end, text = cited(mem, word, "core")
        assert start == end == line_of(path, word), name
        assert_cites_its_lines(path, start, end, text)


# On PostgreSQL the journal lives in the database and a hand edit of a mirrored Daily file is never read back.
@pytest.mark.sqlite_only
def test_daily_hits_cite_journal_and_hand_written_lines(mem: Memory, clock: FakeClock) -> None:
    path = mem.daily.append("Note", ["journal kiloone\u2028kiloword\nsecond line limaone\u2029limaword"])
    mem.daily.append("Note", ["after mikeword"])
    with path.open("ab") as handle:  # a hand edit with the characters the journal itself drops
        handle.write("- hand novemberone\x0cnovemberword\n  continued oscarone\x85oscarword\n"
                     "- hand papaone\x1cpapaword\x0bquebecword\n- closing romeoword\n".encode())
    mem.refresh_index()
    records = {  # word -> (first, last) word of the record that holds it
        "kiloword": ("kiloword", "limaword"), "limaword": ("kiloword", "limaword"), "mikeword": ("mikeword",) * 2,
        "novemberword": ("novemberword", "oscarword"), "oscarword": ("novemberword", "oscarword"),
        "papaword": ("papaword", "papaword"), "quebecword": ("papaword", "papaword"),
        "romeoword": ("romeoword", "romeoword"),
    }
    for word, (first, last) in records.items():
        file, start, end, text = cited(mem, word, "daily")
        assert file == path
        assert (start, end) == (line_of(path, first), line_of(path, last)), word
        assert_cites_its_lines(file, start, end, text)


def test_chunks_of_a_long_record_cite_their_own_lines(mem: Memory) -> None:
    body = "\n".join(f"row{i:02d}word one\u2028two\x85 {'filler ' * 12}" for i in range(40))
    path = mem.daily.append("Note", [body.replace("\x85", "")])  # the journal refuses \x85; a hand edit adds it
    text = path.read_bytes().decode("utf-8")
    path.write_bytes(text.replace("one\u2028two", "one\u2028two\x85").encode("utf-8"))
    mem.refresh_index()
    for i in (0, 17, 39):
        word = f"row{i:02d}word"
        _, start, end, hit_text = cited(mem, word, "daily")
        assert start <= line_of(path, word) <= end and end - start < 39  # a chunk, not the whole record
        assert_cites_its_lines(path, start, end, hit_text)


def test_relevant_notes_in_the_injection_cite_the_files_lines(mem: Memory) -> None:
    path = mem.daily.append("Note", ["packing\u2028boxes first", "the move\u2028to Lisbon is in August"])
    with path.open("ab") as handle:
        handle.write("- hand\x0cedited\x85line: the move to Lisbon needs boxes\n".encode())
    mem.refresh_index()
    text = mem.format_for_injection(query="When is the move to Lisbon?")
    notes = re.findall(r"\((memory/[^)#]+)#L(\d+)(?:-L(\d+))?\): ([^\n]*)", text)
    assert notes, text
    for rel, start, end, note in notes:
        lines = (mem.root / rel).read_bytes().decode("utf-8").split("\n")
        cited_lines = lines[int(start) - 1:int(end or start)]
        assert words_of(note)[:3] == [w for w in words_of(" ".join(cited_lines)) if w != "-"][:3], (note, cited_lines)


def test_a_dream_diff_numbers_the_files_lines() -> None:
    before = "- keep one\u2028still the same line\n- old fact\x0cwith a form feed\n- last\n"
    after = "- keep one\u2028still the same line\n- new fact\n- last\n"
    diff = unified_diff(before, after)
    assert "@@ -1,3 +1,3 @@" in diff  # three lines each, as the files have them
    changed = [line for line in diff.split("\n") if line[:1] in ("+", "-") and not line.startswith(("+++", "---"))]
    assert changed == ["-- old fact\x0cwith a form feed", "+- new fact"]


def test_a_kept_version_counts_the_bullets_of_its_lines() -> None:
    version = CoreVersion(1, "default", datetime(2026, 3, 14, tzinfo=UTC), "dream",
                          "- one\u2028- not a bullet of its own\n- two\x85- nor this\n", True, "")
    assert version.bullets == 2
