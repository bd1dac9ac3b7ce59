"""The Deep Dream reads its window within ``dream_input_tokens``, newest records first (issue 13):
a lossless long day never fails the nightly run, and what it left out is never marked consolidated."""

from __future__ import annotations

from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import NOW, YESTERDAY, open_memory
from hypothesis import given, settings
from hypothesis import strategies as st

from tiermem import Memory
from tiermem.dream.prompt import DailySource, day_header
from tiermem.dream.window import fit_to_budget
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.tiers.markdown import parse_records, render_record
from tiermem.tokens import count_tokens

DAY = date(2026, 3, 14)
FILLER = "We compared the options at length, weighing the costs, the schedule and the risks once more. "


def _day(day: date, records: list[str]) -> DailySource:
    body = "".join(f"## Conversation (0{i % 10}:00)\n" * (i % 7 == 0) + render_record(r) + "\n"
                   for i, r in enumerate(records))
    return DailySource(day, f"# Daily Memory: {day.isoformat()}\n\n{body}")


def _daily_part(request: list[dict[str, Any]]) -> str:
    """The Daily text of a dream request (between its DAILY RECORDS line and the closing line)."""
    user = request[1]["content"]
    return user.split("DAILY RECORDS\n", 1)[1].rsplit("Reply with", 1)[0]


# --- the selection, as a pure function -----------------------------------------------------------
def test_everything_within_the_budget_is_read_whole() -> None:
    days = [_day(DAY - timedelta(days=1), ["user: a", "assistant: b"]), _day(DAY, ["user: c"])]
    read = fit_to_budget(days, 12_000)
    assert read.dailies == days and read.whole_days == [d.day for d in days]
    assert read.left_out == 0 and read.partial_days == [] and read.note(12_000) == ""


def test_a_long_day_keeps_its_newest_records_within_the_budget() -> None:
    records = [f"user: record {i}. {FILLER * 5}" for i in range(500)]
    older = _day(DAY - timedelta(days=1), ["user: yesterday's only record"])
    today = _day(DAY, records)
    assert len(today.text.encode()) > 200_000
    read = fit_to_budget([older, today], 12_000)
    (sent,) = read.dailies
    assert sent.day == DAY and read.tokens <= 12_000
    assert count_tokens(day_header(DAY)) + count_tokens(sent.text) <= 12_000
    assert "record 499." in sent.text and "record 0." not in sent.text
    kept = [r for r in parse_records(sent.text) if r.text.startswith("user: record")]
    assert [r.text for r in kept] == records[-len(kept):] and len(kept) > 20
    assert read.left_out == 500 - len(kept) + 1  # the older day's record too
    assert read.partial_days == [DAY - timedelta(days=1), DAY] and read.whole_days == []
    assert sent.text.startswith(f"[… {500 - len(kept)} earlier record(s) of this day left out")
    assert sent.text.split("\n")[1].startswith("## Conversation (")  # the block heading of the first record read


def test_a_record_over_the_whole_budget_is_cut_visibly() -> None:
    huge = "user: I adopted a dog named Rex. " + FILLER * 1200
    read = fit_to_budget([_day(DAY, ["user: earlier", huge])], 2_000)
    (sent,) = read.dailies
    assert "I adopted a dog named Rex." in sent.text and "characters of this record omitted" in sent.text
    assert count_tokens(sent.text) <= 2_000 and read.left_out == 2 and read.partial_days == [DAY]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.lists(st.integers(1, 60), min_size=1, max_size=12), min_size=1, max_size=4),
       budget=st.integers(80, 1500))
def test_the_selection_is_always_the_newest_suffix(sizes: list[list[int]], budget: int) -> None:
    days = [_day(DAY - timedelta(days=n), [f"note {n}-{i} " + "word " * size for i, size in enumerate(day)])
            for n, day in enumerate(sizes)]
    read = fit_to_budget(days, budget)
    total = sum(len(d) for d in sizes)
    sent_records = [r.text for d in read.dailies for r in parse_records(d.text) if r.text.startswith("note ")]
    newest = f"note 0-{len(sizes[0]) - 1} "
    assert any(r.startswith(newest) for r in sent_records) or any(newest in d.text for d in read.dailies)
    whole_sent = [r for r in sent_records if not any("omitted" in d.text and r in d.text for d in read.dailies)]
    assert read.left_out == total - len(whole_sent)
    ordered = [f"note {n}-{i} " for n in reversed(range(len(sizes))) for i in range(len(sizes[n]))]
    assert [r.split("word")[0] for r in whole_sent] == ordered[len(ordered) - len(whole_sent):]
    if not any("omitted" in d.text for d in read.dailies):
        assert read.tokens <= budget
    assert set(read.whole_days).isdisjoint(read.partial_days)
    assert sorted([*read.whole_days, *read.partial_days]) == sorted(d.day for d in days)


