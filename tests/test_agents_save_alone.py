"""A stop hook with no resident server (issue 23, P8): it journals for a fraction of a second, in
small batches, starts the server and leaves the rest to it; the server, once up, journals the rest
of the session's transcript; every message ends up in the journal once."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_clients import git_repo
from queue_helpers import refresh_mirror

from tiermem.agents import pending_saves
from tiermem.agents.hook_runner import SAVE_ALONE_BATCH, SAVE_ALONE_SECONDS, ServerPort, run_hook
from tiermem.agents.project import coding_scopes
from tiermem.agents.residents import Residents
from tiermem.agents.session_state import SessionState
from tiermem.config import load_settings
from tiermem.tiers.markdown import parse_records

pytestmark = pytest.mark.usefixtures("backend")

SESSION = "5d0c2a0e-1111-4f4f-9e9e-2000messages"
ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none", "TIERMEM_TIMEZONE": "UTC", "TIERMEM_CODING_PERSON": "maya"}
MESSAGES = 2000


@pytest.fixture(autouse=True)
def _settings(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in ENV.items():
        monkeypatch.setenv(key, value)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return git_repo(tmp_path / "shop", "shop")


@pytest.fixture
def transcript(tmp_path: Path) -> Path:
    """A Claude Code transcript of :data:`MESSAGES` messages."""
    lines = []
    for i in range(MESSAGES // 2):
        lines.append({"type": "user", "message": {"role": "user", "content": f"question {i} about the ledger"}})
        lines.append({"type": "assistant", "message": {"role": "assistant", "content": [
            {"type": "text", "text": f"answer {i} about the ledger"}]}})
    path = tmp_path / f"{SESSION}.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


class Down:
    """No resident server: every ask answers ``None``; the starts asked for are counted."""

    def __init__(self) -> None:
        self.started = 0

    def port(self) -> ServerPort:
        def ensure(root: Path, cwd: str) -> bool:
            self.started += 1
            return False

        def save(*_: object) -> None:
            ensure(Path(), "")  # as server_client.ask_save: no server, so one is started
            return None

        return ServerPort(lambda *_: None, lambda *_: None, save, ensure)


def stop(root: Path, repo: Path, transcript: Path, server: Down, started: float) -> float:
    """One Stop hook in-process; its seconds."""
    data = json.dumps({"session_id": SESSION, "cwd": str(repo), "transcript_path": str(transcript)}).encode()
    begun = time.monotonic()
    result = run_hook("claude-code", "Stop", data, root, server=server.port(), started=started)
    assert (result.stdout, result.outcome) == (b"", "ok"), result.detail
    return time.monotonic() - begun


def journal(root: Path, repo: Path) -> list[str]:
    refresh_mirror(root)
    user = coding_scopes(root, repo, load_settings(root)).project.user_id
    return [r.text for path in sorted((root / "users" / user).glob("memory/*.md"))
            for r in parse_records(path.read_text())]


@pytest.fixture
def residents(root: Path) -> Iterator[Residents]:
    with Residents.open(root.resolve()) as server:
        yield server


def test_a_stop_hook_with_no_server_saves_one_batch_after_its_time_and_leaves_the_rest(
        root: Path, repo: Path, transcript: Path) -> None:
    down = Down()
    stop(root, repo, transcript, down, started=time.monotonic() - 60)  # its time is up: one batch, no more
    assert SessionState.load(root, "claude-code", SESSION).cursor.messages == SAVE_ALONE_BATCH
    assert down.started == 1
    [left] = pending_saves.waiting(root)
    assert left == pending_saves.PendingSave("claude-code", SESSION, str(repo), str(transcript))
    assert len(journal(root, repo)) == SAVE_ALONE_BATCH


def test_a_stop_hook_with_no_server_returns_within_its_time(root: Path, repo: Path, transcript: Path) -> None:
    seconds = stop(root, repo, transcript, Down(), started=time.monotonic())
    saved = SessionState.load(root, "claude-code", SESSION).cursor.messages
    assert 0 < saved < MESSAGES and saved % SAVE_ALONE_BATCH == 0
    assert seconds < SAVE_ALONE_SECONDS + 1.5, seconds  # all 2,000 took 3-5 s


def test_the_server_journals_the_rest_once(root: Path, repo: Path, transcript: Path, residents: Residents) -> None:
    down = Down()
    stop(root, repo, transcript, down, started=time.monotonic() - 60)
    assert pending_saves.waiting(root)
    assert residents.take_pending_saves() == 1
    assert residents.take_pending_saves() == 0  # taken once, while it waits or runs
    assert residents._saves.wait_idle(120)
    assert SessionState.load(root, "claude-code", SESSION).cursor.messages == MESSAGES
    assert pending_saves.waiting(root) == []
    stop(root, repo, transcript, down, started=time.monotonic())  # a later Stop: nothing new
    texts = journal(root, repo)
    assert len(texts) == MESSAGES and len(set(texts)) == MESSAGES
    assert texts[0] == "user: question 0 about the ledger" and texts[-1] == "assistant: answer 999 about the ledger"


def test_a_save_that_reaches_the_end_clears_what_was_left(root: Path, repo: Path, transcript: Path) -> None:
    down = Down()
    stop(root, repo, transcript, down, started=time.monotonic() - 60)
    assert pending_saves.waiting(root)
    while SessionState.load(root, "claude-code", SESSION).cursor.messages < MESSAGES:
        stop(root, repo, transcript, down, started=time.monotonic() + 3600)  # time enough: to the end
    assert pending_saves.waiting(root) == []
    assert len(journal(root, repo)) == MESSAGES


def test_a_request_that_is_not_one_is_dropped(root: Path) -> None:
    folder = root / "agents" / pending_saves.PENDING_DIR
    folder.mkdir(parents=True)
    (folder / "garbage.json").write_text("{not json")
    (folder / "partial.json").write_text(json.dumps({"client": "claude-code", "session_id": "s"}))
    assert pending_saves.waiting(root) == []
    assert list(folder.iterdir()) == []
