"""Flush rules: [SCHEDULED] pairs stripped on every path; digests persisted, so a replay writes nothing twice."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.testing import FakeClock
from tiermem.tiers.flush import message_digest, prepare_flush, strip_scheduled
from tiermem.tiers.turns import to_message

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def open_memory(root: Path, clock: FakeClock) -> Memory:
    return Memory(root, llm="none", embedder="hash", clock=clock, timezone="UTC")


def records(mem: Memory) -> list[str]:
    return [line for line in mem.daily.read().splitlines() if line.startswith("- ")]


CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "content": "Book a table for two at 7pm"},
    {"role": "assistant", "content": "Booked at Casa Nova, 7pm."},
    {"role": "user", "content": "[SCHEDULED] daily check: any reminders due?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "reminders", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "none due"},
    {"role": "assistant", "content": "No reminders are due."},
    {"role": "user", "content": "Thanks! Also I am allergic to peanuts."},
    {"role": "assistant", "content": "Noted: peanut allergy."},
]


def test_scheduled_message_and_its_paired_reply_are_stripped() -> None:
    kept = strip_scheduled([to_message(m) for m in CONVERSATION])
    assert [m.text for m in kept] == [
        "Book a table for two at 7pm", "Booked at Casa Nova, 7pm.",
        "Thanks! Also I am allergic to peanuts.", "Noted: peanut allergy."]


def test_scheduled_turns_never_reach_the_daily_file(tmp_path: Path) -> None:
    with open_memory(tmp_path, FakeClock(START)) as mem:
        session = mem.session("s")
        for message in CONVERSATION:
            session.add_message(message)
        session.end()
        journal = mem.daily.read()
    assert "SCHEDULED" not in journal and "reminders" not in journal and "No reminders" not in journal
    assert records_of(journal) == [
        "- user: Book a table for two at 7pm", "- assistant: Booked at Casa Nova, 7pm.",
        "- user: Thanks! Also I am allergic to peanuts.", "- assistant: Noted: peanut allergy."]


def records_of(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("- ")]


def test_digest_is_md5_of_the_content_with_role_and_tool_ids() -> None:
    user = to_message({"role": "user", "content": "yes"})
    assistant = to_message({"role": "assistant", "content": "yes"})
    assert message_digest(user) == hashlib.md5(b"user\x1fyes\x1f|").hexdigest()
    assert message_digest(user) != message_digest(assistant)
    one = to_message({"role": "tool", "tool_call_id": "a", "content": "ok"})
    two = to_message({"role": "tool", "tool_call_id": "b", "content": "ok"})
    assert message_digest(one) != message_digest(two)


def test_prepare_flush_is_pure_and_skips_known_and_repeated_digests() -> None:
    messages = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"},
                {"role": "user", "content": "a"}]
    known = {message_digest(to_message(messages[1]))}
    asked: list[list[str]] = []

    def already(digests: list[str]) -> set[str]:
        asked.append(digests)
        return known & set(digests)

    batch = prepare_flush(messages, already)
    assert [m.text for m in batch.messages] == ["a"]
    assert batch.digests == [message_digest(to_message(messages[0]))]
    assert batch.duplicates_dropped == 2 and batch.scheduled_dropped == 0
    assert len(asked) == 1 and len(asked[0]) == 2  # each digest asked once


def test_dedup_survives_a_restart(tmp_path: Path) -> None:
    clock = FakeClock(START)
    history = [{"role": "user", "content": "My sister Ana lives in Porto."},
               {"role": "assistant", "content": "Good to know."}]
    with open_memory(tmp_path, clock) as mem:
        session = mem.session("chat-1")
        for message in history:
            session.add_message(message)
        session.end()
        assert len(records(mem)) == 2

    clock.advance(3600)
    with open_memory(tmp_path, clock) as mem:  # a new process replays the same thread
        session = mem.session("chat-1")
        for message in [*history, {"role": "user", "content": "She is a dentist."}]:
            session.add_message(message)
        session.end()
        assert records(mem) == ["- user: My sister Ana lives in Porto.", "- assistant: Good to know.",
                                "- user: She is a dentist."]
        assert mem.daily.read().count("## Session Notes") == 2


def test_hashes_belong_to_their_session(tmp_path: Path) -> None:
    with open_memory(tmp_path, FakeClock(START)) as mem:
        for sid in ("one", "two"):
            session = mem.session(sid)
            session.add("user", "Remind me to water the plants")
            session.end()
        assert records(mem) == ["- user: Remind me to water the plants"] * 2


def test_a_failed_write_keeps_the_messages_for_the_next_flush(tmp_path: Path) -> None:
    with open_memory(tmp_path, FakeClock(START)) as mem:
        session = mem.session("s")
        session.add("user", "Important: the wifi password is on the fridge")
        (tmp_path / "memory").mkdir()
        (tmp_path / "memory" / "2026-03-14.md").mkdir()  # a directory where the file should be
        session.end()  # the write fails and is logged; the messages are kept
        (tmp_path / "memory" / "2026-03-14.md").rmdir()
        session.add("user", "and the code is 4711")
        session.end()
        assert records(mem) == ["- user: Important: the wifi password is on the fridge",
                                "- user: and the code is 4711"]
