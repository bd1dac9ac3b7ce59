"""The MCP server over streamable HTTP: the guards of issue 14 item 9, with real HTTP requests.

Servers run in process (uvicorn in a thread on a free 127.0.0.1 port, the app ``serve`` would
run), except where the command line itself is under test. Raw requests use ``http.client`` so the
headers (Host, Origin, Authorization) are exactly what the test says. The tests that serve a
store run on SQLite and on PostgreSQL; the checks of flags and addresses need no store.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.errors import InvalidInput
from tiermem.mcp.http import HttpOptions, build_app, check_exposure, is_loopback, security_settings
from tiermem.mcp.server import build_server

TOKEN = "s3cret-token-for-tests-0123456789"
DEADLINE = 60.0
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "test", "version": "1"}}}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def serving(mem: Memory, **options: Any) -> Iterator[HttpOptions]:
    """The HTTP app of ``serve(mem, HttpOptions(...))`` running on a free port until the block ends."""
    import uvicorn

    opts = HttpOptions(_free_port(), **options)
    server = uvicorn.Server(uvicorn.Config(build_app(build_server(mem), opts), host="127.0.0.1", port=opts.port,
                                           log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + DEADLINE
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
            time.sleep(0.01)
        yield opts
    finally:
        server.should_exit = True
        thread.join(timeout=DEADLINE)


def post(port: int, host: str | None = None, token: str | None = None, origin: str | None = None,
         authorization: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One ``initialize`` POST to ``/mcp`` with exactly these headers; (status, headers, body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream",
               "Host": host or f"127.0.0.1:{port}"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    if authorization is not None:
        headers["Authorization"] = authorization
    if origin is not None:
        headers["Origin"] = origin
    try:
        conn.request("POST", "/mcp", body=json.dumps(INITIALIZE), headers=headers)
        response = conn.getresponse()
        return response.status, {k.lower(): v for k, v in response.getheaders()}, response.read()
    finally:
        conn.close()


# --- the token -------------------------------------------------------------------------------
@pytest.mark.usefixtures("backend")
def test_a_token_server_answers_401_without_the_right_token(mem: Memory) -> None:
    with serving(mem, token=TOKEN) as opts:
        status, headers, body = post(opts.port)
        assert status == 401 and headers["www-authenticate"].startswith("Bearer")
        assert b"missing or wrong bearer token" in body
        assert post(opts.port, token=TOKEN[:-1] + "x")[0] == 401  # same length, one character off
        assert post(opts.port, token=TOKEN + "x")[0] == 401
        assert post(opts.port, authorization=TOKEN)[0] == 401  # no scheme
        assert post(opts.port, authorization=f"Basic {TOKEN}")[0] == 401
        assert post(opts.port, token=TOKEN)[0] == 200
        assert post(opts.port, authorization=f"bearer {TOKEN}")[0] == 200  # the scheme is case-insensitive
    assert mem.facts.list() == []


@pytest.mark.usefixtures("backend")
def test_the_sdk_client_works_with_the_token_and_fails_without(mem: Memory) -> None:
    async def session(url: str, token: str | None, content: str) -> list[str]:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        async with httpx2.AsyncClient(headers=headers, timeout=DEADLINE) as http, \
                Client(streamable_http_client(url, http_client=http), read_timeout_seconds=DEADLINE) as client:
            await client.call_tool("remember", {"content": content, "category": "context"})
            result = await client.call_tool("recall", {"query": content, "min_score": 0})
            assert isinstance(result.structured_content, dict)
            return [hit["text"] for hit in result.structured_content["hits"]]

    async def main(url: str) -> None:
        with anyio.fail_after(DEADLINE):
            assert "Deploys on Fridays" in await session(url, TOKEN, "Deploys on Fridays")
            with pytest.raises(Exception, match="unhandled errors"):  # the SDK's error for the 401
                await session(url, None, "Sneaked in without a token")

    with serving(mem, token=TOKEN) as opts:
        anyio.run(main, f"http://127.0.0.1:{opts.port}/mcp")
    assert [f.content for f in mem.facts.list()] == ["Deploys on Fridays"]


# --- Host and Origin (DNS rebinding) ---------------------------------------------------------
@pytest.mark.usefixtures("backend")
@pytest.mark.parametrize("bind", ["127.0.0.1", "127.1", "localhost"])
def test_wrong_host_or_origin_is_rejected_for_every_loopback_spelling(mem: Memory, bind: str) -> None:
    """Before: any host but 127.0.0.1/localhost/::1 (e.g. ``127.1``) turned the SDK's check off."""
    with serving(mem, host=bind) as opts:
        assert post(opts.port, host=f"evil.example:{opts.port}")[0] == 421
        assert post(opts.port, host="evil.example")[0] == 421
        assert post(opts.port, origin="http://evil.example")[0] == 403
        assert post(opts.port, origin=f"http://evil.example:{opts.port}")[0] == 403
        assert post(opts.port)[0] == 200  # Host 127.0.0.1:port, no token needed on loopback
        assert post(opts.port, host=f"localhost:{opts.port}", origin="http://localhost:5173")[0] == 200
        assert post(opts.port, host=f"{bind}:{opts.port}")[0] == 200


