"""Issue 14 item 10: ``purge`` erases a fact, a text or a user from every table, file, version,
vector, FTS shadow table, free page and the WAL — checked by grepping every byte under the root
(on PostgreSQL: every file under the root, the mirror, and every row of every table as text)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from transfer_helpers import database_rows

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.errors import FactNotFound, InvalidInput, NotFound
from tiermem.search.indexer import text_hash
from tiermem.storage.facts import tombstone_key
from tiermem.storage.purge_columns import unclassified_columns
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.validate import normalise

PHRASE = "Zanzibar Quokka Festival"
WORD = b"quokka"  # appears nowhere but inside PHRASE
pytestmark = pytest.mark.usefixtures("backend")
DREAM_REPLY = f"""[MEMORY]
- Works at Acme Corp as a marine biologist.
- Plans to attend the {PHRASE} in May.

[DREAM]
Added the plan to attend the {PHRASE}.
"""


def root_bytes(root: Path) -> dict[str, bytes]:
    """Every file under the root (database, -wal, -shm, Markdown, locks), lowercased; on PostgreSQL
    also the rows of each table of the store as text (``db:<table>``)."""
    found = {p.relative_to(root).as_posix(): p.read_bytes().lower() for p in sorted(root.rglob("*")) if p.is_file()}
    url = os.environ.get("TIERMEM_DATABASE_URL")
    if url:
        found.update({f"db:{table}": "\n".join(rows).encode("utf-8", "surrogateescape").lower()
                      for table, rows in database_rows(url).items()})
    return found


def in_database(names: list[str]) -> list[str]:
    return [name for name in names if name.startswith(("tiermem.db", "db:"))]


def settle(mem: Memory) -> None:
    """Nothing left in SQLite's WAL (so comparing the files compares the database)."""
    if mem.db.backend == "sqlite":
        mem.db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def holding(root: Path, needle: bytes) -> list[str]:
    return [name for name, data in root_bytes(root).items() if needle.lower() in data]


def seed(mem: Memory, phrase: str = PHRASE) -> str:
    """The phrase in every place tiermem keeps text; returns the id of a fact that holds it."""
    mem.facts.add("Works at Acme Corp as a marine biologist", "knowledge", 0.9)
    fact = mem.facts.add(f"Plans to attend the {phrase} in May", "goal", 0.8)
    assert fact is not None
    forgotten = mem.facts.add(f"Bought tickets for the {phrase.upper()}", "context", 0.7)
    assert forgotten is not None
    mem.facts.delete(forgotten.id)  # a forget: tombstone and audit keep the text
    mem.facts.add(f"Bought tickets for the {phrase}", "context", 0.6, origin="extraction")  # skipped: audit
    mem.facts.set_summaries({"topOfMind": f"Getting ready for the {phrase.lower()}"})
    mem.plans.start(f"Trip to the {phrase}", ["Book flights", f"Pack for the {phrase}"])
    words = phrase.split()
    mem.daily.append("Note", [f"user: I'm going to the {' '.join(words[:2])}\n{words[2]} with Claire.",
                              "assistant: Have fun at Acme's summer party too."])
    session = mem.session("t1")
    session.add("user", f"Remind me: the {phrase} starts on May 3rd.")
    session.add("assistant", "Noted, May 3rd.")
    session.end()
    mem.core.write(f"- Works at Acme Corp as a marine biologist.\n- Wants to see the {phrase}.\n")
    return fact.id


def dream(mem: Memory) -> None:
    result = mem.deep_dream(lookback_days=1)
    assert result.status == "written", result.reason


