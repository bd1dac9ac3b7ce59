"""Gemini CLI with tiermem (issue 23): the real ``gemini -m gemini-2.5-flash -p`` (the version
`.ci/run` pins; it needs Node 20 or later) against the fake server's Gemini API
(``GOOGLE_GEMINI_BASE_URL``), offline, in a temporary HOME, after ``tiermem setup gemini
--project`` in a folder the user trusts (``~/.gemini/trustedFolders.json``).

One session (Gemini CLI takes about 10 s to start): the session-start hook's memory reaches the
model request, the session is journaled once, without the context the hooks added, and no hook
error reaches the client.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from agent_clients import (
    FIRST_MESSAGE,
    REPLY,
    TABS_FACT,
    Responder,
    binary,
    client_env,
    git_repo,
    hook_errors,
    hook_failures,
    hook_log,
    memory_root,
    model_cache,  # noqa: F401 - a fixture
    node_major,
    resident_server_stopped,
    run_client,
    shared_model_cache,  # noqa: F401 - a fixture
    tiermem_cli,
)
from fake_openai_server import FakeLLMServer

from tiermem.agents.project import open_scopes
from tiermem.tiers.markdown import parse_records

pytestmark = pytest.mark.usefixtures("shared_model_cache")

MODEL = "gemini-2.5-flash"  # a fixed model: the default "auto" asks a classifier model first


def _gemini_user_settings(home: Path, repo: Path) -> None:
    """The user's Gemini CLI settings: an API key login, no telemetry or updates, and the repository trusted."""
    folder = home / ".gemini"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(json.dumps({
        "security": {"auth": {"selectedType": "gemini-api-key"}}, "privacy": {"usageStatisticsEnabled": False},
        "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False}}))
    (folder / "trustedFolders.json").write_text(json.dumps({str(repo): "TRUST_FOLDER"}))


def test_gemini_cli_gets_memory_at_session_start_and_is_journaled_once(tmp_path: Path) -> None:
    gemini = binary("gemini")
    major = node_major()
    if major is None or major < 20:
        pytest.skip(f"Gemini CLI 0.61 needs Node 20 or later; this machine has {major or 'no node'}")
    home, shop = tmp_path / "home", git_repo(tmp_path / "shop", "shop")
    _gemini_user_settings(home, shop)
    with FakeLLMServer(Responder()) as server:
        root = memory_root(tmp_path / "memory", server)
        tiermem_cli(root, "setup", "gemini", "--project", str(shop), env=client_env(home, "/usr/bin:/bin"))
        person, project, _ = open_scopes(root, shop, queue_replay=False, shutdown_flush_seconds=0)
        with person, project:  # what an earlier session taught
            person.facts.add(TABS_FACT, "preference", 0.95)
        env = client_env(home, f"{Path(gemini).parent}:/usr/local/bin:/usr/bin:/bin", GEMINI_API_KEY="fake-key",
                         GOOGLE_GEMINI_BASE_URL=server.base_url)
        with resident_server_stopped(root):
            run = run_client([gemini, "-m", MODEL, "-p", FIRST_MESSAGE], shop, env, server, "Content")
        assert run.returncode == 0 and REPLY in run.stdout, run.stderr[-3000:]
        assert run.with_text(TABS_FACT), f"no memory in the request; hook log: {hook_log(root)}"
        print(f"gemini -p run: {run.seconds:.1f} s; hook log: {hook_log(root)}")
    assert hook_failures(root) == []  # no hook failed
    assert hook_errors(run.stderr) == [], run.stderr[-3000:]
    person, project, _ = open_scopes(root, shop, queue_replay=False, shutdown_flush_seconds=0)
    with person, project:
        journal = project.daily.read()
    assert [r.text for r in parse_records(journal) if FIRST_MESSAGE in r.text] == [f"user: {FIRST_MESSAGE}"]
    assert TABS_FACT not in journal  # the context the hook added is not journaled back as the user's words


@pytest.fixture(autouse=True)
def _no_developer_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "GOOGLE_API_KEY", "GOOGLE_GEMINI_BASE_URL", "GEMINI_CLI_HOME"):
        monkeypatch.delenv(name, raising=False)
