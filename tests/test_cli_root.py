"""The CLI and its root: no store created by a read, a store created once by a write, a warning for
a foreign directory, read-only stores, file-system errors and provider names as one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.errors import ConfigError

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
NOBODY = 65534
pytestmark = pytest.mark.usefixtures("backend")

READ_COMMANDS: list[list[str]] = [
    ["search", "dark mode"], ["facts", "list"], ["facts", "show", "fact_00000000"], ["stats"], ["daily"],
    ["inject"], ["history"], ["queue", "status"], ["plan", "list"], ["plan", "show"], ["rollback", "--list"],
    ["dream"], ["facts", "delete", "fact_00000000"], ["queue", "flush"],
]


def invoke(root: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), *args], env={**ENV, **(env or {})}, input=stdin)


def no_store(root: Path) -> str:
    """What a read command says when the store of ``root`` was never created."""
    url = os.environ.get("TIERMEM_DATABASE_URL")
    if not url:
        return f"no tiermem store at {root} (run `tiermem init`, or check --root)"
    from tiermem.storage.postgres.conninfo import safe_url

    return f"no tiermem store at {safe_url(url)} (run `tiermem init`, or check TIERMEM_DATABASE_URL)"


def store_at(root: Path) -> str:
    """How messages name the store of ``root``: the root, or the database without its password."""
    return no_store(root).removeprefix("no tiermem store at ").split(" (run", 1)[0]


def error_line(result: Result) -> str:
    """The one line a failed command printed (stderr); no traceback, exit code 1."""
    assert result.exit_code == 1, (result.exit_code, result.output)
    assert "Traceback" not in result.output and result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# --- a root without a store -----------------------------------------------------------------
@pytest.mark.parametrize("command", READ_COMMANDS, ids=" ".join)
def test_read_commands_on_a_missing_root_fail_and_create_nothing(tmp_path: Path, command: list[str]) -> None:
    root = tmp_path / "nowhere"
    line = error_line(invoke(root, *command))
    assert line == f"Error: {no_store(root)}"
    assert not root.exists()


def test_read_commands_on_an_empty_directory_create_no_store(tmp_path: Path) -> None:
    assert error_line(invoke(tmp_path, "facts", "list")) == f"Error: {no_store(tmp_path)}"
    assert list(tmp_path.iterdir()) == []


def test_a_writing_command_creates_the_store_and_says_so_once(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    first = invoke(root, "remember", "Prefers dark mode")
    assert first.exit_code == 0 and first.stderr == f"created a tiermem store at {store_at(root)}\n"
    assert first.stdout.startswith("remembered fact_")
    second = invoke(root, "remember", "Lives in Lyon")
    assert second.exit_code == 0 and second.stderr == ""
    listed = invoke(root, "facts", "list", "--json")
    assert listed.stderr == "" and [f["content"] for f in json.loads(listed.stdout)] == [
        "Prefers dark mode", "Lives in Lyon"]


def test_init_creates_the_store_without_the_extra_note(tmp_path: Path, backend: str) -> None:
    root = tmp_path / "mem"
    result = invoke(root, "init")
    assert result.exit_code == 0 and result.stderr == "", result.output
    database = "" if backend == "sqlite" else f"store: {store_at(root)}\n"  # the store is on the server
    assert result.stdout == f"initialised {root}\n{database}"
    assert (root / "tiermem.db").is_file() == (backend == "sqlite") and (root / "tiermem.toml").is_file()
    assert invoke(root, "stats", "--json").exit_code == 0


@pytest.mark.sqlite_only  # the store would be a file in that directory; on PostgreSQL it is on the server
def test_a_directory_with_other_files_gets_a_warning_before_a_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not memory", encoding="utf-8")
    result = invoke(tmp_path, "note", "First note")
    assert result.exit_code == 0
    assert result.stderr.splitlines() == [
        f"warning: {tmp_path} is not empty but holds no tiermem store; creating one there (check --root)",
        f"created a tiermem store at {tmp_path}"]
    assert invoke(tmp_path, "note", "Second note").stderr == ""  # a store now: no warning


def test_a_directory_with_only_a_config_file_is_no_surprise(tmp_path: Path) -> None:
    (tmp_path / "tiermem.toml").write_text('[tiermem]\nmax_facts = 10\n', encoding="utf-8")
    result = invoke(tmp_path, "remember", "x")
    assert result.exit_code == 0 and result.stderr == f"created a tiermem store at {store_at(tmp_path)}\n"


# --- file-system errors -----------------------------------------------------------------------
def test_file_system_errors_are_one_line(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    assert error_line(invoke(blocker / "mem", "init")) == f"Error: {blocker / 'mem'}: Not a directory"
    assert error_line(invoke(blocker / "mem", "remember", "x")).endswith(": Not a directory")
    root = tmp_path / "mem"
    invoke(root, "remember", "x")
    target = tmp_path / "missing" / "dump.json"
    line = error_line(invoke(root, "export", str(target)))
    assert str(target) in line and line.endswith("No such file or directory")
    binary = tmp_path / "chat.jsonl"
    binary.write_bytes(b"\xff\xfe\x00junk")
    assert error_line(invoke(root, "ingest", str(binary))).startswith("Error: not UTF-8 text")


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc")
def test_a_root_where_no_folder_can_be_made_is_one_line() -> None:
    """mkdir under /proc fails with ENOENT although the parent exists: one line, not a recursion."""
    assert error_line(invoke(Path("/proc/nope"), "remember", "hi")) == "Error: /proc/nope: No such file or directory"
    line = error_line(invoke(Path("/proc/nope/deeper"), "remember", "hi"))
    assert line.startswith("Error: /proc/nope") and line.endswith("No such file or directory")


def test_debug_shows_the_traceback_instead(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    result = CliRunner().invoke(cli, ["--root", str(blocker / "mem"), "--debug", "init"], env=ENV)
    assert result.exit_code == 1 and isinstance(result.exception, NotADirectoryError)


# --- read-only stores (tests run as root, which ignores file modes: drop privileges) ---------
def as_nobody(work: Callable[[], Any]) -> Any:
    """``work()`` in a forked child running as uid/gid 65534 (or here if we are not root); its
    JSON-able result comes back through a pipe."""
    if os.geteuid() != 0:
        return work()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        status = 0
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            payload = json.dumps({"ok": work()})
        except BaseException as exc:  # noqa: B036 - report anything to the parent
            payload, status = json.dumps({"error": repr(exc)}), 1
        with os.fdopen(write_end, "w") as pipe:
            pipe.write(payload)
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        data = json.loads(pipe.read() or '{"error": "no answer"}')
    os.waitpid(pid, 0)
    assert "error" not in data, data["error"]
    return data["ok"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory outside pytest's private tmp tree, so an unprivileged child can reach it."""
    path = Path(tempfile.mkdtemp(prefix="tiermem-ro-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        for entry in [path, *path.rglob("*")]:
            entry.chmod(entry.stat().st_mode | stat.S_IWUSR | stat.S_IXUSR)
        shutil.rmtree(path)


def freeze(path: Path) -> None:
    """No write permission anywhere below ``path`` (reading stays allowed)."""
    for entry in [path, *path.rglob("*")]:
        entry.chmod(entry.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH) | stat.S_IROTH
                    | (stat.S_IXOTH if entry.is_dir() else 0))


def outputs(root: Path, commands: Sequence[Sequence[str]]) -> list[list[Any]]:
    env = {**ENV, "TIERMEM_CACHE_DIR": str(root.parent / "cache")}
    found = []
    for command in commands:
        result = CliRunner().invoke(cli, ["--root", str(root), *command], env=env)
        found.append([result.exit_code, result.stdout, result.stderr])
    return found


READS = [["facts", "list", "--json"], ["search", "dark mode", "--json", "--min-score", "0"], ["daily", "--json"],
         ["inject", "--query", "dark mode"], ["history", "--json"], ["plan", "list", "--json"], ["queue", "status"]]


@pytest.mark.sqlite_only  # file permissions of the store's files (PostgreSQL: the server's grants)
def test_read_commands_work_on_a_store_nobody_may_write(shared_dir: Path) -> None:
    root = shared_dir / "mem"
    with Memory(root, embedder="hash", timezone="UTC") as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.9)
        mem.daily.append("Note", "Switched the editor to a dark theme")
        mem.plans.start("Ship v1", ["write tests"])
        mem.search("dark mode")  # the index is current
    expected = outputs(root, READS)  # as the owner (this also imports every module the child needs)
    assert [code for code, _, _ in expected] == [0] * len(READS)
    shutil.copytree(root, shared_dir / "copy")
    outputs(shared_dir / "copy", [["stats"], ["remember", "x"], ["note", "x"]])  # imports of the other paths
    freeze(root)
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}

    def unprivileged() -> list[Any]:
        stats = outputs(root, [["stats", "--json"]])[0]
        writes = outputs(root, [["remember", "Lives in Lyon"], ["note", "x"]])
        return [outputs(root, READS), stats, writes]

    reads, stats, writes = as_nobody(unprivileged)
    assert reads == expected
    assert stats[0] == 0 and json.loads(stats[1])["read_only"] is True and json.loads(stats[1])["facts"] == 1
    remember, note = writes
    assert remember == [1, "", f"Error: {root / 'tiermem.db'} is read-only (no write permission): this needs to "
                               "write\n"]
    assert note[0] == 1 and note[2].startswith("Error: ") and note[2].count("\n") == 1
    assert {p: p.read_bytes() for p in root.rglob("*") if p.is_file()} == before