# --- the nightly run -----------------------------------------------------------------------------
@pytest.mark.usefixtures("backend")
def test_a_200kb_day_is_one_call_within_the_budget_holding_the_newest_records(tmp_path: Path,
                                                                               clock: FakeClock) -> None:
    reply = "[MEMORY]\n- The final decision is to move to Porto in May.\n[DREAM]\nRead the newest records.\n"
    mem, llm = open_memory(tmp_path / "m", clock, [reply])
    with mem:
        mem.daily.append("Session Notes", ["user: yesterday's plan was Lyon"], at=YESTERDAY)
        for block in range(10):
            mem.daily.append("Conversation", [f"user: block {block} record {i}. {FILLER * 4}" for i in range(50)],
                             at=NOW - timedelta(hours=2) + timedelta(minutes=block))
        mem.daily.append("Conversation", ["user: The final decision is to move to Porto in May."], at=NOW)
        assert len(mem.daily.read().encode()) > 200_000
        result = mem.deep_dream(lookback_days=2)
        assert result.written, result.reason
        assert len(llm.requests) == 1
        daily = _daily_part(llm.requests[0].messages)
        assert count_tokens(daily) <= mem.settings.dream_input_tokens == 12_000
        assert "move to Porto in May" in daily and "block 9 record 49." in daily
        assert "block 0 record 0." not in daily and "yesterday's plan" not in daily
        read = sum(1 for r in parse_records(daily) if r.text.startswith("user: "))
        assert 100 < read < 500 and result.left_out == 502 - read
        assert result.partial_days == [YESTERDAY.date().isoformat(), NOW.date().isoformat()]
        assert "older record(s)" in result.reason
        diary = (mem.root / result.diary_path).read_text(encoding="utf-8") if result.diary_path else ""
        assert f"Left out: {result.left_out} older record(s)" in diary
        assert mem.daily.consolidated_days() == []  # retention must not delete what no dream read


@pytest.mark.usefixtures("backend")
def test_a_100k_character_message_does_not_fail_the_dream(tmp_path: Path, clock: FakeClock) -> None:
    reply = "[MEMORY]\n- Adopted a dog named Rex.\n[DREAM]\nA dog.\n"
    mem, llm = open_memory(tmp_path / "m", clock, [reply], dream_input_tokens=4000)
    with mem:
        message = "user: I adopted a dog named Rex. " + FILLER * 1100
        assert len(message) > 100_000
        mem.daily.append("Conversation", [message], at=NOW)
        result = mem.deep_dream()
        assert result.written and result.left_out == 1 and result.partial_days == [NOW.date().isoformat()]
        daily = _daily_part(llm.requests[0].messages)
        assert "characters of this record omitted" in daily and count_tokens(daily) <= 4000
        assert mem.daily.consolidated_days() == []


@pytest.mark.usefixtures("backend")
def test_days_read_whole_are_consolidated_but_not_one_appended_meanwhile(tmp_path: Path, clock: FakeClock) -> None:
    reply = "[MEMORY]\n- Accepted an offer from Siemens.\n- Moving to Munich.\n[DREAM]\nok\n"

    class AppendingModel(ScriptedChatModel):
        def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
            mem.daily.append("Conversation", ["user: a message that arrived while the dream ran"], at=NOW)
            return super().complete(messages, json_schema=json_schema)

    llm = AppendingModel([reply])
    with Memory(tmp_path / "m", llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Session Notes", ["user: I accepted an offer from Siemens."], at=YESTERDAY)
        mem.daily.append("Session Notes", ["user: We are moving to Munich."], at=NOW)
        result = mem.deep_dream(lookback_days=2)
        assert result.written and result.left_out == 0
        assert mem.daily.consolidated_days() == [YESTERDAY.date()]  # today changed after it was read
