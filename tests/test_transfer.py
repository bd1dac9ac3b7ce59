"""Export/import is a full backup (R69): rows, vectors and the Markdown files, all or nothing."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from transfer_helpers import (  # noqa: F401  (separate_stores: an autouse fixture)
    LATIN1_DAY,
    START,
    CountingEmbedder,
    Templates,
    observe,
    open_memory,
    separate_stores,
    snapshot,
    store_env,
)

from tiermem import ImportConflict, InvalidInput, Memory, Scope
from tiermem.testing import FakeClock, ScriptedChatModel

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


def _export(root: Path, clock: FakeClock, **scope: Any) -> dict[str, Any]:
    with open_memory(root, clock) as mem:
        data = mem.export(**scope)
    return json.loads(json.dumps(data))  # what a file holds


# --- into an empty root --------------------------------------------------------------------------
def test_import_into_an_empty_root_answers_like_the_original(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    assert {f["path"] for f in data["files"] if f["user_id"] == "default"} >= {
        "MEMORY.md", "memory/2026-03-13.md", "memory/2026-03-14.md", "memory/dreams/2026-03-14.md"}
    assert {i["status"] for i in data["outbox"]} == {"pending", "dead"}
    for section in ("facts", "summaries", "tombstones", "audit", "plans", "core_versions", "dream_state",
                    "consolidated_prefix", "flush_hashes", "embeddings"):
        assert data[section], section
    target = tmp_path / "restored"
    with open_memory(target, clock) as restored:
        counts = restored.import_(data)
        assert counts["facts"] == 3 and counts["files"] == len(data["files"])
        assert restored.export() == data
        with open_memory(source, clock) as original:
            assert observe(restored) == observe(original)
            assert observe(restored.for_scope("bob")) == observe(original.for_scope("bob"))
            assert restored.stats()["queue_pending"] == original.stats()["queue_pending"] == 1
        assert restored.facts.add("works at initech", "context", origin="extraction") is None  # tombstone kept


def test_a_dream_after_import_sees_the_same_and_does_the_same(source: Path, tmp_path: Path,
                                                               clock: FakeClock) -> None:
    data = _export(source, clock)
    with open_memory(tmp_path / "restored", clock) as restored:
        restored.import_(data)
    results, prompts = [], []
    for root in (source, tmp_path / "restored"):
        llm = ScriptedChatModel([])
        with open_memory(root, clock, llm) as mem:
            assert mem.deep_dream(lookback_days=2).status == "skipped"  # same dream state: unchanged days
            mem.daily.append("Conversation", ["user: The flat in Alfama has two rooms."])
            llm.replies.append("[MEMORY]\n- Is moving to Lisbon in August.\n- Works as a backend engineer at"
                               " Acme Corp.\n- Found a flat in Alfama with two rooms.\n[DREAM]\nAdded the flat.\n")
            results.append(mem.deep_dream(lookback_days=2).to_dict())
            prompts.append(llm.requests[0].messages)
            results.append(mem.core.read())
    assert prompts[0] == prompts[1] and "Alfama" in prompts[0][1]["content"]
    assert results[0] == results[2] and results[1] == results[3]


def test_cli_daily_of_the_restored_store_prints_the_same(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    from click.testing import CliRunner

    from tiermem.cli.main import cli

    data = _export(source, clock)
    with open_memory(tmp_path / "restored", clock) as restored:
        restored.import_(data)
    runner = CliRunner()
    outputs = [runner.invoke(cli, ["--root", str(root), "daily", "2026-03-14"], env=store_env(root))
               for root in (source, tmp_path / "restored")]
    assert outputs[0].exit_code == outputs[1].exit_code == 0
    assert outputs[0].output == outputs[1].output and "movers come on August 3rd" in outputs[0].output


# --- files ---------------------------------------------------------------------------------------
def test_bytes_that_are_not_utf8_survive_json_and_come_back_exact(source: Path, tmp_path: Path,
                                                                  clock: FakeClock) -> None:
    data = _export(source, clock)
    (latin1,) = [f for f in data["files"] if f["path"] == "memory/2026-03-10.md"]
    assert "text" not in latin1 and base64.b64decode(latin1["base64"]) == LATIN1_DAY
    with open_memory(tmp_path / "restored", clock) as restored:
        restored.import_(data)
        assert restored.daily.files.read("memory/2026-03-10.md") == LATIN1_DAY
        assert (restored.root / "memory" / "2026-03-10.md").read_bytes() == LATIN1_DAY  # (or its mirror)
        assert any("2026-03-10" in h.ref for h in restored.search("café crème", min_score=0))


def test_the_search_index_sees_the_imported_files(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    with open_memory(tmp_path / "restored", clock) as restored:
        restored.search("warm up")  # the index is loaded (and empty) before the import
        restored.import_(data)
        hits = restored.search("movers August")
        assert hits and hits[0].ref.startswith("memory/2026-03-14.md#L")


# --- scopes --------------------------------------------------------------------------------------
def test_a_scope_export_holds_only_that_scope(source: Path, clock: FakeClock) -> None:
    data = _export(source, clock, scope=Scope("bob"))
    assert data["scope"] == {"user_id": "bob", "agent_name": "default"}
    assert data == _export(source, clock, user_id="bob")
    rows = [r for section in ("facts", "summaries", "tombstones", "audit", "outbox", "extracted_hashes",
                              "core_versions", "dream_state", "consolidated_prefix") for r in data[section]]
    assert rows and {r["user_id"] for r in rows} == {"bob"}
    assert {r.get("agent_name", "default") for r in rows} == {"default"}
    assert {f["user_id"] for f in data["files"]} == {"bob"}
    assert [f["path"] for f in data["files"]] == ["memory/2026-03-13.md"]
    assert all(":bob:default:" in r["namespace"] for r in data["flush_hashes"])
    everything = _export(source, clock)
    assert 0 < len(data["embeddings"]) < len(everything["embeddings"])


def test_an_agent_scope_keeps_its_rows_and_its_users_files(source: Path, clock: FakeClock) -> None:
    data = _export(source, clock, user_id="default", agent_name="coder")
    assert [f["content"] for f in data["facts"]] == ["Uses vim keybindings"]
    assert not data["plans"] and not data["outbox"]
    assert {f["path"] for f in data["files"]} >= {"MEMORY.md", "memory/2026-03-13.md"}


def test_a_scope_export_restores_that_scope(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock, scope=Scope("bob"))
    with open_memory(tmp_path / "restored", clock, user_id="bob") as restored:
        restored.import_(data)
        with open_memory(source, clock, user_id="bob") as original:
            seen, expected = observe(restored), observe(original)
            assert {**seen, "search": None} == {**expected, "search": None}
            # keyword statistics cover the whole database, so scores differ; the best hit does not
            assert seen["search"]["chess opening"][0][1:] == expected["search"]["chess opening"][0][1:]
        assert not restored.for_scope("default").facts.list()


def test_export_rejects_a_bad_scope(source: Path, clock: FakeClock) -> None:
    with open_memory(source, clock) as mem:
        before = snapshot(source)
        with pytest.raises(InvalidInput):
            mem.export(user_id="../etc")
        with pytest.raises(InvalidInput):
            mem.export(scope=Scope("bob"), user_id="bob")
    assert snapshot(source) == before


# --- vectors -------------------------------------------------------------------------------------
def test_import_reuses_vectors_of_the_same_model(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    assert {e["model"] for e in data["embeddings"]} == {"hash-256"}
    embedder = CountingEmbedder()
    with open_memory(tmp_path / "restored", clock, embedder=embedder) as restored:
        restored.import_(data)
        assert restored.vector_status().missing == 0
        restored.search("Lisbon move")
        assert embedder.texts == 1  # the query, nothing else


def test_another_model_embeds_again(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    embedder = CountingEmbedder("other-model")
    with open_memory(tmp_path / "restored", clock, embedder=embedder) as restored:
        restored.import_(data)
        assert embedder.texts > 10 and restored.vector_status().missing == 0


# --- into a store that holds something -----------------------------------------------------------
def test_import_merges_into_a_store_with_other_content(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock, scope=Scope("bob"))
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mine = mem.facts.add("Likes tea", "preference", 0.9)
        mem.daily.append("Notes", ["my own note"])
        mem.import_(data)
        assert {f.content for f in mem.facts.list()} == {"Likes tea"}
        assert [f.content for f in mem.for_scope("bob").facts.list()] == ["Bob plays chess"]
        before = snapshot(target)
        again = mem.import_(data)  # idempotent: everything is there already
        assert again["facts"] == 1 and snapshot(target) == before
        assert mem.facts.get(mine.id if mine else "").content == "Likes tea"


def test_import_says_what_it_added_and_what_was_already_there(source: Path, tmp_path: Path,
                                                                clock: FakeClock) -> None:
    """Issue 22, item 18: the same counts for a first and a second import told nobody whether
    anything was written; each section now says how many rows were added and how many were there."""
    data = _export(source, clock)
    with open_memory(tmp_path / "target", clock) as mem:
        first = mem.import_(data)
        again = mem.import_(data)
    assert dict(first) == dict(again) == {name: len(data[name]) for name in first}  # rows in the file, as before
    for name, rows in first.items():
        assert (first.restored[name].added, first.restored[name].already_there) == (rows, 0), name
        assert (again.restored[name].added, again.restored[name].already_there) == (0, rows), name
        assert first.restored[name].refused == again.restored[name].refused == 0
    assert first.restored["facts"].added == 3 and first.restored["files"].added == len(data["files"])


def test_import_counts_what_it_refused_and_what_it_overwrote_as_there(source: Path, tmp_path: Path,
                                                                       clock: FakeClock) -> None:
    data = _export(source, clock)
    data["consolidated_days"] = [{"user_id": "default", "day": "2026-03-13", "at": "2026-03-14T12:00:00.000000Z"}]
    with open_memory(tmp_path / "target", clock) as mem:
        mem.core.write("- A different memory\n")
        counts = mem.import_(data, replace=True)
    files = counts.restored["files"]  # MEMORY.md was there (with other content: --replace overwrote it)
    assert (files.rows, files.added, files.already_there) == (len(data["files"]), len(data["files"]) - 1, 1)
    legacy = counts.restored["consolidated_days"]  # old whole-day marks: checked, counted, dropped
    assert (legacy.rows, legacy.refused, legacy.added, legacy.already_there) == (1, 1, 0, 0)


def test_audit_entries_merge_as_a_log(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    with open_memory(tmp_path / "target", clock) as mem:
        mem.facts.add("Likes tea", "preference", 0.9)  # audit id 1 is taken by another entry
        mem.import_(data)
        history = [(e.action, e.content) for e in mem.facts.history()]
        assert ("added", "Likes tea") in history and ("added", "Prefers dark mode") in history
        assert len(mem.facts.history()) == 1 + sum(1 for r in data["audit"] if r["user_id"] == "default"
                                                   and r["agent_name"] == "default")


def test_a_file_with_other_content_is_refused_unless_replace(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.core.write("- A different memory\n")
        before = snapshot(target)
        with pytest.raises(ImportConflict, match="MEMORY.md"):
            mem.import_(data)
        assert snapshot(target) == before  # no row, no file, not even the new ones
        mem.import_(data, replace=True)
        assert mem.core.read() == next(f["text"] for f in data["files"] if f["path"] == "MEMORY.md"
                                       and f["user_id"] == "default")
        assert any(h.tier == "core" and "Lisbon" in h.text for h in mem.search("Lisbon August"))


def test_a_row_conflict_writes_no_file(source: Path, tmp_path: Path, clock: FakeClock) -> None:
    data = _export(source, clock)
    with open_memory(tmp_path / "first", clock) as mem:
        mem.import_(data)
    changed = copy.deepcopy(data)
    changed["facts"][0]["content"] = "changed"
    changed["files"] = data["files"]
    target = tmp_path / "first"
    with open_memory(target, clock) as mem:
        assert mem.daily.files.remove("memory/2026-03-13.md")
        before = snapshot(target)
        with pytest.raises(ImportConflict, match=changed["facts"][0]["id"]):
            mem.import_(changed)
        assert snapshot(target) == before and mem.daily.files.read("memory/2026-03-13.md") is None
        mem.import_(changed, replace=True)
        assert mem.daily.files.read("memory/2026-03-13.md") is not None
        assert "changed" in {f.content for s in ("default", "bob") for f in mem.for_scope(s).facts.list()}


def test_a_fact_with_the_content_of_another_id_is_a_conflict(mem: Memory, tmp_path: Path, clock: FakeClock) -> None:
    mem.facts.add("Prefers dark mode", "preference", 0.9)
    with open_memory(tmp_path / "other", clock) as other:
        other.facts.add("prefers  DARK mode", "preference", 0.5)
        data = other.export()
    with pytest.raises(ImportConflict, match="has the content of"):
        mem.import_(data)
    mem.import_(data, replace=True)
    assert [(f.content, f.confidence) for f in mem.facts.list()] == [("prefers  DARK mode", 0.5)]


# --- redaction -----------------------------------------------------------------------------------
def test_import_applies_the_targets_redaction(tmp_path: Path, clock: FakeClock) -> None:
    key = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"
    with open_memory(tmp_path / "plain", clock, redact_secrets=False) as plain:
        plain.facts.add(f"API key is {key}", "knowledge", 0.9)
        plain.daily.append("Notes", [f"the key is {key}"])
        data = json.loads(json.dumps(plain.export()))
    with open_memory(tmp_path / "safe", clock) as safe:
        safe.import_(data)
        assert key not in safe.facts.list()[0].content and "[REDACTED" in safe.facts.list()[0].content
        assert key not in safe.daily.read() and "[REDACTED" in safe.daily.read()
        redacted = safe.export()
    with open_memory(tmp_path / "again", clock) as again:
        again.import_(redacted)
        assert again.export() == redacted  # redaction is idempotent: a redacted store comes back exact


# --- bad files -----------------------------------------------------------------------------------
def _bad(data: dict[str, Any], case: str) -> tuple[Any, str]:
    bad = copy.deepcopy(data)
    if case == "version":
        bad["version"] = 3
        return bad, "version 3"
    if case == "type":
        bad["facts"][0]["confidence"] = "high"
        return bad, "section 'facts', row 0, field 'confidence'"
    if case == "dotdot":
        bad["files"][1]["path"] = "memory/../../../etc/passwd.md"
        return bad, "section 'files', row 1, field 'path'"
    if case == "absolute":
        bad["files"][0]["path"] = "/etc/MEMORY.md"
        return bad, "section 'files', row 0, field 'path'"
    if case == "user":
        bad["summaries"][0]["user_id"] = "../bob"
        return bad, "section 'summaries', row 0, field 'user_id'"
    if case == "file_user":
        bad["files"][0]["user_id"] = "a/b"
        return bad, "section 'files', row 0, field 'user_id'"
    if case == "vector":
        bad["embeddings"][0]["vector"] = "AAAA"
        return bad, "section 'embeddings', row 0, field 'vector'"
    if case == "missing":
        del bad["outbox"]
        return bad, "section 'outbox'"
    if case == "time":
        bad["audit"][2]["at"] = "yesterday"
        return bad, "section 'audit', row 2, field 'at'"
    return [bad], "not a tiermem export"


@pytest.mark.parametrize("case", ["version", "type", "dotdot", "absolute", "user", "file_user", "vector",
                                  "missing", "time", "list"])
def test_a_bad_file_is_one_clear_error_and_changes_nothing(source: Path, tmp_path: Path, clock: FakeClock,
                                                           case: str) -> None:
    bad, message = _bad(_export(source, clock), case)
    target = tmp_path / "target"
    with open_memory(target, clock) as mem:
        mem.facts.add("keep me")
        before = snapshot(target)
        with pytest.raises(InvalidInput) as info:
            mem.import_(bad)
        assert message in str(info.value) and "\n" not in str(info.value)
    assert snapshot(target) == before


def test_every_table_is_exported_or_rebuilt(mem: Memory) -> None:
    """A table added later must be put in an export section or named as rebuilt on import."""
    from tiermem.transfer.rows import NOT_EXPORTED, SECTIONS

    tables = set(mem.db.parts.tables(mem.db))  # the store's own tables (not an index's shadow tables)
    sections = {s.name for s in SECTIONS}
    assert sections <= tables and tables <= NOT_EXPORTED | sections, tables - NOT_EXPORTED - sections


# --- kept from format version 1 ------------------------------------------------------------------
def test_import_restores_without_readmission(mem: Memory, clock: FakeClock, tmp_path: Path) -> None:
    for i in range(5):
        mem.facts.add(f"fact {i}", confidence=0.6)
    data = mem.export()
    with open_memory(tmp_path / "small", clock, max_facts=2, fact_confidence_threshold=0.9) as small:
        small.import_(data)
        assert len(small.facts.list()) == 5


def test_conflicting_id_is_an_error_unless_replace(mem: Memory) -> None:
    fact = mem.facts.add("original", confidence=0.8)
    assert fact is not None
    data = mem.export()
    data["facts"][0]["content"] = "changed"
    with pytest.raises(ImportConflict):
        mem.import_(data)
    assert mem.facts.get(fact.id).content == "original"
    mem.import_(data, replace=True)
    assert mem.facts.get(fact.id).content == "changed"
