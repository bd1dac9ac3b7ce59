"""The Context tier: sessions, trims of whole turns, end, LRU eviction, summaries (R1-R5, R8)."""

from __future__ import annotations

import re
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import InvalidInput, Memory, ProviderError
from tiermem.testing import FakeClock, ScriptedChatModel
from tiermem.tiers import inject_summary, parse_records
from tiermem.tiers.turns import to_message, turn_spans
from tiermem.tokens import count_tokens

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 14, 30, tzinfo=UTC)
FILLER = "and the rest of this sentence is just filler words to make the message long enough " * 2


def open_memory(root: Path, clock: FakeClock, llm: Any = "none", **settings: Any) -> Memory:
    settings.setdefault("timezone", "UTC")
    return Memory(root, llm=llm, embedder="hash", clock=clock, **settings)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START)


@pytest.fixture
def mem(tmp_path: Path, clock: FakeClock) -> Memory:
    memory = open_memory(tmp_path, clock)
    yield memory
    memory.close()


def blocks(text: str) -> list[list[str]]:
    """The ``##`` blocks of a daily file: heading then lines."""
    out: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("## "):
            out.append([line])
        elif line.startswith("- ") and out:
            out[-1].append(line)
    return out


def test_session_tracks_messages_tokens_and_tool_ids(mem: Memory) -> None:
    session = mem.session("s1")
    first = session.add("user", "What is the weather in Paris?")
    session.add_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function", "function": {"name": "weather", "arguments": '{"city": "Paris"}'}}]})
    session.add("tool", "18C and sunny", tool_call_id="call_1")

    assert first.tokens == count_tokens("What is the weather in Paris?")
    assert session.messages[0] == {"role": "user", "content": "What is the weather in Paris?"}
    assert session.messages[1]["tool_calls"][0]["id"] == "call_1"
    assert session.messages[2] == {"role": "tool", "content": "18C and sunny", "tool_call_id": "call_1"}
    assert session.entries[1].tool_call_ids == ("call_1",)
    assert session.entries[2].tool_result_ids == ("call_1",)
    assert session.message_tokens == [e.tokens for e in session.entries]
    assert all(t > 0 for t in session.message_tokens)
    assert session.token_count == sum(session.message_tokens)
    assert session.summary == ""
    assert mem.session("s1") is session


def test_anthropic_shape_is_understood(mem: Memory) -> None:
    session = mem.session("a1")
    session.add_message({"role": "user", "content": [{"type": "text", "text": "Look up order 42"}]})
    session.add_message({"role": "assistant", "content": [
        {"type": "text", "text": "Checking."},
        {"type": "tool_use", "id": "toolu_9", "name": "orders", "input": {"id": 42}}]})
    session.add_message({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_9", "content": [{"type": "text", "text": "shipped"}]}]})

    entries = session.entries
    assert entries[0].text == "Look up order 42"
    assert entries[1].tool_call_ids == ("toolu_9",)
    assert entries[2].tool_result_ids == ("toolu_9",) and entries[2].text == "shipped"
    assert turn_spans(entries) == [(0, 3)]  # the tool_result user message continues the turn
    assert session.messages[1]["content"][1]["input"] == {"id": 42}


@pytest.mark.parametrize(
    "message",
    [
        {"role": "wizard", "content": "x"},
        {"role": "user", "content": 5},
        {"content": "no role"},
        {"role": "tool", "content": "result without id"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "f"}}]},
        {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]},
        "not a dict",
    ],
)
def test_malformed_messages_are_rejected_and_nothing_changes(mem: Memory, message: Any) -> None:
    session = mem.session("bad")
    session.add("user", "kept")
    with pytest.raises(InvalidInput):
        session.add_message(message)
    assert [m["content"] for m in session.messages] == ["kept"]


