"""Helpers of the tests that run the real coding-agent clients (Claude Code, Codex, Gemini CLI)
against tests/fake_openai_server.py, with tiermem set up the way a user sets it up.

The clients come from npm at the versions `.ci/run` pins; ``CODING_AGENT_BIN`` names the folder
of their executables (``node_modules/.bin``), else they are looked up on ``PATH``. Without them
the tests skip with a reason. Everything runs offline: a temporary ``HOME``, the model server on
loopback, tiermem's own LLM (extraction) pointed at the same fake server.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest, ReplySpec

TIERMEM = str(Path(sys.executable).with_name("tiermem"))  # the venv's script, as `tiermem setup` names it
SESSION_TIMEOUT = 180.0  # seconds for one client run on a busy machine (a run takes 1-15 s)
SERVER_DEADLINE = 60.0  # seconds for the resident server to come up or go

# Session 1 of the story (issue 23): one message, two facts of two scopes.
FIRST_MESSAGE = "I always indent with tabs. The billing API of this shop lives in services/ledgerd."
TABS_FACT = "Always indents with tabs"
BILLING_FACT = "The billing API of this shop lives in services/ledgerd"
REPLY = "Noted."


def binary(name: str) -> str:
    """The client's executable, or a skip saying how to get it."""
    folder = os.environ.get("CODING_AGENT_BIN")
    found = shutil.which(name, path=folder) if folder else shutil.which(name)
    if found is None:
        pytest.skip(f"{name} is not installed (.ci/run installs the pinned clients from npm; set CODING_AGENT_BIN "
                    "to their node_modules/.bin)")
    return found


def node_major() -> int | None:
    """The major version of ``node`` on the clients' PATH, ``None`` without one."""
    folder = os.environ.get("CODING_AGENT_BIN")
    node = shutil.which("node", path=f"{folder}:{os.environ.get('PATH', '')}" if folder else None)
    if node is None:
        return None
    done = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    found = re.match(r"v(\d+)\.", done.stdout.strip())
    return int(found.group(1)) if found else None


def git_repo(path: Path, name: str) -> Path:
    """A git repository with one commit of its own (its project key is that root commit)."""
    path.mkdir(parents=True)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", "-C", str(path)]
    subprocess.run([*git, "init", "-q"], check=True)
    (path / "README.md").write_text(f"# {name}\n")
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-q", "-m", f"start {name}"], check=True)
    return path


def extraction(request: RecordedRequest) -> str:
    """tiermem's extraction model: the two facts of session 1 when it reads that conversation."""
    text = request.text
    facts = []
    if "indent with tabs" in text:
        facts.append({"content": TABS_FACT, "category": "preference", "confidence": 0.95})
    if "services/ledgerd" in text:
        facts.append({"content": BILLING_FACT, "category": "knowledge", "confidence": 0.95})
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


class Responder:
    """The fake server's answers: extraction JSON for tiermem (chat completions); to the coding
    agent the replies of :meth:`script` in order (e.g. a tool call), then :data:`REPLY` (each
    wrapped and streamed by the server for the agent's API: Anthropic, Responses or Gemini)."""

    def __init__(self) -> None:
        self._script: list[ReplySpec] = []

    def script(self, *replies: ReplySpec) -> None:
        self._script.extend(replies)

    def __call__(self, request: RecordedRequest) -> ReplySpec:
        if request.path.split("?", 1)[0].endswith("/chat/completions"):
            return extraction(request)
        return self._script.pop(0) if self._script else REPLY


def tool_results(run: Run) -> list[str]:
    """The text of every Anthropic ``tool_result`` block the client sent back to the model."""
    return [block_text(block.get("content")) for request in run.requests for message in request.messages
            if isinstance(message.get("content"), list)
            for block in message["content"] if isinstance(block, dict) and block.get("type") == "tool_result"]


def block_text(content: object) -> str:
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content)


def memory_root(path: Path, llm: FakeLLMServer) -> Path:
    """A memory root whose ``tiermem.toml`` points tiermem's LLM at the fake server (the hooks, the
    resident server and ``tiermem queue flush`` all read it), with no Deep Dream during the test and
    a resident server that exits by itself soon after the test."""
    path.mkdir(parents=True)
    (path / "tiermem.toml").write_text(
        f'llm = "openai-compatible:fake-extractor"\nllm_base_url = "{llm.url}"\n'
        'dream_schedule = "off"\ncoding_server_idle_minutes = 3\n')
    return path


