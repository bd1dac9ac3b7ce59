"""The guards of ``tiermem ui``: bind address, Host/Origin, the token login, the CLI's refusals.

The guards are the MCP HTTP server's (tiermem/mcp/http.py); these tests hold the viewer to them.
No storage is exercised beyond opening a page, so they run on SQLite only (the pages themselves
run on both backends in tests/test_ui.py)."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.errors import InvalidInput
from tiermem.ui.app import build_app
from tiermem.ui.guard import COOKIE, TOKEN_ENV, session_value, ui_options

TOKEN = "ui-token-for-the-tests-0123456789"
CSRF = "csrf-token-for-the-tests-0123456789"
BASE = "http://127.0.0.1:8767"


@pytest.fixture
def open_client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(build_app(mem, ui_options(8767), CSRF), base_url=BASE) as client:
        yield client


@pytest.fixture
def token_client(mem: Memory) -> Iterator[TestClient]:
    with TestClient(build_app(mem, ui_options(8767, token=TOKEN), CSRF), base_url=BASE) as client:
        yield client


def test_a_host_that_is_not_loopback_needs_a_token() -> None:
    with pytest.raises(InvalidInput, match=TOKEN_ENV):
        ui_options(8767, "0.0.0.0")
    assert not ui_options(8767, "0.0.0.0", TOKEN).loopback
    with pytest.raises(InvalidInput, match="at least 16"):
        ui_options(8767, token="short")
    assert ui_options(8767).loopback


def test_host_and_origin_headers_are_checked(open_client: TestClient) -> None:
    assert open_client.get("/core").status_code == 200
    assert open_client.get("/core", headers={"host": "localhost:8767"}).status_code == 200
    assert open_client.get("/core", headers={"host": "evil.example:8767"}).status_code == 421  # DNS rebinding
    data = {"csrf": CSRF, "id": "fact_00000000"}
    evil = open_client.post("/facts/delete", data=data, headers={"origin": "http://evil.example"},
                            follow_redirects=False)
    assert evil.status_code == 403
    same = open_client.post("/facts/delete", data=data, headers={"origin": BASE}, follow_redirects=False)
    assert same.status_code == 303 and "err=" in same.headers["location"]  # passed the guard; no such fact


def test_with_a_token_the_browser_logs_in_once_and_gets_a_cookie(token_client: TestClient, mem: Memory) -> None:
    answer = token_client.get("/core", follow_redirects=False)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"
    assert 'name=token' in token_client.get("/login").text
    wrong = token_client.post("/login", data={"token": TOKEN + "x"}, follow_redirects=False)
    assert wrong.status_code == 401 and COOKIE not in token_client.cookies
    right = token_client.post("/login", data={"token": TOKEN}, follow_redirects=False)
    assert right.status_code == 303
    cookie = right.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
    assert token_client.cookies[COOKIE] == session_value(TOKEN)
    assert token_client.get("/core").status_code == 200
    mem.facts.add("Prefers dark mode", "preference", 0.9)
    fact = mem.facts.list()[0]
    done = token_client.post("/facts/delete", data={"csrf": CSRF, "id": fact.id}, follow_redirects=False)
    assert done.status_code == 303 and mem.facts.list() == []


def test_without_the_cookie_only_the_bearer_token_gets_in(token_client: TestClient, mem: Memory) -> None:
    mem.facts.add("Prefers dark mode", "preference", 0.9)
    fact = mem.facts.list()[0]
    token_client.cookies.set(COOKIE, "0" * 64)
    refused = token_client.post("/facts/delete", data={"csrf": CSRF, "id": fact.id}, follow_redirects=False)
    assert refused.status_code == 401 and mem.facts.list() == [fact]
    token_client.cookies.clear()
    assert token_client.get("/core", headers={"authorization": "Bearer nope-nope-nope-nope"}).status_code == 401
    assert token_client.get("/core", headers={"authorization": f"Bearer {TOKEN}"}).status_code == 200


def test_the_cli_refuses_an_exposed_host_without_a_token_before_opening_the_store(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(cli, ["--root", str(tmp_path), "ui", "--host", "0.0.0.0"])
    assert result.exit_code == 1
    assert "refusing to serve 0.0.0.0 without a token" in result.output and TOKEN_ENV in result.output
    assert "--insecure" not in result.output  # the viewer has no way around the token
    result = runner.invoke(cli, ["--root", str(tmp_path), "ui"], env={TOKEN_ENV: "short"})
    assert result.exit_code == 1 and "at least 16" in result.output
    result = runner.invoke(cli, ["--root", str(tmp_path), "ui", "--port", "0"])
    assert result.exit_code == 2


def test_tiermem_ui_serves_on_the_printed_port(tmp_path: Path) -> None:
    """The command itself, in a subprocess: it prints its URL, serves the pages, refuses a
    foreign Host, and stops on SIGINT."""
    root = tmp_path / "mem"
    with Memory(root, embedder="hash") as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.9)
    port = _free_port()
    env = {**os.environ, "TIERMEM_EMBEDDER": "hash"}
    proc = subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(root), "ui", "--port", str(port)],
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert f"tiermem ui on http://127.0.0.1:{port}/ (scope default/default, no token" in line
        deadline = time.monotonic() + 30
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                connection.request("GET", "/facts")
                break
            except ConnectionRefusedError:
                assert time.monotonic() < deadline and proc.poll() is None
                time.sleep(0.05)
        answer = connection.getresponse()
        assert answer.status == 200 and "Prefers dark mode" in answer.read().decode()
        connection.request("GET", "/facts", headers={"Host": "evil.example"})
        assert connection.getresponse().status == 421
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) in (0, 1, -signal.SIGINT)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port
