"""The Pydantic AI toolset and instructions (tiermem.integrations.pydantic_ai).

Agents run on Pydantic AI's own test models: ``FunctionModel`` (a function plays the model: it
calls ``remember``, ``recall`` and ``forget`` and reads what they returned) and ``TestModel``;
the documented example runs on ``openai:`` against the fake OpenAI server's Responses API. The
store is real, on both backends.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import (
    FakeLLMServer,
    RecordedRequest,
    ReplySpec,
    response_function_call,
    response_message,
    responses_reply,
)
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, RetryPromptPart, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel

from tiermem import Memory
from tiermem.integrations.pydantic_ai import memory_instructions, memory_toolset
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")
MISO = "The user's cat is called Miso."


@pytest.fixture
def mem(root: Path, clock: FakeClock) -> Iterator[Memory]:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as memory:
        yield memory


def _returned(messages: list[ModelMessage]) -> Any:
    """What the last tool call returned (the last part of the last request)."""
    part = messages[-1].parts[-1]
    assert isinstance(part, ToolReturnPart), part
    return part.content


class Script:
    """A FunctionModel body: one step per model request; records what each request showed it."""

    def __init__(self, *steps: Any) -> None:
        self.steps = list(steps)
        self.infos: list[AgentInfo] = []
        self.seen: list[list[ModelMessage]] = []

    def __call__(self, messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        self.infos.append(info)
        self.seen.append(list(messages))
        step = self.steps.pop(0)
        return step(messages) if callable(step) else step


def test_function_model_remembers_then_recalls_then_forgets(mem: Memory) -> None:
    remembered: dict[str, Any] = {}

    def recall(messages: list[ModelMessage]) -> ModelResponse:
        remembered.update(_returned(messages))
        return ModelResponse(parts=[ToolCallPart("recall", {"query": "what is the cat called"})])

    def forget(messages: list[ModelMessage]) -> ModelResponse:
        hits = _returned(messages)["hits"]
        assert [hit["text"] for hit in hits] == [MISO]
        return ModelResponse(parts=[ToolCallPart("forget", {"id": hits[0]["ref"]})])

    script = Script(ModelResponse(parts=[ToolCallPart("remember", {"content": MISO, "category": "knowledge"})]),
                    recall, forget, lambda messages: ModelResponse(parts=[TextPart(_returned(messages)["status"])]))
    agent = Agent(FunctionModel(script), toolsets=[memory_toolset(mem)])
    result = agent.run_sync("My cat is called Miso; then forget it again.")
    assert result.output == "forgotten" and script.steps == []
    assert remembered["status"] == "remembered" and remembered["fact"]["content"] == MISO
    assert mem.facts.list() == []
    assert [f.name for f in script.infos[0].function_tools] == ["remember", "recall", "forget"]
    schema = script.infos[0].function_tools[0].parameters_json_schema
    assert "knowledge" in schema["properties"]["category"]["enum"] and schema["required"] == ["content"]


def test_the_model_reads_the_memory_ranked_for_its_prompt(mem: Memory) -> None:
    mem.facts.add("The user plays the cello on Sundays.", confidence=0.9)
    mem.facts.add(MISO, confidence=0.8)
    script = Script(*[ModelResponse(parts=[TextPart("ok")])] * 3)
    Agent(FunctionModel(script), toolsets=[memory_toolset(mem)]).run_sync("What is my cat called?")
    Agent(FunctionModel(script), toolsets=[memory_toolset(mem, max_tokens=30)]).run_sync("What is my cat called?")
    Agent(FunctionModel(script), instructions=memory_instructions(mem, max_tokens=30)).run_sync(
        "When do I play the cello?")
    full, cat, cello = (info.instructions or "" for info in script.infos)
    assert MISO in full and "cello on Sundays" in full
    assert MISO in cat and "cello" not in cat  # within the budget, the fact the prompt asks about stays
    assert "cello on Sundays" in cello and MISO not in cello


def test_bad_arguments_come_back_as_a_retry_prompt(mem: Memory) -> None:
    script = Script(ModelResponse(parts=[ToolCallPart("remember", {"content": "   "})]),
                    ModelResponse(parts=[ToolCallPart("forget", {"id": "fact_00000000"})]),
                    ModelResponse(parts=[TextPart("sorry")]))
    Agent(FunctionModel(script), toolsets=[memory_toolset(mem)]).run_sync("Remember nothing.")
    retries = [part for messages in script.seen for part in messages[-1].parts
               if isinstance(part, RetryPromptPart) or getattr(part, "outcome", None) == "retried"]
    assert [str(part.content) for part in retries] == [
        "content must not be empty", "no fact 'fact_00000000' in scope default/default"]
    assert mem.facts.list() == []


def test_test_model_runs_the_tools(mem: Memory) -> None:
    agent = Agent(TestModel(call_tools=["remember", "recall"]), toolsets=[memory_toolset(mem, instructions=False)])
    result = agent.run_sync("Remember something.")
    assert len(mem.facts.list()) == 1  # TestModel's made-up arguments went through the real checks
    assert "recall" in result.output and "remember" in result.output


# --- the documentation's example -------------------------------------------------------------------
DOC = Path(__file__).parent.parent / "docs" / "pydantic-ai.md"


def _doc_responder(request: RecordedRequest) -> ReplySpec:
    last = request.body["input"][-1]
    if last.get("type") == "function_call_output":
        return responses_reply(response_message("I will remember that Miso is your cat."))
    return responses_reply(response_function_call("remember", {"content": MISO, "category": "knowledge",
                                                               "confidence": 0.9}))


def test_the_documented_example_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    [code] = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    with FakeLLMServer(_doc_responder) as server:
        monkeypatch.chdir(tmp_path)
        monkeypatch.setenv("OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the default embedder, as for a reader (issue 22, 13)
        exec(compile(code, str(DOC), "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
        assert [r.path for r in server.requests] == ["/v1/responses", "/v1/responses"]
    assert "I will remember that Miso is your cat." in capsys.readouterr().out
    assert "You are a helpful assistant." in json.dumps(server.requests[0].body)
    with Memory(tmp_path / ".tiermem", user_id="ada") as mem:
        assert [f.content for f in mem.facts.list()] == [MISO]


@pytest.mark.sqlite_only  # about imports, not storage: once is enough
def test_importing_tiermem_imports_neither_framework() -> None:
    code = ("import sys, tiermem, tiermem.integrations; from tiermem import Memory;"
            " print(sorted(m for m in sys.modules if m.split('.')[0] in ('agents', 'pydantic_ai')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
