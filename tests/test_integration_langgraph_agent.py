"""TiermemStore inside real LangGraph graphs (issue 17): a ``create_react_agent`` whose tools use the
store, driven by langchain-core's in-memory fake chat model; a graph run with ``ainvoke``; and
docs/langgraph.md's example, run as written."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import pytest

from tiermem import Memory

pytest.importorskip("langgraph.prebuilt")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage  # noqa: E402
from langchain_core.outputs import ChatResult  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langgraph.graph import START, StateGraph  # noqa: E402
from langgraph.prebuilt import InjectedStore, create_react_agent  # noqa: E402
from langgraph.store.base import BaseStore  # noqa: E402

from tiermem.integrations.langgraph import TiermemStore  # noqa: E402

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL

DOC = Path(__file__).parent.parent / "docs" / "langgraph.md"


class ScriptedToolModel(GenericFakeChatModel):
    """The fake chat model with tools bound (it answers from its script) and a record of every
    prompt it was sent; a script left unused fails the test."""

    sent: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> Any:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.sent.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


@tool
def save_memory(text: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Save something worth remembering about Ada."""
    store.put(("ada", "memories"), f"m{len(store.search(('ada', 'memories'), limit=100))}", {"text": text})
    return "saved"


@tool
def recall_memories(query: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Look up what is remembered about Ada."""
    return "\n".join(item.value["text"] for item in store.search(("ada", "memories"), query=query, limit=2))


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved")  # langchain's create_agent is not installed
def test_react_agent_saves_and_recalls_through_the_store(mem: Memory) -> None:
    store = TiermemStore(mem)
    script = iter([call("save_memory", {"text": "Ada's cat is called Miso"}, "c1"), AIMessage(content="Noted."),
                   call("save_memory", {"text": "Ada moves to Lisbon in August"}, "c2"), AIMessage(content="Noted."),
                   call("recall_memories", {"query": "what is the cat called"}, "c3"),
                   AIMessage(content="Your cat is Miso.")])
    model = ScriptedToolModel(messages=script)
    model.sent = []
    agent = create_react_agent(model, [save_memory, recall_memories], store=store)
    agent.invoke({"messages": [HumanMessage("My cat is called Miso.")]})
    agent.invoke({"messages": [HumanMessage("I move to Lisbon in August.")]})
    result = agent.invoke({"messages": [HumanMessage("What is my cat called?")]})
    assert result["messages"][-1].content == "Your cat is Miso."
    assert next(script, None) is None  # every scripted reply was used, none more
    stored = {i.key: i.value for i in store.search(("ada",), limit=10)}
    assert stored == {"m0": {"text": "Ada's cat is called Miso"}, "m1": {"text": "Ada moves to Lisbon in August"}}
    tool_result = [m for m in model.sent[-1] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_result] == ["Ada's cat is called Miso\nAda moves to Lisbon in August"]


def test_a_graph_uses_the_store_from_async_code(mem: Memory) -> None:
    store = TiermemStore(mem, user_id="ada")

    async def note(state: dict[str, Any], *, store: BaseStore) -> dict[str, Any]:
        await store.aput(("notes",), state["key"], {"text": state["text"]})
        found = await store.asearch(("notes",), query=state["text"])
        return {"seen": [item.key for item in found]}

    builder: StateGraph[Any] = StateGraph(dict)
    builder.add_node("note", note)
    builder.add_edge(START, "note")
    graph = builder.compile(store=store)

    async def run() -> list[Any]:
        return await asyncio.gather(*(graph.ainvoke({"key": f"k{i}", "text": f"note number {i} about tea"})
                                      for i in range(5)))

    asyncio.run(run())
    assert sorted(i.key for i in store.search((), limit=10)) == [f"k{i}" for i in range(5)]
    assert store.search(("notes",), query="note number 3 about tea")[0].key == "k3"


def test_the_docs_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
                               ) -> None:
    (code,) = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    monkeypatch.chdir(tmp_path)
    # the default embedder, as for a reader (issue 22, item 13)
    exec(compile(code, str(DOC), "exec"), {"__name__": "langgraph_doc"})  # noqa: S102 - the documentation
    assert capsys.readouterr().out == "my cat is called Miso\n"
    with Memory(tmp_path / ".tiermem") as mem:
        assert mem.embedder.model_id.startswith("all-MiniLM-L6-v2")
        found = TiermemStore(mem).search(("ada",), limit=10)
        assert sorted(i.value["text"] for i in found) == ["I am moving to Lisbon in August", "my cat is called Miso"]
