"""``tiermem doctor`` checks a store without writing to it; ``--repair`` rebuilds a damaged database
beside the old one (kept) from the files and the rows it can still read, never touching user text."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from test_damaged_store import DAMAGE, ENV, NOW, build_store, corrupt_table, digest, newer_schema

from tiermem import Memory, StorageError
from tiermem.cli.main import cli
from tiermem.doctor import check, repair
from tiermem.doctor.report import DoctorReport
from tiermem.testing import FakeClock, HashEmbedder

STAMP = "20260314T093000Z"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One store built per module (as tiermem writes it: its own file modes); each test gets a copy."""
    root = tmp_path_factory.mktemp("template") / "mem"
    build_store(root)
    return root


@pytest.fixture
def store(template: Path, tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    shutil.copytree(template, root, symlinks=True)
    return root


def invoke(root: Path, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--root", str(root), "doctor", *args], env=ENV)


def snapshot(root: Path) -> dict[str, str]:
    """Every file under the root and its content hash."""
    return {p.relative_to(root).as_posix(): digest(p) for p in sorted(root.rglob("*")) if p.is_file()}


def open_mem(root: Path) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=FakeClock(NOW), timezone="UTC")


def sql(root: Path, statement: str, args: tuple[object, ...] = ()) -> None:
    with sqlite3.connect(root / "tiermem.db") as conn:
        conn.execute(statement, args)
    conn.close()


# --- a healthy store ------------------------------------------------------------------------------
def test_a_healthy_store_passes_every_check(store: Path) -> None:
    report = check(store)
    assert report.ok and report.exit_code == 0 and report.problems == [] and report.unchecked == []
    assert report.checked == ["integrity", "schema", "queue", "search index", "vectors", "consolidation marks",
                              "modes", "symlinks"]
    result = invoke(store)
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1].endswith("— healthy")


