"""Reading coding agents' transcripts (issue 23): what each client's lines mean (fixtures recorded
from the real clients, tests/fixtures/agents/), and the incremental reader — a cursor, lines still
being written, malformed and over-long lines, replaced files, rewritten messages, bounded memory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tiermem.agents.clients import client
from tiermem.agents.transcript import Cursor, TranscriptRead, read_transcript
from tiermem.errors import InvalidInput, NotFound

FIXTURES = Path(__file__).parent / "fixtures" / "agents"


def read(name: str, path: Path, cursor: Cursor | None = None, **limits: Any) -> TranscriptRead:
    agent = client(name)
    return read_transcript(path, cursor or Cursor(), agent.transcript_line, line_key=agent.transcript_key, **limits)


def texts(messages: list[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False)


def user(text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"


def assistant(text: str) -> str:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return json.dumps({"type": "assistant", "message": message}) + "\n"


# --- what the clients' lines mean -----------------------------------------------------------------

def test_claude_code_transcript_keeps_the_conversation_and_its_tool_calls() -> None:
    found = read("claude-code", FIXTURES / "claude-code" / "tool-resume-compact.jsonl")
    assert found.bad_lines == 0 and found.end.messages == 10
    assert found.messages[:4] == [
        {"role": "user", "content": "Remember that I indent with tabs"},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "mcp__tiermem__remember",
                                           "input": {"content": "The user indents with tabs",
                                                     "category": "preference"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content":
                                      '{"status":"skipped","reason":"duplicate of fact_0020643e",'
                                      '"content":"The user indents with tabs"}'}]},
        {"role": "assistant", "content": [{"type": "text", "text": "Saved."}]}]
    assert [m["content"] for m in found.messages[8:]] == ["third prompt",
                                                          [{"type": "text", "text": "Hello from the fake"}]]
    shown = texts(found.messages)
    for left_out in ("CTX-", "This session is being continued", "<command-name>", "local-command", "Caveat",
                     "No response requested", "Continue from where you left off"):
        assert left_out not in shown  # injected context, compaction summary, slash commands, synthetic replies


def test_claude_code_leaves_out_thinking_side_chains_and_media_data() -> None:
    line = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "secret plan", "signature": "x"},
        {"type": "redacted_thinking", "data": "zzz"},
        {"type": "text", "text": "Done."}]}}
    agent = client("claude-code")
    assert agent.transcript_line(line) == [{"role": "assistant", "content": [{"type": "text", "text": "Done."}]}]
    assert agent.transcript_line({**line, "isSidechain": True}) == []
    picture = {"type": "user", "message": {"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "data": "iVBORw0KGgo" * 1000}},
        {"type": "text", "text": "see"}]}}
    assert agent.transcript_line(picture) == [{"role": "user", "content": [{"type": "text", "text": "[image]"},
                                                                          {"type": "text", "text": "see"}]}]
    only_thinking = {"type": "assistant",
                     "message": {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm"}]}}
    assert agent.transcript_line(only_thinking) == []


def test_codex_rollout_keeps_the_conversation_and_leaves_out_what_codex_added() -> None:
    found = read("codex", FIXTURES / "codex" / "mcp-tool-call.jsonl")
    assert found.bad_lines == 0
    assert found.messages[0] == {"role": "user", "content": "Remember that I indent with tabs"}
    call = found.messages[1]["tool_calls"][0]
    assert call["id"] == "call_1" and call["function"]["name"] == "mcp__tiermem__remember"
    assert found.messages[2]["role"] == "tool" and found.messages[2]["tool_call_id"] == "call_1"
    assert found.messages[3] == {"role": "assistant", "content": "Saved."}
    compacted = read("codex", FIXTURES / "codex" / "compaction.jsonl")
    assert [m["role"] for m in compacted.messages] == ["user", "assistant", "tool", "assistant"]
    shown = texts(found.messages + compacted.messages)
    for left_out in ("CTX-", "environment_context", "skills_instructions", "permissions instructions", "SUMMARY:",
                     "Another language model"):
        assert left_out not in shown


def test_codex_context_messages_are_recognised_without_provenance_metadata() -> None:
    agent = client("codex")
    for text in ("<environment_context>\n  <cwd>/x</cwd>\n</environment_context>",
                 "# AGENTS.md instructions for /repo\n\n<INSTRUCTIONS>\nUse tabs\n</INSTRUCTIONS>",
                 "<user_instructions>be brief</user_instructions>",
                 "<turn_aborted>\nThe user interrupted.\n</turn_aborted>",
                 "<some_future_notice>anything</some_future_notice>",
                 "Memory from tiermem: what earlier sessions taught ..."):
        line = {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                     "content": [{"type": "input_text", "text": text}]}}
        assert agent.transcript_line(line) == [], text
    said = {"type": "response_item", "payload": {"type": "message", "role": "user",
                                                 "content": [{"type": "input_text", "text": "<b>bold</b> please"}]}}
    assert agent.transcript_line(said) == [{"role": "user", "content": "<b>bold</b> please"}]


def test_gemini_chat_file_strips_our_context_and_reads_a_rewritten_message_once() -> None:
    hello = read("gemini", FIXTURES / "gemini" / "hello.jsonl")
    assert hello.messages == [{"role": "user", "content": "hello"},
                              {"role": "assistant", "content": "Hello from the fake"}]
    tool = read("gemini", FIXTURES / "gemini" / "mcp-tool-call.jsonl")
    assert [m["role"] for m in tool.messages] == ["user", "assistant", "tool", "assistant"]
    assert tool.messages[0] == {"role": "user", "content": "Remember that I indent with tabs"}
    assert tool.messages[1]["tool_calls"][0]["function"]["name"] == "mcp_tiermem_remember"
    assert "session_context" not in texts(tool.messages) and "CTX-" not in texts(tool.messages)


def test_a_message_rewritten_in_a_later_read_gives_only_what_it_added(tmp_path: Path) -> None:
    path = tmp_path / "chat.jsonl"
    first = {"id": "m1", "type": "gemini", "content": "Let me look."}
    hi = {"id": "u1", "type": "user", "content": [{"text": "hi"}]}
    path.write_text(json.dumps(hi) + "\n" + json.dumps(first) + "\n")
    one = read("gemini", path)
    assert [m["content"] for m in one.messages] == ["hi", "Let me look."]
    call = {"id": "c1", "name": "read_file", "args": {"path": "a.py"}}
    with path.open("a") as handle:
        handle.write(json.dumps({**first, "toolCalls": [call]}) + "\n")
        handle.write(json.dumps({**first, "toolCalls": [call, {**call, "id": "c2"}]}) + "\n")
    two = read("gemini", path, one.end)
    assert [m["tool_calls"][0]["id"] for m in two.messages] == ["c1", "c2"]
    assert two.start.messages == 2 and two.end.messages == 4


# --- the incremental reader -----------------------------------------------------------------------

def test_a_transcript_read_in_two_parts_gives_what_one_read_gives(tmp_path: Path) -> None:
    source = (FIXTURES / "claude-code" / "tool-resume-compact.jsonl").read_bytes()
    whole = read("claude-code", FIXTURES / "claude-code" / "tool-resume-compact.jsonl")
    lines = source.splitlines(keepends=True)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"".join(lines[:20]))
    first = read("claude-code", path)
    with path.open("ab") as handle:
        handle.write(b"".join(lines[20:]))
    second = read("claude-code", path, first.end)
    assert second.start == first.end and not second.restarted
    assert first.messages + second.messages == whole.messages
    assert second.end.messages == whole.end.messages and second.end.offset == len(source)
    again = read("claude-code", path, second.end)
    assert again.messages == [] and again.end == second.end


def test_a_line_still_being_written_waits_for_the_next_read(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    whole = user("a complete line")
    partial = assistant("the reply being written")
    path.write_text(whole + partial[:25])
    first = read("claude-code", path)
    assert [m["content"] for m in first.messages] == ["a complete line"]
    assert first.end.offset == len(whole) and first.bad_lines == 0
    with path.open("a") as handle:
        handle.write(partial[25:])
    second = read("claude-code", path, first.end)
    assert second.messages == [{"role": "assistant", "content": [{"type": "text", "text": "the reply being written"}]}]
    assert second.end.messages == 2


@pytest.mark.parametrize("garbage", ["not json at all", "[1, 2, 3]", '"a string"', '{"type": "user", "message": 7',
                                     '{"type": "user", "message": {"role": "user", "content": {"x": 1}}}',
                                     "\ufffd\x00\x01", '{"a": ' * 5000 + "1" + "}" * 5000])
def test_a_malformed_line_is_skipped_and_counted(tmp_path: Path, garbage: str) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(user("before") + garbage + "\n" + user("after"), encoding="utf-8", errors="surrogateescape")
    found = read("claude-code", path)
    assert [m["content"] for m in found.messages] in (["before", "after"],)
    assert found.lines == 3 and found.end.messages == 2
    assert found.bad_lines == (0 if garbage.startswith('{"type": "user", "message": {') else 1)


def test_a_line_over_the_limit_is_skipped_unread(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    huge = user("x" * 5000)
    path.write_text(user("before") + huge + user("after"))
    found = read("claude-code", path, max_line_bytes=1000)
    assert [m["content"] for m in found.messages] == ["before", "after"]
    assert (found.long_lines, found.bad_lines, found.lines) == (1, 0, 3)
    path.write_text(user("before") + huge[:3000])  # a long line still being written
    cut = read("claude-code", path, max_line_bytes=1000)
    assert cut.long_lines == 0 and cut.end.offset == len(user("before"))


def test_a_replaced_or_shrunk_transcript_is_read_again_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text(user("one") + user("two"))
    first = read("claude-code", path)
    path.write_text(user("ONE") + user("two") + user("three"))  # longer, other first line
    replaced = read("claude-code", path, first.end)
    assert replaced.restarted and replaced.start == Cursor()
    assert [m["content"] for m in replaced.messages] == ["ONE", "two", "three"]
    path.write_text(user("one"))
    shrunk = read("claude-code", path, replaced.end)
    assert shrunk.restarted and [m["content"] for m in shrunk.messages] == ["one"]


def test_a_read_stops_at_its_batch_limit_and_the_next_one_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_text("".join(user(f"message {i}") for i in range(25)))
    cursor, seen = Cursor(), []
    for _ in range(3):
        batch = read("claude-code", path, cursor, max_messages=10)
        seen += [m["content"] for m in batch.messages]
        assert batch.start.messages == cursor.messages
        cursor = batch.end
    assert seen == [f"message {i}" for i in range(25)] and not batch.more


def test_a_missing_transcript_and_a_fifo_are_typed_errors(tmp_path: Path) -> None:
    with pytest.raises(NotFound):
        read("claude-code", tmp_path / "nope.jsonl")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="not a regular file"):
        read("claude-code", fifo)
    with pytest.raises(InvalidInput, match="not a regular file"):
        read("claude-code", tmp_path)


_READ_HUGE = """
import resource, sys, tracemalloc
from pathlib import Path
from tiermem.agents.clients import client
from tiermem.agents.transcript import Cursor, read_transcript