def test_init_in_a_directory_nobody_may_write_is_one_line(shared_dir: Path) -> None:
    freeze(shared_dir)
    invoke(shared_dir / "warm-up", "init")  # imports, as root (creates it; removed below)
    shutil.rmtree(shared_dir / "warm-up")
    result = as_nobody(lambda: outputs(shared_dir / "mem", [["init"]])[0])
    assert result == [1, "", f"Error: {shared_dir / 'mem'}: Permission denied\n"]
    assert not (shared_dir / "mem").exists()


@pytest.mark.sqlite_only  # SQLite's read-only connection
def test_a_database_opened_read_only_reads_and_refuses_writes(tmp_path: Path) -> None:
    from tiermem.errors import StorageError
    from tiermem.storage.sqlite.db import Database

    with Memory(tmp_path, embedder="hash") as mem:
        mem.facts.add("Prefers dark mode")
    db = Database(tmp_path / "tiermem.db", read_only=True)
    try:
        assert db.read_only and [r[0] for r in db.rows("SELECT content FROM facts")] == ["Prefers dark mode"]
        with pytest.raises(StorageError, match="is read-only"), db.transaction() as conn:
            conn.execute("DELETE FROM facts")
        with pytest.raises(sqlite3.OperationalError, match="readonly"):
            db.conn.execute("DELETE FROM facts")  # even outside a transaction SQLite refuses
    finally:
        db.close()
    owner = Database(tmp_path / "tiermem.db")  # the owner may write: read-write by default
    assert not owner.read_only
    owner.close()


