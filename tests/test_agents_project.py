"""The person and project scopes of a coding session (R74): settings, project keys, extraction routing."""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tiermem import ConfigError, Memory
from tiermem.agents.project import (
    PROJECTS_FILE,
    ProjectKey,
    coding_scopes,
    project_key,
    run_git,
    without_credentials,
)
from tiermem.config import Settings, load_settings
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

GIT = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-c", "init.defaultBranch=main"]


def git(folder: Path, *args: str) -> str:
    done = subprocess.run([*GIT, "-C", str(folder), *args], capture_output=True, check=True, text=True)
    return done.stdout.strip()


def repository(path: Path, commits: int = 1) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for n in range(commits):
        (path / f"f{n}.txt").write_text(f"{path.name} {n}\n")  # repositories with the same first commit are one project
        git(path, "add", ".")
        git(path, "commit", "-q", "-m", f"c{n}")
    return path


class CountingGit:
    """The real git runner, counting the commands it ran (or answering ``None`` when ``broken``)."""

    def __init__(self, broken: bool = False) -> None:
        self.calls: list[tuple[str, ...]] = []
        self.broken = broken

    def __call__(self, folder: Path, args: Sequence[str], timeout: float) -> str | None:
        self.calls.append(tuple(args))
        return None if self.broken else run_git(folder, args, timeout)


# --- settings -------------------------------------------------------------------------------------
def test_coding_settings_have_defaults_and_bad_values_are_config_errors(tmp_path: Path) -> None:
    settings = load_settings(tmp_path)
    assert (settings.coding_agent_name, settings.coding_start_tokens, settings.coding_prompt_tokens) == \
        ("coding", 1500, 600)
    assert settings.person_categories() == ("preference", "behavior", "correction")
    for bad in ({"coding_person": "../etc"}, {"coding_agent_name": "a b"}, {"coding_start_tokens": 0},
                {"coding_prompt_tokens": -1}, {"coding_person_categories": "preference,opinion"}):
        with pytest.raises(ConfigError):
            load_settings(tmp_path, bad)
    assert load_settings(tmp_path, {"coding_person_categories": "none"}).person_categories() == ()
    assert load_settings(tmp_path, {"coding_person": "maya"}).coding_person_name() == "maya"


