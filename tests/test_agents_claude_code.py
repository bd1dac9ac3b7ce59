"""Claude Code with tiermem, as a new user gets it (issue 23): the real ``claude -p`` (the version
`.ci/run` pins) against the fake model server, offline, in a temporary HOME, after
``tiermem setup claude-code --project`` in a repository whose settings already hold another hook.

The story: session 1 says where the billing API lives and how the person indents; the journal
holds that message once; tiermem's extraction (the fake server's scripted reply) puts the
preference in the person scope and the billing path in the project scope once the queue is
drained; session 2 in the same repository gets both, and the next step of a half-done plan;
session 3 in another repository gets the preference only; ``setup --remove`` leaves the other
hook. No hook error reaches the client, and the hook log stays empty.

The default (local) embedder, SQLite; the hooks and the store's two backends are tested without
the client in tests/test_agents_hooks.py and tests/test_agents_save.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_clients import (
    BILLING_FACT,
    FIRST_MESSAGE,
    REPLY,
    TABS_FACT,
    Responder,
    Run,
    binary,
    client_env,
    git_repo,
    hook_errors,
    hook_failures,
    hook_log,
    memory_root,
    model_cache,  # noqa: F401 - a fixture
    resident_server_stopped,
    run_client,
    saved,
    shared_model_cache,  # noqa: F401 - a fixture
    tiermem_cli,
    tool_results,
    wait_for_server,
)
from fake_openai_server import FakeLLMServer, anthropic_reply, anthropic_tool_use

from tiermem.agents.project import open_scopes

pytestmark = pytest.mark.usefixtures("shared_model_cache")

OTHER_HOOK = "other-hook-ran"
PLAN_STEPS = ["write the ledgerd migration", "run it against staging", "switch the billing API over"]


def _other_hook(repo: Path, log: Path) -> bytes:
    """The project's settings before setup: a SessionStart hook of the user's own."""
    hook = {"type": "command", "command": f"cat > /dev/null; echo {OTHER_HOOK} >> {log}"}
    settings = {"hooks": {"SessionStart": [{"hooks": [hook]}]}, "env": {"SOMETHING": "kept"}}
    (repo / ".claude").mkdir()
    (repo / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return (repo / ".claude" / "settings.json").read_bytes()


def _claude(claude: str, repo: Path, home: Path, server: FakeLLMServer, prompt: str) -> Run:
    env = client_env(home, f"{Path(claude).parent}:/usr/bin:/bin", ANTHROPIC_BASE_URL=server.base_url,
                     ANTHROPIC_API_KEY="sk-ant-fake", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                     # `tiermem mcp` needs 2-3 s to answer (importing the mcp SDK), more on a busy machine;
                     # Claude Code gives an MCP server 5 s by default, then goes on without its tools
                     MCP_CONNECT_TIMEOUT_MS="30000")
    run = run_client([claude, "-p", prompt], repo, env, server, "/messages")
    assert run.returncode == 0 and REPLY in run.stdout, run.stderr[-3000:]
    assert hook_errors(run.stderr) == [], run.stderr[-3000:]  # no hook error reached the client
    assert run.requests, "claude sent no model request"
    return run


def _recall(query: str) -> dict[str, object]:
    """The model's turn that calls the tiermem MCP server's ``recall`` tool."""
    return anthropic_reply("", tool_uses=[anthropic_tool_use("mcp__tiermem__recall", {"query": query})])


def _missing(root: Path, run: Run, text: str) -> None:
    context = [m for r in run.requests for m in r.messages if m.get("role") == "system"]
    raise AssertionError(f"{text!r} did not reach the model; hook log: {hook_log(root)}; context: {context}")


def _facts(root: Path, repo: Path) -> tuple[list[str], list[str]]:
    person, project, _ = open_scopes(root, repo, queue_replay=False, shutdown_flush_seconds=0)
    with person, project:
        return [f.content for f in person.facts.list()], [f.content for f in project.facts.list()]


def test_claude_code_remembers_the_person_everywhere_and_the_project_in_its_repository(tmp_path: Path) -> None:
    claude = binary("claude")
    home, other_log = tmp_path / "home", tmp_path / "other-hook.log"
    home.mkdir()
    shop, blog = git_repo(tmp_path / "shop", "shop"), git_repo(tmp_path / "blog", "blog")
    before = _other_hook(shop, other_log)
    replies = Responder()
    with FakeLLMServer(replies) as server:
        root = memory_root(tmp_path / "memory", server)
        for repo in (shop, blog):  # the same memory root: one person, two projects
            tiermem_cli(root, "setup", "claude-code", "--project", str(repo), env=client_env(home, "/usr/bin:/bin"))
        with resident_server_stopped(root):
            # session 1: the message is journaled once, as one record; nothing is extracted in a hook
            first = _claude(claude, shop, home, server, FIRST_MESSAGE)
            assert other_log.read_text().split() == [OTHER_HOOK]  # the user's own hook still runs
            assert saved(root, shop, FIRST_MESSAGE) == [f"user: {FIRST_MESSAGE}"]  # one record, once, queued
            assert server.requests_with(TABS_FACT) == []  # no extraction before the queue is drained

            # the queue drained (as a worker would): each fact in its scope
            tiermem_cli(root, "queue", "flush")
            person_facts, project_facts = _facts(root, shop)
            assert person_facts == [TABS_FACT] and project_facts == [BILLING_FACT]
            person, project, _ = open_scopes(root, shop, queue_replay=False, shutdown_flush_seconds=0)
            with person, project:  # a plan left half done in this repository
                plan = project.plans.start("Move billing to ledgerd", PLAN_STEPS)
                project.plans.check(plan.id, 0)

            # session 2, same repository: both facts and the plan's next step reach the model
            wait_for_server(root)  # started by session 1's hooks (which never wait for it)
            replies.script(_recall("where is the billing API?"))  # the model asks the MCP server too
            second = _claude(claude, shop, home, server, "Where do I start today?")
            request = (second.with_text(TABS_FACT) or [_missing(root, second, TABS_FACT)])[0]
            assert BILLING_FACT in request.text and f"Next: {PLAN_STEPS[1]}" in request.text
            [found] = tool_results(second)
            assert BILLING_FACT in found  # the MCP server serves this repository's project scope

            # session 3, another repository: the person's preference only
            replies.script(_recall("indentation with tabs or the billing API"))
            third = _claude(claude, blog, home, server, "Add a post about summer.")
            assert third.with_text(TABS_FACT) and not third.with_text("services/ledgerd")
            assert not third.with_text(PLAN_STEPS[1])
            [found] = tool_results(third)
            assert TABS_FACT in found  # and the person's scope, in any repository
        print(f"claude -p runs: {first.seconds:.1f} s, {second.seconds:.1f} s, {third.seconds:.1f} s; "
              f"hook log: {hook_log(root)}")
    assert hook_failures(root) == []  # no hook failed

    # setup --remove: the user's hook and settings stay as they were, the files setup made go
    tiermem_cli(root, "setup", "claude-code", "--project", str(shop), "--remove",
                env=client_env(home, "/usr/bin:/bin"))
    assert (shop / ".claude" / "settings.json").read_bytes() == before
    assert not (shop / ".mcp.json").exists() and not (shop / ".claude" / "settings.local.json").exists()


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