agent = client("claude-code")
cursor, messages, long_lines = Cursor(), 0, 0
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
tracemalloc.start()
while True:
    found = read_transcript(Path(sys.argv[1]), cursor, agent.transcript_line)
    messages += len(found.messages)
    long_lines += found.long_lines
    cursor = found.end
    if not found.more:
        break
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(messages, long_lines, cursor.offset, (after - before) // 1024, tracemalloc.get_traced_memory()[1] // 2**20)
"""


def test_a_100_mb_transcript_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    with path.open("w") as handle:
        for i in range(10):
            handle.write(user("y" * (9 * 1024 * 1024)))  # over the 8 MB line limit: skipped unread
            handle.write("".join(user(f"message {i}.{j} " + "z" * 900) for j in range(1000)))
    size = path.stat().st_size
    assert size > 100_000_000
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_READ_HUGE), str(path)],
                          capture_output=True, text=True, timeout=300, check=True)
    messages, long_lines, offset, grown_mb, peak_mb = map(int, done.stdout.split())
    assert (messages, long_lines, offset) == (10_000, 10, size)
    assert grown_mb < 64, f"peak RSS grew by {grown_mb} MB"
    assert peak_mb < 32, f"{peak_mb} MB allocated at the peak"  # a line up to the 8 MB limit, one batch
