"""``tiermem export`` / ``tiermem import``: every scope unless --user/--agent (or TIERMEM_USER /
TIERMEM_AGENT) was given; file-system and format errors are one line, never a traceback."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from transfer_helpers import (  # noqa: F401  (separate_stores: an autouse fixture)
    START,
    Templates,
    open_memory,
    separate_stores,
    snapshot,
    store_env,
)

from tiermem.cli.main import cli
from tiermem.testing import FakeClock

pytestmark = pytest.mark.usefixtures("backend")


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Templates]:
    templates = Templates(tmp_path_factory.mktemp("template"))
    yield templates
    templates.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(START + timedelta(days=1))  # the filled store's days are 2026-03-13 and -14


@pytest.fixture
def source(template: Templates, tmp_path: Path, clock: FakeClock) -> Path:
    return template.copy(tmp_path / "source", clock)


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    """``tiermem ARGS`` on the store of the ``--root`` given (its own schema on PostgreSQL)."""
    root = Path(args[args.index("--root") + 1])
    return CliRunner().invoke(cli, list(args), env={"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC",
                                                   **store_env(root), **(env or {})})


def _one_line_error(result: Result) -> str:
    assert result.exit_code == 1, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.output
    return lines[0]


def test_export_without_a_scope_carries_every_scope(source: Path, tmp_path: Path) -> None:
    result = run("--root", str(source), "export", str(tmp_path / "all.json"))
    assert result.exit_code == 0, result.output
    data = json.loads((tmp_path / "all.json").read_text(encoding="utf-8"))
    assert data["scope"] is None and {f["user_id"] for f in data["facts"]} == {"default", "bob"}
    assert {f["user_id"] for f in data["files"]} == {"default", "bob"}


@pytest.mark.parametrize("how", ["option", "env"])
def test_export_with_a_user_carries_that_scope(source: Path, tmp_path: Path, how: str) -> None:
    args, env = (["--user", "bob"], {}) if how == "option" else ([], {"TIERMEM_USER": "bob"})
    result = run("--root", str(source), *args, "export", env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert data["scope"] == {"user_id": "bob", "agent_name": "default"}
    assert {f["user_id"] for f in data["facts"]} == {"bob"} and {f["user_id"] for f in data["files"]} == {"bob"}


def test_the_default_user_given_explicitly_is_a_scope(source: Path) -> None:
    data = json.loads(run("--root", str(source), "--user", "default", "export").output)
    assert data["scope"] == {"user_id": "default", "agent_name": "default"}
    assert {f["user_id"] for f in data["facts"]} == {"default"}


def test_import_round_trip_and_json_counts(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    backup = tmp_path / "backup.json"
    assert run("--root", str(source), "export", str(backup)).exit_code == 0
    result = run("--root", str(tmp_path / "restored"), "import", str(backup), "--json")
    assert result.exit_code == 0, result.output
    counts = json.loads(result.output[result.output.index("{"):])
    assert counts["rows"]["facts"] == 3 and counts["rows"]["files"] >= 5
    assert counts["added"] == {k: n for k, n in counts["rows"].items() if n}
    assert counts["already_there"] == counts["refused"] == {}
    again = run("--root", str(tmp_path / "restored"), "import", str(backup), "--json")
    second = json.loads(again.output[again.output.index("{"):])
    assert second["added"] == {} and second["already_there"] == counts["added"]
    with open_memory(tmp_path / "restored", clock) as restored:
        assert restored.export() == json.loads(backup.read_text(encoding="utf-8"))


INTERNAL_NAMES = ("consolidated_prefix", "flush_hashes", "extracted_hashes", "dream_state", "core_versions",
                  "tombstones", "outbox", "embeddings", "store_items", "session_items", "agent_sessions", "audit")


def test_import_says_in_words_what_it_added_and_what_was_already_there(source: Path, tmp_path: Path) -> None:
    """Issue 22, item 18: internal table names, and the same counts for a second import."""
    backup = tmp_path / "backup.json"
    run("--root", str(source), "export", str(backup))
    target = str(tmp_path / "restored")
    first, second = (run("--root", target, "import", str(backup)) for _ in range(2))
    assert first.exit_code == second.exit_code == 0, first.output + second.output
    for output in (first.output, second.output):
        assert not any(name in output for name in INTERNAL_NAMES), output
    lines = first.stdout.splitlines()
    assert lines[0] == f"imported {backup}:"
    assert lines[1].startswith("  added: 3 facts, ") and " history entries" in lines[1] and " vectors" in lines[1]
    assert lines[2:] == ["  already there: nothing", "  refused: nothing"]
    again = second.stdout.splitlines()
    assert again[1] == "  added: nothing (everything in the file was here already)"
    assert again[2] == "  already there: " + lines[1].removeprefix("  added: ")


def test_a_refused_import_says_nothing_was_imported(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    backup = tmp_path / "backup.json"
    run("--root", str(source), "export", str(backup))
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.core.write("- Something else\n")
    line = _one_line_error(run("--root", str(target), "import", str(backup)))
    assert line.startswith("Error: refused, nothing was imported: ") and "use --replace" in line
    replaced = run("--root", str(target), "import", str(backup), "--replace")
    there = [line for line in replaced.stdout.splitlines() if line.startswith("  already there or overwritten")]
    assert there and there[0].startswith("  already there or overwritten (--replace): "), replaced.output
    assert there[0].endswith(" 1 Markdown file") or " 1 Markdown file, " in there[0]


def test_import_refuses_a_conflicting_file_unless_replace(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    backup = tmp_path / "backup.json"
    run("--root", str(source), "export", str(backup))
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.core.write("- Something else\n")
    before = snapshot(target)
    assert "MEMORY.md exists with other content" in _one_line_error(run("--root", str(target), "import",
                                                                        str(backup)))
    assert snapshot(target) == before
    assert run("--root", str(target), "import", str(backup), "--replace").exit_code == 0
    assert "Lisbon" in (target / "MEMORY.md").read_text(encoding="utf-8")  # (on PostgreSQL: the mirror)
    with open_memory(target, clock) as mem:
        assert "Lisbon" in mem.core.read()


def test_export_into_a_missing_directory_is_one_line(source: Path, tmp_path: Path) -> None:
    line = _one_line_error(run("--root", str(source), "export", str(tmp_path / "no" / "such" / "dir.json")))
    assert "cannot write" in line and "No such file or directory" in line
    assert not (tmp_path / "no").exists()


@pytest.mark.parametrize("content", [b"not json at all", b"\xff\xfe\x00binary", b'{"format": "tiermem-export"}'])
def test_import_of_a_bad_file_is_one_line(tmp_path: Path, content: bytes, clock: FakeClock) -> None:
    bad = tmp_path / "bad.json"
    bad.write_bytes(content)
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.facts.add("keep me")
    before = snapshot(target)
    line = _one_line_error(run("--root", str(target), "import", str(bad)))
    assert "export" in line
    assert snapshot(target) == before


@pytest.mark.sqlite_only  # file modes of the store's files: on PostgreSQL the server holds the store
def test_export_works_on_a_read_only_store(source: Path, tmp_path: Path) -> None:
    """Tests run as root, which ignores file modes: the export runs in a child as uid 65534."""
    shared = Path(tempfile.mkdtemp(prefix="tiermem-ro-"))
    try:
        root = Path(shutil.copytree(source, shared / "store"))
        expected = run("--root", str(root), "export")  # also imports every module the child needs
        for entry in [shared, *shared.rglob("*")]:
            entry.chmod(0o555 if entry.is_dir() else 0o444)
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            os.close(read_end)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(65534)
                os.setuid(65534)
            result = run("--root", str(root), "export")
            with os.fdopen(write_end, "w") as pipe:
                pipe.write(json.dumps([result.exit_code, result.output]))
            os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end) as pipe:
            code, output = json.loads(pipe.read())
        os.waitpid(pid, 0)
        assert code == 0 and output == expected.output
    finally:
        for entry in [shared, *shared.rglob("*")]:
            entry.chmod(0o755 if entry.is_dir() else 0o644)
        shutil.rmtree(shared)
