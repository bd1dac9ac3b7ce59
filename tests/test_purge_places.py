"""Issue 22 items 3 and 15: a text purge reaches the text wherever and however it is stored — JSON
escaped (a logged prompt, a tool call's arguments, a model's JSON reply, a queued message, a
session item, a store value), or as a LangGraph store item's key or namespace label — and its
preview counts exactly what the purge then erases. Both backends; every byte under the root (and,
on PostgreSQL, every row) is searched for the text afterwards."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_purge import holding, in_database

from tiermem import Memory
from tiermem.storage.matcher import PLACEHOLDER, Matcher
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

ARGUMENTS = json.dumps({"address": "Quokka\nStreet 4"})  # a tool call's arguments: JSON inside a JSON string
TOOL_CALL = {"id": "c1", "type": "function", "function": {"name": "save_address", "arguments": ARGUMENTS}}


def open_memory(root: Path, clock: FakeClock, replies: list[str] | None = None) -> Memory:
    llm = None if replies is None else ScriptedChatModel(replies)
    return Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC", log_prompts=True)


@pytest.mark.usefixtures("backend")
def test_a_json_escaped_text_is_purged_wherever_it_is_stored(root: Path, clock: FakeClock) -> None:
    pytest.importorskip("agents")
    pytest.importorskip("langgraph.store.base")
    from tiermem.integrations.langgraph import TiermemStore
    from tiermem.integrations.openai_agents import TiermemSession

    reply = '{"facts": [{"content": "Lives on Quokka\\nStreet"}]}'  # a model's JSON reply, escapes as sent
    with open_memory(root, clock, [reply]) as mem:
        assert mem.llm is not None
        mem.llm.complete([{"role": "user", "content": 'I live on Quokka\nStreet, "Quokka\tStreet" 4'},
                          {"role": "assistant", "content": None, "tool_calls": [TOOL_CALL]}])
    with open_memory(root, clock) as mem:  # no model: the queued items stay queued
        mem.queue.add("t1", [{"role": "assistant", "content": "", "tool_calls": [TOOL_CALL]}])
        session = TiermemSession(mem, "chat-1")
        session.add_items_sync([{"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "save_address",
                                 "arguments": ARGUMENTS, "status": "completed"}])
        store = TiermemStore(mem)
        store.put(("default", "memories"), "address", {"raw": ARGUMENTS, "n": 1})
        assert in_database(holding(root, b"quokka"))

        planned = mem.purge(text="quokka street", dry_run=True)
        report = mem.purge(text="quokka street")

        assert holding(root, b"quokka") == [], "the escaped text is still stored"
        assert {"call_log", "outbox", "session_items", "store_items"} <= set(report.rows)
        assert planned.rows == report.rows
        # rewritten inside the strings: every document is still what its owner wrote, but the text
        (item,) = session.get_items_sync()
        assert json.loads(str(item["arguments"])) == {"address": f"{PLACEHOLDER} 4"}
        stored = store.get(("default", "memories"), "address")
        assert stored is not None and json.loads(stored.value["raw"]) == {"address": f"{PLACEHOLDER} 4"}
        (call,) = mem.calls.list()
        assert call.prompt is not None and call.completion is not None
        sent = json.loads(call.prompt)
        assert sent[0]["content"] == f"I live on {PLACEHOLDER}, \"{PLACEHOLDER}\" 4"
        assert json.loads(sent[1]["tool_calls"][0]["function"]["arguments"]) == {"address": f"{PLACEHOLDER} 4"}
        assert json.loads(call.completion) == {"facts": [{"content": f"Lives on {PLACEHOLDER}"}]}


@pytest.mark.usefixtures("backend")
def test_a_store_item_keyed_or_filed_under_the_text_is_erased_whole(mem: Memory, root: Path) -> None:
    pytest.importorskip("langgraph.store.base")
    from tiermem.integrations.langgraph import TiermemStore

    store = TiermemStore(mem)
    said = "I am moving to Lisbon in August"
    store.put(("default", "memories"), said.casefold(), {"text": said})  # docs/langgraph.md: the text is the key
    store.put(("default", "trips to lisbon in august"), "plan", {"text": "flights booked"})
    store.put(("default", "memories"), "cat", {"text": "my cat is called Miso"})
    assert store.search(("default",), query="moving to lisbon")  # embeds the items' texts

    planned = mem.purge(text="lisbon  in AUGUST", dry_run=True)
    report = mem.purge(text="lisbon  in AUGUST")

    assert planned.rows == report.rows == {"store_items": 2}
    assert planned.vectors == report.vectors
    assert holding(root, b"lisbon") == []
    assert store.get(("default", "memories"), said.casefold()) is None
    assert store.get(("default", "trips to lisbon in august"), "plan") is None
    kept = store.get(("default", "memories"), "cat")
    assert kept is not None and kept.value == {"text": "my cat is called Miso"}
    assert store.list_namespaces() == [("default", "memories")]
    # a namespace's first label is the user's id, not a text: purging that word keeps the items
    assert "store_items" not in mem.purge(text="default").rows
    assert store.get(("default", "memories"), "cat") is not None


@pytest.mark.parametrize(("stored", "expected", "count"), [
    ('{"a": "Quokka\\nStreet"}', '{"a": "[purged]"}', 1),  # escaped line break
    ('x "QUOKKA\\u0020\\tstreet" y', 'x "[purged]" y', 1),  # \u escapes, in any text
    ('{"q": "say \\"Quokka Street\\""}', '{"q": "say \\"[purged]\\""}', 1),  # plain inside a literal
    ('"{\\"a\\": \\"Quokka\\\\nStreet\\"}"', '"{\\"a\\": \\"[purged]\\"}"', 1),  # JSON in a JSON string
    ('[{"content": "see Quokka\\nStreet soon[... 9 more characters]', '[{"content": "see [purged] soon[... 9 more'
     ' characters]', 1),  # a clipped prompt: the last literal has no closing quote
    ('C:\\new "path\\x" Quokka Street', 'C:\\new "path\\x" [purged]', 1),  # not JSON: matched as it is
], ids=["line break", "unicode escape", "plain", "JSON in JSON", "clipped", "not JSON"])
def test_the_matcher_reads_json_escapes(stored: str, expected: str, count: int) -> None:
    matcher = Matcher("quokka street")
    assert matcher.sub(stored) == (expected, count)
    assert matcher.found(stored) and not matcher.found(expected)
