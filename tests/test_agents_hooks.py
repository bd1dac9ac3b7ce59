"""``tiermem hook CLIENT EVENT`` (R72, R73): what each action prints, and that a hook never gets in
the client's way — budgets, errors, garbage on stdin, a store it cannot open, a full disk, no LLM call."""

from __future__ import annotations

import fcntl
import io
import json
import os
import resource
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_clients import git_repo
from click.testing import CliRunner
from fake_openai_server import FakeLLMServer

from tiermem import Memory
from tiermem.agents import hook_log
from tiermem.agents.clients import START
from tiermem.agents.hook_runner import MAX_PAYLOAD_BYTES, HookCall, ServerPort, main, run_hook
from tiermem.agents.project import open_scopes
from tiermem.cli.main import cli, hook_arguments

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
PERSON = "maya"
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC", "TIERMEM_CODING_PERSON": PERSON}
NOBODY = 65534
# ``tiermem hook`` as a process, with budgets no loaded test machine overruns (the budgets have tests of their own)
PATIENT_HOOK = ("import sys\nfrom tiermem.agents import clients\n"
                "clients.BUDGET_SECONDS.update(start=60, prompt=60, save=60)\n"
                "from tiermem.cli.main import main\nsys.argv[0] = 'tiermem'\nmain()\n")


def hook_process(root: Path, event: str) -> list[str]:
    return [sys.executable, "-c", PATIENT_HOOK, "--root", str(root), "hook", "claude-code", event]


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "shop", "shop")


class Resident:
    """A resident server for the hooks: by default down (answers ``None``; starts are counted,
    nothing starts); ``answer`` is its reply to a prompt, ``start`` its session-start text."""

    def __init__(self, answer: str | None = None, start: str | None = None) -> None:
        self.answer, self.start = answer, start
        self.started = 0

    def port(self) -> ServerPort:
        def ensure(root: Path, cwd: str) -> bool:
            self.started += 1
            return False

        return ServerPort(lambda *_: self.answer, lambda *_: self.start, lambda *_: None, ensure)


def payload(**fields: Any) -> bytes:
    return json.dumps({"session_id": "s1", **fields}).encode()


def log_lines(root: Path) -> list[str]:
    path = hook_log.log_path(root)
    return path.read_text().splitlines() if path.exists() else []


def run_main(root: Path, client: str, event: str, data: bytes, **seams: Any) -> bytes:
    out = io.BytesIO()
    assert main(["--root", str(root), "hook", client, event], stdin=io.BytesIO(data), stdout=out,
                server=seams.pop("server", Resident().port()), **seams) == 0
    return out.getvalue()


# --- what each action prints ---------------------------------------------------------------------------------
@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("client,event", [("claude-code", "SessionStart"), ("codex", "SessionStart"),
                                          ("gemini", "SessionStart")])
def test_start_hook_prints_the_clients_context_with_both_scopes(root: Path, repo: Path, client: str,
                                                                event: str) -> None:
    resident = Resident()
    empty = run_hook(client, event, payload(cwd=str(repo), source="startup"), root, server=resident.port())
    assert (empty.stdout, empty.outcome) == (b"", "ok")  # no memory yet: nothing at all
    person, project, scopes = open_scopes(root, repo, embedder="hash")
    with person, project:
        person.facts.add("Indents with tabs", "preference", 0.9)
        project.facts.add("The billing API lives in services/ledgerd", "knowledge", 0.9)
    assert scopes.person.user_id == PERSON and scopes.key.kind == "root-commit"
    result = run_hook(client, event, payload(cwd=str(repo), source="startup"), root, server=resident.port())
    shown = json.loads(result.stdout)
    assert shown["hookSpecificOutput"]["hookEventName"] == event
    text = shown["hookSpecificOutput"]["additionalContext"]
    assert "Indents with tabs" in text and "services/ledgerd" in text
    assert resident.started == 2  # the resident server is started (never waited for)
    assert log_lines(root) == []
    up = Resident(start="Memory from tiermem: made by the resident server")
    served = run_hook(client, event, payload(cwd=str(repo), source="startup"), root, server=up.port())
    assert json.loads(served.stdout)["hookSpecificOutput"]["additionalContext"] == up.start


