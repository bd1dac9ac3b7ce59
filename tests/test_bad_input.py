"""Bad input found by fuzzing (issue 14, item 11): each is one typed error a person can act on —
in the library, the CLI (exit 1, one line) and MCP (a tool error; the server stays up) — and
nothing is written.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from mcp import Client

from tiermem import InvalidInput, Memory, TiermemError
from tiermem.cli.main import cli
from tiermem.ingest import read_transcript
from tiermem.mcp.server import build_server
from tiermem.search.filters import build_filters
from tiermem.testing import FakeClock, HashEmbedder

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
SURROGATE = "\udcff"  # what a shell argument holding the byte 0xff becomes in Python
DEEP = "[" * 100_000 + "]" * 100_000

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL


def state(root: Path) -> dict[str, bytes]:
    """Every file under the root but locks and the database's WAL/SHM (their bytes move on a read)."""
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.startswith(".") and not p.name.endswith(("-wal", "-shm"))}


def rows(mem: Memory) -> list[Any]:
    conn = mem.db.conn
    tables = [t for t in mem.db.parts.tables(mem.db) if not t.startswith("search_")]
    return [(t, sorted(map(tuple, conn.execute(f"SELECT * FROM {t}")), key=repr)) for t in sorted(tables)]


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert text and "\n" not in text, text
    return text


@pytest.fixture
def filled(mem: Memory) -> Iterator[Memory]:
    fact = mem.facts.add("Prefers green tea", "preference", 0.9)
    assert fact is not None
    mem.plans.start("Move to Lisbon", ["find a flat"], session_id="s1")
    mem.daily.append("Note", ["tea with Maya"])
    mem.session("s2")  # a live session (opening one attaches it to the active plan)
    yield mem


# --- dates at the ends of the calendar ---------------------------------------------------------
@pytest.mark.parametrize("until", ["9999-12-31", date(9999, 12, 31), "9999-12-31T23:59:59.999999",
                                   "9999-12-31T23:59:59+00:00", datetime(9999, 12, 31, 23, 59, tzinfo=UTC)])
def test_until_the_last_day_of_the_calendar_finds_everything(filled: Memory, until: Any) -> None:
    assert {h.tier for h in filled.search("tea", until=until, min_score=0)} == {"fact", "daily"}


@pytest.mark.parametrize("since", ["0001-01-01", date(1, 1, 1), "0001-01-01T00:00:00+14:00", "0999-06-01"])
def test_since_the_first_days_of_the_calendar_finds_everything(filled: Memory, since: Any) -> None:
    assert {h.tier for h in filled.search("tea", since=since, min_score=0)} == {"fact", "daily"}


def test_bounds_compare_as_the_store_writes_times() -> None:
    """Times are compared as text in SQL; a year before 1000 once became ``999-06-01...``, which
    sorts after every real time and so kept every fact out of the keyword half of a search."""
    flt = build_filters(since="0999-06-01", until="9999-12-30").for_sql()
    assert (flt.fact_from, flt.fact_to) == ("0999-06-01T00:00:00.000000Z", "9999-12-31T00:00:00.000000Z")
    assert build_filters(until="9999-12-31").for_sql().fact_to is None  # nothing lies after it


@pytest.mark.parametrize(("since", "until"), [("9999-12-31T23:59:59-14:00", None),
                                              (None, "0001-01-01T00:00:00+14:00")])
def test_a_bound_past_the_calendar_is_one_clear_error(filled: Memory, since: Any, until: Any) -> None:
    with pytest.raises(InvalidInput) as info:
        filled.search("tea", since=since, until=until)
    assert "representable" in one_line(info.value)


def test_dates_in_range_still_filter(filled: Memory, clock: FakeClock) -> None:
    today = clock.now().date()
    assert filled.search("tea", since=today + timedelta(days=1), until="9999-12-31", min_score=0) == []
    assert filled.search("tea", since="0001-01-01", until=today - timedelta(days=1), min_score=0) == []


