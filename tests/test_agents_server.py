"""The coding agents' resident server (issue 23, P8): a real ``python -m tiermem.agents.server``
process on a temporary root, asked over loopback as the hooks ask it
(:mod:`tiermem.agents.server_client`).

The hash embedder keeps these fast (``TIERMEM_EMBEDDER=hash``); one test uses the default local
model. Idle exit is tested with ``coding_server_idle_minutes`` set to about a second.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest

from tiermem.agents import server_client
from tiermem.agents.server_client import ServerError, ServerFiles, read_info

START_DEADLINE = 60.0  # an interpreter importing numpy and the store on a busy machine
DEADLINE = 30.0


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_") or k in (
        "TIERMEM_CACHE_DIR", "TIERMEM_DATABASE_URL")}
    env.update(TIERMEM_EMBEDDER="hash", TIERMEM_LLM="none", TIERMEM_TIMEZONE="UTC", TIERMEM_CODING_PERSON="ada")
    env.update(extra)
    return env


class Server:
    """One server process of ``root`` (started directly, so the test owns its output)."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.log = root.parent / f"server-{time.monotonic_ns()}.log"
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen([sys.executable, "-m", "tiermem.agents.server", "--root", str(root)],
                                         env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_DEADLINE
        while not server_client.healthy(self.root):
            assert self.proc.poll() is None, self.output()
            assert time.monotonic() < deadline, f"the server did not start: {self.output()}"
            time.sleep(0.05)
        info = read_info(self.root)
        assert info is not None and info.pid == self.proc.pid

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=DEADLINE)


@contextmanager
def running(root: Path, env: dict[str, str] | None = None) -> Iterator[Server]:
    server = Server(root, env if env is not None else _env())
    try:
        server.wait_ready()
        yield server
    finally:
        code = server.stop()
    assert code == 0, server.output()


def _stop_detached(pid: int) -> int:
    """SIGTERM a server this test process started through the client (its child: reaped here, as
    init reaps it when the hook that started it has exited); its exit status."""
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + DEADLINE
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        assert time.monotonic() < deadline, "the server did not stop"
        time.sleep(0.05)