def test_prompt_hook_prints_the_resident_servers_answer_or_nothing(root: Path, repo: Path) -> None:
    prompt = payload(cwd=str(repo), prompt="where is the billing API?")
    up = Resident("Memory from tiermem relevant to this prompt: billing lives in ledgerd")
    shown = json.loads(run_hook("claude-code", "UserPromptSubmit", prompt, root, server=up.port()).stdout)
    assert shown == {"hookSpecificOutput": {"hookEventName": "UserPromptSubmit",
                                            "additionalContext": up.answer}}
    gemini = json.loads(run_hook("gemini", "BeforeAgent", prompt, root, server=up.port()).stdout)
    assert gemini["hookSpecificOutput"]["hookEventName"] == "BeforeAgent"
    for answer in (None, ""):  # down (it was started), or nothing relevant
        assert run_hook("claude-code", "UserPromptSubmit", prompt, root, server=Resident(answer).port()).stdout == b""
    assert not root.exists()  # a prompt hook never opens the store itself


@pytest.mark.usefixtures("backend")
def test_save_hook_journals_the_transcript_once_and_prints_nothing(root: Path, repo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "hello.jsonl", transcript)
    stop = payload(cwd=str(repo), transcript_path=str(transcript))
    for _ in range(2):
        result = run_hook("claude-code", "Stop", stop, root, server=Resident().port())
        assert (result.stdout, result.outcome) == (b"", "ok")
    person, project, _ = open_scopes(root, repo, embedder="hash")
    with person, project:
        journal = project.daily.read()
        assert journal.count("hello") >= 1 and journal.count("Hello from the fake") == 1
    assert log_lines(root) == []


def test_events_tiermem_does_not_use_print_nothing(root: Path) -> None:
    result = run_hook("claude-code", "PreToolUse", b"not even json", root)
    assert (result.stdout, result.outcome) == (b"", "ignored")
    assert log_lines(root) == []


# --- failures: exit 0, nothing on stdout, one line in the hook log --------------------------------------
def test_a_failing_action_is_one_log_line_and_no_output(root: Path) -> None:
    def broken(call: HookCall) -> str:
        raise RuntimeError("boom\nsecond line")

    out = run_main(root, "claude-code", "SessionStart", payload(cwd="/"), actions={START: broken})
    assert out == b""
    [line] = log_lines(root)
    assert " claude-code SessionStart session=s1 what=RuntimeError: boom second line" in line
    assert stat.S_IMODE(hook_log.log_path(root).stat().st_mode) == 0o600


@pytest.mark.parametrize("data", [b"", b"\xff\xfe", b"not json", b"[1, 2]", b'{"session_id": "s1"',
                                  b"[" * 100_000, b" " * (MAX_PAYLOAD_BYTES + 1)])
def test_garbage_on_stdin_is_logged_and_prints_nothing(root: Path, data: bytes) -> None:
    assert run_main(root, "claude-code", "SessionStart", data) == b""
    [line] = log_lines(root)
    assert "HookInputError" in line


def test_unknown_client_and_bad_usage_are_logged(root: Path) -> None:
    assert run_main(root, "vim", "SessionStart", payload()) == b""
    out = io.BytesIO()
    assert main(["--root", str(root), "hook", "claude-code"], stdin=io.BytesIO(b"{}"), stdout=out) == 0
    assert out.getvalue() == b""
    lines = log_lines(root)
    assert len(lines) == 2 and "unknown coding-agent client 'vim'" in lines[0] and "usage:" in lines[1]


def test_a_hook_past_its_budget_prints_nothing_and_exits_0(root: Path) -> None:
    released, exits = threading.Event(), []

    def slow(call: HookCall) -> str:
        released.wait(30)
        return "too late"

    def exit_process(code: int) -> None:
        exits.append(code)
        released.set()

    out = run_main(root, "claude-code", "SessionStart", payload(cwd="/"), actions={START: slow},
                   exit_process=exit_process, wait=lambda seconds: False)  # the budget is over at once
    assert (out, exits) == (b"", [0])
    [line] = log_lines(root)
    assert "ran past its budget of 2 s" in line