# --- lone surrogates in ids, names and text ------------------------------------------------------
SURROGATE_CALLS = [
    "facts.get", "facts.update", "facts.update content", "facts.delete", "facts.add", "facts.add source",
    "plans.get", "plans.check", "plans.pause", "plans.attach_session", "plans.start", "plans.start title",
    "session", "queue.add", "queue.add content", "queue.add tool", "daily.append",
    "daily.append kind", "core.write", "for_scope", "export", "inject", "search since"]


def _calls(mem: Memory) -> dict[str, Callable[[], Any]]:
    plan = mem.plans.list()[0].id
    fact = mem.facts.list()[0].id
    s = SURROGATE
    return {
        "facts.get": lambda: mem.facts.get(f"fact_{s}"),
        "facts.update": lambda: mem.facts.update(f"fact_{s}", content="x"),
        "facts.update content": lambda: mem.facts.update(fact, content=f"tea {s}"),
        "facts.delete": lambda: mem.facts.delete(f"fact_{s}"),
        "facts.add": lambda: mem.facts.add(f"likes {s}"),
        "facts.add source": lambda: mem.facts.add("likes coffee", source=f"t{s}"),
        "plans.get": lambda: mem.plans.get(f"plan_{s}"),
        "plans.check": lambda: mem.plans.check(f"plan_{s}", 0),
        "plans.pause": lambda: mem.plans.pause(f"plan_{s}"),
        "plans.attach_session": lambda: mem.plans.attach_session(plan, f"s{s}"),
        "plans.start": lambda: mem.plans.start("Trip", ["pack"], session_id=f"s{s}"),
        "plans.start title": lambda: mem.plans.start(f"Trip {s}", ["pack"]),
        "session": lambda: mem.session(f"s{s}"),
        "queue.add": lambda: mem.queue.add(f"t{s}", [{"role": "user", "content": "hi"}]),
        "queue.add content": lambda: mem.queue.add("t2", [{"role": "user", "content": f"hi {s}"}]),
        "queue.add tool": lambda: mem.queue.add("t2", [{"role": "user", "content": "hi", "name": s}]),
        "daily.append": lambda: mem.daily.append("Note", [f"tea {s}"]),
        "daily.append kind": lambda: mem.daily.append(f"Note {s}", ["tea"]),
        "core.write": lambda: mem.core.write(f"- tea {s}\n"),
        "for_scope": lambda: mem.for_scope(f"u{s}"),
        "export": lambda: mem.export(user_id=f"u{s}"),
        "inject": lambda: mem.format_for_injection(query=f"tea {s}"),
        "search since": lambda: mem.search("tea", since=f"2026-03-14{s}"),
    }


@pytest.mark.parametrize("name", SURROGATE_CALLS)
def test_a_lone_surrogate_is_one_typed_error_and_changes_nothing(filled: Memory, name: str) -> None:
    before_files, before_rows = state(filled.root), rows(filled)
    with pytest.raises(InvalidInput) as info:
        _calls(filled)[name]()
    message = one_line(info.value)
    assert any(w in message for w in ("not valid Unicode", "control or binary", "ISO-8601", "not allowed")), message
    assert filled.session("s2").messages == []
    assert state(filled.root) == before_files and rows(filled) == before_rows


def test_a_session_message_with_a_surrogate_is_journaled_without_it(filled: Memory) -> None:
    """A live session keeps what the agent gave it; the Daily record drops what UTF-8 cannot hold."""
    session = filled.session("s3")
    session.add("user", f"hello {SURROGATE}there")
    session.add("assistant", [{"type": "text", "text": f"ok{SURROGATE}"},
                              {"type": "tool_use", "id": f"t{SURROGATE}", "name": "look", "input": {"k": SURROGATE}}])
    session.end()
    text = filled.daily.path_for(filled.daily.today()).read_bytes().decode("utf-8")
    assert "- user: hello there\n" in text and "- assistant: ok\n" in text


@pytest.mark.parametrize("updates", [{"topOfMind": 5}, {"topOfMind": None}, {"topOfMind": f"busy {SURROGATE}"},
                                     {"topOfMind": "x" * 4001}, {"topOfMind": "a\x00b"}, ["topOfMind"]])
def test_bad_summaries_are_one_typed_error_and_change_nothing(filled: Memory, updates: Any) -> None:
    before = rows(filled)
    with pytest.raises(InvalidInput) as info:
        filled.facts.set_summaries(updates)
    one_line(info.value)
    assert rows(filled) == before


