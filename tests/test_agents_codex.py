"""Codex CLI with tiermem, as a new user gets it (issue 23): the real ``codex exec`` (the version
`.ci/run` pins) against the fake Responses server (a ``[model_providers.fake]`` of the user's
``config.toml``), offline, in a temporary HOME, after ``tiermem setup codex`` — which switches the
hooks on and marks them trusted in that ``config.toml``, so no ``--dangerously-bypass-hook-trust``.

Session 1 says where the billing API lives and how the person indents: the journal holds it once;
with the queue drained (the fake server's scripted extraction) each fact is in its scope; session 2
in the same repository gets both. No hook error reaches the client.
"""

from __future__ import annotations

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
    wait_for_server,
)
from fake_openai_server import FakeLLMServer

from tiermem.agents.project import open_scopes

pytestmark = pytest.mark.usefixtures("shared_model_cache")


def _codex_config(codex_home: Path, server: FakeLLMServer) -> None:
    """The user's own Codex config before setup: a model provider (the fake server), no plugin sync."""
    codex_home.mkdir(parents=True)
    (codex_home / "config.toml").write_text(
        'model = "gpt-5-fake"\nmodel_provider = "fake"\n\n'
        f'[model_providers.fake]\nname = "Fake"\nbase_url = "{server.url}"\nwire_api = "responses"\n'
        'env_key = "FAKE_API_KEY"\n\n[features]\nplugins = false\n')


def _codex(codex: str, repo: Path, home: Path, server: FakeLLMServer, prompt: str) -> Run:
    env = client_env(home, f"{Path(codex).parent}:/usr/local/bin:/usr/bin:/bin", CODEX_HOME=str(home / ".codex"),
                     FAKE_API_KEY="sk-fake")
    run = run_client([codex, "exec", prompt], repo, env, server, "/responses")
    assert run.returncode == 0 and REPLY in run.stdout, run.stderr[-3000:]
    hooks = [line.split()[1:] for line in run.stderr.splitlines() if line.startswith("hook: ")]
    # each trusted hook ran (an untrusted one is skipped silently) and completed: no hook error reached Codex
    assert [event for event, *status in hooks if status == ["Completed"]] == ["SessionStart", "UserPromptSubmit",
                                                                             "Stop"], run.stderr[-3000:]
    assert all(status in ([], ["Completed"]) for _, *status in hooks), run.stderr[-3000:]
    assert hook_errors(run.stderr) == [], run.stderr[-3000:]
    assert run.requests, "codex sent no model request"
    return run


def test_codex_journals_the_session_and_brings_both_facts_to_the_next_one(tmp_path: Path) -> None:
    codex = binary("codex")
    home = tmp_path / "home"
    shop = git_repo(tmp_path / "shop", "shop")
    with FakeLLMServer(Responder()) as server:
        _codex_config(home / ".codex", server)
        root = memory_root(tmp_path / "memory", server)
        tiermem_cli(root, "setup", "codex", env=client_env(home, "/usr/bin:/bin", CODEX_HOME=str(home / ".codex")))
        with resident_server_stopped(root):
            first = _codex(codex, shop, home, server, FIRST_MESSAGE)
            assert saved(root, shop, FIRST_MESSAGE) == [f"user: {FIRST_MESSAGE}"]  # one record, once, queued
            assert server.requests_with(TABS_FACT) == []  # nothing extracted inside a hook

            tiermem_cli(root, "queue", "flush")
            person, project, _ = open_scopes(root, shop, queue_replay=False, shutdown_flush_seconds=0)
            with person, project:
                assert [f.content for f in person.facts.list()] == [TABS_FACT]
                assert [f.content for f in project.facts.list()] == [BILLING_FACT]

            wait_for_server(root)  # started by session 1's hooks (which never wait for it)
            second = _codex(codex, shop, home, server, "Where do I start today?")
            assert [r for r in second.with_text(TABS_FACT) if BILLING_FACT in r.text], hook_log(root)
        print(f"codex exec runs: {first.seconds:.1f} s, {second.seconds:.1f} s; hook log: {hook_log(root)}")
    assert hook_failures(root) == []


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("CODEX_HOME", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
