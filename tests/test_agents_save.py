"""Saving a coding session (issue 23, R73): the transcript's new messages are journaled once each in
the project scope at their transcript positions and queued for extraction (no LLM call, no queue
thread), the cursor moves last, and a re-read after a crash, a replaced transcript or a second
hook for the same turn changes nothing."""

from __future__ import annotations

import json
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from queue_helpers import extraction, refresh_mirror

from tiermem import Memory
from tiermem.agents.save import cap_tool_output, conversation_id, save_transcript
from tiermem.agents.session_state import SessionState, state_path
from tiermem.errors import InvalidInput, StorageError
from tiermem.queue.process import conversation_journal
from tiermem.storage.journal import FlushHashRepository
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.tiers.conversation import numbered
from tiermem.tiers.markdown import parse_records
from tiermem.tiers.turns import to_message

pytestmark = pytest.mark.usefixtures("backend")
FIXTURES = Path(__file__).parent / "fixtures" / "agents"
PROJECT, AGENT, SESSION = "project-0123456789abcdef", "coding", "7938e26c-0a86-4576-8b54-801445704ec7"
THREAD = f"claude-code-{SESSION}"


def user(text: str) -> str:
    return json.dumps({"type": "user", "message": {"role": "user", "content": text}}) + "\n"


def assistant(text: str) -> str:
    message = {"role": "assistant", "content": [{"type": "text", "text": text}]}
    return json.dumps({"type": "assistant", "message": message}) + "\n"


def turns(start: int, count: int) -> str:
    return "".join(user(f"question {i} about topic {i * 3}") + assistant(f"answer {i} on topic {i * 3}")
                   for i in range(start, start + count))


@pytest.fixture
def project(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, llm=ScriptedChatModel([]), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                user_id=PROJECT, agent_name=AGENT, queue_replay=False, shutdown_flush_seconds=0) as mem:
        yield mem


def save(project: Memory, transcript: Path, **options: Any) -> tuple[Any, SessionState]:
    state = SessionState.load(project.root, "claude-code", SESSION)
    report = save_transcript(project, "claude-code", SESSION, transcript, state, **options)
    return report, SessionState.load(project.root, "claude-code", SESSION)


def texts(root: Path) -> list[str]:
    """The records of the project scope's Daily files."""
    refresh_mirror(root)
    return [r.text for path in sorted((root / "users" / PROJECT).glob("memory/*.md"))
            for r in parse_records(path.read_text())]


def test_a_save_journals_the_new_messages_once_and_queues_them(project: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "tool-resume-compact.jsonl", transcript)
    report, state = save(project, transcript)
    assert (report.conversation, report.first_position, report.read, report.journaled) == (THREAD, 0, 10, 10)
    assert state.cursor.offset == transcript.stat().st_size and state.cursor.messages == 10
    journal = texts(project.root)
    assert journal.count("user: Remember that I indent with tabs") == 1 and journal.count("user: third prompt") == 1
    assert not any("CTX-" in line for line in journal)
    (item,) = OutboxRepository(project.db).items()
    assert (item.thread_id, item.scope.user_id, item.first_position, len(item.messages)) == (THREAD, PROJECT, 0, 10)
    assert project.llm.requests == []  # type: ignore[union-attr]  # no model call in a save
    again, _ = save(project, transcript)
    assert (again.read, again.journaled) == (0, 0)
    assert len(texts(project.root)) == len(journal)