def test_the_watchdog_ends_a_real_process(root: Path) -> None:
    child = ("import sys, time\n"
             "from tiermem.agents import clients, hook_runner\n"
             "clients.BUDGET_SECONDS['start'] = 0.3\n"
             "def slow(call):\n    time.sleep(60)\n    return 'late'\n"
             "sys.exit(hook_runner.main(sys.argv[1:], actions={'start': slow}))\n")
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-c", child, "--root", str(root), "hook", "claude-code", "SessionStart"],
                          input=payload(cwd="/"), capture_output=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert time.monotonic() - began < 30
    assert "ran past its budget of 0.3 s" in log_lines(root)[0]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A folder an unprivileged child can reach (pytest's tmp tree is private to root)."""
    path = Path(tempfile.mkdtemp(prefix="tiermem-hook-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path)


@pytest.mark.skipif(os.geteuid() != 0, reason="drops privileges: runs as root in CI")
def test_a_store_the_hook_cannot_open_leaves_the_session_alone(shared_dir: Path) -> None:
    root = shared_dir / "mem"
    with Memory(root, embedder="hash", user_id="x") as mem:  # a store only its owner (root) may open
        mem.facts.add("Indents with tabs", "preference", 0.9)
    start = payload(cwd=str(shared_dir), source="startup")
    assert run_main(root, "claude-code", "SessionStart", start) == b""  # every module the child needs is loaded
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            out = run_main(root, "claude-code", "SessionStart", start)
            os.write(write_end, b"ok:" + out)
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        answer = pipe.read()
    assert os.waitpid(pid, 0)[1] == 0
    assert answer == b"ok:"  # it returned 0 with nothing for the client


@pytest.mark.usefixtures("server_starting")
def test_a_full_disk_leaves_the_session_alone(root: Path, repo: Path, tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "hello.jsonl", transcript)

    def small_files() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

    done = subprocess.run(hook_process(root, "Stop"), input=payload(cwd=str(repo), transcript_path=str(transcript)),
                          capture_output=True, timeout=60, preexec_fn=small_files, env=_child_env())
    assert (done.returncode, done.stdout) == (0, b"")
    assert "Traceback" not in done.stderr.decode()
    [line] = log_lines(root)  # the store could not be written: said in the hook log, not to the client
    assert " claude-code Stop session=s1 what=StorageError" in line


# --- no LLM call in a hook (R73) -----------------------------------------------------------------------------
def _child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(ENV, TIERMEM_CACHE_DIR=os.environ["TIERMEM_CACHE_DIR"], **extra)
    if "TIERMEM_DATABASE_URL" in os.environ:
        env["TIERMEM_DATABASE_URL"] = os.environ["TIERMEM_DATABASE_URL"]
    return env


@pytest.fixture
def server_starting(root: Path) -> Iterator[None]:
    """Hold the resident server's lock, as a server that is starting does: hooks then start none."""
    folder = root / "agents"
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


@pytest.mark.usefixtures("backend", "server_starting")
def test_hooks_make_no_llm_call_with_queued_work_and_a_configured_llm(root: Path, repo: Path,
                                                                     tmp_path: Path) -> None:
    transcript = tmp_path / "t.jsonl"
    shutil.copy(FIXTURES / "claude-code" / "hello.jsonl", transcript)
    with FakeLLMServer(lambda request: '{"newFacts": []}') as llm:
        env = _child_env(TIERMEM_LLM="openai-compatible:m", TIERMEM_LLM_BASE_URL=llm.url,
                         OPENAI_API_KEY="sk-test", TIERMEM_EXTRACT_MIN_TURNS="1", TIERMEM_DEBOUNCE_SECONDS="0")
        hooks = [("Stop", payload(cwd=str(repo), transcript_path=str(transcript))),  # queues the conversation
                 ("SessionStart", payload(cwd=str(repo), source="startup")),
                 ("UserPromptSubmit", payload(cwd=str(repo), prompt="hello")),
                 ("SessionEnd", payload(cwd=str(repo), transcript_path=str(transcript)))]
        for event, data in hooks:
            done = subprocess.run(hook_process(root, event), input=data, capture_output=True, timeout=120, env=env)
            assert (done.returncode, done.stderr) == (0, b""), event
        assert llm.requests == []
    assert log_lines(root) == []
    person, project, _ = open_scopes(root, repo, embedder="hash", queue_replay=False)
    with person, project:
        assert project.daily.read().count("Hello from the fake") == 1
        assert project.stats()["queue_pending"] >= 1  # the work is there, for the worker


# --- the hook log and doctor ---------------------------------------------------------------------------------
def test_the_hook_log_stays_bounded(root: Path) -> None:
    for n in range(2000):
        assert hook_log.write(root, "claude-code", "Stop", f"s{n}", "StorageError: " + "x" * 400)
    path = hook_log.log_path(root)
    assert path.stat().st_size <= hook_log.MAX_BYTES
    lines = path.read_text().splitlines()
    assert "session=s1999 " in lines[-1] and all(" what=StorageError: " in line for line in lines)


def test_doctor_shows_the_hook_logs_count_and_last_lines(root: Path) -> None:
    with Memory(root, embedder="hash"):
        pass
    healthy = CliRunner().invoke(cli, ["--root", str(root), "doctor"])
    assert healthy.exit_code == 0 and "hooks.log" not in healthy.output and "hook log" not in healthy.output
    for n in range(5):
        hook_log.write(root, "codex", "Stop", f"s{n}", f"StorageError: disk full ({n})")
    result = CliRunner().invoke(cli, ["--root", str(root), "doctor"])
    assert result.exit_code == 0, result.output  # a notice, not damage
    [notice] = [line for line in result.output.splitlines() if "agents/hooks.log" in line]
    assert notice.startswith("notice: 5 coding-agent hook failures or overruns in agents/hooks.log")
    assert "disk full (4)" in notice and "disk full (2)" in notice and "disk full (1)" not in notice


# --- the command line: a fast path that imports no CLI, no model, no MCP ------------------------------------
def test_hook_arguments_take_the_fast_path_and_the_rest_goes_to_click(root: Path) -> None:
    assert hook_arguments(["--root", "R", "hook", "codex", "Stop"]) == ["--root", "R", "hook", "codex", "Stop"]
    assert hook_arguments(["--root=R", "hook", "codex", "Stop"]) is not None
    assert hook_arguments(["hook", "codex", "Stop"]) is not None
    for other in (["--debug", "hook", "codex", "Stop"], ["hook", "--help"], ["search", "hook", "a", "b"], []):
        assert hook_arguments(other) is None
    result = CliRunner().invoke(cli, ["--root", str(root), "--debug", "hook", "claude-code", "PreToolUse"], input="{}")
    assert (result.exit_code, result.output) == (0, "")


@pytest.mark.usefixtures("server_starting")
@pytest.mark.parametrize("event,data", [("UserPromptSubmit", {"prompt": "where is billing?"}),
                                        ("SessionStart", {"source": "startup"})])
def test_prompt_and_start_hooks_import_no_click_model_or_mcp(root: Path, repo: Path, event: str,
                                                             data: dict[str, str]) -> None:
    with Memory(root, embedder="hash", user_id=PERSON, agent_name="coding") as mem:
        mem.facts.add("Indents with tabs", "preference", 0.9)
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", PATIENT_HOOK, "--root", str(root), "hook",
                           "claude-code", event], input=payload(cwd=str(repo), **data), capture_output=True,
                          timeout=120, env=_child_env(TIERMEM_EMBEDDER="local"))
    modules = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.decode().splitlines()
               if line.startswith("import time:")}
    assert "tiermem" in modules and done.returncode == 0
    assert not modules & {"click", "numpy", "onnxruntime", "mcp", "tokenizers", "httpx", "openai", "anthropic"}
    if event == "SessionStart":
        assert b"Indents with tabs" in done.stdout  # it did its work, with the embedder never loaded


