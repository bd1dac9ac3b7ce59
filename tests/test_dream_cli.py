"""``tiermem dream`` and ``tiermem rollback``: one library call each, JSON output, exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.models import registry
from tiermem.testing import ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

REPLY = ("[MEMORY]\n- Works as a backend engineer at Acme Corp.\n- Is moving from Lyon to Munich.\n"
         "- Has a pet giraffe named Gerald.\n[DREAM]\nAdded the move.\n")
ENV = {"TIERMEM_LLM": "dreamtest:any", "TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}


@pytest.fixture
def llm(monkeypatch: pytest.MonkeyPatch) -> ScriptedChatModel:
    model = ScriptedChatModel([])
    monkeypatch.setitem(registry._LLMS, "dreamtest", lambda name, options: model)
    return model


@pytest.fixture
def root(tmp_path: Path) -> Path:
    with Memory(tmp_path, embedder="hash", timezone="UTC") as mem:  # the real clock: the CLI uses it too
        mem.core.write("- Works as a backend engineer at Acme Corp.\n")
        mem.daily.append("Session Notes", ["user: We are moving from Lyon to Munich."])
    return tmp_path


def run(root: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env=ENV)
    return result.exit_code, result.output


def test_dream_dry_run_then_write_then_rollback(root: Path, llm: ScriptedChatModel) -> None:
    llm.replies += [REPLY, REPLY]
    code, out = run(root, "dream", "--days", "1", "--dry-run")
    assert code == 0 and out.startswith("skipped: dry run")
    assert "+- Is moving from Lyon to Munich." in out and "dropped (not in the sources): Has a pet giraffe" in out
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == "- Works as a backend engineer at Acme Corp.\n"
    code, out = run(root, "dream", "--json")
    data = json.loads(out)
    assert code == 0 and data["status"] == "written" and data["bullets"] == 2
    assert [d["text"] for d in data["dropped"]] == ["Has a pet giraffe named Gerald."]
    assert "Is moving from Lyon to Munich." in (root / "MEMORY.md").read_text(encoding="utf-8")
    code, out = run(root, "dream", "--json")  # unchanged daily content: no LLM call
    assert code == 0 and json.loads(out)["status"] == "skipped" and llm.remaining == []
    code, out = run(root, "rollback", "--list", "--json")
    assert code == 0 and [v["cause"] for v in json.loads(out)] == ["dream"]
    code, out = run(root, "rollback", "--json")
    assert code == 0 and json.loads(out)["restored"]["id"] == data["versionId"]
    assert (root / "MEMORY.md").read_text(encoding="utf-8") == "- Works as a backend engineer at Acme Corp.\n"
    code, out = run(root, "rollback", "--list")
    assert code == 0 and "replaced by rollback" in out and "replaced by dream" in out


def test_refused_dream_exits_1(root: Path, llm: ScriptedChatModel) -> None:
    llm.replies.append("I could not find anything to remember.")
    code, out = run(root, "dream")
    assert code == 1 and out.startswith("refused: unusable reply")


def test_rollback_without_versions_is_a_one_line_error(root: Path, llm: ScriptedChatModel) -> None:
    code, out = run(root, "rollback")
    assert code == 1 and "no MEMORY.md versions" in out and "Traceback" not in out
    code, out = run(root, "rollback", "0")
    assert code == 2


@pytest.mark.parametrize("command", ["dream", "rollback"])
def test_help_has_an_example(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--help"])
    assert result.exit_code == 0 and "Example:" in result.output and f"tiermem {command}" in result.output