def test_a_user_id_with_a_surrogate_opens_nothing(root: Path) -> None:
    with pytest.raises(InvalidInput):
        Memory(root, user_id=f"u{SURROGATE}", embedder=HashEmbedder())
    assert not root.exists()


def test_a_search_query_with_a_surrogate_works_or_says_why(filled: Memory) -> None:
    try:
        hits = filled.search(f"green {SURROGATE} tea", min_score=0)
    except TiermemError as exc:
        one_line(exc)
    else:
        assert hits and hits[0].text == "Prefers green tea"


# --- files that are not UTF-8, JSON nested without end --------------------------------------------
def test_a_transcript_that_is_not_utf8_names_the_place(filled: Memory) -> None:
    raw = '{"role": "user", "content": "caf\u00e9"}\n'.encode() + b'{"role": "user", "content": "caf\xe9"}\n'
    with pytest.raises(InvalidInput) as info:
        read_transcript(raw, "chat.jsonl")
    assert one_line(info.value) == ("not UTF-8 text: chat.jsonl, byte 0xe9 at line 2, column 33 (save it as"
                                    " UTF-8 and try again)")


@pytest.mark.parametrize("text", [DEEP, '{"role": "user", "content": ' + DEEP + "}",
                                  '[{"role": "user", "content": [' + '{"a": ' * 70 + "1" + "}" * 70 + "]}]"])
def test_a_transcript_nested_too_deep_is_one_error(filled: Memory, text: str) -> None:
    with pytest.raises(InvalidInput) as info:
        read_transcript(text.encode(), "chat.json")
    assert "deeper than 64 levels" in one_line(info.value)


def test_an_import_nested_too_deep_is_one_error_and_writes_nothing(filled: Memory) -> None:
    data = filled.export()
    nested: Any = "x"
    for _ in range(10_000):  # deeper than the interpreter's stack: json.dumps would raise RecursionError
        nested = [nested]
    data["outbox"] = [{"thread_id": "t9", "user_id": "default", "agent_name": "default",
                       "messages": [{"role": "user", "content": "hi", "extra": nested}], "status": "pending",
                       "attempts": 0, "last_error": None, "enqueued_at": "2026-03-14T09:30:00.000000Z",
                       "not_before": "2026-03-14T09:30:00.000000Z"}]
    before_files, before_rows = state(filled.root), rows(filled)
    with pytest.raises(InvalidInput) as info:
        filled.import_(data)
    assert one_line(info.value) == "export section 'outbox' nests JSON deeper than 64 levels"
    assert state(filled.root) == before_files and rows(filled) == before_rows


def test_messages_nested_too_deep_are_refused_before_queueing(filled: Memory) -> None:
    nested: Any = {}
    for _ in range(5_000):
        nested = {"a": nested}
    with pytest.raises(InvalidInput):
        filled.queue.add("t3", [{"role": "user", "content": "hi", "tool_input": nested}])
    assert filled.queue.pending() == []
    session = filled.session("s3")
    with pytest.raises(InvalidInput):  # found by the fuzz tests: a RecursionError in copy.deepcopy
        session.add("user", [{"type": "tool_result", "tool_use_id": "x", "content": [nested]}])
    assert session.messages == []


# --- the CLI: exit 1, one line, nothing written ---------------------------------------------------
def invoke(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], env=ENV)


def error_line(result: Result) -> str:
    assert result.exit_code == 1, (result.exit_code, result.output, result.exception)
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    return lines[0]


