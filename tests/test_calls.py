"""The LLM call log (issue 17) through the pipelines, with the scripted model: every purpose, the
outcomes, tokens, prices, retention, prompt texts only with ``log_prompts``, purge, and that a log
that cannot be written never fails a call. Both backends."""

from __future__ import annotations

import json
import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from dream_helpers import GOOD_REPLY, open_memory, seed

from tiermem import InvalidInput, Memory, ProviderError
from tiermem.calls import CallRecord, unwrap_model
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.tokens import count_tokens

pytestmark = pytest.mark.usefixtures("backend")

FIXTURES = Path(__file__).parent / "fixtures" / "transcripts"
TEA = {"content": "Drinks green tea", "category": "preference", "confidence": 0.9}
GOOD_EXTRACTION = json.dumps({"user": None, "history": None, "factsToRemove": [], "newFacts": [TEA]})
TURNS = [{"role": "user", "content": "I drink green tea every morning."}]
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
PRICES = {"custom:ScriptedChatModel": {"input_per_mtok": 2.0, "output_per_mtok": 8.0}}


def memory(root: Path, clock: FakeClock, replies: list[Any], **settings: Any) -> Memory:
    return Memory(root, llm=ScriptedChatModel(replies), embedder=HashEmbedder(), clock=clock, timezone="UTC",
                  **settings)


def stored_bytes(mem: Memory) -> bytes:
    """Everything the database holds: the SQLite files, or every call_log row of PostgreSQL as text."""
    if mem.db.backend == "sqlite":
        return b"".join(p.read_bytes() for p in mem.root.rglob("tiermem.db*") if p.is_file())
    rows = mem.db.conn.execute("SELECT * FROM call_log").fetchall()
    return repr([tuple(r) for r in rows]).encode("utf-8")


def test_extraction_logs_each_call_and_marks_the_unusable_reply(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["this is not json", GOOD_EXTRACTION]) as mem:
        report = mem.extract(TURNS)
        assert [f.content for f in report.added] == ["Drinks green tea"]
        first, second = unwrap_model(mem.llm).requests
        newest, oldest = mem.calls.list()
    assert (newest.outcome, oldest.outcome) == ("ok", "parse_failed")
    assert oldest.error and "JSON" in oldest.error and newest.error is None
    for row in (newest, oldest):
        assert (row.purpose, row.provider, row.model, row.attempt) == ("extraction", "custom", "ScriptedChatModel", 1)
        assert row.tokens_counted and row.cost is None and row.prompt is None and row.completion is None
        assert row.at == "2026-03-14T09:30:00.000000Z" and row.latency_ms >= 0
    # counted with tiermem/tokens.py: the messages sent and the reply
    assert oldest.prompt_tokens == count_tokens("\n".join(str(m["content"]) for m in first.messages))
    assert oldest.completion_tokens == count_tokens("this is not json")
    assert newest.completion_tokens == count_tokens(GOOD_EXTRACTION)
    assert newest.id > oldest.id


def test_provider_error_is_logged_and_raised(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, [ProviderError("upstream exploded")]) as mem:
        with pytest.raises(ProviderError, match="upstream exploded"):
            mem.extract(TURNS)
        (row,) = mem.calls.list()
        totals = mem.calls.totals()
    assert row.outcome == "provider_error" and row.error == "ProviderError: upstream exploded"
    assert (row.prompt_tokens, row.completion_tokens, row.cost) == (0, 0, None)
    assert totals.by_outcome == {"provider_error": 1} and totals.calls == 1


def test_deep_dream_calls_are_logged_and_an_unusable_reply_is_parse_failed(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, ["I would rather not.", GOOD_REPLY])
    with mem:
        seed(mem)
        assert mem.deep_dream(lookback_days=2).status == "refused"
        assert mem.deep_dream(lookback_days=2).status == "written"
        rows = mem.calls.list(purpose="dream")
    assert [r.outcome for r in rows] == ["ok", "parse_failed"]
    assert rows[1].error == "the reply has no [MEMORY] section"


