"""A transcript with garbage in it (issue 23): the save hook journals what it can read, exits 0
with nothing on stdout, and says in one hook-log line (which ``tiermem doctor`` shows) that it
skipped lines; a second save does not say it again. The real hook process, no client needed (the
hook log, store and full-disk failures are in tests/test_agents_hooks.py)."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tiermem.agents import hook_log
from tiermem.agents.project import open_scopes
from tiermem.tiers.markdown import parse_records

FIXTURES = Path(__file__).parent / "fixtures" / "agents"
GARBAGE = [b"\x00\xff\xfe binary junk \x80\x81", b"[1, 2, 3]",
           b'{"type": "user", "message": {"role": "user", "content"', b"not json at all"]


@pytest.fixture
def no_server(tmp_path: Path) -> Iterator[Path]:
    """A memory root whose resident server looks like it is starting (its lock held): the hook
    saves by itself and starts none."""
    root = tmp_path / "mem"
    (root / "agents").mkdir(parents=True)
    with (root / "agents" / "server.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield root


def _hook(root: Path, payload: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TIERMEM_EMBEDDER": "hash", "TIERMEM_CODING_PERSON": "maya"}
    command = [sys.executable, "-m", "tiermem.cli.main", "--root", str(root), "hook", "claude-code", "Stop"]
    return subprocess.run(command, input=json.dumps(payload).encode(), capture_output=True, timeout=120, env=env,
                          check=False)


def test_a_garbage_transcript_is_journaled_where_readable_and_said_once_in_the_hook_log(no_server: Path,
                                                                                        tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    lines = (FIXTURES / "claude-code" / "hello.jsonl").read_bytes().splitlines()
    transcript = tmp_path / "session.jsonl"
    transcript.write_bytes(b"\n".join([*GARBAGE[:2], *lines[:5], *GARBAGE[2:], *lines[5:]]) + b"\n")
    payload = {"session_id": "s1", "cwd": str(repo), "transcript_path": str(transcript), "hook_event_name": "Stop"}
    for _ in range(2):
        done = _hook(no_server, payload)
        assert (done.returncode, done.stdout) == (0, b""), done.stderr
        assert b"Traceback" not in done.stderr
    [line] = hook_log.log_path(no_server).read_text().splitlines()
    assert " claude-code save session=s1 " in line and "skipped 4 unreadable transcript lines" in line
    person, project, _ = open_scopes(no_server, repo, embedder="hash", queue_replay=False,
                                     shutdown_flush_seconds=0, coding_person="maya")
    with person, project:
        journal = [r.text for r in parse_records(project.daily.read())]
    assert journal == ["user: hello", "assistant: Hello from the fake"]