def test_trim_moves_oldest_whole_turns_to_the_daily_tier(mem: Memory, clock: FakeClock) -> None:
    session = mem.session("trim", max_tokens=120)
    for i in range(6):
        session.add("user", f"user question {i} {FILLER}")
        clock.advance(60)
        session.add("assistant", f"assistant answer {i} {FILLER}")

    assert session.token_count <= 120
    texts = [m["content"] for m in session.messages]
    assert texts[-2:] == [f"user question 5 {FILLER}", f"assistant answer 5 {FILLER}"]
    assert texts[0].startswith("user question")  # cut at a turn boundary
    daily = mem.daily.read()
    trimmed = [b for b in blocks(daily) if b[0].startswith("## Trimmed Context (")]
    assert trimmed and trimmed[0][0] == "## Trimmed Context (14:32)"  # the second answer passed the limit
    flushed = [line for b in trimmed for line in b[1:]]
    kept_count = len(texts) // 2
    assert len(flushed) == 2 * (6 - kept_count)  # every trimmed message recorded once
    assert flushed[0].startswith("- user: user question 0 and the rest")
    assert flushed[1].startswith("- assistant: assistant answer 0")
    summary = session.summary  # folded into the running summary, newest lines kept within a budget
    assert flushed[-1].rstrip() in summary.splitlines()  # the record keeps the message's trailing space
    assert count_tokens(summary) <= 256


def test_end_flushes_the_rest_as_session_notes(mem: Memory, clock: FakeClock) -> None:
    session = mem.session("end")
    session.add("system", "You are a helpful assistant.")
    session.add("user", "My cat is called Miso.")
    session.add("assistant", "Nice name!")
    clock.advance(15 * 60)
    session.end()

    assert session.messages == []
    assert blocks(mem.daily.read()) == [
        ["## Session Notes (14:45)", "- user: My cat is called Miso.", "- assistant: Nice name!"]]
    assert "You are a helpful assistant" not in mem.daily.read()  # instructions are not journalled
    session.end()  # nothing left: nothing written
    assert len(blocks(mem.daily.read())) == 1


def _openai_tool_turn(session: Any, n: int) -> None:
    session.add("user", f"request {n} {FILLER}")
    session.add_message({"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{n}a", "type": "function", "function": {"name": "search", "arguments": f'{{"q": "{n}"}}'}},
        {"id": f"call_{n}b", "type": "function", "function": {"name": "fetch", "arguments": "{}"}}]})
    session.add("tool", f"result a {n} {FILLER}", tool_call_id=f"call_{n}a")
    session.add("tool", f"result b {n} {FILLER}", tool_call_id=f"call_{n}b")
    session.add("assistant", f"done {n}")


