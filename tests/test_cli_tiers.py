"""``tiermem note``, ``daily --json``, ``stats`` (table and JSON) and ``search --min-score``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from click.testing import CliRunner, Result

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.config import load_settings
from tiermem.storage.backend import store_exists
from tiermem.storage.postgres.conninfo import safe_url
from tiermem.tiers.markdown import parse_records

ENV = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL


def invoke(root: Path, *args: str, env: dict[str, str] | None = None, stdin: str | None = None) -> Result:
    result = CliRunner().invoke(cli, ["--root", str(root), *args], env={**ENV, **(env or {})}, input=stdin)
    assert "Traceback" not in result.output
    return result


def test_note_appends_to_todays_daily_file(tmp_path: Path) -> None:
    first = invoke(tmp_path, "note", "Chose SQLite for storage", "--kind", "Decision")
    assert first.exit_code == 0 and first.stdout.startswith("noted in memory/") and first.stdout.endswith(".md\n")
    invoke(tmp_path, "note", "First line of a longer note\nsecond line with `code`")
    invoke(tmp_path, "note", "-", stdin="From stdin\n")
    with Memory(tmp_path, embedder="hash", timezone="UTC") as mem:
        text = mem.daily.read()
        assert first.stdout == f"noted in {mem.daily.path_for(mem.daily.today()).relative_to(tmp_path)}\n"
    assert text.startswith("# Daily Memory: ")
    assert "## Decision (" in text and "- Chose SQLite for storage\n" in text
    records = [(r.heading.split(" (")[0], r.text) for r in parse_records(text) if r.heading]
    assert records == [("Decision", "Chose SQLite for storage"),
                       ("Note", "First line of a longer note\nsecond line with `code`"),  # one record, verbatim
                       ("Note", "From stdin")]
    assert invoke(tmp_path, "note", "  ").exit_code == 1  # nothing to note: a one-line error
    assert invoke(tmp_path, "note", "x", "--kind", "A\nB").exit_code == 1
    with Memory(tmp_path, embedder="hash", timezone="UTC") as mem:
        assert mem.daily.read() == text
        hits = mem.search("longer note", tier="daily", min_score=0)
        assert "First line of a longer note" in hits[0].text


def test_daily_json_has_the_day_path_text_and_records(tmp_path: Path) -> None:
    invoke(tmp_path, "note", "Lunch with Ana")
    result = invoke(tmp_path, "daily", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and set(data) == {"day", "path", "text", "records"}
    assert data["path"] == str(tmp_path / "memory" / f"{data['day']}.md")
    assert data["text"] == Path(data["path"]).read_text(encoding="utf-8")
    [record] = data["records"]
    assert record["text"] == "Lunch with Ana" and record["heading"].startswith("Note (")
    assert data["text"].splitlines()[record["line_start"] - 1] == "- Lunch with Ana"
    same_day = json.loads(invoke(tmp_path, "daily", data["day"], "--json").stdout)
    assert same_day == data
    missing = invoke(tmp_path, "daily", "1999-01-01", "--json")
    assert missing.exit_code == 1 and missing.stderr == "Error: no daily file for 1999-01-01\n"
    assert invoke(tmp_path, "daily", "1999-13-01").exit_code == 1


def test_stats_table_and_json(tmp_path: Path, backend: str) -> None:
    invoke(tmp_path, "remember", "Prefers dark mode", "-c", "preference")
    invoke(tmp_path, "remember", "Ships v1 in March", "Learns Portuguese", "-c", "goal")
    invoke(tmp_path, "note", "Lunch with Ana")
    invoke(tmp_path, "plan", "start", "Ship v1", "write tests")
    data = json.loads(invoke(tmp_path, "stats", "--json").stdout)
    assert data["facts"] == 3 and data["facts_by_category"] == {"goal": 2, "preference": 1}
    assert (data["daily_files"], data["core_bullets"], data["active_plan"]) == (1, 0, "Ship v1")
    assert (data["queue_pending"], data["queue_dead"], data["read_only"]) == (0, 0, False)
    assert (data["llm"], data["embedder"], data["root"]) == ("none", "hash", str(tmp_path))
    assert isinstance(data["search_min_score"], float)
    url = os.environ.get("TIERMEM_DATABASE_URL")
    database = str(tmp_path / "tiermem.db") if url is None else safe_url(url)
    assert (data["backend"], data["database"]) == (backend, database)
    table = invoke(tmp_path, "stats")
    assert table.exit_code == 0
    rows = {" ".join(line.strip("│┃ ").split("│")[0].split()): line for line in table.stdout.splitlines()
            if "│" in line}
    assert rows["facts"].split("│")[2].strip() == "3"
    assert rows["goal"].split("│")[2].strip() == "2" and rows["preference"].split("│")[2].strip() == "1"
    assert rows["active plan"].split("│")[2].strip() == "Ship v1"
    assert rows["daily files"].split("│")[2].strip() == "1"
    assert rows["backend"].split("│")[2].strip() == backend
    password = urlsplit(url).password if url else None
    assert not password or password not in table.stdout + json.dumps(data)


def test_search_min_score_is_the_floor(tmp_path: Path) -> None:
    invoke(tmp_path, "remember", "Prefers dark mode in every editor", "Lives in Lyon with two cats",
           "Deploys run on Fridays")
    everything = json.loads(invoke(tmp_path, "search", "dark mode editor", "--min-score", "0", "--json").stdout)
    assert everything[0]["text"] == "Prefers dark mode in every editor" and len(everything) == 3
    scores = [hit["score"] for hit in everything]
    assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)
    cut = (scores[0] + scores[-1]) / 2
    kept = json.loads(invoke(tmp_path, "search", "dark mode editor", "--min-score", str(cut), "--json").stdout)
    assert kept == [hit for hit in everything if hit["score"] >= cut] and 0 < len(kept) < 3
    assert invoke(tmp_path, "search", "dark mode", "--min-score", "1.5").exit_code == 2


def test_search_says_when_nothing_clears_the_floor(tmp_path: Path) -> None:
    invoke(tmp_path, "remember", "Prefers dark mode", "Lives in Lyon with two cats")
    none = invoke(tmp_path, "search", "quantum chromodynamics lattice", "--tier", "core")
    assert none.exit_code == 0 and none.stdout == ("no memories scored above the relevance floor (0.58) for this"
                                          " query; --min-score 0 shows everything\n")  # the hash embedder's
    strict = {"TIERMEM_SEARCH_MIN_SCORE": "0.95"}  # without --min-score the floor comes from the setting
    assert json.loads(invoke(tmp_path, "search", "quantum", "--tier", "daily", "--json", env=strict).stdout) == []
    assert invoke(tmp_path, "search", "quantum", "--tier", "daily", env=strict).stdout == (
        "no memories scored above the relevance floor (0.95) for this query; --min-score 0 shows everything\n")
    everything = json.loads(invoke(tmp_path, "search", "dark mode", "--min-score", "0", "--json").stdout)
    low, high = everything[-1]["score"], everything[0]["score"]
    assert low < high
    floor = {"TIERMEM_SEARCH_MIN_SCORE": str((low + high) / 2)}
    kept = json.loads(invoke(tmp_path, "search", "dark mode", "--json", env=floor).stdout)
    assert [h["text"] for h in kept] == ["Prefers dark mode"]
    again = json.loads(invoke(tmp_path, "search", "dark mode", "--min-score", "0", "--json", env=floor).stdout)
    assert again == everything  # --min-score 0 overrides the setting


def test_worker_processes_what_another_process_queued_until_stopped(tmp_path: Path) -> None:
    env = {**os.environ, **ENV, "TIERMEM_LLM": "none"}
    with (tmp_path / "worker.log").open("wb") as log:
        worker = subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(tmp_path), "worker",
                                   "--poll", "0.1"], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:  # this process only queues (a debounce of an hour); the worker journals the conversation
        with Memory(tmp_path, embedder="hash", timezone="UTC", debounce_seconds=3600) as mem:
            mem.queue.add("web-1", [{"role": "user", "content": "Booked the flight to Lisbon"}])
            deadline = time.monotonic() + 60
            while mem.queue.pending():
                assert worker.poll() is None and time.monotonic() < deadline, (tmp_path / "worker.log").read_text()
                time.sleep(0.05)
            assert "Booked the flight to Lisbon" in mem.daily.read()
    finally:
        worker.terminate()
        code = worker.wait(timeout=60)
    text = (tmp_path / "worker.log").read_text()
    assert code == 0 and "tiermem worker on " in text and "tiermem worker stopping" in text, text
    assert "Traceback" not in text


def test_worker_refuses_a_turned_off_queue(tmp_path: Path) -> None:
    result = invoke(tmp_path, "worker", env={"TIERMEM_ENABLED": "false"})
    assert result.exit_code == 2 and "the update queue is turned off" in result.output


@pytest.mark.parametrize("poll", ["nan", "inf", "-inf", "1e300", "0", "-1"])
def test_worker_takes_only_a_finite_positive_poll(tmp_path: Path, poll: str) -> None:
    """nan busy-looped (FloatRange lets it through), inf ended in an OverflowError traceback."""
    env = {**os.environ, **ENV, "TIERMEM_LLM": "none"}
    result = subprocess.run([sys.executable, "-m", "tiermem.cli.main", "--root", str(tmp_path), "worker",
                             "--poll", poll], env=env, capture_output=True, text=True, timeout=60)
    assert result.returncode == 2 and "Traceback" not in result.stderr, result.stderr
    assert "Invalid value for '--poll'" in result.stderr and "tiermem worker on" not in result.stderr
    assert not store_exists(tmp_path, load_settings(tmp_path))


def test_a_read_on_a_missing_store_names_where_and_creates_nothing(tmp_path: Path) -> None:
    url = os.environ.get("TIERMEM_DATABASE_URL")
    result = invoke(tmp_path, "stats")
    where = str(tmp_path) if url is None else safe_url(url)
    hint = "check --root" if url is None else "check TIERMEM_DATABASE_URL"
    assert result.exit_code == 1
    assert result.stderr == f"Error: no tiermem store at {where} (run `tiermem init`, or {hint})\n"
    assert not store_exists(tmp_path, load_settings(tmp_path))  # no file, no tables
    assert invoke(tmp_path, "remember", "Prefers dark mode").stderr == f"created a tiermem store at {where}\n"
    assert store_exists(tmp_path, load_settings(tmp_path)) and invoke(tmp_path, "stats").exit_code == 0


def test_queue_retry_takes_item_ids(tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from tiermem.storage.outbox import OutboxRepository

    with Memory(tmp_path, embedder="hash", timezone="UTC", llm="none") as mem:
        outbox = OutboxRepository(mem.db)
        ids = [outbox.put(f"t{i}", mem.scope, [{"role": "user", "content": f"message {i}"}],
                          datetime.now(UTC))
               for i in range(2)]
        with mem.db.transaction() as conn:
            conn.execute("UPDATE outbox SET status = 'dead', attempts = 3")
    result = invoke(tmp_path, "queue", "retry", str(ids[1]))
    assert result.exit_code == 0 and result.stdout.startswith("retried 1 item;"), result.output
    with Memory(tmp_path, embedder="hash", timezone="UTC", llm="none") as mem:
        assert [i.id for i in OutboxRepository(mem.db).items(status="dead")] == [ids[0]]
    assert invoke(tmp_path, "queue", "retry", "0").exit_code == 2  # ids start at 1
