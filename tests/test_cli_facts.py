"""The CLI's fact commands, JSON output and exit codes (0 ok, 1 error, 2 usage)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from tiermem.cli.main import cli

pytestmark = pytest.mark.usefixtures("backend")


def run(root: Path, *args: str, database_url: str | None = None) -> tuple[int, str]:
    env = {"TIERMEM_EMBEDDER": "hash"} | ({"TIERMEM_DATABASE_URL": database_url} if database_url else {})
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env=env)
    return result.exit_code, result.stdout if result.exit_code == 0 else result.output  # stdout, or the error


def test_remember_list_show_edit_delete(tmp_path: Path) -> None:
    code, out = run(tmp_path, "remember", "Prefers dark mode", "-c", "preference", "--confidence", "0.9", "--json")
    assert code == 0
    fact_id = json.loads(out)[0]["fact"]["id"]
    code, out = run(tmp_path, "facts", "list", "--json")
    assert code == 0 and [f["content"] for f in json.loads(out)] == ["Prefers dark mode"]
    code, out = run(tmp_path, "facts", "edit", fact_id, "--confidence", "0.6", "--json")
    assert code == 0 and json.loads(out)["confidence"] == 0.6
    code, out = run(tmp_path, "facts", "show", fact_id, "--json")
    assert code == 0 and [e["action"] for e in json.loads(out)["history"]] == ["added", "updated"]
    code, out = run(tmp_path, "inject")
    assert code == 0 and "- [preference | 0.60] Prefers dark mode" in out
    code, _ = run(tmp_path, "facts", "delete", fact_id)
    assert code == 0
    code, out = run(tmp_path, "facts", "list", "--json")
    assert json.loads(out) == []


def test_errors_exit_1_with_one_line(tmp_path: Path) -> None:
    assert run(tmp_path, "init")[0] == 0
    code, out = run(tmp_path, "facts", "delete", "fact_00000000")
    assert code == 1 and "no fact" in out and "Traceback" not in out
    code, out = run(tmp_path, "remember", "x", "--confidence", "nan")
    assert code == 1 and "confidence" in out
    code, out = run(tmp_path, "--user", "../etc", "facts", "list")
    assert code == 1 and "user_id" in out


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert run(tmp_path, "remember")[0] == 2
    assert run(tmp_path, "remember", "x", "-c", "opinion")[0] == 2
    assert run(tmp_path, "facts", "edit", "fact_00000000")[0] == 2


def test_export_import_round_trip(tmp_path: Path) -> None:
    run(tmp_path / "a", "remember", "one", "two")
    assert run(tmp_path / "a", "export", str(tmp_path / "dump.json"))[0] == 0
    if "TIERMEM_DATABASE_URL" in os.environ:  # b needs a schema of its own: a new root alone shares the database
        from pg_helpers import fresh_schema

        with fresh_schema() as url:
            _import_into_b(tmp_path, url)
    else:
        _import_into_b(tmp_path, None)


def _import_into_b(tmp_path: Path, database_url: str | None) -> None:
    code, out = run(tmp_path / "b", "import", str(tmp_path / "dump.json"), "--json", database_url=database_url)
    assert code == 0 and json.loads(out)["rows"]["facts"] == 2
    a = json.loads(run(tmp_path / "a", "facts", "list", "--json")[1])
    b = json.loads(run(tmp_path / "b", "facts", "list", "--json", database_url=database_url)[1])
    assert a == b and len(a) == 2


def test_stats_json(tmp_path: Path) -> None:
    run(tmp_path, "remember", "one", "-c", "goal")
    code, out = run(tmp_path, "stats", "--json")
    assert code == 0 and json.loads(out)["facts_by_category"] == {"goal": 1}


def test_short_commands_leave_queued_items_to_the_queue(tmp_path: Path) -> None:
    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    def statuses() -> list[tuple[str, ...]]:
        with Memory(tmp_path, embedder=HashEmbedder(), debounce_seconds=3600, shutdown_flush_seconds=0) as mem:
            return [tuple(row) for row in mem.db.rows("SELECT status FROM outbox")]

    with Memory(tmp_path, embedder=HashEmbedder(), debounce_seconds=3600, shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", [{"role": "user", "content": "queued but not processed"}])
    assert run(tmp_path, "facts", "list", "--json")[0] == 0
    assert statuses() == [("pending",)]
    code, out = run(tmp_path, "queue", "flush")
    assert code == 0 and "queue empty" in out


def test_remember_says_why_a_fact_was_skipped(tmp_path: Path) -> None:
    code, out = run(tmp_path, "remember", "Prefers dark mode", "--json")
    fact_id = json.loads(out)[0]["fact"]["id"]
    code, out = run(tmp_path, "remember", "prefers DARK  mode", "Maybe likes tea", "--confidence", "0.3")
    assert code == 0 and out.splitlines() == [
        "skipped: confidence 0.30 below threshold 0.50 -- prefers DARK  mode",
        "skipped: confidence 0.30 below threshold 0.50 -- Maybe likes tea"]
    code, out = run(tmp_path, "remember", "prefers DARK  mode", "Likes tea", "--json")
    duplicate, added = json.loads(out)
    assert duplicate == {"content": "prefers DARK  mode", "fact": None, "reason": f"duplicate of {fact_id}"}
    assert added["fact"]["content"] == "Likes tea" and added["reason"] is None
    code, out = run(tmp_path, "facts", "delete", fact_id)
    code, out = run(tmp_path, "remember", "Prefers dark mode")  # a person may bring deleted content back
    assert code == 0 and out.startswith("remembered fact_")
    code, out = run(tmp_path, "history", "--json")
    assert [e["reason"] for e in json.loads(out) if e["action"] == "skipped"] == [
        "confidence 0.30 below threshold 0.50", "confidence 0.30 below threshold 0.50", f"duplicate of {fact_id}"]


def test_delete_with_one_unknown_id_deletes_nothing(tmp_path: Path) -> None:
    code, out = run(tmp_path, "remember", "one", "two", "--json")
    one, two = (item["fact"]["id"] for item in json.loads(out))
    code, out = run(tmp_path, "facts", "delete", one, "fact_00000000", two)
    assert code == 1 and out.count("\n") == 1
    assert "no fact 'fact_00000000'" in out and "nothing was deleted" in out and one not in out
    code, out = run(tmp_path, "facts", "list", "--json")
    assert sorted(f["id"] for f in json.loads(out)) == sorted([one, two])
    code, out = run(tmp_path, "history", "--json")
    assert [e["action"] for e in json.loads(out)] == ["added", "added"]  # no delete was audited
    code, out = run(tmp_path, "facts", "delete", one, two, one, "--json")
    assert code == 0 and json.loads(out) == {"deleted": [one, two]}
    assert json.loads(run(tmp_path, "facts", "list", "--json")[1]) == []