def test_person_name_is_the_os_user_fitted_to_a_user_id(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LOGNAME", "José Silva..x")
    assert Settings().coding_person_name() == "Jos__Silva.x"
    monkeypatch.setenv("LOGNAME", "---")
    assert Settings().coding_person_name() == "person"


# --- project keys ---------------------------------------------------------------------------------
def test_root_commit_key_is_shared_by_a_worktree_and_a_moved_clone(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    repo = repository(tmp_path / "repo", commits=2)
    (repo / "sub").mkdir()
    first = git(repo, "rev-list", "--max-parents=0", "HEAD")
    key = project_key(root, repo / "sub")
    assert (key.kind, key.key, key.top) == ("root-commit", f"root-commit:{first}", repo.resolve())
    assert key.user.startswith("project-") and len(key.user) == len("project-") + 16
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    subprocess.run(["git", "clone", "-q", str(repo), str(tmp_path / "clone")], check=True)
    shutil.move(tmp_path / "clone", tmp_path / "moved")
    assert project_key(root, tmp_path / "wt").user == key.user
    assert project_key(root, tmp_path / "moved").user == key.user
    other = repository(tmp_path / "other")
    assert project_key(root, other).user != key.user


def test_key_is_cached_with_its_kind_and_git_runs_once_per_repository(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    repo = repository(tmp_path / "repo")
    counting = CountingGit()
    key = project_key(root, repo, git=counting)
    asked = len(counting.calls)
    assert asked >= 1
    assert project_key(root, repo, git=counting) == key and len(counting.calls) == asked
    cache = root / "agents" / PROJECTS_FILE
    data = json.loads(cache.read_text())
    assert data["projects"][str(repo.resolve())] == {"key": key.key, "kind": "root-commit", "user": key.user}
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600
    assert stat.S_IMODE(cache.parent.stat().st_mode) == 0o700


def test_no_commits_uses_the_remote_without_credentials(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo", commits=0)
    git(repo, "remote", "add", "origin", "https://bob:s3cret@git.example.org/team/shop.git")
    key = project_key(tmp_path / "mem", repo)
    assert (key.kind, key.key) == ("remote", "remote:https://git.example.org/team/shop")
    assert "s3cret" not in (tmp_path / "mem" / "agents" / PROJECTS_FILE).read_text()
    assert without_credentials("git@github.com:o/r.git") == "git@github.com:o/r"
    assert without_credentials("ssh://tok@host:22/o/r/?x=1#y") == "ssh://host:22/o/r"


def test_a_shallow_clone_uses_the_remote_not_its_cut_off_commit(tmp_path: Path) -> None:
    source = repository(tmp_path / "source", commits=3)
    url = source.resolve().as_uri()
    subprocess.run(["git", "clone", "-q", "--depth", "1", url, str(tmp_path / "shallow")], check=True)
    key = project_key(tmp_path / "mem", tmp_path / "shallow")
    assert (key.kind, key.key) == ("remote", f"remote:{url}")


def test_path_key_outside_a_repository_or_without_git(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    plain = tmp_path / "plain"
    plain.mkdir()
    counting = CountingGit()
    assert project_key(root, plain, git=counting) == ProjectKey(f"path:{plain.resolve()}", "path", plain.resolve())
    assert counting.calls == []  # no repository: git is not asked at all
    repo = repository(tmp_path / "repo")
    broken = CountingGit(broken=True)  # git missing, timed out or refusing
    assert project_key(root, repo, git=broken).kind == "path"
    assert project_key(root, repo).kind == "root-commit"  # a path key of a repository is asked again


def test_a_root_that_cannot_hold_the_cache_still_answers(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    root.write_text("a file, not a folder")
    repo = repository(tmp_path / "repo")
    assert project_key(root, repo).kind == "root-commit"


def test_scopes_of_a_working_directory(tmp_path: Path) -> None:
    repo = repository(tmp_path / "repo")
    settings = load_settings(tmp_path, {"coding_person": "maya", "coding_agent_name": "dev"})
    scopes = coding_scopes(tmp_path / "mem", repo, settings)
    assert (scopes.person.user_id, scopes.person.agent_name) == ("maya", "dev")
    assert (scopes.project.user_id, scopes.project.agent_name) == (scopes.key.user, "dev")


# --- extraction routing (both backends) -------------------------------------------------------------
def reply(new_facts: list[dict[str, object]], remove: list[int] | None = None) -> str:
    empty = {"summary": "", "shouldUpdate": False}
    return json.dumps({"user": {k: empty for k in ("workContext", "personalContext", "topOfMind")},
                       "history": {k: empty for k in ("recentMonths", "earlierContext", "longTermBackground")},
                       "newFacts": new_facts, "factsToRemove": remove or []})


TURNS = [{"role": "user", "content": "I always indent with tabs. The billing API lives in services/ledgerd."}]
PERSON, PROJECT = "maya", "project-0123456789abcdef"


def coding_memory(root: Path, clock: FakeClock, model: ScriptedChatModel, user: str = PROJECT,
                  agent: str = "coding") -> Memory:
    return Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user,
                  agent_name=agent, coding_person=PERSON)


@pytest.mark.usefixtures("backend")
def test_extraction_routes_person_categories_to_the_person_scope(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([reply([
        {"content": "Indents with tabs", "category": "preference", "confidence": 0.9},
        {"content": "The billing API lives in services/ledgerd", "category": "knowledge", "confidence": 0.9},
    ])])
    with coding_memory(root, clock, model) as mem:
        report = mem.extract(TURNS, thread_id="claude-code-s1")
        assert [f.content for f in report.added] == ["Indents with tabs", "The billing API lives in services/ledgerd"]
        person = mem.for_scope(PERSON, "coding")
        assert [f.content for f in person.facts.list()] == ["Indents with tabs"]
        assert [f.content for f in mem.facts.list()] == ["The billing API lives in services/ledgerd"]
        assert model.remaining == []


@pytest.mark.usefixtures("backend")
def test_extraction_shows_both_scopes_and_removes_by_short_id_in_either(root: Path, clock: FakeClock) -> None:
    with coding_memory(root, clock, ScriptedChatModel([])) as setup:
        person_fact = setup.for_scope(PERSON, "coding").facts.add("Indents with spaces", "preference", 0.9)
        project_fact = setup.facts.add("Billing lives in services/billing", "knowledge", 0.8)
        assert person_fact is not None and project_fact is not None
    shown = [person_fact, project_fact]
    model = ScriptedChatModel([reply([{"content": "Indents with tabs", "category": "correction", "confidence": 0.9}],
                                     remove=[1, 2])])
    with coding_memory(root, clock, model) as mem:
        report = mem.extract(TURNS)
        sent = model.requests[0].text
        assert all(fact.content in sent for fact in shown)
        assert {f.id for f in report.removed} == {person_fact.id, project_fact.id}
        assert mem.facts.list() == []
        assert [f.content for f in mem.for_scope(PERSON, "coding").facts.list()] == ["Indents with tabs"]


@pytest.mark.usefixtures("backend")
def test_other_scopes_are_not_routed(root: Path, clock: FakeClock) -> None:
    preference = {"content": "Writes commit messages in English", "category": "preference", "confidence": 0.9}
    for user, agent in (("alice", "default"), (PROJECT, "default"), (PERSON, "coding")):
        model = ScriptedChatModel([reply([preference])])
        with coding_memory(root / user / agent, clock, model, user, agent) as mem:
            mem.extract(TURNS)
            assert [f.content for f in mem.facts.list()] == ["Writes commit messages in English"]
            assert mem.for_scope(PERSON, "coding").facts.list() == ([] if user != PERSON else mem.facts.list())


# --- the MCP server of a coding agent (both backends, the real client over stdio) ----------------------------
def mcp_env() -> dict[str, str]:
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none", "TIERMEM_CODING_PERSON": PERSON,
           "TIERMEM_CACHE_DIR": os.environ["TIERMEM_CACHE_DIR"], "PATH": os.environ.get("PATH", "")}
    if "TIERMEM_DATABASE_URL" in os.environ:  # the postgres backend: the server uses the test's schema
        env["TIERMEM_DATABASE_URL"] = os.environ["TIERMEM_DATABASE_URL"]
    return env


async def call(client: Client, name: str, **arguments: object) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def serve_in(root: Path, cwd: Path, scenario: Callable[[Client], Awaitable[None]], log: Path) -> None:
    params = StdioServerParameters(command=sys.executable, cwd=cwd, env=mcp_env(),
                                   args=["-m", "tiermem.cli.main", "--root", str(root), "mcp", "--coding-agent"])

    async def main() -> None:
        with anyio.fail_after(90), log.open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                await scenario(client)

    anyio.run(main)


@pytest.mark.usefixtures("backend")
def test_mcp_server_of_a_coding_agent_serves_the_folders_project_and_the_person(tmp_path: Path) -> None:
    root, shop, other = tmp_path / "mem", repository(tmp_path / "shop"), repository(tmp_path / "other")
    ids: dict[str, str] = {}

    async def in_shop(client: Client) -> None:
        tabs = await call(client, "remember", content="Indents with tabs", category="preference")
        ledger = await call(client, "remember", content="The billing API lives in services/ledgerd")
        ids.update(tabs=tabs["fact"]["id"], ledger=ledger["fact"]["id"])
        await call(client, "daily_note", text="Moved the invoice export to ledgerd")
        listed = await call(client, "list_facts")
        assert [f["content"] for f in listed["facts"]] == ["Indents with tabs",
                                                           "The billing API lives in services/ledgerd"]
        hits = (await call(client, "recall", query="indent with tabs"))["hits"]
        assert hits[0]["ref"] == ids["tabs"]
        injection = (await client.read_resource("memory://injection")).contents[0]
        assert "Indents with tabs" in injection.text and "services/ledgerd" in injection.text  # type: ignore[union-attr]

    async def in_other(client: Client) -> None:
        assert [h["ref"] for h in (await call(client, "recall", query="indent with tabs"))["hits"]] == [ids["tabs"]]
        everything = (await call(client, "recall", query="billing API ledgerd", min_score=0))["hits"]
        assert [h["ref"] for h in everything] == [ids["tabs"]]  # the shop's facts stay in the shop
        await call(client, "forget", id=ids["tabs"])  # a person fact, from any project
        assert (await call(client, "list_facts"))["facts"] == []

    serve_in(root, shop, in_shop, tmp_path / "shop.log")
    serve_in(root, other, in_other, tmp_path / "other.log")
    settings = load_settings(root, {"coding_person": PERSON})
    project = coding_scopes(root, shop, settings).project
    with Memory(root, embedder="hash", user_id=project.user_id, agent_name="coding") as mem:
        assert [f.content for f in mem.facts.list()] == ["The billing API lives in services/ledgerd"]
        assert "Moved the invoice export to ledgerd" in mem.daily.read()
        assert mem.for_scope(PERSON, "coding").facts.list() == []