def test_a_second_slice_is_journaled_at_its_positions_and_merges_into_the_queued_item(project: Memory,
                                                                                      tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(turns(0, 5))
    save(project, transcript)
    with transcript.open("a") as handle:
        handle.write(turns(5, 5))
    report, state = save(project, transcript)
    assert (report.first_position, report.read, report.journaled) == (10, 10, 10)
    (item,) = OutboxRepository(project.db).items()
    assert (item.first_position, len(item.messages)) == (0, 20)
    whole = numbered(to_message(m) for _, m in item.positioned())  # the thread from 0: each at its position
    writer = conversation_journal(project, FlushHashRepository(project.db))
    assert writer.write(THREAD, "Conversation", whole).written == 0
    journal = texts(project.root)
    assert len(journal) == 20 and len(set(journal)) == 20


def test_each_slice_is_extracted_once_by_the_queue(root: Path, clock: FakeClock, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(turns(0, 3))
    model = ScriptedChatModel([extraction("Topic zero matters"), extraction("Topic nine matters")])
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=PROJECT,
                agent_name=AGENT, queue_replay=False, shutdown_flush_seconds=0, extract_min_turns=1) as mem:
        save(mem, transcript)
        assert model.requests == []
        assert mem.queue.flush(timeout=20)
        with transcript.open("a") as handle:
            handle.write(turns(3, 2))
        save(mem, transcript)
        assert mem.queue.flush(timeout=20)
        assert len(model.requests) == 2
        assert "question 0 " in model.requests[0].text and "question 3 " not in model.requests[0].text
        assert "question 3 " in model.requests[1].text and "question 0 " not in model.requests[1].text
        assert {f.content for f in mem.facts.list()} == {"Topic zero matters", "Topic nine matters"}
    journal = texts(root)
    assert len(journal) == 10 and len(set(journal)) == 10


def test_a_crash_before_the_queue_or_the_cursor_is_repaired_by_the_next_save(project: Memory, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(turns(0, 3))
    real_put = OutboxRepository.put

    def fail(*args: Any, **kwargs: Any) -> int:
        raise StorageError("disk full")

    monkeypatch.setattr(OutboxRepository, "put", fail)
    with pytest.raises(StorageError):
        save(project, transcript)
    assert SessionState.load(project.root, "claude-code", SESSION).cursor.offset == 0  # the cursor moves last
    monkeypatch.setattr(OutboxRepository, "put", real_put)
    real_save = SessionState.save
    monkeypatch.setattr(SessionState, "save", lambda self: fail())
    with pytest.raises(StorageError):
        save(project, transcript)
    monkeypatch.setattr(SessionState, "save", real_save)
    report, state = save(project, transcript)
    assert (report.read, report.journaled, state.cursor.messages) == (6, 0, 6)
    (item,) = OutboxRepository(project.db).items()
    assert (item.first_position, len(item.messages)) == (0, 6)
    journal = texts(project.root)
    assert len(journal) == 6 and len(set(journal)) == 6


def test_a_replaced_transcript_is_read_again_without_journaling_twice(project: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(turns(0, 3))
    save(project, transcript)
    rewritten = "".join(json.dumps(json.loads(line), separators=(",", ":")) + "\n" for line in turns(0, 4).splitlines())
    transcript.write_text(rewritten)  # the same conversation written again (other bytes), one turn more
    report, state = save(project, transcript)
    assert report.restarted and (report.first_position, report.read, report.journaled) == (0, 8, 2)
    transcript.write_text(turns(0, 1))  # shrunk
    shrunk, _ = save(project, transcript)
    assert shrunk.restarted and (shrunk.read, shrunk.journaled) == (2, 0)
    journal = texts(project.root)
    assert len(journal) == 8 and len(set(journal)) == 8


def test_tool_output_is_capped_and_secrets_are_redacted(root: Path, clock: FakeClock, tmp_path: Path) -> None:
    key = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4"
    result = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "line\n" * 3000}]}}
    call = {"type": "assistant", "message": {"role": "assistant", "content": [
        {"type": "tool_use", "id": "toolu_9", "name": "Read", "input": {"path": "a.py"}}]}}
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(user(f"my key is {key}") + json.dumps(call) + "\n" + json.dumps(result) + "\n")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=PROJECT, agent_name=AGENT,
                queue_replay=False, shutdown_flush_seconds=0, tool_result_max_chars=100) as mem:
        save(mem, transcript)
        (item,) = OutboxRepository(mem.db).items()
        stored = json.dumps(item.messages)
        assert key not in stored and "[REDACTED" in stored
        assert "characters omitted" in item.messages[2]["content"][0]["content"]  # type: ignore[index]
        assert len(item.messages[2]["content"][0]["content"]) < 200  # type: ignore[index]
    journal = "\n".join(texts(root))
    assert key not in journal and "characters omitted" in journal


