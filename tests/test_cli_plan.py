"""The ``tiermem plan`` commands: JSON output, exit codes (0 ok, 1 error, 2 usage), help text."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli.main import cli

pytestmark = pytest.mark.usefixtures("backend")

STEPS = ["write tests", "fix bugs", "release"]


def run(root: Path, *args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env={"TIERMEM_EMBEDDER": "hash"}, input=stdin)
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output  # stdout, or the error


def test_cli_start_check_show_list_resume(tmp_path: Path) -> None:
    code, out = run(tmp_path, "plan", "start", "Ship v1", *STEPS, "--json")
    assert code == 0
    started = json.loads(out)
    assert started["status"] == "active" and started["progress"] == {"done": 0, "total": 3}
    plan_id = started["id"]
    code, out = run(tmp_path, "plan", "check", plan_id, "1", "--json")
    assert code == 0 and json.loads(out)["items"][1] == {"index": 1, "text": "fix bugs", "done": True}
    code, out = run(tmp_path, "plan", "show")
    assert code == 0 and f"{plan_id}  active  1/3  Ship v1" in out and "[x] fix bugs" in out
    code, out = run(tmp_path, "plan", "resume")
    assert code == 0 and out.startswith('You were working on the plan "Ship v1"') and "Next: write tests" in out
    code, out = run(tmp_path, "plan", "start", "Other", "--file", "-", "--json", stdin="- [ ] a\n- [x] b\n")
    assert code == 0 and json.loads(out)["progress"] == {"done": 1, "total": 2}
    code, out = run(tmp_path, "plan", "list", "--status", "paused", "--json")
    assert code == 0 and [p["id"] for p in json.loads(out)] == [plan_id]
    for command, status in (("resume", "active"), ("pause", "paused"), ("complete", "completed")):
        code, out = run(tmp_path, "plan", command, plan_id, "--json")
        assert code == 0 and json.loads(out)["status"] == status
    code, out = run(tmp_path, "plan", "uncheck", plan_id, "1")
    assert code == 1 and "completed" in out


def test_cli_errors(tmp_path: Path) -> None:
    assert run(tmp_path, "init")[0] == 0
    code, out = run(tmp_path, "plan", "show")
    assert code == 1 and "no active plan" in out
    code, out = run(tmp_path, "plan", "start", "x", "--json")
    assert code == 2
    code, out = run(tmp_path, "plan", "start", "x", "step")
    plan_id = out.split()[0]
    code, out = run(tmp_path, "plan", "check", plan_id, "5")
    assert code == 1 and "out of range" in out and "Traceback" not in out
    code, out = run(tmp_path, "plan", "abandon", "plan_00000000")
    assert code == 1 and "no plan" in out


def test_every_plan_command_has_help_with_an_example() -> None:
    group = cli.commands["plan"]
    assert "Example" in (group.help or "")
    commands = group.commands  # type: ignore[attr-defined]
    assert set(commands) == {"list", "show", "start", "check", "uncheck", "pause", "resume", "complete", "abandon"}
    for name, command in commands.items():
        assert "Example:" in (command.help or ""), name
        assert f"tiermem plan {name}" in (command.help or ""), name
