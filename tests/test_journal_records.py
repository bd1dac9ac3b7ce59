"""The lossless record form (R8): render/parse round trip, hand-written Markdown, message records,
the tool-output cap, and long records indexed as several chunks that cite their own lines."""

from __future__ import annotations

import tempfile
import unicodedata
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem import InvalidInput, Memory
from tiermem.paths import UserPaths
from tiermem.storage.chunks import ChunkRepository
from tiermem.testing import FakeClock
from tiermem.tiers.core import parse_core
from tiermem.tiers.daily import DailyJournal
from tiermem.tiers.indexer import CHUNK_MAX_CHARS, chunks_of
from tiermem.tiers.markdown import normalise_text, parse_records, render_record
from tiermem.tiers.records import message_records, tool_names
from tiermem.tiers.turns import to_message
from tiermem.validate import MAX_MESSAGE_CHARS

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 14, 30, tzinfo=UTC)
TRICKY_LINES = ["", "  ", "- item", "* star", "-", "# heading", "## Trimmed Context (14:30)", "```python",
                "```", "    indented code", " leading", "trailing  ", "\t", "漢字とかな、한국어", "> quote", "1. one"]
ARGUMENTS = '{"q": "' + "y" * 50 + '"}'
RECORD_TEXT = st.one_of(
    st.text(),
    st.lists(st.one_of(st.sampled_from(TRICKY_LINES), st.text(max_size=20)), max_size=8).map("\n".join),
)


@given(RECORD_TEXT)
def test_render_then_parse_gives_the_exact_text_back(text: str) -> None:
    expected = normalise_text(text)
    block = f"# Daily Memory: 2026-03-14\n\n## Note (14:30)\n{render_record(text)}\n{render_record('next')}\n"
    records = parse_records(block)
    assert [r.text for r in records] == [expected, "next"]
    assert (records[0].line_start, records[0].line_end) == (4, 4 + expected.count("\n"))
    assert records[0].bullet and records[0].heading == "Note (14:30)"


@given(st.text())
def test_normalising_keeps_only_newlines_and_tabs_of_the_control_characters(text: str) -> None:
    once = normalise_text(text)
    assert normalise_text(once) == once
    assert "\r" not in once and all(c in "\n\t" or ord(c) >= 0x20 for c in once if ord(c) < 0xA0)


def test_normalising_drops_exactly_the_control_characters_and_lone_surrogates() -> None:
    every = "".join(map(chr, range(0x110000)))
    expected = every.replace("\r\n", "\n").replace("\r", "\n")
    expected = "".join(c for c in expected if c in "\n\t" or unicodedata.category(c) not in ("Cc", "Cs"))
    assert normalise_text(every) == expected


def test_the_form_is_marker_then_two_space_continuations() -> None:
    text = "Here:\r\n```python\n# not a heading\n\n- not a bullet\n```\n "
    assert render_record(text) == "- Here:\n  ```python\n  # not a heading\n  \n  - not a bullet\n  ```\n   "
    assert render_record("") == "- "


@settings(max_examples=40, deadline=None)
@given(RECORD_TEXT.map(normalise_text).filter(lambda t: t.strip() != ""))
def test_daily_append_writes_any_record_losslessly(text: str) -> None:
    if text.startswith(("- ", "* ")):
        text = "x " + text  # a leading bullet marker is the form's own: append drops it
    with tempfile.TemporaryDirectory() as folder:
        journal = DailyJournal(UserPaths.for_user(Path(folder), "default"), FakeClock(START), ZoneInfo("UTC"))
        journal.append("Note", [text, "after"])
        assert [r.text for r in parse_records(journal.read())] == [text, "after"]


HAND_WRITTEN = (
    "# Memory\n\n"
    "- Works at Acme\nas a senior engineer\n"
    "* Likes tea  \n  - nested item\n   + another nested item\n\n"
    "A paragraph\nby hand.\n"
    "## Work\n- old one-line record\n-\n- after an empty marker\n"
)


def test_hand_written_markdown_still_parses() -> None:
    records = parse_records(HAND_WRITTEN)
    assert [(r.line_start, r.line_end, r.text, r.bullet) for r in records] == [
        (3, 4, "Works at Acme\nas a senior engineer", True),  # a lazy continuation belongs to its bullet
        (5, 7, "Likes tea\n- nested item\n + another nested item", True),
        (9, 10, "A paragraph\nby hand.", False),
        (12, 12, "old one-line record", True),
        (14, 14, "after an empty marker", True),
    ]
    assert records[3].heading == "Work"
    assert parse_records(HAND_WRITTEN.replace("\n", "\r\n")) == records  # a CRLF file reads the same
    assert [item for section in parse_core(HAND_WRITTEN) for item in section.items] == [
        "Works at Acme as a senior engineer", "Likes tea", "nested item", "another nested item",
        "old one-line record", "after an empty marker"]