# --- provider names -------------------------------------------------------------------------
@pytest.mark.parametrize("command", [["remember", "x"], ["facts", "list"], ["search", "x"], ["note", "x"],
                                     ["inject"], ["mcp"]], ids=" ".join)
def test_an_unknown_provider_fails_when_the_store_opens(tmp_path: Path, command: list[str]) -> None:
    root = tmp_path / "mem"
    invoke(root, "init")
    line = error_line(invoke(root, *command, env={"TIERMEM_LLM": "bogus"}))
    assert line.startswith("Error: unknown llm provider 'bogus' (known: anthropic, none, openai")
    line = error_line(invoke(root, *command, env={"TIERMEM_EMBEDDER": "bogus:x"}))
    assert line.startswith("Error: unknown embedder provider 'bogus' (known: hash, local, openai")
    assert not (root / "memory").exists() and invoke(root, "facts", "list", "--json").stdout == "[]\n"


def test_an_unknown_provider_creates_no_store(tmp_path: Path) -> None:
    error_line(invoke(tmp_path / "mem", "remember", "x", env={"TIERMEM_LLM": "bogus:model"}))
    assert not (tmp_path / "mem").exists()


def test_the_library_checks_provider_names_at_construction(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ConfigError, match="unknown llm provider 'bogus'"):
        Memory(tmp_path / "a", llm="bogus")
    with pytest.raises(ConfigError, match="unknown embedder provider 'nope'"):
        Memory(tmp_path / "a", embedder="nope:model")
    monkeypatch.setenv("TIERMEM_LLM", "bogus")
    with pytest.raises(ConfigError, match="unknown llm provider"):
        Memory(tmp_path / "a", embedder="hash")
    assert not (tmp_path / "a").exists()
    monkeypatch.delenv("TIERMEM_LLM")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with Memory(tmp_path / "b", llm="openai:gpt-4o-mini", embedder="hash") as mem:  # built lazily
        mem.facts.add("Prefers dark mode")
        with pytest.raises(ConfigError, match="set OPENAI_API_KEY"):
            mem.extract([{"role": "user", "content": "I moved to Lisbon"}])
        assert [f.content for f in mem.facts.list()] == ["Prefers dark mode"]


def test_mcp_reports_a_missing_api_key_on_stderr_before_serving(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    invoke(root, "init")
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_API_KEY"}
    env.update(ENV, TIERMEM_LLM="openai:gpt-4o-mini")
    proc = subprocess.run([sys.executable, "-m", "tiermem.cli.main", "--root", str(root), "mcp"],
                          env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "Error: openai:gpt-4o-mini needs an API key: set OPENAI_API_KEY\n"