@pytest.fixture
def week(root: Path, clock: FakeClock) -> Iterator[Memory]:
    """A store that holds PHRASE everywhere: facts, a forgotten fact, summaries, a plan, Daily
    records, a session, MEMORY.md, a kept MEMORY.md version, a dream diary and a queued item."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        seed(mem)
    with Memory(root, llm=ScriptedChatModel([DREAM_REPLY]), embedder=HashEmbedder(), clock=clock,
                timezone="UTC") as dreamer:
        dream(dreamer)
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.queue.add("t2", [{"role": "user", "content": f"What about the {PHRASE}\nnext year?"}])  # stays queued
        assert mem.search("quokka festival", k=5)
        yield mem


def test_forget_keeps_copies_and_purge_erases_every_one(week: Memory, root: Path) -> None:
    before = holding(root, WORD)
    assert {"MEMORY.md", "memory/2026-03-14.md", "memory/dreams/2026-03-14.md"} <= set(before)
    assert in_database(before)  # forget kept the text in the database

    report = week.purge(text="zanzibar QUOKKA festival")

    assert report.complete and report.vacuumed and report.wal_truncated
    assert holding(root, WORD) == [], "the purged text is still stored"
    assert report.facts and len(report.facts) == 1
    assert {"MEMORY.md", "memory/2026-03-14.md", "memory/dreams/2026-03-14.md"} <= set(report.files)
    assert report.occurrences == 4 and report.vectors >= 1
    assert {"facts", "tombstones", "audit", "summaries", "plans", "outbox", "core_versions"} <= set(report.rows)
    # unrelated content stays, and search still works on it
    assert holding(root, b"marine biologist") and holding(root, b"claire")
    hits = week.search("marine biologist Acme", k=3)
    assert hits and "marine biologist" in hits[0].text
    assert all("quokka" not in h.text.lower() for h in week.search("quokka festival", k=10, min_score=0))
    assert "Zanzibar Quokka" not in week.system_context().text
    # the dream's consolidation mark (R12) still covers the rewritten Daily file
    data = week.daily.files.read("memory/2026-03-14.md")
    assert data is not None and data == (root / "memory" / "2026-03-14.md").read_bytes()  # (or its mirror)
    mark = week.db.conn.execute('SELECT "offset", sha256 FROM consolidated_prefix WHERE day = ?',
                                ("2026-03-14",)).fetchone()
    assert tuple(mark) == (len(data), hashlib.sha256(data).hexdigest())
    assert week.core.items()[0].startswith("Works at Acme")


def test_the_purge_is_audited_by_hash_and_counts(week: Memory) -> None:
    report = week.purge(text=PHRASE)
    entry = week.facts.history()[-1]
    assert entry.action == "purged" and entry.content is None
    assert f"sha256:{hashlib.sha256(normalise(PHRASE).encode()).hexdigest()}" in entry.reason
    assert report.sha256 in entry.reason and f"{report.occurrences} occurrences" in entry.reason
    assert "quokka" not in json.dumps([e.to_dict() for e in week.facts.history()]).lower()


def test_search_index_fts_and_vectors_forget_the_text(week: Memory, root: Path) -> None:
    conn = week.db.conn
    fact = next(f for f in week.facts.list() if "Quokka" in f.content)
    vectors = "SELECT COUNT(*) FROM embeddings WHERE content_hash = ?"
    assert conn.execute(vectors, (text_hash(fact.content),)).fetchone()[0]
    week.purge(text=PHRASE)
    if week.db.backend == "sqlite":  # FTS5's vocabulary (PostgreSQL's text search columns: in root_bytes)
        assert conn.execute("SELECT COUNT(*) FROM search_words_vocab WHERE term LIKE 'quokka%'").fetchone()[0] == 0
        assert conn.execute("SELECT COUNT(*) FROM search_grams_vocab WHERE term = 'okk'").fetchone()[0] == 0
    assert holding(root, WORD) == []
    assert conn.execute(vectors, (text_hash(fact.content),)).fetchone()[0] == 0
    assert conn.execute("SELECT COUNT(*) FROM search_docs WHERE text LIKE '%quokka%' OR context LIKE '%quokka%'"
                        ).fetchone()[0] == 0


def test_a_purged_tombstone_still_blocks_extraction(mem: Memory, root: Path) -> None:
    fact = mem.facts.add(f"Loves the {PHRASE}")
    assert fact is not None
    mem.facts.delete(fact.id)
    mem.purge(text="quokka festival")
    assert holding(root, WORD) == []
    stored = mem.db.conn.execute("SELECT norm, content FROM tombstones").fetchall()
    assert [tuple(r) for r in stored] == [(tombstone_key(normalise(fact.content)), "")]
    again = mem.facts.add(f"loves   the {PHRASE.upper()}", origin="extraction")
    assert again is None and "tombstoned" in mem.facts.history()[-1].reason
    assert mem.facts.add(f"Loves the {PHRASE}") is not None  # a person may bring it back
    assert mem.db.conn.execute("SELECT COUNT(*) FROM tombstones").fetchone()[0] == 0


def test_purge_of_one_fact_by_id(mem: Memory, root: Path) -> None:
    keep = mem.facts.add("Prefers dark mode", "preference")
    fact = mem.facts.add(f"Volunteers at the {PHRASE}", "context")
    assert keep is not None and fact is not None
    mem.daily.append("Note", [f"user: she volunteers at the {PHRASE.lower()}, every year."])
    report = mem.purge(fact.id)
    assert report.kind == "fact" and report.facts == (fact.id,)
    assert report.files == {"memory/2026-03-14.md": 1}
    assert holding(root, b"volunteers at the") == [] and holding(root, WORD) == []
    assert [f.id for f in mem.facts.list()] == [keep.id]
    assert "user: she [purged], every year." in mem.daily.read()
    with pytest.raises(FactNotFound):
        mem.facts.get(fact.id)
    assert mem.facts.add(f"Volunteers at the {PHRASE}", origin="extraction") is None


def test_purge_of_a_user_leaves_other_users_intact(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob",
                shutdown_flush_seconds=0) as bob:
        seed(bob, "Bobbington Walrus Gala")
        bob.queue.add("b1", [{"role": "user", "content": "Bobbington queue message"}])
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="alice",
                queue_replay=False) as alice:
        seed(alice)
    assert holding(root, b"bobbington") and (root / "users" / "bob").is_dir()
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", queue_replay=False) as admin:
        planned = admin.purge(user="bob", dry_run=True)
        report = admin.purge(user="bob")
        assert report.kind == "user" and report.complete and report.vectors > 0
        assert (planned.rows, planned.files, planned.vectors) == (report.rows, report.files, report.vectors)
        assert {"facts", "audit", "tombstones", "summaries", "plans", "outbox", "chunks"} <= set(report.rows)
        assert "users/bob/MEMORY.md" in report.files
        assert admin.facts.history()[-1].action == "purged"
        assert "bob" not in admin.facts.history()[-1].reason
    assert holding(root, b"bobbington") == [] and holding(root, b"walrus") == []
    assert in_database(holding(root, b"bob")) == []
    assert not (root / "users" / "bob").exists()
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        for table in mem.db.parts.tables(mem.db):
            if "user_id" in mem.db.parts.columns(mem.db, table):
                assert mem.db.conn.execute(f"SELECT COUNT(*) FROM {table} WHERE user_id = 'bob'").fetchone()[0] == 0
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="alice") as alice:
        assert len(alice.facts.list()) == 2 and PHRASE in alice.core.read()
        assert alice.search("quokka festival", k=3)[0].text
        assert [item.thread_id for item in alice.queue.pending()] == []
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        assert bob.facts.list() == [] and bob.search("walrus gala", k=3, min_score=0) == []


def test_purge_of_the_default_user_keeps_the_store_and_other_users(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        seed(bob, "Bobbington Walrus Gala")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        seed(mem)
        report = mem.purge(user="default")
        assert report.complete and "MEMORY.md" in report.files and "memory/2026-03-14.md" in report.files
        assert mem.facts.list() == [] and mem.daily.days() == [] and mem.core.read() == ""
        assert [e.action for e in mem.facts.history()] == ["purged"]  # only the purge's own entry
        assert mem.search("quokka", k=5, min_score=0) == []
    assert holding(root, WORD) == [] and not (root / "memory").exists()
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        assert len(bob.facts.list()) == 2 and bob.search("walrus gala", k=3)


BAD = [
    ({}, InvalidInput, "exactly one"),
    ({"text": PHRASE, "user": "bob"}, InvalidInput, "exactly one"),
    ({"text": "ab"}, InvalidInput, "at least 3"),
    ({"text": "   "}, InvalidInput, "empty"),
    ({"text": "bad\x00text"}, InvalidInput, "control"),
    ({"text": "lone \udc80 surrogate"}, InvalidInput, "surrogate"),
    ({"text": 42}, InvalidInput, "string"),
    ({"fact_id": "fact_00000000"}, FactNotFound, "no fact"),
    ({"user": "../etc"}, InvalidInput, "not allowed"),
    ({"user": "nobody"}, NotFound, "nothing is stored"),
    ({"text": PHRASE, "dry_run": "yes"}, InvalidInput, "dry_run"),
]


@pytest.mark.parametrize(("kwargs", "error", "message"), BAD)
def test_bad_arguments_change_nothing(mem: Memory, root: Path, kwargs: dict[str, object],
                                      error: type[Exception], message: str) -> None:
    seed(mem)
    settle(mem)
    before = {k: v for k, v in root_bytes(root).items() if not k.endswith("-shm")}
    with pytest.raises(error, match=message):
        mem.purge(**kwargs)  # type: ignore[arg-type]
    assert {k: v for k, v in root_bytes(root).items() if not k.endswith("-shm")} == before


def test_dry_run_counts_and_changes_nothing(week: Memory, root: Path) -> None:
    settle(week)
    before = {k: v for k, v in root_bytes(root).items() if not k.endswith("-shm")}
    planned = week.purge(text=PHRASE, dry_run=True)
    assert {k: v for k, v in root_bytes(root).items() if not k.endswith("-shm")} == before
    assert planned.dry_run and planned.complete and planned.facts == ()
    done = week.purge(text=PHRASE)
    # the preview is what the user decides on: what it counts is what goes (issue 22 item 15)
    assert (planned.rows, planned.files, planned.vectors) == (done.rows, done.files, done.vectors)
    assert planned.rows["facts"] == done.rows["facts"] == 1 and planned.vectors > 0


def test_a_queued_message_is_scrubbed_and_journaled_once(mem: Memory, root: Path, clock: FakeClock) -> None:
    thread = [{"role": "user", "content": f"See you at the {PHRASE}!"}, {"role": "assistant", "content": "Sure."}]
    session = mem.session("t9")
    for message in thread:
        session.add(message["role"], message["content"])
    session.end()  # journaled by the session flush ...
    mem.queue.add("t9", thread)  # ... and queued for extraction, not processed yet
    mem.purge(text=PHRASE)
    stored = mem.db.conn.execute("SELECT messages FROM outbox").fetchone()[0]
    assert "[purged]" in stored and "quokka" not in stored.lower()
    clock.advance(3600)
    assert mem.queue.flush(timeout=10)
    text = mem.daily.read()
    assert text.count("See you at the [purged]!") == 1 and text.count("Sure.") == 1
    assert holding(root, WORD) == []


def test_a_hand_edited_file_and_a_multiline_occurrence(mem: Memory, root: Path) -> None:
    mem.daily.append("Note", ["first line"])
    rel = "memory/2026-03-14.md"
    typed = b"- typed by hand: ZANZIBAR\n  quokka   festival tomorrow\n"
    mem.daily.files.replace(rel, (mem.daily.files.read(rel) or b"") + typed)  # as an editor saves it
    report = mem.purge(text=PHRASE)
    assert report.files == {"memory/2026-03-14.md": 1}
    assert "- typed by hand: [purged] tomorrow" in mem.daily.read()
    assert holding(root, WORD) == []


def test_every_text_column_is_classified(mem: Memory) -> None:
    assert unclassified_columns(mem.db) == []


def test_purge_survives_export_and_import(mem: Memory, root: Path, tmp_path: Path, clock: FakeClock) -> None:
    fact = mem.facts.add(f"Loves the {PHRASE}")
    assert fact is not None
    mem.facts.delete(fact.id)
    mem.purge(text=PHRASE)
    data = mem.export()
    assert "quokka" not in json.dumps(data).lower()
    with Memory(tmp_path / "copy", embedder=HashEmbedder(), clock=clock) as copy:
        copy.import_(data)
        assert copy.facts.add(f"Loves the {PHRASE}", origin="extraction") is None


def test_cli_purge(root: Path) -> None:
    runner = CliRunner(env={"TIERMEM_EMBEDDER": "hash"})
    base = ["--root", str(root)]
    assert runner.invoke(cli, [*base, "remember", f"Plans to attend the {PHRASE}", "Prefers tea"]).exit_code == 0
    refused = runner.invoke(cli, [*base, "purge", "--text", PHRASE], input="n\n")
    assert refused.exit_code == 1 and "1 fact, " in refused.output and holding(root, WORD)
    done = runner.invoke(cli, [*base, "purge", "--text", PHRASE, "--yes", "--json"])
    assert done.exit_code == 0, done.output
    assert json.loads(done.output)["facts"] and json.loads(done.output)["complete"] is True
    assert holding(root, WORD) == []
    for args, message in ((["purge"], "exactly one"), (["purge", "--text", "x", "--user", "bob"], "exactly one"),
                          (["purge", "--fact", "fact_00000000", "--yes"], "no fact"),
                          (["purge", "--user", "nobody", "--yes"], "nothing is stored")):
        failed = runner.invoke(cli, [*base, *args])
        assert failed.exit_code == 1 and message in failed.output and "Traceback" not in failed.output, args
    none = ["--root", str(root / "none"), "purge", "--text", PHRASE, "--yes"]
    assert runner.invoke(cli, none, env={"TIERMEM_DATABASE_URL": None}).exit_code == 1  # no store there
    assert not (root / "none").exists()


def test_cli_purge_preview_lists_where_and_the_report_names_exports(root: Path) -> None:
    """Issue 22 items 15 and 4: the preview lists the tables, files and vectors the purge then
    erases; the report says that exports taken before are not reached."""
    runner = CliRunner(env={"TIERMEM_EMBEDDER": "hash"})
    base = ["--root", str(root)]
    assert runner.invoke(cli, [*base, "remember", f"Plans to attend the {PHRASE}", "Prefers tea"]).exit_code == 0
    assert runner.invoke(cli, [*base, "note", f"Booked the {PHRASE}"]).exit_code == 0
    assert runner.invoke(cli, [*base, "search", "quokka festival"]).exit_code == 0  # embeds the texts
    preview = runner.invoke(cli, [*base, "purge", "--text", PHRASE], input="n\n")
    assert preview.exit_code == 1 and holding(root, WORD)
    done = runner.invoke(cli, [*base, "purge", "--text", PHRASE, "--json", "--yes"])
    report = json.loads(done.output)
    assert report["vectors"] > 0 and report["files"]
    lines = preview.output.splitlines()
    assert f"  vectors: {report['vectors']}" in lines
    assert "  tables: " + ", ".join(f"{t} {n}" for t, n in sorted(report["rows"].items())) in lines
    assert "  files: " + ", ".join(f"{f} ({n})" for f, n in sorted(report["files"].items())) in lines
    assert "export" in report["not_reached"]
    runner.invoke(cli, [*base, "remember", f"Loves the {PHRASE}"])
    text = runner.invoke(cli, [*base, "purge", "--text", PHRASE, "--yes"])
    assert text.exit_code == 0 and text.output.startswith("purged text")
    assert text.output.splitlines()[-1] == report["not_reached"]


def test_cli_purge_of_a_user(root: Path) -> None:
    runner = CliRunner(env={"TIERMEM_EMBEDDER": "hash"})
    base = ["--root", str(root)]
    assert runner.invoke(cli, [*base, "--user", "bob", "remember", "Bobbington Walrus Gala"]).exit_code == 0
    assert runner.invoke(cli, [*base, "--user", "bob", "note", "Bobbington again"]).exit_code == 0
    done = runner.invoke(cli, [*base, "purge", "--user", "bob"], input="y\n")
    assert done.exit_code == 0, done.output
    assert "purged user bob" in done.output and holding(root, b"bobbington") == []


def test_tombstones_are_hashed_after_a_later_day_too(mem: Memory, clock: FakeClock) -> None:
    mem.daily.append("Note", [f"day one: {PHRASE}"])
    clock.advance(timedelta(days=1).total_seconds())
    mem.daily.append("Note", [f"day two: {PHRASE}"])
    report = mem.purge(text=PHRASE)
    assert report.files == {"memory/2026-03-14.md": 1, "memory/2026-03-15.md": 1}
    assert not [h for h in mem.search("quokka", k=10, min_score=0) if "quokka" in h.text.lower()]


def test_a_later_purge_matching_purged_never_rehashes_a_tombstone(mem: Memory, root: Path) -> None:
    fact = mem.facts.add(f"Loves the {PHRASE}")
    assert fact is not None
    mem.facts.delete(fact.id)
    mem.purge(text="quokka festival")
    mem.purge(text="purge")  # matches the hashed tombstone's reason "purged"
    stored = mem.db.conn.execute("SELECT norm, content FROM tombstones").fetchall()
    assert [tuple(r) for r in stored] == [(tombstone_key(normalise(fact.content)), "")]
    assert mem.facts.add(f"loves the {PHRASE}", origin="extraction") is None