def _raw(port: int, method: str, path: str, headers: dict[str, str], body: bytes | None = None
         ) -> tuple[int, dict[str, Any]]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        connection.request(method, path, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


def _token(root: Path) -> str:
    return ServerFiles.of(root).token.read_text().strip()


def _port(root: Path) -> int:
    info = read_info(root)
    assert info is not None
    return info.port


# --- the hook's side stays light ------------------------------------------------------------------
def test_the_client_module_imports_no_numpy_and_no_store() -> None:
    code = ("import sys, tiermem.agents.server_client; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'numpy' or m.startswith("
            "('tiermem.memory', 'tiermem.storage', 'tiermem.search', 'tiermem.tiers'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=_env())
    assert out.stdout.strip() == "[]"


def test_no_server_is_none_and_no_file_is_written_by_asking(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    assert server_client.request(root, "GET", "/health") is None
    assert not server_client.healthy(root)
    assert read_info(root) is None


def _fake_server(root: Path, answer: bytes | None) -> socket.socket:
    """A listener named in ``server.json`` (this process's pid) that answers ``answer`` to any
    request, or never (``None``)."""
    listener = socket.create_server(("127.0.0.1", 0))
    files = ServerFiles.of(root)
    files.make_folder()
    files.token.write_text("t" * 64)
    files.info.write_text(json.dumps({"port": listener.getsockname()[1], "pid": os.getpid(), "started": 0}))

    def serve() -> None:
        with contextlib.suppress(OSError):
            connection, _ = listener.accept()
            with connection:
                connection.recv(65536)
                if answer is not None:
                    connection.sendall(answer)
                else:
                    connection.recv(1)  # until the client gives up
    threading.Thread(target=serve, daemon=True).start()
    return listener


@pytest.mark.parametrize(("answer", "message"), [
    (None, "did not answer"),
    (b"garbage", "not HTTP"),
    (b"HTTP/1.0 200 OK\r\n\r\nnot json", "no JSON object"),
    (b'HTTP/1.0 500 Internal\r\n\r\n{"error": "X", "message": "it broke"}', "status 500: it broke"),
])
def test_a_server_that_errs_or_stalls_is_a_server_error(tmp_path: Path, answer: bytes | None, message: str) -> None:
    root = tmp_path / "mem"
    with _fake_server(root, answer):
        started = time.monotonic()
        with pytest.raises(ServerError, match=message):
            server_client.ask_prompt(root, "claude-code", "s", "/tmp", "hi", timeout=0.3)
        assert time.monotonic() - started < 0.3 + 1.0


def test_a_dead_server_is_none_and_a_new_one_is_started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "mem"
    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    files = ServerFiles.of(root)
    files.make_folder()
    files.info.write_text(json.dumps({"port": 1, "pid": 2**22 + 12345, "started": 0}))  # no such process
    assert server_client.ask_prompt(root, "claude-code", "s", str(tmp_path), "hi") is None
    deadline = time.monotonic() + START_DEADLINE
    while not server_client.healthy(root):
        assert time.monotonic() < deadline, files.log.read_text(errors="replace")
        time.sleep(0.05)
    info = read_info(root)
    assert info is not None
    assert _stop_detached(info.pid) == 0


# --- start, files, second server, stop ------------------------------------------------------------
def test_ensure_server_starts_one_detached_that_publishes_private_files(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "mem"
    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    assert server_client.ensure_server(root) is False  # started, not waited for
    deadline = time.monotonic() + START_DEADLINE
    while not server_client.healthy(root):
        assert time.monotonic() < deadline, ServerFiles.of(root).log.read_text(errors="replace")
        time.sleep(0.05)
    info = read_info(root)
    assert info is not None
    try:
        files = ServerFiles.of(root)
        assert stat.S_IMODE(files.folder.stat().st_mode) == 0o700
        for path in (files.info, files.token, files.lock, files.log):
            assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
        assert len(_token(root)) == 64
        assert os.getsid(info.pid) == info.pid  # its own session: the client's signals do not reach it
        assert server_client.ensure_server(root) is True
        reply = server_client.request(root, "GET", "/health")
        assert reply is not None and reply["ok"] is True and reply["pid"] == info.pid
    finally:
        code = _stop_detached(info.pid)
    assert code == 0 and read_info(root) is None and not ServerFiles.of(root).token.exists()


def test_a_second_server_exits_at_once_while_the_first_lives(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with running(root) as first:
        started = time.monotonic()
        second = subprocess.run([sys.executable, "-m", "tiermem.agents.server", "--root", str(root)], env=_env(),
                                capture_output=True, text=True, timeout=DEADLINE)
        assert second.returncode == 0 and "running already" in second.stderr
        assert time.monotonic() - started < DEADLINE
        info = read_info(root)
        assert info is not None and info.pid == first.proc.pid and server_client.healthy(root)
        assert server_client.lock_held(root)
    assert not server_client.lock_held(root)


def test_idle_server_exits_and_removes_its_files(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    server = Server(root, _env(TIERMEM_CODING_SERVER_IDLE_MINUTES="0.02"))  # 1.2 s
    server.wait_ready()
    assert server.proc.wait(timeout=DEADLINE) == 0, server.output()
    assert "no request for 1.2 s" in server.output()
    assert read_info(root) is None and not ServerFiles.of(root).token.exists()


# --- the guards -------------------------------------------------------------------------------------
def test_wrong_or_missing_token_is_401(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with running(root):
        port, token = _port(root), _token(root)
        host = {"Host": f"127.0.0.1:{port}"}
        assert _raw(port, "GET", "/health", host)[0] == 401
        assert _raw(port, "GET", "/health", {**host, "Authorization": "Bearer " + "0" * 64})[0] == 401
        assert _raw(port, "GET", "/health", {**host, "Authorization": f"Basic {token}"})[0] == 401
        status, body = _raw(port, "POST", "/prompt", {**host, "Authorization": "Bearer nope"}, b"{}")
        assert status == 401 and body["error"] == "unauthorized"
        assert _raw(port, "GET", "/health", {**host, "Authorization": f"Bearer {token}"})[0] == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:80", "127.0.0.1.evil.example", "10.0.0.5",
                                  "localhost.evil.example:1234", ""])
def test_non_loopback_host_is_refused(tmp_path: Path, host: str) -> None:
    root = tmp_path / "mem"
    with running(root):
        port, token = _port(root), _token(root)
        status, body = _raw(port, "GET", "/health", {"Host": host, "Authorization": f"Bearer {token}"})
        assert status == 421 and body["error"] == "misdirected"
        for fine in (f"localhost:{port}", "127.0.0.1", f"[::1]:{port}"):
            assert _raw(port, "GET", "/health", {"Host": fine, "Authorization": f"Bearer {token}"})[0] == 200


def test_bad_requests_get_typed_answers(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with running(root):
        port, token = _port(root), _token(root)
        auth = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
        assert _raw(port, "GET", "/nope", auth)[0] == 404
        assert _raw(port, "GET", "/prompt", auth)[0] == 405
        assert _raw(port, "POST", "/prompt", {**auth, "Content-Length": str(2 << 20)})[0] == 413
        assert _raw(port, "POST", "/prompt", auth, b"not json")[0] == 400
        assert _raw(port, "POST", "/prompt", auth, b"[1]")[0] == 400
        status, body = _raw(port, "POST", "/prompt", auth, json.dumps(
            {"client": "nope", "session_id": "s", "cwd": "/tmp", "prompt": "hi"}).encode())
        assert status == 400 and "unknown coding-agent client" in body["message"]
        status, body = _raw(port, "POST", "/prompt", auth, json.dumps(
            {"client": "claude-code", "session_id": "s", "cwd": "relative/dir", "prompt": "hi"}).encode())
        assert status == 400 and "absolute" in body["message"]
        with pytest.raises(ServerError, match="status 400"):
            server_client.ask_prompt(root, "claude-code", "s", "relative", "hi", timeout=DEADLINE)
        assert server_client.healthy(root)


def _fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts open files in /proc")
def test_open_files_stay_bounded_after_500_requests(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with running(root) as server:
        port, token = _port(root), _token(root)
        auth = {"Host": f"127.0.0.1:{port}", "Authorization": f"Bearer {token}"}
        for _ in range(5):
            assert server_client.healthy(root)
        before = _fds(server.proc.pid)

        def one(i: int) -> int:
            if i % 5 == 0:
                return _raw(port, "GET", "/health", {"Host": f"127.0.0.1:{port}"})[0]  # 401
            if i % 5 == 1:
                return _raw(port, "POST", "/prompt", auth, b"{")[0]  # 400
            if i % 5 == 2:  # a client that sends half a body and goes away
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
                connection.putrequest("POST", "/prompt", skip_host=True)
                for key, value in {**auth, "Content-Length": "100"}.items():
                    connection.putheader(key, value)
                connection.endheaders(b"{")
                connection.close()
                return 0
            return _raw(port, "GET", "/health", auth)[0]

        with ThreadPoolExecutor(16) as pool:
            statuses = list(pool.map(one, range(500)))
        assert statuses.count(200) == 200 and statuses.count(401) == 100 and statuses.count(400) == 100
        assert server_client.healthy(root)
        after = _fds(server.proc.pid)
        threads = len(os.listdir(f"/proc/{server.proc.pid}/task"))
    assert after <= before + 2, (before, after)
    assert threads < 40, threads


# --- the update queue ----------------------------------------------------------------------------------
def _extraction(request: RecordedRequest) -> str:
    text = json.dumps(request.body)
    facts = [{"content": "The billing API lives in services/ledgerd", "category": "knowledge", "confidence": 0.9}] \
        if "ledgerd" in text else []
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


@pytest.mark.usefixtures("backend")
def test_the_server_extracts_what_a_hook_queued(tmp_path: Path) -> None:
    from tiermem import Memory

    root = tmp_path / "mem"
    with FakeLLMServer(_extraction) as llm:
        env = _env(TIERMEM_LLM="openai-compatible:llama3.1", TIERMEM_LLM_BASE_URL=llm.url,
                   TIERMEM_EXTRACT_MIN_TURNS="1", TIERMEM_DEBOUNCE_SECONDS="0.2")
        with running(root, env):
            # what a save hook does: queue without processing (R73), then exit
            with Memory(root, user_id="project-0123456789abcdef", agent_name="coding", embedder="hash",
                        queue_replay=False, shutdown_flush_seconds=0, debounce_seconds=3600) as hook:
                hook.queue.add("claude-code-s1", [
                    {"role": "user", "content": "The billing API of this shop lives in services/ledgerd."},
                    {"role": "assistant", "content": "Noted."}])
            assert llm.call_count == 0
            deadline = time.monotonic() + DEADLINE
            with Memory(root, user_id="project-0123456789abcdef", agent_name="coding", embedder="hash",
                        queue_replay=False) as mem:
                while not [f.content for f in mem.facts.list()]:
                    assert time.monotonic() < deadline, "the server did not extract the queued conversation"
                    time.sleep(0.1)
                assert [f.content for f in mem.facts.list()] == ["The billing API lives in services/ledgerd"]
                assert "services/ledgerd" in mem.daily.read()
        assert llm.unexpected == 0


# --- prompts -----------------------------------------------------------------------------------------
BILLING = "The billing API of this shop lives in services/ledgerd"
TABS = "Always indents with tabs"


def _fill(root: Path, repo: Path, embedder: str) -> tuple[str, str]:
    """A project fact and a person fact for ``repo``; their scopes' user ids."""
    from tiermem import Memory
    from tiermem.agents.project import coding_scopes
    from tiermem.config import load_settings

    scopes = coding_scopes(root, repo, load_settings(root, {"coding_person": "ada"}))
    with Memory(root, embedder=embedder, user_id=scopes.project.user_id, agent_name="coding") as project:
        project.facts.add(BILLING, "knowledge", 0.9)
    with Memory(root, embedder=embedder, user_id=scopes.person.user_id, agent_name="coding") as person:
        person.facts.add(TABS, "preference", 0.9)
    return scopes.person.user_id, scopes.project.user_id


@pytest.mark.usefixtures("backend")
def test_prompt_answers_with_the_relevant_fact_once_per_session(tmp_path: Path) -> None:
    root, repo = tmp_path / "mem", tmp_path / "repo"
    repo.mkdir()
    _fill(root, repo, "hash")
    with running(root):
        text = server_client.ask_prompt(root, "claude-code", "s1", str(repo), "where does the billing API live?",
                                          timeout=DEADLINE)
        assert text is not None and "services/ledgerd" in text
        again = server_client.ask_prompt(root, "claude-code", "s1", str(repo), "where does the billing API live?",
                                          timeout=DEADLINE)
        assert again is not None and "services/ledgerd" not in again  # given already in this session
        other = server_client.ask_prompt(root, "claude-code", "s2", str(repo), "billing API location",
                                         timeout=DEADLINE)
        assert other is not None and "services/ledgerd" in other
        assert server_client.ask_prompt(root, "claude-code", "s3", str(repo), "qqqq zzzz wwww",
                                        timeout=DEADLINE) == ""


@pytest.mark.usefixtures("backend")
def test_session_start_text_from_the_server_and_what_it_gave_is_not_given_again(tmp_path: Path) -> None:
    root, repo = tmp_path / "mem", tmp_path / "repo"
    repo.mkdir()
    _fill(root, repo, "hash")
    question = "where does the billing API live?"
    with running(root):
        text = server_client.ask_start(root, "claude-code", "s1", str(repo), "startup", timeout=DEADLINE)
        assert text is not None and BILLING in text and TABS in text
        again = server_client.ask_prompt(root, "claude-code", "s1", str(repo), question, timeout=DEADLINE)
        assert again is not None and "services/ledgerd" not in again  # the session has it already
        assert server_client.ask_start(root, "claude-code", "s1", str(repo), "compact", timeout=DEADLINE)
        server_client.ask_start(root, "claude-code", "s2", str(repo), None, timeout=DEADLINE)
        with pytest.raises(ServerError, match="status 400"):
            server_client.ask_start(root, "claude-code", "s1", str(repo), "x" * 65, timeout=DEADLINE)


def test_prompt_with_the_default_local_embedder(tmp_path: Path) -> None:
    root, repo = tmp_path / "mem", tmp_path / "repo"
    repo.mkdir()
    _fill(root, repo, "local")
    env = _env()
    del env["TIERMEM_EMBEDDER"]
    with running(root, env):
        started = time.monotonic()
        # the prompt shares the fact's words: the local embedder's injection floor takes shared words (docs/search.md)
        text = server_client.ask_prompt(root, "claude-code", "s1", str(repo), "Where does the billing API live?",
                                        timeout=DEADLINE)
        took = time.monotonic() - started
        assert text is not None and "services/ledgerd" in text and TABS not in text
        assert took < DEADLINE


# --- saves and background embedding ----------------------------------------------------------------------
def _claude_transcript(path: Path, session: str, texts: list[tuple[str, str]]) -> None:
    lines = [{"type": "queue-operation", "operation": "enqueue", "sessionId": session, "content": "x"}]
    for i, (role, text) in enumerate(texts):
        message: dict[str, Any] = {"role": role, "content": text}
        if role == "assistant":
            message.update(id=f"m{i}", content=[{"type": "text", "text": text}])
        lines.append({"parentUuid": None, "isSidechain": False, "type": role, "uuid": f"u{i}", "sessionId": session,
                      "message": message})
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


@pytest.mark.usefixtures("backend")
def test_save_in_the_server_after_the_answer_journals_once_and_embeds_in_the_background(tmp_path: Path) -> None:
    from tiermem import Memory

    root, repo = tmp_path / "mem", tmp_path / "repo"
    repo.mkdir()
    _, project_user = _fill(root, repo, "hash")
    transcript = tmp_path / "s1.jsonl"
    _claude_transcript(transcript, "s1", [("user", "The deploy script lives in tools/shipit.sh"),
                                          ("assistant", "Noted, tools/shipit.sh it is.")])
    with running(root) as server:
        assert server_client.ask_save(root, "claude-code", "s1", str(repo), str(transcript), DEADLINE) == {
            "accepted": True}
        _wait_for(lambda: "saved claude-code-s1: 2 messages read, 2 journaled" in server.output(), server)
        assert server_client.ask_save(root, "claude-code", "s1", str(repo), str(transcript), DEADLINE) == {
            "accepted": True}
        _wait_for(lambda: "saved claude-code-s1: 0 messages read, 0 journaled" in server.output(), server)
        with Memory(root, embedder="hash", user_id=project_user, agent_name="coding", queue_replay=False,
                    embed_on_write=False) as mem:
            assert mem.daily.read().count("tools/shipit.sh") == 2
            _wait_for(lambda: not mem.vector_status().missing, server)  # the server's tick embeds them
        with pytest.raises(ServerError, match="transcript_path must be an absolute path"):
            server_client.ask_save(root, "claude-code", "s1", str(repo), "s1.jsonl", DEADLINE)


def _wait_for(check: Callable[[], bool], server: Server) -> None:
    deadline = time.monotonic() + DEADLINE
    while not check():
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)


def test_background_saves_merge_a_waiting_session_and_run_it_again_after_a_running_one() -> None:
    from tiermem.agents.background_saves import BackgroundSaves

    done: list[str] = []
    started, gate = threading.Event(), threading.Event()

    def run(request: str) -> None:
        if request == "a1":
            started.set()
            gate.wait(DEADLINE)
        done.append(request)

    saves: BackgroundSaves[str] = BackgroundSaves(run, max_sessions=2)
    assert saves.submit("a", "a1")
    assert started.wait(DEADLINE)  # a1 runs
    assert saves.submit("a", "a2")  # a once more after it
    assert saves.submit("b", "b1")
    assert saves.submit("a", "a3")  # merged into a2 (the latest wins), which keeps its place before b
    assert not saves.submit("c", "c1")  # a and b wait: full
    gate.set()
    assert saves.wait_idle(DEADLINE)
    assert done == ["a1", "a3", "b1"]
    saves.close()
    assert not saves.submit("a", "a4")


# --- the memories it keeps open -----------------------------------------------------------------------
def test_project_memories_are_bounded_and_closed_when_no_request_holds_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tiermem.agents.residents import Residents
    from tiermem.errors import StorageError
    from tiermem.types import Scope

    for key, value in _env().items():
        monkeypatch.setenv(key, value)
    with Residents.open(tmp_path / "mem") as residents:
        residents.max_projects = 1
        with residents.project(Scope("project-a", "coding")) as first:
            first.facts.add("Project a uses tabs", "knowledge", 0.9)
            with residents.project(Scope("project-b", "coding")):
                assert residents.open_scopes() == ["ada/coding", "project-b/coding"]
                assert [f.content for f in first.facts.list()] == ["Project a uses tabs"]  # held: still open
        with pytest.raises(StorageError):
            first.facts.list()  # evicted and released: closed
        with residents.project(Scope("project-a", "coding")) as again:
            assert [f.content for f in again.facts.list()] == ["Project a uses tabs"]
        assert residents.open_scopes() == ["ada/coding", "project-a/coding"]


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="thread priorities are a POSIX feature")
def test_background_threads_yield_the_cpu_to_requests() -> None:
    from tiermem.agents.background_saves import BackgroundSaves
    from tiermem.agents.residents import BACKGROUND_NICENESS, lower_priority

    base = os.getpriority(os.PRIO_PROCESS, 0)
    seen: list[int] = []
    saves: BackgroundSaves[str] = BackgroundSaves(
        lambda _: seen.append(os.getpriority(os.PRIO_PROCESS, threading.get_native_id())), on_start=lower_priority)
    assert saves.submit("s", "x") and saves.wait_idle(DEADLINE)
    saves.close()
    assert seen == [min(base + BACKGROUND_NICENESS, 19)]
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == base  # the caller's stays
