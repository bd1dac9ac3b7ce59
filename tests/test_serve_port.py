"""``tiermem ui`` and ``tiermem mcp --http`` say where they serve only once the port is theirs
(issue 22): a busy port is one line naming the flag (no traceback, no "on http://..." line
first), and a client that connects right after the line is not refused."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli.main import cli

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
COMMANDS = {"ui": (["ui", "--port"], "--port"), "mcp": (["mcp", "--http"], "--http")}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    assert CliRunner().invoke(cli, ["--root", str(root), "init"], env=ENV).exit_code == 0
    return root


@contextmanager
def held_port() -> Iterator[int]:
    """A port another program listens on."""
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        yield int(holder.getsockname()[1])


def start(root: Path, command: str, port: int) -> subprocess.Popen[str]:
    args, _flag = COMMANDS[command]
    return subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(root), *args, str(port)],
                            env={**os.environ, **ENV}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_busy_port_is_one_line_naming_the_flag(store: Path, command: str) -> None:
    with held_port() as port:
        process = start(store, command, port)
        _, stderr = process.communicate(timeout=120)
    flag = COMMANDS[command][1]
    assert process.returncode == 1, stderr
    assert stderr.splitlines() == [f"Error: port {port} on 127.0.0.1 is already in use: stop what holds it, or"
                                   f" choose another port with {flag}"], stderr


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_the_line_comes_once_the_port_is_bound(store: Path, command: str) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = int(probe.getsockname()[1])
    process = start(store, command, port)
    try:
        assert process.stderr is not None
        line = process.stderr.readline()  # blocks until the server says where it serves
        assert f"on http://127.0.0.1:{port}/" in line and "Ctrl-C stops it" in line, line
        with socket.create_connection(("127.0.0.1", port), timeout=30):  # not refused
            pass
    finally:
        process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + 60
        while process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=60)