@pytest.fixture
def cli_root(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    assert invoke(root, "remember", "Prefers green tea").exit_code == 0
    return root


@pytest.mark.parametrize("args", [
    ("search", "tea", "--until", "0001-01-01T00:00:00+14:00"),
    ("facts", "show", f"fact_{SURROGATE}"), ("facts", "delete", f"fact_{SURROGATE}"),
    ("facts", "edit", f"fact_{SURROGATE}", "--content", "x"), ("remember", f"tea {SURROGATE}"),
    ("note", f"tea {SURROGATE}"), ("note", "tea", "--kind", SURROGATE), ("plan", "show", f"plan_{SURROGATE}"),
    ("plan", "check", f"plan_{SURROGATE}", "0"), ("plan", "start", f"Trip {SURROGATE}", "pack"),
    ("--user", f"u{SURROGATE}", "facts", "list"),
])
def test_cli_bad_arguments_are_one_line(cli_root: Path, args: tuple[str, ...]) -> None:
    before = state(cli_root)
    error_line(invoke(cli_root, *args))
    assert state(cli_root) == before


def test_cli_search_until_the_end_of_the_calendar_works(cli_root: Path) -> None:
    result = invoke(cli_root, "search", "tea", "--until", "9999-12-31", "--min-score", "0", "--json")
    assert result.exit_code == 0, result.output
    assert [hit["text"] for hit in json.loads(result.stdout)] == ["Prefers green tea"]


@pytest.mark.parametrize(("command", "content", "expected"), [
    ("import", b'{"format": "tiermem-export", "version": 2, "x": "caf\xe9"}', "not UTF-8 text: export file"),
    ("import", DEEP.encode(), "nests JSON deeper than 64 levels"),
    ("import", b'{"format": "tiermem-export", "version": 1, "facts": ' + DEEP.encode() + b"}", "deeper than"),
    ("import", b'{"format": "tiermem-export", "version": 1, "facts": [{"id": "fact_\\ud800"}]}', "field 'id'"),
    ("ingest", b'{"role": "user", "content": "caf\xe9"}', "not UTF-8 text: "),
    ("ingest", DEEP.encode(), "nests JSON deeper than 64 levels"),
    ("ingest", ('{"role": "user", "content": ' + DEEP + "}").encode(), "line 1 nests JSON deeper"),
    ("ingest", b'{"role": "user", "content": "hi", "thread_id": "t\\udc80"}', "not valid Unicode"),
    ("ingest", b'{"role": "user", "content": "hi", "timestamp": "9999-12-31T23:59:59-14:00"}', "bad timestamp"),
])
def test_cli_bad_files_are_one_line_and_write_nothing(cli_root: Path, tmp_path: Path, command: str,
                                                      content: bytes, expected: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    before = state(cli_root)
    assert expected in error_line(invoke(cli_root, command, str(bad)))
    assert state(cli_root) == before


def test_cli_bad_file_on_a_missing_root_creates_no_store(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b"\xff\xfe")
    error_line(invoke(tmp_path / "mem", "ingest", str(bad)))
    error_line(invoke(tmp_path / "mem", "import", str(bad)))
    assert not (tmp_path / "mem").exists()


# --- MCP: a tool error, and the server answers the next call --------------------------------------
@pytest.mark.parametrize(("tool", "arguments"), [
    ("forget", {"id": f"fact_{SURROGATE}"}), ("remember", {"content": f"tea {SURROGATE}"}),
    ("daily_note", {"text": f"tea {SURROGATE}"}), ("plan_check", {"plan_id": f"plan_{SURROGATE}", "index": 0}),
    ("plan_pause", {"plan_id": f"plan_{SURROGATE}"}), ("plan_active", {"session_id": f"s{SURROGATE}"}),
    ("plan_start", {"title": "Trip", "checklist": ["pack"], "session_id": f"s{SURROGATE}"}),
])
def test_mcp_bad_ids_are_tool_errors_and_the_server_stays_up(filled: Memory, tool: str,
                                                             arguments: dict[str, Any]) -> None:
    async def main() -> None:
        with anyio.fail_after(30):
            async with Client(build_server(filled)) as client:
                result = await client.call_tool(tool, arguments)
                assert result.is_error
                text = str(result.content[0].text)  # type: ignore[union-attr]
                assert text.count("\n") == 0 and "InvalidInput" in text and "Traceback" not in text
                text.encode("utf-8")  # escaped: a JSON reply can carry it
                after = await client.call_tool("recall", {"query": "green tea", "min_score": 0})
                assert not after.is_error and after.structured_content is not None
                assert after.structured_content["hits"][0]["text"] == "Prefers green tea"

    before = rows(filled)
    anyio.run(main)
    assert rows(filled) == before
