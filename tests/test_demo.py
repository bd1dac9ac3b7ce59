"""``tiermem demo``: the main job runs end to end, with and without an LLM, and is idempotent."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from fake_openai_server import FakeLLMServer, RecordedRequest

from tiermem import Memory
from tiermem.testing import HashEmbedder

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}


def run_demo(root: Path, env: dict[str, str]) -> str:
    from tiermem.cli.main import cli

    result = CliRunner().invoke(cli, ["--root", str(root), "demo"], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def test_demo_without_llm_fills_context_daily_and_core(tmp_path: Path) -> None:
    out = run_demo(tmp_path, ENV)
    for marker in ("1. Context tier", "2. Daily tier", "3. Core tier", "4. Search", "5. Injection",
                   "No LLM configured", "TIERMEM_LLM=openai:gpt-4o-mini"):
        assert marker in out
    with Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC") as mem:
        days = mem.daily.days()
        assert len(days) == 3
        journal = "".join(mem.daily.read(d) for d in days)
        assert "## Trimmed Context" in journal and "## Session Notes" in journal
        assert "moving to Lisbon in August" in journal and "[SCHEDULED]" not in journal
        assert {f.content for f in mem.facts.list()} == {
            "Prefers short answers with code over long explanations", "Is vegetarian",
            "On call the first week of every month"}
        lines = journal.count("\n- ")
    run_demo(tmp_path, ENV)
    with Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert "".join(mem.daily.read(d) for d in mem.daily.days()).count("\n- ") == lines


def _model(request: RecordedRequest) -> str:
    system = request.messages[0]["content"]
    if "[MEMORY]" in system:
        return ("[MEMORY]\n## Work\n- Maya joined Fernhill as a backend engineer on the payments team.\n"
                "[DREAM]\nAdded her role from the journal.")
    if "Summarise" in system or "summar" in system.lower() and "newFacts" not in system:
        return "- Maya talked about her work."
    facts = [{"content": "Works at Fernhill", "category": "context", "confidence": 0.9}]
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


def test_demo_with_llm_extracts_and_dreams(tmp_path: Path) -> None:
    with FakeLLMServer(_model) as server:
        env = {**ENV, "TIERMEM_LLM": "openai-compatible:llama3.1", "TIERMEM_LLM_BASE_URL": server.url}
        out = run_demo(tmp_path, env)
        assert "Deep Dream: written" in out
    with Memory(tmp_path, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert "Works at Fernhill" in {f.content for f in mem.facts.list()}
        assert mem.core.items() == ["Maya joined Fernhill as a backend engineer on the payments team."]