def test_compression_summary_is_logged(root: Path, clock: FakeClock) -> None:
    messages = json.loads((FIXTURES / "invoicer.json").read_text())["messages"]
    with memory(root, clock, ["The agent read the invoice module and fixed the rounding."]) as mem:
        result = mem.compress(messages, protect_turns=4)
        assert result.summary
        (row,) = mem.calls.list()
    assert (row.purpose, row.outcome) == ("compression", "ok")
    assert row.completion_tokens == count_tokens("The agent read the invoice module and fixed the rounding.")


def test_compress_with_a_model_passed_in_is_logged_too(root: Path, clock: FakeClock) -> None:
    messages = json.loads((FIXTURES / "invoicer.json").read_text())["messages"]
    other = ScriptedChatModel(["   "])  # an empty summary: the reply is unusable
    with memory(root, clock, []) as mem:
        result = mem.compress(messages, protect_turns=4, llm=other)
        assert result.summary_error
        (row,) = mem.calls.list()
    assert (row.purpose, row.outcome) == ("compression", "parse_failed")
    assert row.error == "the model returned an empty summary"


def test_session_summary_is_logged(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["- User moved to Lisbon in March."]) as mem:
        session = mem.session("s1")
        session.add("user", "I moved to Lisbon in March.")
        session.add("assistant", "Welcome to Lisbon!")
        session.end()
        assert mem.wait_idle(10)
        rows = mem.calls.list()
    assert [(r.purpose, r.outcome) for r in rows] == [("session_summary", "ok")]


def test_session_summary_without_event_lines_is_parse_failed(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["Sure! Nothing to add."]) as mem:
        session = mem.session("s1")
        session.add("user", "I moved to Lisbon in March.")
        session.end()
        assert mem.wait_idle(10)
        (row,) = mem.calls.list()
    assert (row.purpose, row.outcome) == ("session_summary", "parse_failed") and "no '- ' lines" in (row.error or "")


def test_prices_give_a_cost_per_row_and_in_totals(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["one", "two"], prices=PRICES) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "hello there"}])
        mem.llm.complete([{"role": "user", "content": "and again"}])
        rows = mem.calls.list()
        totals = mem.calls.totals()
    for row in rows:
        assert row.purpose == "other"  # called outside tiermem's pipelines
        assert row.cost == pytest.approx((row.prompt_tokens * 2.0 + row.completion_tokens * 8.0) / 1e6)
        assert row.cost is not None and row.cost > 0
    assert totals.cost == pytest.approx(sum(r.cost or 0 for r in rows))
    assert totals.prompt_tokens == sum(r.prompt_tokens for r in rows) > 0
    assert totals.by_purpose == {"other": 2}


def test_retention_removes_old_rows(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["a", "b", "c"], call_log_retention_days=30) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "first"}])
        clock.advance(timedelta(days=29).total_seconds())
        mem.llm.complete([{"role": "user", "content": "second"}])
        assert len(mem.calls.list()) == 2  # 29 days old: kept
        clock.advance(timedelta(days=2).total_seconds())
        mem.llm.complete([{"role": "user", "content": "third"}])
        rows = mem.calls.list()
    assert [r.at[:10] for r in rows] == ["2026-04-14", "2026-04-12"]  # the first, 31 days old, is gone


def test_prompt_text_is_never_stored_without_log_prompts(root: Path, clock: FakeClock) -> None:
    marker = "quokka-marmalade-7781"
    with memory(root, clock, [f"reply about {marker}"]) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": f"tell me about {marker}"}])
        (row,) = mem.calls.list()
        mem.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)") if mem.db.backend == "sqlite" else None
        data = stored_bytes(mem)
    assert row.prompt is None and row.completion is None
    assert b"quokka-marmalade" not in data


def test_log_prompts_stores_redacted_texts(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, [f"your key {SECRET} is noted"], log_prompts=True) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "system", "content": "Be brief."}, {"role": "user", "content": f"key {SECRET}"}])
        (row,) = mem.calls.list()
        data = stored_bytes(mem)
    assert row.prompt is not None and row.completion == "your key [REDACTED:openai_key] is noted"
    assert json.loads(row.prompt) == [{"role": "system", "content": "Be brief."},
                                      {"role": "user", "content": "key [REDACTED:openai_key]"}]
    assert SECRET.encode() not in data


