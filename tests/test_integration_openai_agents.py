"""The OpenAI Agents SDK session, tools and instructions (tiermem.integrations.openai_agents).

The agent runs on the SDK's real ``Runner`` with its default model class,
``OpenAIResponsesModel``, whose real ``AsyncOpenAI`` client talks over HTTP to the test suite's
fake OpenAI server speaking the Responses API (``POST /v1/responses``, tests/fake_openai_server.py).
The SDK's tracing is off (no network). Everything that touches the store runs on both backends.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from agents import Agent, OpenAIResponsesModel, Runner, Session, SessionSettings, set_tracing_disabled
from fake_openai_server import (
    FakeLLMServer,
    RecordedRequest,
    ReplySpec,
    response_function_call,
    response_message,
    response_reasoning,
    responses_reply,
)
from openai import AsyncOpenAI
from queue_helpers import extraction

from tiermem import Memory
from tiermem.errors import InvalidInput
from tiermem.integrations.openai_agents import TiermemSession, memory_instructions, memory_tools
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")
KEY = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4"

ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "My cat is called Miso. Ünïcödé ✓"},
    {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "private thoughts"}]},
    {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "lookup_pet",
     "arguments": "{\"name\": \"Miso\"}", "status": "completed"},
    {"type": "function_call_output", "call_id": "call_1", "output": "Miso: a grey cat, 4 years old"},
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search", "query": "cats"}},
    {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
     "content": [{"type": "output_text", "text": "Miso sounds lovely.", "annotations": []}]},
    {"type": "item_reference", "id": "msg_0"},
    {"z_last": 1, "role": "user", "content": [{"type": "input_text", "text": "And a dog?"},
                                               {"type": "input_image", "image_url": "data:image/png;base64,AAAA"}]},
]


@pytest.fixture(autouse=True)
def _no_tracing() -> None:
    set_tracing_disabled(True)


def _open(root: Path, clock: FakeClock, **options: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **options)


@pytest.fixture
def mem(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with _open(root, clock) as memory:
        yield memory


@contextmanager
def _other_store(root: Path, clock: FakeClock) -> Iterator[Memory]:
    """A second store: on PostgreSQL in a schema of its own (the test's schema is the first store's)."""
    if not os.environ.get("TIERMEM_DATABASE_URL"):
        with _open(root, clock) as memory:
            yield memory
        return
    from pg_helpers import fresh_schema

    with fresh_schema() as url, _open(root, clock, database_url=url) as memory:
        yield memory


def _rows(mem: Memory) -> list[Any]:
    return [sorted(map(tuple, mem.db.rows(f"SELECT * FROM {table}")), key=repr)
            for table in ("session_items", "agent_sessions", "outbox")]


class ThreadClock(FakeClock):
    """The fake clock, noting the threads that read it (the session reads it when it writes)."""

    threads: set[int] = set()  # replaced per test

    def now(self) -> Any:
        self.threads.add(threading.get_ident())
        return super().now()


def _texts(items: list[Any]) -> list[str]:
    return [json.dumps(item, ensure_ascii=False) for item in items]  # key order included


# --- the session protocol ------------------------------------------------------------------------
def test_items_come_back_verbatim_across_restarts(root: Path, clock: FakeClock) -> None:
    with _open(root, clock) as mem:
        session = TiermemSession(mem, "chat-1")
        assert isinstance(session, Session)  # the SDK's runtime-checkable protocol
        asyncio.run(session.add_items(ITEMS[:3]))
        asyncio.run(session.add_items(ITEMS[3:]))
        assert _texts(asyncio.run(session.get_items())) == _texts(ITEMS)
        assert asyncio.run(session.get_items(limit=2)) == ITEMS[-2:]
        assert asyncio.run(session.get_items(limit=0)) == []
    with _open(root, clock) as mem:  # a new process on the same store
        session = TiermemSession(mem, "chat-1")
        assert _texts(asyncio.run(session.get_items())) == _texts(ITEMS)
        assert TiermemSession(mem, "chat-2").get_items_sync() == []
        assert TiermemSession(mem.for_scope("bob"), "chat-1").get_items_sync() == []  # per user
        limited = TiermemSession(mem, "chat-1", session_settings=SessionSettings(limit=3))
        assert limited.get_items_sync() == ITEMS[-3:]


def test_pop_and_clear(mem: Memory) -> None:
    session, other = TiermemSession(mem, "chat-1"), TiermemSession(mem, "chat-2")
    session.add_items_sync(ITEMS[:3])
    other.add_items_sync(ITEMS[:1])
    assert asyncio.run(session.pop_item()) == ITEMS[2]
    assert session.get_items_sync() == ITEMS[:2]
    asyncio.run(session.clear_session())
    assert session.get_items_sync() == [] and asyncio.run(session.pop_item()) is None
    assert other.get_items_sync() == ITEMS[:1]
    session.add_items_sync([ITEMS[5]])
    assert session.get_items_sync() == [ITEMS[5]]


def test_the_async_methods_work_off_the_event_loop(root: Path, clock: FakeClock) -> None:
    thread_clock = ThreadClock(clock.now())
    with _open(root, thread_clock) as mem:
        session = TiermemSession(mem, "chat-1")
        thread_clock.threads = set()

        async def run() -> int:
            await session.add_items(ITEMS[:2])
            await session.clear_session()
            return threading.get_ident()

        loop_thread = asyncio.run(run())
        assert thread_clock.threads and loop_thread not in thread_clock.threads


@pytest.mark.parametrize("bad", [
    "not a dict", {"role": "user", "content": float("nan")}, {"role": "user", "content": b"bytes"},
    {"role": "user", "content": "lone \ud800 surrogate"}, {"role": "user", "content": "bell \x07"},
    {"role": "user", "content": 7},
])
def test_bad_items_change_nothing(mem: Memory, bad: Any) -> None:
    session = TiermemSession(mem, "chat-1")
    session.add_items_sync(ITEMS[:1])
    before = _rows(mem)
    with pytest.raises(InvalidInput):
        asyncio.run(session.add_items([ITEMS[5], bad]))
    assert _rows(mem) == before
    with pytest.raises(InvalidInput):
        session.get_items_sync(limit=-1)
    with pytest.raises(InvalidInput):
        TiermemSession(mem, "")


def test_sessions_travel_in_exports_and_go_with_purges(root: Path, clock: FakeClock, tmp_path: Path) -> None:
    with _open(root, clock) as mem:
        session = TiermemSession(mem, "chat-1")
        session.add_items_sync(ITEMS)
        session.clear_session_sync()
        session.add_items_sync(ITEMS[:2])
        TiermemSession(mem.for_scope("bob"), "chat-9").add_items_sync(ITEMS[:1])
        data = json.loads(json.dumps(mem.export()))
        with _other_store(tmp_path / "copy", clock) as copy:
            copy.import_(data)
            restored = TiermemSession(copy, "chat-1")
            assert _texts(restored.get_items_sync()) == _texts(ITEMS[:2])
            restored.clear_session_sync()  # the generation came along: the next one is #2
            restored.add_items_sync(ITEMS[:1])
            assert [item.thread_id for item in copy.queue.pending()][-1] == "chat-1#2"
        mem.purge(text="grey cat")
        assert "grey cat" not in json.dumps(session.get_items_sync())  # erased inside the item, rest kept
        assert session.get_items_sync()[0] == ITEMS[0]
        mem.purge(user="bob")
        assert TiermemSession(mem.for_scope("bob"), "chat-9").get_items_sync() == []
        assert len(session.get_items_sync()) == 2


# --- the journal and the update queue -------------------------------------------------------------
def test_text_turns_reach_the_journal_and_the_queue_as_one_conversation(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([extraction("The user has a grey cat called Miso.")])
    items = [{**ITEMS[0], "content": f"My cat is called Miso. My key is {KEY}"}, *ITEMS[1:]]
    with _open(root, clock, llm=model) as mem:
        session = TiermemSession(mem, "chat-1")
        session.add_items_sync(items[:4])
        session.add_items_sync(items[4:])
        [queued] = mem.queue.pending()
        assert queued.thread_id == "chat-1" and len(queued.messages) == 6  # reasoning, item_reference: no turn
        assert mem.queue.flush()
        daily = mem.daily.read()
        stored = session.get_items_sync()  # the items as added, but the secret redacted (R68)
        assert stored[0] == {**items[0], "content": "My cat is called Miso. My key is [REDACTED:openai_key]"}
        assert stored[1:] == items[1:]
    records = [line for line in daily.splitlines() if line.startswith("- ")]
    assert records == [
        "- user: My cat is called Miso. My key is [REDACTED:openai_key]",
        '- assistant called lookup_pet({"name": "Miso"})',
        "- tool result (lookup_pet): Miso: a grey cat, 4 years old",
        '- assistant called web_search({"query": "cats", "type": "search"})',
        "- assistant: Miso sounds lovely.",
        "- user: And a dog?",
    ], records
    assert KEY not in daily and "private thoughts" not in daily
    [request] = model.requests
    sent = json.dumps(request.messages)
    assert "My cat is called Miso." in sent and "Miso sounds lovely." in sent and "And a dog?" in sent
    assert KEY not in sent
    assert model.remaining == []


def test_a_cleared_session_journals_its_next_conversation_anew(mem: Memory) -> None:
    session = TiermemSession(mem, "chat-1")
    session.add_items_sync([{"role": "user", "content": "hello there"}])
    assert mem.queue.flush()
    session.clear_session_sync()
    session.add_items_sync([{"role": "user", "content": "hello there"}])
    assert [item.thread_id for item in mem.queue.pending()] == ["chat-1#1"]
    assert mem.queue.flush()
    assert mem.daily.read().count("- user: hello there") == 2


def test_a_long_session_is_queued_in_segments(mem: Memory) -> None:
    session = TiermemSession(mem, "long")
    session.add_items_sync([{"role": "user", "content": f"message {i}"} for i in range(499)])
    session.add_items_sync([{"role": "user", "content": f"message {i}"} for i in range(499, 502)])
    queued = {item.thread_id: item.messages for item in mem.queue.pending()}
    assert sorted(queued) == ["long", "long~1"]
    assert len(queued["long"]) == 500 and queued["long"][-1]["content"] == "message 499"
    assert [m["content"] for m in queued["long~1"]] == ["message 500", "message 501"]


def test_items_without_a_text_turn_never_raise_and_queue_nothing(mem: Memory) -> None:
    odd = [{}, {"type": 5}, {"type": "reasoning", "summary": []}, {"type": "compaction", "encrypted_content": "x"},
           {"role": "critic", "content": "not a chat role"}, {"type": "mcp_list_tools", "tools": []}]
    session = TiermemSession(mem, "odd")
    session.add_items_sync(odd)
    assert session.get_items_sync() == odd and mem.queue.pending() == []
    session.add_items_sync([{"type": "mcp_call", "id": "mcp_1", "name": "weather", "arguments": "{}",
                             "output": "sunny", "server_label": "w"}])
    [item] = mem.queue.pending()
    assert item.thread_id == "odd" and [m["role"] for m in item.messages] == ["assistant", "tool"]
    assert item.messages[1] == {"role": "tool", "tool_call_id": "mcp_1", "content": "sunny"}


def test_journal_off_keeps_items_only(mem: Memory) -> None:
    session = TiermemSession(mem, "chat-1", journal=False)
    session.add_items_sync(ITEMS)
    assert session.get_items_sync() == ITEMS and mem.queue.pending() == []


# --- the SDK's Runner against the fake Responses API ----------------------------------------------
def _agent(mem: Memory, session: TiermemSession, server: FakeLLMServer) -> Agent[Any]:
    client = AsyncOpenAI(base_url=server.url, api_key="sk-test", max_retries=0)
    return Agent(name="assistant", instructions=memory_instructions(mem, session, preamble="Be brief."),
                 tools=memory_tools(mem), model=OpenAIResponsesModel("fake-model", openai_client=client))


def _outputs(request: RecordedRequest) -> list[str]:
    return [str(item["output"]) for item in request.body["input"] if item.get("type") == "function_call_output"]


def test_runner_remembers_recalls_and_replays_the_session(root: Path, clock: FakeClock) -> None:
    replies: list[ReplySpec] = [
        responses_reply(response_reasoning("the user shares a fact"), response_function_call(
            "remember", {"content": "The user's cat is called Miso.", "category": "knowledge"}, call_id="c1")),
        responses_reply(response_message("Noted.")),
        responses_reply(response_function_call("recall", {"query": "cat name"}, call_id="c2")),
        responses_reply(response_message("Your cat is Miso.")),
    ]
    with FakeLLMServer(replies) as server:
        with _open(root, clock) as mem:
            session = TiermemSession(mem, "run-1")
            first = asyncio.run(Runner.run(_agent(mem, session, server), "My cat is called Miso.", session=session))
            assert first.final_output == "Noted."
            assert [f.content for f in mem.facts.list()] == ["The user's cat is called Miso."]
            stored = session.get_items_sync()
        with _open(root, clock) as mem:  # restarted: the history and the fact come back
            session = TiermemSession(mem, "run-1")
            assert session.get_items_sync() == stored
            second = asyncio.run(Runner.run(_agent(mem, session, server), "What is my cat called?", session=session))
            assert second.final_output == "Your cat is Miso."
            assert mem.queue.flush()
            daily = mem.daily.read()
        assert server.remaining == [] and server.unexpected == 0
    assert [item.get("type", "message") for item in stored] == [
        "message", "reasoning", "function_call", "function_call_output", "message"]
    assert json.loads(_outputs(server.requests[1])[0])["status"] == "remembered"
    third = server.requests[2].body
    assert "Be brief." in third["instructions"] and "The user's cat is called Miso." in third["instructions"]
    assert [item.get("content") for item in third["input"]][0] == "My cat is called Miso."  # replayed history
    assert "The user's cat is called Miso." in _outputs(server.requests[3])[0]  # recall's hit
    assert "- user: What is my cat called?" in daily and "- assistant: Your cat is Miso." in daily
    assert "- tool result (remember):" in daily


def test_a_bad_tool_call_tells_the_model_why(mem: Memory) -> None:
    replies: list[ReplySpec] = [
        responses_reply(response_function_call("remember", {"content": "   ", "category": "knowledge"})),
        responses_reply(response_message("Sorry.")),
    ]
    with FakeLLMServer(replies) as server:
        session = TiermemSession(mem, "run-2")
        asyncio.run(Runner.run(_agent(mem, session, server), "Remember nothing.", session=session))
    [output] = _outputs(server.requests[1])
    assert output.startswith("The memory tool failed:") and "content" in output
    assert mem.facts.list() == []


# --- the documentation's example -------------------------------------------------------------------
DOC = Path(__file__).parent.parent / "docs" / "openai-agents.md"


def _doc_responder(request: RecordedRequest) -> ReplySpec:
    last = request.body["input"][-1]
    if last.get("type") == "function_call_output":
        return responses_reply(response_message("I will remember that Miso is your cat."))
    return responses_reply(response_function_call(
        "remember", {"content": "The user's cat is called Miso.", "category": "knowledge"}))


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    [code] = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    with FakeLLMServer(_doc_responder) as server:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the default embedder, as for a reader (issue 22, 13)
        exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
        assert len(server.requests) == 2
    assert "I will remember that Miso is your cat." in capsys.readouterr().out
    with Memory(tmp_path / ".tiermem", user_id="ada") as mem:
        assert [f.content for f in mem.facts.list()] == ["The user's cat is called Miso."]
        assert len(TiermemSession(mem, "support-chat-1").get_items_sync()) == 4