def test_doctor_json(store: Path) -> None:
    result = invoke(store, "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["ok"] is True and data["exit_code"] == 0
    assert set(data) == {"root", "ok", "exit_code", "checked", "problems", "notices", "unchecked", "repairs",
                         "vector_model"}
    assert data["root"] == str(store) and "search index" in data["checked"]
    assert data["vector_model"] == HashEmbedder().model_id  # what the vectors were made with (issue 16)


def test_doctor_writes_nothing_even_on_a_damaged_store(store: Path) -> None:
    corrupt_table(store / "tiermem.db")
    before = snapshot(store)
    assert check(store).exit_code == 1
    assert snapshot(store) == before  # no -wal, no -shm, not a byte changed


# --- damage: exit 1, or 2 when it cannot check --------------------------------------------------
SAID = {
    "truncated": "problem: the database is damaged: it is truncated (",
    "random bytes": "problem: the database is damaged: it is not a SQLite database",
    "zero bytes beside a Daily file": "problem: the database is empty (0 bytes) beside 1 Daily file: the facts,",
    "a damaged page": "problem: the database is damaged: database disk image is malformed",
}


@pytest.mark.parametrize("kind", DAMAGE, ids=str)
def test_doctor_reports_a_damaged_database(store: Path, kind: str) -> None:
    damage, _ = DAMAGE[kind]
    damage(store / "tiermem.db")
    result = invoke(store)
    assert result.exit_code == 1 and "Traceback" not in result.output
    problems = [line for line in result.stdout.splitlines() if line.startswith("problem: ")]
    assert len(problems) == 1 and problems[0].startswith(SAID[kind]) and "`tiermem doctor --repair`" in problems[0]


def test_doctor_cannot_check_a_newer_schema_and_says_so(store: Path) -> None:
    newer_schema(store / "tiermem.db")
    report = check(store)
    assert report.exit_code == 2 and report.schema_too_new and report.problems == []
    assert "newer tiermem (schema version 999" in report.unchecked[0]
    result = invoke(store)
    assert result.exit_code == 2 and "not checked: the database was written by a newer tiermem" in result.stdout
    repaired = invoke(store, "--repair")
    assert repaired.exit_code == 2 and repaired.stderr.startswith(f"Error: cannot repair {store}: the database was")
    assert "Traceback" not in repaired.output


def test_doctor_on_a_root_without_a_store_cannot_check(tmp_path: Path) -> None:
    result = invoke(tmp_path / "nowhere")
    assert result.exit_code == 2 and f"not checked: no tiermem store at {tmp_path / 'nowhere'}" in result.stdout
    with pytest.raises(StorageError, match="cannot repair"):
        repair(tmp_path / "nowhere")
    assert not (tmp_path / "nowhere").exists()


# --- repair ---------------------------------------------------------------------------------------
def _daily_files(root: Path) -> dict[str, str]:
    return {k: v for k, v in snapshot(root).items() if k.endswith(".md")}


@pytest.mark.parametrize("kind", DAMAGE, ids=str)
def test_repair_rebuilds_beside_the_damaged_file_and_brings_search_back(store: Path, kind: str) -> None:
    damage, _ = DAMAGE[kind]
    db = store / "tiermem.db"
    damage(db)
    damaged, notes = digest(db), _daily_files(store)
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.rebuilt and result.ok, result.after.to_dict()
    assert result.damaged_copy == store / f"tiermem.db.damaged-{STAMP}" and digest(result.damaged_copy) == damaged
    assert _daily_files(store) == notes  # user text untouched
    with open_mem(store) as mem:
        hits = mem.search("When is Maya moving to Lisbon?", k=3)
        assert hits and hits[0].text == "Maya is moving to Lisbon in August" and hits[0].tier == "daily"


def test_repair_brings_back_every_readable_fact(store: Path) -> None:
    with open_mem(store) as mem:
        every = {f.content: f.id for f in mem.facts.list()}
    db = store / "tiermem.db"
    with db.open("r+b") as handle:  # the last quarter of the file is gone
        handle.truncate(db.stat().st_size * 3 // 4 // 4096 * 4096)
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and result.salvaged["facts"] > 0
    with open_mem(store) as mem:
        back = {f.content: f.id for f in mem.facts.list()}
        assert back.items() <= every.items() and len(back) == result.salvaged["facts"]  # same ids, same text
        text = next(iter(back))
        assert any(h.text == text for h in mem.search(text[:40], k=5, tier="fact"))


def test_repair_of_a_damaged_page_keeps_the_rows_on_either_side(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    texts = build_store(root, facts=200)
    db = root / "tiermem.db"
    with sqlite3.connect(db) as conn:  # a leaf page in the middle of the facts table
        pages = [int(r[0]) for r in conn.execute("SELECT pageno FROM dbstat WHERE name = 'facts' AND pagetype = 'leaf'"
                                                 " ORDER BY pageno")] if _has_dbstat(conn) else []
    conn.close()
    if not pages:
        pytest.skip("this SQLite has no dbstat table")
    with db.open("r+b") as handle:
        handle.seek((pages[len(pages) // 2] - 1) * 4096)
        handle.write(os.urandom(4096))
    result = repair(root, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and "facts" in result.unreadable
    assert len(texts) * 0.8 < result.salvaged["facts"] < len(texts)  # one page of rows lost, the rest kept


def _has_dbstat(conn: sqlite3.Connection) -> bool:
    try:
        conn.execute("SELECT 1 FROM dbstat LIMIT 1")
    except sqlite3.OperationalError:
        return False
    return True


def test_repair_cli_json_and_exit_code(store: Path) -> None:
    (store / "tiermem.db").write_bytes(b"")
    result = invoke(store, "--repair", "--json")
    data = json.loads(result.stdout)
    assert result.exit_code == 0 and data["ok"] and data["rebuilt"] and data["after"]["exit_code"] == 0
    assert data["before"]["exit_code"] == 1 and data["damaged_copy"].startswith(str(store / "tiermem.db.damaged-"))
    assert (store / "tiermem.db").stat().st_size > 0 and Path(data["damaged_copy"]).stat().st_size == 0
    assert invoke(store).exit_code == 0


def test_repair_cli_text(store: Path) -> None:
    (store / "tiermem.db").write_bytes(os.urandom(8192))
    result = invoke(store, "--repair")
    lines = result.stdout.splitlines()
    assert result.exit_code == 0 and "Traceback" not in result.output
    assert "repaired: could not read all of: every table (the schema cannot be read: file is not a database)" in lines
    assert any(line.startswith("repaired: rebuilt the database beside the damaged one") for line in lines)
    assert lines[-1].endswith("— healthy")


def test_repair_of_a_missing_database_beside_daily_files_creates_and_indexes_it(store: Path) -> None:
    (store / "tiermem.db").unlink()
    assert check(store).exit_code == 1
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and result.rebuilt and result.damaged_copy is None
    with open_mem(store) as mem:
        assert mem.search("Lisbon", k=1)[0].text == "Maya is moving to Lisbon in August"


def test_repair_twice_in_one_second_keeps_both_damaged_files(store: Path) -> None:
    (store / "tiermem.db").write_bytes(b"")
    repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    (store / "tiermem.db").write_bytes(b"")
    second = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert second.damaged_copy == store / f"tiermem.db.damaged-{STAMP}-1"
    assert (store / f"tiermem.db.damaged-{STAMP}").exists()


def test_a_healthy_store_needs_no_repair(store: Path) -> None:
    before = snapshot(store)
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and not result.rebuilt and result.actions == []
    assert snapshot(store) == before


# --- the search index ------------------------------------------------------------------------------
def test_an_index_merely_behind_the_files_is_a_notice_not_damage(store: Path) -> None:
    daily = next((store / "memory").glob("*.md"))
    with daily.open("a", encoding="utf-8") as handle:
        handle.write("- 10:00 A note written by hand\n")
    report = check(store)
    assert report.exit_code == 0 and report.problems == []
    assert any("behind 1 file (memory/" in n and "run `tiermem reindex`" in n for n in report.notices)


def test_an_index_that_disagrees_with_a_file_it_claims_is_damage_and_repaired(store: Path) -> None:
    sql(store, "UPDATE chunks SET text = 'something else' WHERE tier = 'daily'")
    report = check(store)
    assert report.exit_code == 1 and "search index disagrees with 1 file it claims" in report.problems[0]
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and not result.rebuilt and any("rebuilt the search index" in a for a in result.actions)
    with open_mem(store) as mem:
        assert mem.search("Lisbon", k=1)[0].text == "Maya is moving to Lisbon in August"


def test_search_rows_without_their_facts_mean_a_rebuild_that_keeps_every_fact(store: Path) -> None:
    sql(store, "DELETE FROM search_docs WHERE source = 'fact' AND id IN (SELECT id FROM search_docs LIMIT 5)")
    report = check(store)
    assert report.exit_code == 1 and "facts without a search row" in report.problems[0]
    with open_mem(store) as mem:
        count = len(mem.facts.list())
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and result.rebuilt and result.unreadable == [] and result.salvaged["facts"] == count


def _lose_a_vector_and_wait_for_another(conn: Any) -> None:
    """One fact's vector gone (as a lost embedding write would leave it), another fact not embedded yet."""
    hashes = [r[0] for r in conn.execute("SELECT embed_hash FROM search_docs WHERE source = 'fact' ORDER BY id"
                                         " LIMIT 2").fetchall()]
    conn.execute("DELETE FROM embeddings WHERE content_hash = ?", (hashes[0],))
    conn.execute("UPDATE search_docs SET embed_hash = NULL WHERE embed_hash = ?", (hashes[1],))


def _vectors_found(report: DoctorReport) -> None:
    assert report.exit_code == 1 and "vectors" in report.checked
    assert report.problems == [f"1 search item has no vector for {HashEmbedder().model_id}, the store's embedder "
                               "model, so vector search cannot find them (default/default: 1): run `tiermem reindex`"]
    assert "1 search item has no vector yet: the next search embeds it" in report.notices


def test_items_without_a_vector_of_the_stores_model_are_reported(store: Path) -> None:
    with sqlite3.connect(store / "tiermem.db") as conn:
        _lose_a_vector_and_wait_for_another(conn)
    conn.close()
    _vectors_found(check(store))
    result = CliRunner().invoke(cli, ["--root", str(store), "reindex"], env=ENV)
    assert result.exit_code == 0, result.output
    assert check(store).exit_code == 0


# --- queue, marks, modes, links -----------------------------------------------------------------
def test_a_stuck_queue_claim_is_a_problem_and_repair_hands_it_back(store: Path) -> None:
    expired = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    sql(store, "INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before,"
               " claimed_by, claimed_at, lease_until) VALUES ('t1', 'default', 'default', '[]', 'processing', ?, ?,"
               " 'elsewhere:1/x', ?, ?)", (expired, expired, expired, expired))
    report = check(store, clock=FakeClock(NOW))
    assert report.exit_code == 1 and "1 queue item is stuck in processing" in report.problems[0]
    live = check(store, clock=FakeClock(NOW - timedelta(hours=2)))  # the lease still runs: not stuck
    assert live.exit_code == 0
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and "handed 1 stuck queue item back to the queue" in result.actions


def test_consolidation_marks_damaged_or_void(store: Path) -> None:
    daily = next((store / "memory").glob("*.md"))
    data = daily.read_bytes()
    sql(store, "INSERT INTO consolidated_prefix (user_id, day, offset, sha256, at) VALUES ('default', ?, ?, ?, ?)",
        (daily.stem, len(data), hashlib.sha256(data).hexdigest(), "2026-03-14T09:30:00.000000Z"))
    assert check(store).ok
    with daily.open("a", encoding="utf-8") as handle:  # appended after the dream: the mark covers a prefix
        handle.write("- 11:00 later\n")
    assert not any("Deep Dream" in n for n in check(store).notices)
    daily.write_bytes(data.replace(b"Lisbon", b"Porto") + b"- 11:00 later\n")  # edited by hand: the mark is void
    report = check(store)
    assert report.exit_code == 0 and any("1 Daily file was edited after the Deep Dream" in n for n in report.notices)
    sql(store, "INSERT INTO consolidated_prefix (user_id, day, offset, sha256, at) VALUES ('default', '2026-01-01',"
               " -5, 'nothex', 'x')")
    report = check(store)
    assert report.exit_code == 1 and "1 consolidation mark is damaged (default 2026-01-01: offset)" in \
        report.problems[0]
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert "dropped 1 damaged consolidation marks" in result.actions and result.ok


@pytest.mark.skipif(os.name != "posix", reason="POSIX file modes")
def test_files_others_can_read_are_a_problem_and_repair_tightens_them(store: Path) -> None:
    os.chmod(store / "tiermem.db", 0o644)
    os.chmod(store / "memory", 0o755)
    report = check(store)
    assert report.exit_code == 1 and report.problems[0].startswith("2 files or folders can be read by other users")
    assert "tiermem.db 0644" in report.problems[0] and "memory 0755" in report.problems[0]
    result = repair(store, embedder=HashEmbedder(), clock=FakeClock(NOW))
    assert result.ok and (store / "tiermem.db").stat().st_mode & 0o777 == 0o600
    assert (store / "memory").stat().st_mode & 0o777 == 0o700


def test_a_symlink_out_of_the_root_is_a_problem_unless_allowed(store: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (store / "users").mkdir(mode=0o700)
    (store / "users" / "bob").symlink_to(outside)
    report = check(store)
    assert report.exit_code == 1 and "1 symlink leads outside the root (users/bob -> " in report.problems[0]
    (store / "tiermem.toml").write_text("[tiermem]\nallow_symlinks = true\n", encoding="utf-8")
    os.chmod(store / "tiermem.toml", 0o600)
    allowed = check(store)
    assert allowed.exit_code == 0 and any("allowed by allow_symlinks" in n for n in allowed.notices)


def test_the_root_itself_may_be_a_symlink(store: Path, tmp_path: Path) -> None:
    link = tmp_path / "synced"
    link.symlink_to(store)
    assert check(link).ok


# --- PostgreSQL: a short report (connection, schema, extension, rows, queue) ---------------------------
@pytest.fixture
def pg_url() -> Iterator[str]:
    from pg_helpers import fresh_schema

    with fresh_schema() as url:
        yield url


def test_doctor_on_postgres_gives_a_short_report(tmp_path: Path, pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_DATABASE_URL", pg_url)
    root = tmp_path / "mem"
    with open_mem(root) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.9)
        mem.daily.append("Note", "Maya is moving to Lisbon in August")
    report = check(root, clock=FakeClock(NOW))
    assert report.exit_code == 0, report.to_dict()
    assert report.checked == ["connection", "schema", "extension", "rows", "vectors", "queue", "modes", "symlinks"]
    assert report.database["schema_version"] >= 1 and report.database["vector_extension"]
    assert report.database["rows"]["facts"] == 1 and report.database["database"].startswith("postgresql://")
    result = invoke(root)
    assert result.exit_code == 0, result.output
    assert "database: postgresql://" in result.output and "facts 1" in result.output
    data = json.loads(invoke(root, "--json").stdout)
    assert data["ok"] and data["database"]["rows"]["facts"] == 1


def test_doctor_on_postgres_without_a_store_cannot_check(tmp_path: Path, pg_url: str,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_DATABASE_URL", pg_url)
    report = check(tmp_path / "nowhere")
    assert report.exit_code == 2 and "no tiermem store in postgresql://" in report.unchecked[0]
    assert "tiermem init" in report.unchecked[0] and not (tmp_path / "nowhere").exists()
    with pytest.raises(StorageError, match="no tiermem store"):
        repair(tmp_path / "nowhere")


def test_doctor_on_postgres_finds_a_stuck_claim_and_repair_hands_it_back(tmp_path: Path, pg_url: str,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_DATABASE_URL", pg_url)
    root = tmp_path / "mem"
    expired = (NOW - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S.000000Z")
    with open_mem(root) as mem, mem.db.transaction() as conn:
        conn.execute("INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, enqueued_at, not_before,"
                     " claimed_by, claimed_at, lease_until) VALUES ('t1', 'default', 'default', '[]', 'processing',"
                     " ?, ?, 'elsewhere:1/x', ?, ?)", (expired, expired, expired, expired))
    report = check(root, clock=FakeClock(NOW))
    assert report.exit_code == 1 and "1 queue item is stuck in processing" in report.problems[0]
    result = repair(root, clock=FakeClock(NOW))
    assert result.ok and "handed 1 stuck queue item back to the queue" in result.actions


def test_doctor_on_postgres_reports_items_without_a_vector(tmp_path: Path, pg_url: str,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TIERMEM_DATABASE_URL", pg_url)
    root = tmp_path / "mem"
    with open_mem(root) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.9)
        mem.facts.add("Works on distributed databases", "knowledge", 0.8)
        with mem.db.transaction() as conn:
            _lose_a_vector_and_wait_for_another(conn)
    _vectors_found(check(root, clock=FakeClock(NOW)))
    with open_mem(root) as mem:
        assert mem.reindex_vectors().items == 2
    assert check(root, clock=FakeClock(NOW)).exit_code == 0
