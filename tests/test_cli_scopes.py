"""``tiermem scopes``: the person and project scopes of a folder, as options the other commands take."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from click.testing import CliRunner

from tiermem.agents.project import open_scopes
from tiermem.cli.main import cli


def test_scopes_names_the_scopes_the_hooks_use(tmp_path: Path) -> None:
    repo, root = tmp_path / "shop", tmp_path / "mem"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "first"], check=True)
    env = {"TIERMEM_EMBEDDER": "hash"}
    result = CliRunner().invoke(cli, ["--root", str(root), "scopes", str(repo), "--json"], env=env)
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    assert shown["project"]["key_kind"] == "root-commit" and shown["project"]["user"].startswith("project-")
    project = shown["project"]
    added = CliRunner().invoke(cli, ["--root", str(root), "--user", project["user"], "--agent", project["agent"],
                                     "remember", "The billing API lives in services/ledgerd"], env=env)
    assert added.exit_code == 0, added.output
    person_mem, project_mem, scopes = open_scopes(root, repo, embedder="hash")
    try:
        assert (scopes.person.user_id, scopes.person.agent_name) == (shown["person"]["user"], shown["person"]["agent"])
        assert [f.content for f in project_mem.facts.list()] == ["The billing API lives in services/ledgerd"]
        assert person_mem.facts.list() == []
    finally:
        person_mem.close()
        project_mem.close()
    text = CliRunner().invoke(cli, ["--root", str(root), "scopes", str(repo)], env=env).output
    assert f"--user {project['user']} --agent coding" in text and "root-commit key of" in text