def test_message_records_are_verbatim_and_tool_output_is_capped_visibly() -> None:
    speech = "a long message\n" + "x" * 10_000
    result = "tool result (search): "
    thread = [to_message(m) for m in [
        {"role": "user", "content": speech, "name": "Ana"},
        {"role": "assistant", "content": "Looking.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "search", "arguments": ARGUMENTS}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "r" * 120},
    ]]
    names = tool_names(thread)
    assert message_records(thread[0], names, 100) == ["user (Ana): " + speech]  # people's text is never cut
    assert message_records(thread[1], names, 40) == [
        "assistant: Looking.", 'assistant called search({"q": "' + "y" * 33 + " [… 19 characters omitted])"]
    assert message_records(thread[2], names, 100) == [result + "r" * 100 + " [… 20 characters omitted]"]
    assert message_records(thread[2], names, 120) == [result + "r" * 120]


def test_a_tool_result_over_the_setting_is_journaled_with_the_marker(tmp_path: Path) -> None:
    with Memory(tmp_path, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC",
                tool_result_max_chars=1000) as mem:
        session = mem.session("tools")
        session.add("user", "Fetch the log " + "please " * 500)
        session.add_message({"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "fetch_log", "arguments": "{}"}}]})
        session.add("tool", "line\n" * 1000, tool_call_id="c1")
        session.end()
        records = [r.text for r in parse_records(mem.daily.read())]
    assert records[0] == "user: Fetch the log " + "please " * 500
    assert records[1] == "assistant called fetch_log({})"
    assert records[2] == "tool result (fetch_log): " + "line\n" * 200 + " [… 4000 characters omitted]"


def test_the_input_cap_refuses_and_changes_nothing(tmp_path: Path) -> None:
    with Memory(tmp_path, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC") as mem:
        session = mem.session("big")
        session.add("user", "small")
        with pytest.raises(InvalidInput, match="limit"):
            session.add("user", "x" * (MAX_MESSAGE_CHARS + 1))
        with pytest.raises(InvalidInput, match="limit"):
            mem.queue.add("big", [{"role": "user", "content": "x" * (MAX_MESSAGE_CHARS + 1)}])
        assert [m["content"] for m in session.messages] == ["small"]
        assert mem.queue.pending() == []
        session.add("user", "y" * MAX_MESSAGE_CHARS)  # the cap itself is fine, and journaled whole
        session.end()
        assert [r.text for r in parse_records(mem.daily.read())] == ["user: small", "user: " + "y" * MAX_MESSAGE_CHARS]


def test_long_records_are_indexed_as_chunks_citing_their_own_lines(tmp_path: Path) -> None:
    lines = [f"line {n:02d} " + "word " * 18 for n in range(60)]  # ~100 characters a line
    long_line = "z" * 3000 + " tail"
    with Memory(tmp_path, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC") as mem:
        mem.daily.append("Note", ["short one", "\n".join(lines), long_line])
        stored = ChunkRepository(mem.db).chunks("default", "memory/2026-03-14.md")
        text = mem.daily.read()
    computed = chunks_of("memory/2026-03-14.md", text)
    assert sorted(stored, key=repr) == sorted(computed, key=repr)  # the index holds exactly these chunks
    file_lines = text.split("\n")
    assert (computed[0].line_start, computed[0].line_end, computed[0].text) == (4, 4, "short one")
    body = [c for c in computed if 5 <= c.line_start <= 64]
    assert len(body) >= 4 and all(len(c.text) <= CHUNK_MAX_CHARS for c in body)
    for chunk in body:  # each chunk's text is exactly the record lines it cites
        cited = [line[2:] for line in file_lines[chunk.line_start - 1:chunk.line_end]]
        assert chunk.text == "\n".join(cited)
    assert [c.line_start for c in body] == sorted(c.line_start for c in body)
    assert body[0].line_start == 5 and body[-1].line_end == 64
    pieces = [c for c in computed if c.line_start == 65]
    assert len(pieces) == 3 and all(c.line_end == 65 for c in pieces)  # one line, three pieces
    assert "".join(c.text for c in pieces) == long_line


def test_the_documented_example_is_what_the_journal_writes(tmp_path: Path) -> None:
    doc = (Path(__file__).parent.parent / "docs" / "daily.md").read_text(encoding="utf-8")
    example = doc.split("~~~markdown\n", 1)[1].split("~~~", 1)[0]
    with Memory(tmp_path, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC") as mem:
        session = mem.session("doc")
        session.add("user", 'Here is the script:\n```python\nprint("hi")\n```')
        session.add_message({"role": "assistant", "content": "Thanks! Running it now.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "run_script", "arguments": '{"path": "hi.py"}'}}]})
        session.add("tool", "hi", tool_call_id="c1")
        session.end()
        written = mem.daily.read()
    assert written.replace("Session Notes", "Trimmed Context") == example.split("\n## Session Summary")[0]
