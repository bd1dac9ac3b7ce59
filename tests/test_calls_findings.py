"""Findings of issue 22 in the LLM call log, each with its test, on both backends."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tiermem import InvalidInput, Memory, ProviderError
from tiermem.calls import call_purpose, note_attempt, note_usage
from tiermem.cli.main import cli
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options

pytestmark = pytest.mark.usefixtures("backend")

GOOD_EXTRACTION = json.dumps({"user": None, "history": None, "factsToRemove": [], "newFacts": []})
TURNS = [{"role": "user", "content": "I drink green tea every morning."}]
# secrets only their names give away (no known key prefix): only a walk that reads "api_key": "..." finds them
NAMED = "hunter2-quokka-771"
DEEP = "Tr0ub4dor-and-3x"
PREFIXED = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def memory(root: Path, clock: FakeClock, replies: list[Any], **settings: Any) -> Memory:
    return Memory(root, llm=ScriptedChatModel(replies), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                  **settings)


def stored_text(mem: Memory) -> str:
    """Every row of the call log as text."""
    return repr([tuple(r) for r in mem.db.conn.execute("SELECT * FROM call_log").fetchall()])


# --- 2: tool calls and JSON inside strings are redacted ---------------------------------------------
def test_log_prompts_redacts_tool_calls_and_json_inside_strings(root: Path, clock: FakeClock) -> None:
    arguments = json.dumps({"api_key": NAMED, "config": json.dumps({"password": DEEP})})
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": "log in for me"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": f"login-{PREFIXED}", "arguments": arguments}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"token": {"api_key": NAMED}})},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "login",
                                           "input": {"api_key": NAMED, "note": f"key {PREFIXED}"}}]},
    ]
    reply = json.dumps({"tool": "login", "arguments": json.dumps({"api_key": NAMED})})
    with memory(root, clock, [reply], log_prompts=True) as mem:
        assert mem.llm is not None
        assert mem.llm.complete(messages) == reply  # the caller gets the reply as it was
        (row,) = mem.calls.list()
        everything = stored_text(mem)
    for secret in (NAMED, DEEP, PREFIXED):
        assert secret not in everything
    assert row.prompt is not None and row.completion is not None
    logged = json.loads(row.prompt)  # still JSON, the same shape, the strings that were JSON still JSON
    function = logged[1]["tool_calls"][0]["function"]
    assert function["name"] == "login-[REDACTED:openai_key]"
    args = json.loads(function["arguments"])
    assert args["api_key"] == "[REDACTED:secret]"
    assert json.loads(args["config"]) == {"password": "[REDACTED:password]"}
    assert json.loads(logged[2]["content"]) == {"token": {"api_key": "[REDACTED:secret]"}}
    assert logged[3]["content"][0]["input"] == {"api_key": "[REDACTED:secret]", "note": "key [REDACTED:openai_key]"}
    assert logged[0] == {"role": "user", "content": "log in for me"}
    assert json.loads(json.loads(row.completion)["arguments"]) == {"api_key": "[REDACTED:secret]"}


def test_a_reply_without_secrets_is_logged_as_it_came(root: Path, clock: FakeClock) -> None:
    reply = '{"b": 1,  "a": "x"}'  # key order and spacing kept: nothing was redacted
    with memory(root, clock, [reply], log_prompts=True) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "hi"}])
        (row,) = mem.calls.list()
    assert row.completion == reply


# --- 8: the retention is bounded; a failed clean-up changes nothing about the call -----------------
def refuse_deletes(mem: Memory) -> None:
    """A database that refuses to delete call-log rows (the clean-up fails, inserts still work)."""
    if mem.db.backend == "sqlite":
        statements = ["CREATE TRIGGER refuse_delete BEFORE DELETE ON call_log BEGIN "
                      "SELECT RAISE(ABORT, 'deletes refused'); END"]
    else:
        statements = ["CREATE FUNCTION refuse_delete() RETURNS trigger LANGUAGE plpgsql AS "
                      "$$ BEGIN RAISE EXCEPTION 'deletes refused'; END $$",
                      "CREATE TRIGGER refuse_delete BEFORE DELETE ON call_log FOR EACH STATEMENT "
                      "EXECUTE FUNCTION refuse_delete()"]
    with mem.db.transaction() as conn:
        for statement in statements:
            conn.execute(statement)


def test_a_failed_clean_up_still_marks_the_unusable_reply(root: Path, clock: FakeClock,
                                                            caplog: pytest.LogCaptureFixture) -> None:
    with memory(root, clock, ["old call", "not json", GOOD_EXTRACTION], call_log_retention_days=30) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "an old call"}])
        refuse_deletes(mem)
        clock.advance(timedelta(days=31).total_seconds())  # the old row is due for removal
        with caplog.at_level(logging.WARNING, logger="tiermem.calls.recorder"):
            mem.extract(TURNS)
        rows = mem.calls.list()
    assert [(r.purpose, r.outcome) for r in rows] == [("extraction", "ok"), ("extraction", "parse_failed"),
                                                      ("other", "ok")]
    assert rows[1].error and "JSON" in rows[1].error
    warnings = [r.getMessage() for r in caplog.records]
    assert any("could not remove old rows of the LLM call log" in w for w in warnings), warnings
    assert not any("could not write the LLM call log" in w for w in warnings), warnings


def test_an_extraction_reply_is_parse_failed_at_the_longest_retention(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["not json", GOOD_EXTRACTION], call_log_retention_days=36_500) as mem:
        mem.extract(TURNS)
        rows = mem.calls.list()
    assert [r.outcome for r in rows] == ["ok", "parse_failed"]


# --- 11: a since out of the calendar is bad input --------------------------------------------------
@pytest.mark.parametrize("since", ["999999d", "999999w", "0001-01-01T00:00:00+01:00",
                                   datetime(1, 1, 1, tzinfo=timezone(timedelta(hours=1)))])
def test_a_since_before_year_one_is_invalid_input(root: Path, clock: FakeClock, since: str | datetime) -> None:
    with memory(root, clock, ["x"]) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "hi"}])
        with pytest.raises(InvalidInput, match="since"):
            mem.calls.list(since=since)
        with pytest.raises(InvalidInput, match="since"):
            mem.calls.totals(since=since)
        assert len(mem.calls.list(since="9999d")) == 1  # 27 years back: fine


def test_cli_and_viewer_refuse_a_since_before_year_one(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["x"]) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "hi"}])
        with TestClient(build_app(mem, ui_options(8767), "csrf-0123456789abcdef0123456789"),
                        base_url="http://127.0.0.1:8767") as client:
            answer = client.get("/calls", params={"since": "999999d"})
    assert answer.status_code == 400 and "since" in answer.text
    result = CliRunner().invoke(cli, ["--root", str(root), "calls", "--since", "999999d"],
                                env={"TIERMEM_EMBEDDER": "hash"})
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: since") and "Traceback" not in result.output


# --- 20: the table at 80 columns -----------------------------------------------------------------
MODEL = "anthropic:claude-sonnet-4-5-20250929"
HEADERS = {"at (UTC)", "purpose", "model", "in/out", "ms", "outcome"}
OUTCOME_WORD = re.compile(r"(?<![\w-])(ok|retried|parse_failed|provider_error)(?![\w-])")


class RetriedModel:
    """A provider that reports its attempts: two failures, then a slow success with large token counts;
    every third call fails for good after three attempts."""

    model_id = MODEL

    def __init__(self) -> None:
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.calls += 1
        note_attempt(30_000.0, "timed out")
        note_attempt(30_000.0, "HTTP 529 overloaded")
        if self.calls % 3 == 0:
            note_attempt(30_000.0, "HTTP 529 overloaded")
            raise ProviderError("overloaded after 3 attempts")
        note_attempt(123_456.0)
        note_usage(123_456, 12_345, counted=True)
        return "done"


def model_cells(header: str, body: list[str]) -> list[str]:
    """The model column's text per row, its folded lines joined."""
    start = header.index("model")
    cells: list[str] = []
    for line in body:
        piece = line[start:].split()[0] if line[start:].strip() else ""
        if line[:start].strip():
            cells.append(piece)
        else:
            cells[-1] += piece
    return cells