@pytest.mark.usefixtures("server_starting")
def test_a_prompt_hook_imports_no_setup_no_transcript_reader_no_dataclasses_no_logging(root: Path,
                                                                                       repo: Path) -> None:
    """P8: every client is registered by name, but what setup writes and how a transcript is read
    are imported only by the hooks (and commands) that use them; ``dataclasses`` and ``logging``
    (25 ms of a 70 ms hook at idle) only by those that open a store."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", PATIENT_HOOK, "--root", str(root), "hook",
                           "claude-code", "UserPromptSubmit"], input=payload(cwd=str(repo), prompt="where is billing?"),
                          capture_output=True, timeout=120, env=_child_env())
    modules = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines()
               if line.startswith("import time:")}
    assert done.returncode == 0 and "tiermem.agents.server_client" in modules
    assert not {m for m in modules if m.startswith(("tiermem.agents.config", "tiermem.agents.setup",
                                                    "tiermem.agents.transcript", "tomlkit"))}
    assert not modules & {"dataclasses", "logging", "inspect"}


def test_doctor_checks_the_modes_of_the_coding_agents_files(root: Path) -> None:
    with Memory(root, embedder="hash"):
        pass
    hook_log.write(root, "codex", "Stop", "s1", "StorageError: disk full")
    hook_log.log_path(root).chmod(0o644)
    result = CliRunner().invoke(cli, ["--root", str(root), "doctor"])
    assert result.exit_code == 1 and "agents/hooks.log 0644" in result.output
    assert CliRunner().invoke(cli, ["--root", str(root), "doctor", "--repair"]).exit_code == 0
    assert stat.S_IMODE(hook_log.log_path(root).stat().st_mode) == 0o600


def test_a_hook_ends_before_the_client_cuts_it_off() -> None:
    """Codex cuts a SessionEnd hook off at 3 s, under the 5 s save budget: the hook's own limit is
    set under the client's, so it ends first (and logs why) instead of being killed mid-write."""
    from tiermem.agents.clients import BUDGET_SECONDS, SAVE, client

    codex, claude = client("codex"), client("claude-code")
    assert codex.budget("SessionEnd") < 3.0 <= codex.budget("Stop") == BUDGET_SECONDS[SAVE]
    assert claude.budget("SessionEnd") == BUDGET_SECONDS[SAVE]