def client_env(home: Path, path: str, **extra: str) -> dict[str, str]:
    """A clean environment for a client run: its own HOME, nothing of the developer's."""
    env = {"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"}
    env.update({k: v for k, v in os.environ.items() if k in ("TIERMEM_CACHE_DIR", "TIERMEM_DATABASE_URL")})
    env.update(extra)
    return env


@dataclass(frozen=True)
class Run:
    """One finished client run: its output and the model requests it made."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    requests: list[RecordedRequest]

    def with_text(self, text: str) -> list[RecordedRequest]:
        return [request for request in self.requests if text in request.text]


def run_client(command: list[str], cwd: Path, env: dict[str, str], server: FakeLLMServer, api: str) -> Run:
    """Run the client once (stdin closed) and collect the requests it sent to ``api`` (a path end,
    e.g. ``/messages``) meanwhile."""
    first = server.call_count
    began = time.monotonic()
    done = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          timeout=SESSION_TIMEOUT, check=False)
    seconds = time.monotonic() - began
    sent = [r for r in server.requests[first:] if api in r.path.split("?", 1)[0]]
    return Run(done.returncode, done.stdout, done.stderr, seconds, sent)


def tiermem_cli(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``tiermem --root ROOT ARGS`` as a user types it; its output (a failure fails the test)."""
    done = subprocess.run([TIERMEM, "--root", str(root), *args], capture_output=True, text=True, timeout=300,
                          env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


HOOK_TROUBLE = re.compile(r"hook.*(error|fail|timed? ?out|cancel|block)", re.IGNORECASE)


def hook_errors(stderr: str) -> list[str]:
    """The lines where a client reports a hook that failed, timed out or blocked."""
    return [line for line in stderr.splitlines() if HOOK_TROUBLE.search(line)]


def hook_failures(root: Path) -> list[str]:
    """The hook log's lines other than budget overruns (a slow machine; the hook still exits 0 with nothing)."""
    return [line for line in hook_log(root) if "ran past its budget" not in line]


def hook_log(root: Path) -> list[str]:
    """The lines of the hook log (every hook failure or overrun is one)."""
    path = root / "agents" / "hooks.log"
    return path.read_text().splitlines() if path.exists() else []


def saved(root: Path, repo: Path, text: str) -> list[str]:
    """The project journal's records holding ``text``, once a session's save wrote them and queued
    the conversation (the resident server saves after it has answered the hook: wait for it)."""
    from tiermem.agents.project import open_scopes
    from tiermem.tiers.markdown import parse_records

    deadline = time.monotonic() + SERVER_DEADLINE
    person, project, _ = open_scopes(root, repo, queue_replay=False, shutdown_flush_seconds=0)
    with person, project:
        while True:
            records = [r.text for r in parse_records(project.daily.read()) if text in r.text]
            if (records and project.stats()["queue_pending"]) or time.monotonic() > deadline:
                return records
            time.sleep(0.1)


@pytest.fixture(scope="session")
def model_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One cache of the local model's graph for the real-client tests (each process that finds none
    builds it, which takes seconds)."""
    return tmp_path_factory.mktemp("agents-model-cache")


@pytest.fixture
def shared_model_cache(model_cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_CACHE_DIR", str(model_cache))


def wait_for_server(root: Path) -> None:
    """Wait until the resident server a hook started answers (the hooks never wait for it)."""
    from tiermem.agents import server_client

    deadline = time.monotonic() + SERVER_DEADLINE
    while not server_client.healthy(root):
        assert time.monotonic() < deadline, _server_log(root)
        time.sleep(0.1)


def stop_server(root: Path) -> None:
    """End the resident server the hooks started for ``root`` (by its pid in server.json), waiting
    for one that is still starting."""
    from tiermem.agents import server_client

    deadline = time.monotonic() + SERVER_DEADLINE
    signalled: set[int] = set()
    while server_client.lock_held(root) and time.monotonic() < deadline:
        info = server_client.read_info(root)
        if info is not None and info.pid not in signalled and server_client.pid_alive(info.pid):
            with suppress(ProcessLookupError):
                os.kill(info.pid, signal.SIGTERM)
            signalled.add(info.pid)
        time.sleep(0.1)
    assert not server_client.lock_held(root), "the resident server did not stop: " + _server_log(root)


def _server_log(root: Path) -> str:
    path = root / "agents" / "server.log"
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(no server log)"


@contextmanager
def resident_server_stopped(root: Path) -> Iterator[None]:
    """Stop the resident server of ``root`` when the block ends, however it ends."""
    try:
        yield
    finally:
        stop_server(root)