def _anthropic_tool_turn(session: Any, n: int) -> None:
    session.add("user", f"request {n} {FILLER}")
    session.add_message({"role": "assistant", "content": [
        {"type": "tool_use", "id": f"toolu_{n}", "name": "search", "input": {"q": n}}]})
    session.add_message({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": f"toolu_{n}", "content": f"found {n} {FILLER}"}]})
    session.add("assistant", f"done {n}")


@pytest.mark.parametrize("turn", [_openai_tool_turn, _anthropic_tool_turn])
def test_trims_never_split_a_tool_call_from_its_result(mem: Memory, turn: Any) -> None:
    session = mem.session("tools", max_tokens=200)
    for n in range(8):
        turn(session, n)
        live = session.entries
        calls = {i for e in live for i in e.tool_call_ids}
        results = {i for e in live for i in e.tool_result_ids}
        assert calls == results  # every live call has its result and vice versa
        assert live[0].role == "user" and not live[0].is_tool_result
    trimmed = [b for b in blocks(mem.daily.read()) if b[0].startswith("## Trimmed Context")]
    assert trimmed
    journalled = 0
    for block in trimmed:  # each trimmed turn is in one block: request, call and result together
        text = "\n".join(block)
        requests = set(re.findall(r"- user: request (\d+) ", text))
        results = set(re.findall(r"tool result \(search\): (?:result a|found) (\d+) ", text))
        assert requests and requests == results
        assert text.count("called search(") == len(requests)
        journalled += len(requests)
    assert journalled + sum(1 for e in session.entries if e.text.startswith("request ")) == 8


def test_the_current_turn_is_never_trimmed(mem: Memory) -> None:
    session = mem.session("long", max_tokens=50)
    session.add("user", "one long request " + FILLER * 3)
    session.add("assistant", "a long answer " + FILLER * 3)
    assert len(session.messages) == 2  # over the limit, but it is the turn in progress
    assert mem.daily.read() == ""
    session.add("user", "next")
    assert [m["content"] for m in session.messages] == ["next"]
    assert "one long request" in mem.daily.read()


def test_least_recently_used_session_is_flushed_before_it_is_dropped(tmp_path: Path, clock: FakeClock) -> None:
    with open_memory(tmp_path, clock, max_live_sessions=2) as mem:
        a = mem.session("a")
        a.add("user", "alpha fact: the launch code word is heliotrope")
        b = mem.session("b")
        b.add("user", "beta message")
        a.add("assistant", "noted")  # a is now the most recently used
        c = mem.session("c")  # evicts b, not a
        c.add("user", "gamma message")

        journal = mem.daily.read()
        assert "- user: beta message" in journal
        assert "heliotrope" not in journal
        assert len(a.messages) == 2 and len(c.messages) == 1  # the others stay live
        assert b.messages == []

        b.add("user", "beta is back")  # the dropped handle stays usable; a is evicted now
        assert "heliotrope" in mem.daily.read()
        assert a.messages == [] and len(c.messages) == 1
        assert mem.session("b") is b
    with open_memory(tmp_path, clock) as again:  # closing flushed the live ones
        journal = again.daily.read()
        assert "beta is back" in journal and "gamma message" in journal


def test_on_summary_callback_and_injection(mem: Memory) -> None:
    seen: list[str] = []
    session = mem.session("cb", on_summary=seen.append, max_tokens=60)
    session.add("user", "I live in Lisbon " + FILLER * 2)
    session.add("assistant", "Lisbon is lovely")
    session.add("user", "What should I pack?")

    assert len(seen) == 1
    assert "I live in Lisbon" in seen[0] and seen[0] == session.summary
    messages = [{"role": "system", "content": "Be brief."}, *session.messages]
    injected = inject_summary(messages, session.summary)
    assert injected[0] == {"role": "system", "content": "Be brief."}
    assert injected[1]["content"].startswith("Summary of the earlier conversation:\n- user: I live in Lisbon")
    assert injected[2:] == session.messages
    assert messages[1] == session.messages[0]  # the input list was not changed
    again = inject_summary(injected, "- newer summary")
    assert [m["content"] for m in again].count("Summary of the earlier conversation:\n- newer summary") == 1
    assert len(again) == len(injected)
    assert inject_summary(messages, "") == messages


def test_failing_callback_does_not_break_the_session(mem: Memory) -> None:
    def boom(text: str) -> None:
        raise RuntimeError("callback bug")

    session = mem.session("cb2", on_summary=boom)
    session.add("user", "hello")
    session.end()
    assert "- user: hello" in mem.daily.read()


class BlockingModel:
    """An LLM seam that answers only when the test lets it (to show nobody waits for it)."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.release = threading.Event()
        self.called = threading.Event()
        self.requests: list[list[dict[str, Any]]] = []

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.requests.append(messages)
        self.called.set()
        assert self.release.wait(10), "the test never released the model"
        return self.reply


def test_with_an_llm_trimmed_turns_leave_at_once_and_the_summary_lands_later(tmp_path: Path,
                                                                             clock: FakeClock) -> None:
    model = BlockingModel("<think>hmm</think>\nHere you go:\n- User moved to Lisbon in March.\n- User packs light.")
    with open_memory(tmp_path, clock, llm=model) as mem:
        summaries: list[str] = []
        session = mem.session("llm", max_tokens=60, on_summary=summaries.append)
        session.add("user", "I moved to Lisbon in March " + FILLER * 2)
        session.add("assistant", "Welcome to Lisbon")
        session.add("user", "thanks")  # trims the first turn; returns before the model answers

        assert [m["content"] for m in session.messages] == ["thanks"]
        assert model.called.wait(10)
        verbatim = [r.text for r in parse_records(mem.daily.read())]  # written at once, before the summary
        assert verbatim == [f"user: I moved to Lisbon in March {FILLER * 2}", "assistant: Welcome to Lisbon"]
        model.release.set()
        assert mem.wait_idle(10)

        assert [b[0] for b in blocks(mem.daily.read())] == ["## Trimmed Context (14:30)", "## Session Summary (14:30)"]
        assert blocks(mem.daily.read())[1][1:] == ["- User moved to Lisbon in March.", "- User packs light."]
        assert session.summary == "- User moved to Lisbon in March.\n- User packs light."
        assert summaries == [session.summary]  # the callback ran once the summary was written
        prompt = "\n".join(str(m["content"]) for m in model.requests[0])
        assert "I moved to Lisbon in March" in prompt and "Welcome to Lisbon" in prompt
        assert "2026-03-14" in prompt


def test_when_the_llm_fails_the_verbatim_record_stands_alone(tmp_path: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([ProviderError("rate limited"), "no bullet lines at all"])
    with open_memory(tmp_path, clock, llm=model) as mem:
        session = mem.session("fail", max_tokens=60)
        session.add("user", "My passport number ends in 1234 " + FILLER * 2)
        session.add("assistant", "Noted")
        session.add("user", "And my visa expires in June " + FILLER * 2)  # trim 1: the model raises
        session.add("assistant", "Noted too")
        session.add("user", "bye")  # trim 2: the model's reply has no "- " lines
        assert mem.wait_idle(10)
        journal = mem.daily.read()
        assert model.remaining == []
        assert "- user: My passport number ends in 1234" in journal
        assert "- user: And my visa expires in June" in journal
        assert "Session Summary" not in journal  # no summary block without a summary
        assert "user: And my visa expires in June" in session.summary  # the condensed lines stay


def test_without_an_llm_the_record_is_verbatim_and_whole(mem: Memory) -> None:
    session = mem.session("x")
    session.add("user", "line one\r\n\nline   two\x1b[31m red")
    session.add("assistant", "word " * 400)
    session.end()
    records = [r.text for r in parse_records(mem.daily.read())]
    assert records == ["user: line one\n\nline   two[31m red", "assistant: " + "word " * 400]  # CRLF, ESC normalised
    assert session.summary.splitlines()[1].endswith(" …")  # the running summary is condensed, the record is not


def test_session_ids_are_validated(mem: Memory) -> None:
    for bad in ("", "x" * 300, "tab\tid", 5):
        with pytest.raises(InvalidInput):
            mem.session(bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        mem.session("ok", max_tokens=0)


def test_turn_spans_start_at_user_messages_only_when_no_call_is_pending() -> None:
    messages = [to_message(m) for m in [
        {"role": "assistant", "content": "greeting"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "user", "content": "interjection while c1 runs"},
        {"role": "tool", "tool_call_id": "c1", "content": "r"},
        {"role": "user", "content": "q2"},
    ]]
    assert turn_spans(messages) == [(0, 1), (1, 5), (5, 6)]


def test_session_limit_comes_from_settings(tmp_path: Path, clock: FakeClock) -> None:
    with open_memory(tmp_path, clock, session_max_tokens=40) as mem:
        session = mem.session("s")
        assert session.max_tokens == 40
        session.add("user", "first question " + FILLER * 2)
        session.add("user", "second question")
        assert [m["content"] for m in session.messages] == ["second question"]
        assert mem.session("other", max_tokens=500).max_tokens == 500
        assert mem.wait_idle(1)


def test_inject_summary_rejects_bad_arguments() -> None:
    with pytest.raises(InvalidInput):
        inject_summary([], "summary", role="tool")
    with pytest.raises(InvalidInput):
        inject_summary([], None)  # type: ignore[arg-type]
    assert inject_summary([{"role": "user", "content": "hi"}], "s", role="user") == [
        {"role": "user", "content": "Summary of the earlier conversation:\ns"}, {"role": "user", "content": "hi"}]