def test_a_capped_tool_result_says_how_much_of_the_original_was_left_out(root: Path, clock: FakeClock,
                                                                          tmp_path: Path) -> None:
    result = {"type": "user", "message": {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": "ledgerd " * 125}]}}  # 1000 characters
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(user("list the services") + json.dumps(result) + "\n")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=PROJECT, agent_name=AGENT,
                queue_replay=False, shutdown_flush_seconds=0, tool_result_max_chars=200) as mem:
        save(mem, transcript)
        (item,) = OutboxRepository(mem.db).items()
        queued = item.messages[1]["content"][0]["content"]  # type: ignore[index]
    cut = "ledgerd " * 25 + " [… 800 characters omitted]"
    assert queued == cut
    assert [text for text in texts(root) if "ledgerd" in text] == [f"tool result (toolu_9): {cut}"]  # cut once


def test_a_message_that_cannot_be_kept_is_skipped_and_keeps_its_position(project: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(user("before") + user("x" * 250_000) + user("after") + "garbage\n")
    report, state = save(project, transcript)
    assert (report.read, report.skipped, report.queued, report.bad_lines) == (3, 1, 2, 1)
    (item,) = OutboxRepository(project.db).items()
    assert item.positioned() == [(0, {"role": "user", "content": "before"}), (2, {"role": "user", "content": "after"})]
    assert texts(project.root) == ["user: before", "user: after"]


def test_a_missing_transcript_saves_nothing_and_keeps_the_cursor(project: Memory, tmp_path: Path) -> None:
    report, state = save(project, tmp_path / "not-yet.jsonl")
    assert report.missing and report.read == 0 and state.cursor.offset == 0
    assert OutboxRepository(project.db).items() == []
    with pytest.raises(InvalidInput):
        save(project, tmp_path)  # a folder is no transcript


def test_a_save_stops_between_batches_when_its_time_is_up(project: Memory, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    transcript.write_text(turns(0, 600))  # 1200 messages: two batches
    report, state = save(project, transcript, until=0.0)
    assert report.more and report.read == 1000 and state.cursor.messages == 1000
    rest, state = save(project, transcript)
    assert (rest.first_position, rest.read, rest.more) == (1000, 200, False)


def test_session_state_file_is_private_and_a_corrupt_one_is_a_fresh_start(root: Path) -> None:
    state = SessionState.load(root, "claude-code", SESSION)
    state.given.update({"fact_0123abcd", "default:memory/2026-03-14.md#3"})
    state.save()
    path = state_path(root, "claude-code", SESSION)
    assert path == root / "agents" / "sessions" / f"{THREAD}.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert SessionState.load(root, "claude-code", SESSION).given == state.given
    path.write_text("{not json")
    assert SessionState.load(root, "claude-code", SESSION).given == set()
    odd = state_path(root, "codex", "../../etc/passwd")
    assert odd.parent == path.parent and ".." not in odd.name


def test_conversation_ids_are_checked() -> None:
    assert conversation_id("codex", "01a2") == "codex-01a2"
    with pytest.raises(InvalidInput):
        conversation_id("codex", "bad\nid")


def test_cap_tool_output_cuts_results_and_arguments_only() -> None:
    long = "z" * 50
    message = {"role": "assistant", "content": long, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "w", "arguments": long}}]}
    capped = cap_tool_output(message, 10)
    assert capped["content"] == long and capped["tool_calls"][0]["function"]["arguments"].startswith("z" * 10 + " [")
    assert cap_tool_output({"role": "tool", "tool_call_id": "c", "content": long}, 10)["content"].endswith("omitted]")