def test_filters_and_bad_arguments(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["x", ProviderError("down"), "y"]) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "one"}])
        clock.advance(3600)
        with pytest.raises(ProviderError):
            mem.llm.complete([{"role": "user", "content": "two"}])
        clock.advance(3600)
        mem.llm.complete([{"role": "user", "content": "three"}])
        calls = mem.calls
        assert [r.outcome for r in calls.list()] == ["ok", "provider_error", "ok"]
        assert [r.outcome for r in calls.list(outcome="provider_error")] == ["provider_error"]
        assert len(calls.list(model="custom:ScriptedChatModel")) == 3 == len(calls.list(model="ScriptedChatModel"))
        assert calls.list(model="openai:gpt-4o-mini") == [] and calls.list(purpose="dream") == []
        assert len(calls.list(since="2026-03-14T10:00:00Z")) == 2
        assert len(calls.list(since="59m")) == 1 and len(calls.list(since="90m")) == 2
        assert len(calls.list(since=clock.now() - timedelta(hours=3))) == 3
        assert len(calls.list(limit=1)) == 1
        assert calls.totals(since="2026-03-14T10:00:00Z").calls == 2
        for bad in ({"purpose": "gossip"}, {"outcome": "meh"}, {"since": "yesterday-ish"}, {"limit": 0},
                    {"model": " "}):
            with pytest.raises(InvalidInput):
                calls.list(**bad)


def test_a_log_that_cannot_be_written_never_fails_the_call(root: Path, clock: FakeClock,
                                                             caplog: pytest.LogCaptureFixture) -> None:
    with memory(root, clock, ["still answered"]) as mem:
        assert mem.llm is not None
        mem.db.conn.execute("DROP TABLE call_log")
        with caplog.at_level(logging.WARNING, logger="tiermem.calls.recorder"):
            assert mem.llm.complete([{"role": "user", "content": "hi"}]) == "still answered"
    assert any("could not write the LLM call log" in r.getMessage() for r in caplog.records)


def test_other_scopes_log_under_their_own_scope_once(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, ["for bob"]) as mem:
        bob = mem.for_scope("bob")
        assert bob.llm is not None and unwrap_model(bob.llm) is unwrap_model(mem.llm)
        bob.llm.complete([{"role": "user", "content": "hi"}])
        assert mem.calls.list() == []
        (row,) = bob.calls.list()
    assert isinstance(row, CallRecord) and row.outcome == "ok"


def test_a_model_id_names_provider_and_model(root: Path, clock: FakeClock) -> None:
    class Acme(ScriptedChatModel):
        model_id = "acme:wile-1"

    with Memory(root, llm=Acme(["ok"]), embedder=HashEmbedder(), clock=clock) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": "hi"}])
        (row,) = mem.calls.list(model="acme:wile-1")
    assert (row.provider, row.model, row.model_id) == ("acme", "wile-1", "acme:wile-1")


def test_purge_of_a_user_removes_the_call_rows_and_a_text_purge_scrubs_prompts(root: Path, clock: FakeClock) -> None:
    phrase = "walrus carnival"
    with memory(root, clock, ["fine", f"noted: {phrase}"], log_prompts=True) as mem:
        bob = mem.for_scope("bob")
        assert bob.llm is not None and mem.llm is not None
        bob.llm.complete([{"role": "user", "content": f"I love the {phrase}"}])
        mem.llm.complete([{"role": "user", "content": f"remember the {phrase}"}])
        report = mem.purge(text=phrase)
        assert report.rows.get("call_log") == 1
        (mine,) = mem.calls.list()
        assert mine.prompt is not None and phrase not in mine.prompt and "[purged]" in mine.prompt
        assert mine.completion is not None and "[purged]" in mine.completion
        assert phrase in (bob.calls.list()[0].prompt or "")  # another user's rows are not touched
        mem.purge(user="bob")
        assert bob.calls.list() == []
        assert mem.calls.list() == [mine]


def test_queued_extraction_of_another_user_is_logged_in_that_scope(root: Path, clock: FakeClock) -> None:
    with memory(root, clock, [GOOD_EXTRACTION], extract_min_turns=1, shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", TURNS, user_id="carol")
        assert mem.queue.flush(timeout=20)
        assert mem.calls.list() == []
        (row,) = mem.for_scope("carol").calls.list()
    assert (row.purpose, row.outcome) == ("extraction", "ok")