@pytest.mark.parametrize("columns", [80, 60])
def test_calls_table_keeps_headers_and_outcomes_whole(root: Path, clock: FakeClock, columns: int) -> None:
    with Memory(root, llm=RetriedModel(), embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        assert mem.llm is not None
        for _ in range(9):  # 27 rows, 21 of them with an error note: up to "provider_error #3 [21]"
            with call_purpose("session_summary"), contextlib.suppress(ProviderError):
                mem.llm.complete([{"role": "user", "content": "summarise"}])
        rows = mem.calls.list()
    result = CliRunner().invoke(cli, ["--root", str(root), "calls"],
                                env={"TIERMEM_EMBEDDER": "hash", "COLUMNS": str(columns)})
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= columns, result.stdout
    rule = next(i for i, line in enumerate(lines) if "───" in line)
    end = next(i for i in range(rule + 1, len(lines)) if not lines[i].strip())
    header, body = lines[rule - 1], lines[rule + 1:end]
    shown = set(re.split(r"\s{2,}", header.strip()))
    assert {"model", "outcome"} <= shown <= HEADERS, result.stdout  # every header whole
    table = "\n".join(body)
    assert OUTCOME_WORD.findall(table) == [r.outcome for r in rows], result.stdout  # whole, one per row
    assert re.findall(r"\[\d+\]", table) == [f"[{n}]" for n in range(1, 22)], result.stdout
    assert len(re.findall(r"(?<!\S)#[23](?!\S)", table)) == 18
    assert model_cells(header, body) == [MODEL] * len(rows)  # folded, not cut
    if "purpose" in shown:
        assert table.count("session_summary") == len(rows)
    if columns == 80:
        assert shown == HEADERS - {"ms"} and table.count("123456/12345*") == 6
    left_out = ", ".join(h for h in ("at (UTC)", "purpose", "model", "in/out", "ms", "outcome") if h not in shown)
    assert f"(left out at this width: {left_out}; --json has every field)" in " ".join(result.stdout.split())
