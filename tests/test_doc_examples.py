"""Every Python example of README.md and docs/*.md runs in a test, with the default embedder (the
local model), and shows what it says it shows (issue 22, item 13).

The examples of README.md run in tests/test_readme.py and those of the framework pages in the
adapters' tests; the others run here: docs/mcp.md's client against the real ``tiermem mcp`` over
stdio, the ``recall`` reply docs/mcp.md shows, and the export and purge examples. The inventory
test fails when an example appears that no test runs.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from tiermem import Memory
from tiermem.mcp.server import build_server

ROOT = Path(__file__).parent.parent
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)

#: (document, n-th Python block) -> the test module that runs it
RUN_BY = {
    ("README.md", 1): "test_readme.py", ("README.md", 2): "test_readme.py", ("README.md", 3): "test_readme.py",
    ("README.md", 4): "test_readme.py", ("README.md", 5): "test_readme.py",
    ("docs/langgraph.md", 1): "test_integration_langgraph_agent.py",
    ("docs/openai-agents.md", 1): "test_integration_openai_agents.py",
    ("docs/pydantic-ai.md", 1): "test_integration_pydantic_ai.py",
    ("docs/mcp.md", 1): "test_doc_examples.py",
    ("docs/export.md", 1): "test_doc_examples.py",
    ("docs/security.md", 1): "test_doc_examples.py",
}


def blocks(document: str, language: str) -> list[str]:
    return [code for lang, code in BLOCK.findall((ROOT / document).read_text(encoding="utf-8")) if lang == language]


def documents() -> list[str]:
    return ["README.md", *sorted(f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md"))]


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A HOME whose cache holds the local model's graph, built once for the module: by the MCP
    server (which finds it under HOME) or by the tests in process (``TIERMEM_CACHE_DIR``)."""
    return tmp_path_factory.mktemp("home")


@pytest.fixture
def default_embedder(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CACHE_DIR", str(home / ".cache" / "tiermem"))
    monkeypatch.delenv("TIERMEM_EMBEDDER", raising=False)


def test_every_python_example_is_run_by_a_test() -> None:
    found = {(doc, n) for doc in documents() for n, _ in enumerate(blocks(doc, "python"), 1)}
    assert found == set(RUN_BY), "a Python example no test runs (or a listed one is gone): add its test to RUN_BY"
    for (doc, _), module in RUN_BY.items():
        assert Path(doc).name in (ROOT / "tests" / module).read_text(encoding="utf-8"), (doc, module)
    for doc in documents():
        for code in blocks(doc, "python"):
            ast.parse(code)  # a complete program, not a fragment


def _run_example(code: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300) -> str:
    result = subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                            timeout=timeout, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


# --- docs/mcp.md ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("default_embedder")
def test_the_mcp_client_example_finds_what_it_remembered_over_stdio(tmp_path: Path, home: Path) -> None:
    """The example as written, with its root moved into the test's folder; the server it starts
    (``tiermem`` on PATH) inherits only HOME and PATH, so it runs on the defaults: SQLite and the
    local embedder (its model cache under that HOME)."""
    (code,) = blocks("docs/mcp.md", "python")
    root = tmp_path / "alice"
    code = code.replace("/home/alice/.tiermem", str(root))
    env = {"PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}", "HOME": str(home)}
    out = _run_example(code, tmp_path, env)
    printed = ast.literal_eval(out.strip())
    assert printed["text"] == "Prefers dark mode" and printed["tier"] == "fact", out
    with Memory(root) as mem:  # the store the server wrote, read back with the same default embedder
        assert mem.embedder.model_id.startswith("all-MiniLM-L6-v2")
        assert printed["ref"] == mem.facts.list()[0].id


@pytest.mark.usefixtures("default_embedder")
def test_the_recall_reply_for_nothing_relevant_is_as_documented(tmp_path: Path) -> None:
    (shown,) = [json.loads(text) for text in blocks("docs/mcp.md", "json") if "quantum chromodynamics" in text]

    async def main() -> dict[str, Any]:
        with Memory(tmp_path / "mem") as mem:
            async with Client(build_server(mem)) as client:
                await client.call_tool("remember", {"content": "Prefers dark mode", "category": "preference"})
                result = await client.call_tool("recall", {"query": shown["query"], "min_score": shown["min_score"]})
                assert isinstance(result.structured_content, dict)
                return result.structured_content

    assert anyio.run(main) == shown


# --- docs/export.md and docs/security.md -----------------------------------------------------------
@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.chdir(tmp_path)
    yield tmp_path


@pytest.mark.usefixtures("default_embedder")
def test_the_export_example_restores_into_another_root(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with Memory("./.tiermem") as mem:
        mem.facts.add("Prefers dark mode")
        mem.for_scope("maya").facts.add("Maya is moving to Lisbon")
    (code,) = blocks("docs/export.md", "python")
    exec(compile(code, "docs/export.md", "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
    assert capsys.readouterr().out == "{'rows': 2, 'added': 2, 'already_there': 0, 'refused': 0}\n"
    with Memory("./restored") as restored:
        assert [f.content for f in restored.facts.list()] == ["Prefers dark mode"]
        assert [f.content for f in restored.for_scope("maya").facts.list()] == ["Maya is moving to Lisbon"]


@pytest.mark.usefixtures("default_embedder")
def test_the_purge_example_erases_the_fact(in_tmp: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (code,) = blocks("docs/security.md", "python")
    exec(compile(code, "docs/security.md", "exec"), {"__name__": "__main__"})  # noqa: S102 - our own docs
    shown = code.split("print(report.summary())", 1)[1].split("#", 1)[1].strip()
    assert capsys.readouterr().out == shown + "\n"
    with Memory("./.tiermem") as mem:
        assert mem.facts.list() == [] and not mem.search("Lisbon apartment", min_score=0)