@pytest.mark.usefixtures("backend")
def test_allow_host_adds_a_host_and_its_origins(mem: Memory) -> None:
    with serving(mem, token=TOKEN, allow_hosts=("memory.lan", "proxy.example:8443")) as opts:
        assert post(opts.port, host=f"memory.lan:{opts.port}", token=TOKEN)[0] == 200
        assert post(opts.port, host="memory.lan", token=TOKEN, origin="https://memory.lan")[0] == 200
        assert post(opts.port, host="proxy.example:8443", token=TOKEN)[0] == 200
        assert post(opts.port, host="proxy.example:9999", token=TOKEN)[0] == 421
        assert post(opts.port, host="other.lan", token=TOKEN)[0] == 421
        assert post(opts.port, host=f"memory.lan:{opts.port}")[0] == 401  # the token still counts


def test_security_settings_are_explicit_for_wildcard_binds() -> None:
    settings = security_settings(HttpOptions(8765, "0.0.0.0", token=TOKEN))
    assert settings.enable_dns_rebinding_protection
    assert "127.0.0.1:*" in settings.allowed_hosts and "localhost:*" in settings.allowed_hosts
    assert not any(h.startswith("0.0.0.0") for h in settings.allowed_hosts)
    assert "http://localhost:*" in settings.allowed_origins
    settings = security_settings(HttpOptions(8765, "127.1", allow_hosts=("[fd00::5]",)))
    assert {"127.1:8765", "[fd00::5]", "[fd00::5]:*"} <= set(settings.allowed_hosts)
    assert "https://[fd00::5]" in settings.allowed_origins


# --- binding beyond loopback -----------------------------------------------------------------
def test_loopback_detection() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.1", "localhost", "::1", "127.8.9.10"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.20", "10.0.0.1"))
    with pytest.raises(InvalidInput, match="cannot resolve host"):
        is_loopback("no-such-host.invalid")


def test_non_loopback_without_token_is_refused_before_anything_starts(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    for host in ("0.0.0.0", "::", "192.168.1.20"):
        result = CliRunner().invoke(cli, ["--root", str(root), "mcp", "--http", "8765", "--host", host])
        assert result.exit_code == 1, result.output
        assert f"refusing to serve {host} without a token" in result.output
        assert "TIERMEM_MCP_TOKEN" in result.output and "Traceback" not in result.output
    assert not root.exists()  # refused before the store was opened
    with pytest.raises(InvalidInput, match="refusing to serve 0.0.0.0"):
        check_exposure(HttpOptions(8765, "0.0.0.0"))
    check_exposure(HttpOptions(8765, "0.0.0.0", token=TOKEN))
    check_exposure(HttpOptions(8765, "0.0.0.0", insecure=True))


def test_bad_flags_are_one_line_errors(tmp_path: Path) -> None:
    root = str(tmp_path / "mem")
    short = CliRunner().invoke(cli, ["--root", root, "mcp", "--http", "8765"], env={"TIERMEM_MCP_TOKEN": "short"})
    assert short.exit_code == 1 and "at least 16 characters" in short.output
    spaced = CliRunner().invoke(cli, ["--root", root, "mcp", "--http", "8765", "--token", "a b" * 8])
    assert spaced.exit_code == 1 and "printable ASCII without spaces" in spaced.output
    bad_host = CliRunner().invoke(cli, ["--root", root, "mcp", "--http", "8765", "--allow-host", "a/b"])
    assert bad_host.exit_code == 1 and "--allow-host takes a host name" in bad_host.output
    with pytest.raises(InvalidInput, match="--allow-host takes a host name"):
        HttpOptions(8765, allow_hosts=("proxy.example:٨٤٤٣",))  # a port in ASCII digits only
    for flags in (["--token", TOKEN], ["--insecure"], ["--allow-host", "memory.lan"], ["--host", "0.0.0.0"]):
        usage = CliRunner().invoke(cli, ["--root", root, "mcp", *flags])
        assert usage.exit_code == 2 and "only apply with --http PORT" in usage.output
    assert not Path(root).exists()


@pytest.mark.usefixtures("backend")
def test_insecure_serves_with_a_warning_on_stderr(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none"}
    env.pop("TIERMEM_MCP_TOKEN", None)
    log = tmp_path / "server.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(tmp_path / "mem"), "mcp",
                                 "--http", str(port), "--host", "0.0.0.0", "--insecure"],
                                env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the server did not start"
                time.sleep(0.05)
        assert post(port)[0] == 200
        assert post(port, host=f"evil.example:{port}")[0] == 421  # the Host check stays on
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert "WARNING: serving http://0.0.0.0:" in text and "without a token (--insecure)" in text
