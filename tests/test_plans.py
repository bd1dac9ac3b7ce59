"""Boulder state (R54-R56): plans, their checklist, status moves, resume, persistence, CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import ImportConflict, InvalidInput, Memory, NotFound
from tiermem.plans import Plan
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

STEPS = ["write tests", "fix bugs", "release"]


def _open(root: Path, clock: FakeClock | None = None, **kwargs: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **kwargs)


@contextmanager
def _other_store(root: Path, clock: FakeClock) -> Iterator[Memory]:
    """A second, empty store: a new root on SQLite; on PostgreSQL a schema of its own too (a new
    root alone would share the test's database)."""
    if "TIERMEM_DATABASE_URL" not in os.environ:
        with _open(root, clock) as mem:
            yield mem
        return
    from pg_helpers import fresh_schema

    with fresh_schema() as url, _open(root, clock, database_url=url) as mem:
        yield mem


# --- R54: the plan and its checklist --------------------------------------------------------
def test_start_from_a_list(mem: Memory, clock: FakeClock) -> None:
    plan = mem.plans.start("Ship v1", STEPS)
    assert plan.id.startswith("plan_") and len(plan.id) == 13 and int(plan.id[5:], 16) >= 0
    assert plan.title == "Ship v1"
    assert plan.checklist == "- [ ] write tests\n- [ ] fix bugs\n- [ ] release"
    assert plan.status == "active"
    assert plan.created_at == plan.updated_at == clock.now()
    assert (plan.user_id, plan.agent_name) == ("default", "default")
    assert plan.session_ids == ()
    assert plan.progress == (0, 3)
    assert [(i.index, i.text, i.done) for i in plan.items] == [(0, "write tests", False), (1, "fix bugs", False),
                                                                (2, "release", False)]


def test_start_from_markdown_keeps_the_text_and_reads_every_box_style(mem: Memory) -> None:
    markdown = "## Steps\n- [ ] one\n* [x] two\n  + [X] nested three\n1. [ ] four\nsome note\n- plain bullet"
    plan = mem.plans.start("Markdown", markdown)
    assert plan.checklist == markdown
    assert [(i.text, i.done) for i in plan.items] == [("one", False), ("two", True), ("nested three", True),
                                                      ("four", False)]
    assert plan.progress == (2, 4)


def test_list_entries_may_carry_their_own_box(mem: Memory) -> None:
    plan = mem.plans.start("Boxes", ["- [x] done already", "todo"])
    assert plan.checklist == "- [x] done already\n- [ ] todo"
    assert plan.progress == (1, 2)


def test_plan_persists_in_the_database_as_json(root: Path, clock: FakeClock) -> None:
    with _open(root, clock) as mem:
        plan = mem.plans.start("Persist", STEPS, session_id="s-1")
    with _open(root, clock) as again:
        assert again.plans.get(plan.id) == plan
        assert again.plans.active() == plan
        rows = [tuple(row) for row in again.db.rows("SELECT id, user_id, agent_name, status, data FROM plans")]
    assert len(rows) == 1
    assert rows[0][:4] == (plan.id, "default", "default", "active")
    assert json.loads(rows[0][4]) == plan.to_record()
    assert json.loads(rows[0][4])["sessionIds"] == ["s-1"]


def test_database_allows_one_active_plan_per_scope(mem: Memory) -> None:
    plan = mem.plans.start("A", STEPS)
    with pytest.raises(mem.db.IntegrityError):
        mem.db.conn.execute(
            "INSERT INTO plans (id, user_id, agent_name, status, revision, created_at, updated_at, data)"
            " SELECT 'plan_00000000', user_id, agent_name, status, revision, created_at, updated_at, data"
            " FROM plans WHERE id = ?", (plan.id,))


def test_ids_are_drawn_again_on_conflict(mem: Memory, monkeypatch: pytest.MonkeyPatch) -> None:
    taken = uuid.UUID("1234abcd" + "0" * 24)
    fresh = uuid.UUID("feedbeef" + "0" * 24)
    draws = iter([taken, taken, fresh])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(draws))
    first = mem.plans.start("first", STEPS)
    second = mem.plans.start("second", STEPS)
    assert (first.id, second.id) == ("plan_1234abcd", "plan_feedbeef")


# --- one active plan per (user, agent) ------------------------------------------------------
def test_starting_a_plan_pauses_the_active_one(mem: Memory, clock: FakeClock) -> None:
    old = mem.plans.start("old", STEPS)
    clock.advance(60)
    new = mem.plans.start("new", ["x"])
    assert mem.plans.active() == new
    paused = mem.plans.get(old.id)
    assert paused.status == "paused"
    assert paused.updated_at == clock.now() and paused.created_at == old.created_at
    assert paused.revision == old.revision + 1
    assert [p.id for p in mem.plans.list()] == [new.id, old.id]
    assert [p.id for p in mem.plans.list("paused")] == [old.id]


def test_scopes_do_not_share_plans(root: Path, clock: FakeClock) -> None:
    with _open(root, clock) as a, _open(root, clock, agent_name="other") as b:
        mine = a.plans.start("mine", STEPS)
        theirs = b.plans.start("theirs", STEPS)
        assert a.plans.active() == mine and b.plans.active() == theirs  # neither paused the other
        assert b.plans.get(theirs.id).agent_name == "other"
        with pytest.raises(NotFound):
            b.plans.get(mine.id)
        with pytest.raises(NotFound):
            b.plans.check(mine.id, 0)
        assert [p.id for p in a.plans.list()] == [mine.id]
        assert a.plans.get(mine.id).progress == (0, 3)


# --- check / uncheck --------------------------------------------------------------------------
def test_check_and_uncheck_change_only_that_box(mem: Memory, clock: FakeClock) -> None:
    plan = mem.plans.start("Markdown", "# Title\n- [ ] one\nnote [ ] here\n- [ ] two")
    clock.advance(30)
    checked = mem.plans.check(plan.id, 1)
    assert checked.checklist == "# Title\n- [ ] one\nnote [ ] here\n- [x] two"
    assert checked.progress == (1, 2)
    assert checked.updated_at == clock.now() and checked.created_at == plan.created_at
    assert checked.revision == 2
    assert mem.plans.get(plan.id) == checked
    unchecked = mem.plans.uncheck(plan.id, 1)
    assert unchecked.checklist == plan.checklist and unchecked.progress == (0, 2) and unchecked.revision == 3


def test_checking_a_checked_item_changes_nothing(mem: Memory, clock: FakeClock) -> None:
    plan = mem.plans.check(mem.plans.start("p", STEPS).id, 0)
    clock.advance(30)
    again = mem.plans.check(plan.id, 0)
    assert again == plan  # same revision and updated_at


@pytest.mark.parametrize("index", [-1, 3, 99, True, "0", 1.0, None])
def test_bad_index_is_invalid_input_and_changes_nothing(mem: Memory, index: Any) -> None:
    plan = mem.plans.start("p", STEPS)
    with pytest.raises(InvalidInput):
        mem.plans.check(plan.id, index)
    with pytest.raises(InvalidInput):
        mem.plans.uncheck(plan.id, index)
    assert mem.plans.get(plan.id) == plan


def test_unknown_plan_is_not_found_and_a_key_error(mem: Memory) -> None:
    with pytest.raises(NotFound):
        mem.plans.get("plan_00000000")
    with pytest.raises(KeyError):
        mem.plans.check("plan_00000000", 0)
    with pytest.raises(NotFound):
        mem.plans.pause("nonsense")
    with pytest.raises(InvalidInput):
        mem.plans.get(123)  # type: ignore[arg-type]


# --- status moves -----------------------------------------------------------------------------
def test_pause_resume_complete(mem: Memory) -> None:
    plan = mem.plans.start("p", STEPS)
    paused = mem.plans.pause(plan.id)
    assert paused.status == "paused" and mem.plans.active() is None
    resumed = mem.plans.resume(plan.id)
    assert resumed.status == "active" and mem.plans.active() == resumed
    done = mem.plans.complete(plan.id)
    assert done.status == "completed" and mem.plans.active() is None
    assert done.progress == (0, 3)  # completing does not tick boxes


def test_resuming_a_paused_plan_pauses_the_active_one(mem: Memory) -> None:
    first = mem.plans.start("first", STEPS)
    second = mem.plans.start("second", STEPS)
    assert mem.plans.resume(first.id).status == "active"
    assert mem.plans.get(second.id).status == "paused"
    assert mem.plans.active() == mem.plans.get(first.id)


def test_resume_with_a_session_attaches_it_and_bad_session_changes_nothing(mem: Memory) -> None:
    plan = mem.plans.pause(mem.plans.start("p", STEPS).id)
    with pytest.raises(InvalidInput):
        mem.plans.resume(plan.id, session_id="")
    assert mem.plans.get(plan.id) == plan
    resumed = mem.plans.resume(plan.id, session_id="s9")
    assert resumed.status == "active" and resumed.session_ids == ("s9",)


def test_same_status_is_a_no_op(mem: Memory, clock: FakeClock) -> None:
    plan = mem.plans.start("p", STEPS)
    clock.advance(5)
    assert mem.plans.resume(plan.id) == plan
    paused = mem.plans.pause(plan.id)
    clock.advance(5)
    assert mem.plans.pause(plan.id) == paused


@pytest.mark.parametrize("final", ["complete", "abandon"])
def test_completed_and_abandoned_are_final(mem: Memory, final: str) -> None:
    plan = mem.plans.start("p", STEPS)
    ended = getattr(mem.plans, final)(plan.id)
    assert ended.status == {"complete": "completed", "abandon": "abandoned"}[final]
    assert getattr(mem.plans, final)(plan.id) == ended  # asking again is a no-op
    other = "abandon" if final == "complete" else "complete"
    for call in (lambda: mem.plans.resume(plan.id), lambda: mem.plans.pause(plan.id),
                 lambda: getattr(mem.plans, other)(plan.id), lambda: mem.plans.check(plan.id, 0),
                 lambda: mem.plans.attach_session(plan.id, "s")):
        with pytest.raises(InvalidInput):
            call()
    assert mem.plans.get(plan.id) == ended


def test_list_filters_by_status_and_rejects_unknown_status(mem: Memory) -> None:
    a = mem.plans.start("a", STEPS)
    b = mem.plans.start("b", STEPS)
    mem.plans.abandon(a.id)
    assert [p.id for p in mem.plans.list("abandoned")] == [a.id]
    assert [p.id for p in mem.plans.list("active")] == [b.id]
    assert mem.plans.list("completed") == []
    with pytest.raises(InvalidInput):
        mem.plans.list("done")


def test_attach_session_records_each_session_once(mem: Memory) -> None:
    plan = mem.plans.start("p", STEPS, session_id="s1")
    plan = mem.plans.attach_session(plan.id, "s2")
    assert mem.plans.attach_session(plan.id, "s1") == plan
    assert mem.plans.get(plan.id).session_ids == ("s1", "s2")
    for bad in ("", "x" * 300, "a\x00b", 5):
        with pytest.raises(InvalidInput):
            mem.plans.attach_session(plan.id, bad)  # type: ignore[arg-type]
    assert mem.plans.get(plan.id) == plan


# --- R55: continuation ------------------------------------------------------------------------
def test_continuation_prompt_names_done_and_next(mem: Memory) -> None:
    plan = mem.plans.start("Ship v1", STEPS)
    plan = mem.plans.check(plan.id, 0)
    prompt = plan.continuation_prompt()
    assert prompt.startswith(f'You were working on the plan "Ship v1" ({plan.id}, active); 1 of 3 steps done.')
    assert "Done:\n- [x] write tests\n" in prompt
    assert "Next: fix bugs (item 1)\n" in prompt
    assert "Then:\n- [ ] release (item 2)" in prompt
    assert plan.continuation_prompt() == prompt  # no clock inside: byte-stable


def test_continuation_prompt_when_nothing_or_everything_is_done(mem: Memory) -> None:
    plan = mem.plans.start("p", ["only"])
    assert "Done: nothing yet." in plan.continuation_prompt()
    assert "Next: only (item 0)" in plan.continuation_prompt()
    finished = mem.plans.check(plan.id, 0)
    assert "Next: every step is done" in finished.continuation_prompt()


def test_resume_without_id_returns_the_active_plan_and_prompt(mem: Memory) -> None:
    assert mem.plans.resume() is None
    plan = mem.plans.start("p", STEPS)
    found = mem.plans.resume(session_id="session-2")
    assert found is not None
    resumed, prompt = found
    assert resumed.id == plan.id and resumed.session_ids == ("session-2",)
    assert prompt == resumed.continuation_prompt()
    mem.plans.pause(plan.id)
    assert mem.plans.resume() is None  # only the active plan comes back


_STARTER = """
import sys
from tiermem import Memory
from tiermem.testing import HashEmbedder
with Memory(sys.argv[1], embedder=HashEmbedder(), agent_name="coder") as m:
    plan = m.plans.start("Port the parser", ["read the grammar", "write the lexer", "write the parser"],
                         session_id="session-1")
    m.plans.check(plan.id, 0)
    print(plan.id)
"""


def test_plan_resumes_in_another_process(root: Path) -> None:
    out = subprocess.run([sys.executable, "-c", _STARTER, str(root)], capture_output=True, text=True, timeout=60,
                         check=True)
    plan_id = out.stdout.strip()
    with _open(root, agent_name="coder") as mem:
        found = mem.plans.resume(session_id="session-2")
        assert found is not None
        plan, prompt = found
        assert plan.id == plan_id and plan.status == "active" and plan.progress == (1, 3)
        assert plan.session_ids == ("session-1", "session-2")
        assert "Done:\n- [x] read the grammar" in prompt and "Next: write the lexer (item 1)" in prompt
    with _open(root, agent_name="coder") as mem:
        session = mem.session("session-3")  # R55: a new session starts with the plan
        assert session.plan is not None and session.plan.id == plan_id and session.plan.progress == (1, 3)
        assert session.plan.session_ids == ("session-1", "session-2", "session-3")
        assert session.continuation == session.plan.continuation_prompt()
    with _open(root) as default_agent:  # another (user, agent) scope sees nothing
        assert default_agent.plans.resume() is None
        assert default_agent.session("s").plan is None


def test_new_session_exposes_the_active_plan(mem: Memory) -> None:
    empty = mem.session("before")
    assert empty.plan is None and empty.continuation is None
    plan = mem.plans.start("p", STEPS)
    mem.plans.check(plan.id, 0)
    session = mem.session("s1")
    assert session.plan == mem.plans.get(plan.id) and session.plan.session_ids == ("s1",)
    assert session.continuation is not None and "Next: fix bugs (item 1)" in session.continuation
    revision = mem.plans.get(plan.id).revision
    assert mem.session("s1") is session
    assert mem.plans.get(plan.id).revision == revision  # an existing session does not start again


# --- concurrency: read-modify-write in one BEGIN IMMEDIATE ------------------------------------
_CHECKER = """
import sys, time
from pathlib import Path
from tiermem import Memory
from tiermem.testing import HashEmbedder
root, plan_id, start = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
with Memory(root, embedder=HashEmbedder()) as m:
    (root / f"ready-{start}").touch()
    deadline = time.monotonic() + 60
    while not all((root / f"ready-{n}").exists() for n in (0, 1)):  # start together
        assert time.monotonic() < deadline
    for index in range(start, 120, 2):
        m.plans.check(plan_id, index)
"""


def test_two_processes_checking_items_lose_none(root: Path) -> None:
    with _open(root) as mem:
        plan = mem.plans.start("many", [f"step {i}" for i in range(120)])
    procs = [subprocess.Popen([sys.executable, "-c", _CHECKER, str(root), plan.id, str(start)]) for start in (0, 1)]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with _open(root) as mem:
        final = mem.plans.get(plan.id)
    assert final.progress == (120, 120)
    assert final.revision == 121  # every check was its own committed change


def test_threads_checking_items_lose_none(mem: Memory) -> None:
    plan = mem.plans.start("many", [f"step {i}" for i in range(32)])
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            barrier.wait()
            for index in range(offset, 32, 4):
                mem.plans.check(plan.id, index)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert mem.plans.get(plan.id).progress == (32, 32)


# --- bad input changes nothing ------------------------------------------------------------------
@pytest.mark.parametrize(("title", "checklist"), [
    ("", STEPS),
    ("   ", STEPS),
    (None, STEPS),
    ("two\nlines", STEPS),
    ("x" * 201, STEPS),
    ("t", []),
    ("t", ""),
    ("t", "just a note\n- a plain bullet"),
    ("t", "- [ ] ok\n- [ ]"),
    ("t", [""]),
    ("t", ["two\nlines"]),
    ("t", [1]),
    ("t", {"a": 1}),
    ("t", None),
    ("t", "- [ ] bad \x00 byte"),
    ("t", [f"s{i}" for i in range(501)]),
])
def test_bad_start_is_invalid_input_and_stores_nothing(mem: Memory, title: Any, checklist: Any) -> None:
    before = mem.plans.start("existing", STEPS)
    with pytest.raises(InvalidInput):
        mem.plans.start(title, checklist)
    assert mem.plans.list() == [before]
    assert mem.plans.active() == before


def test_plan_from_record_rejects_malformed_records() -> None:
    good = Plan("plan_0123abcd", "t", "- [ ] a", "active", datetime(2026, 1, 1, tzinfo=UTC),
                datetime(2026, 1, 1, tzinfo=UTC)).to_record()
    assert Plan.from_record(good).to_record() == good
    for bad in ({**good, "status": "done"}, {**good, "id": "plan_xyz"}, {**good, "checklist": ""},
                {k: v for k, v in good.items() if k != "title"}, {**good, "createdAt": "yesterday"},
                {**good, "revision": 0}, {**good, "sessionIds": "s"}, {**good, "userId": "../x"}, []):
        with pytest.raises(InvalidInput):
            Plan.from_record(bad)


# --- export / import (R69) --------------------------------------------------------------------
def _populate(root: Path, clock: FakeClock) -> None:
    with _open(root, clock) as mem, _open(root, clock, user_id="alice", agent_name="writer") as alice:
        a = mem.plans.start("first", "# Steps\n- [ ] one\n- [x] two\nnote", session_id="s-1")
        clock.advance(10)
        b = mem.plans.start("second", ["uno", "dos"])
        mem.plans.check(b.id, 1)
        mem.plans.complete(a.id)
        alice.plans.start("hers", ["x"])
        mem.facts.add("Prefers dark mode", "preference")


def test_export_import_round_trips_plans_exactly(tmp_path: Path, clock: FakeClock) -> None:
    _populate(tmp_path / "src", clock)
    with _open(tmp_path / "src", clock) as src:
        data = src.export()
        plans = src.plans.list()
    assert len(data["plans"]) == 3
    with _other_store(tmp_path / "dst", clock) as dst:
        counts = dst.import_(json.loads(json.dumps(data)))
        assert counts["plans"] == 3
        assert dst.export() == data
        assert dst.plans.list() == plans
        assert dst.plans.active() == next(p for p in plans if p.status == "active")
        assert {p.status for p in dst.plans.list()} == {"active", "completed"}


def test_import_conflicts_unless_replace(tmp_path: Path, clock: FakeClock) -> None:
    _populate(tmp_path / "src", clock)
    with _open(tmp_path / "src", clock) as src:
        data = src.export()
    with _other_store(tmp_path / "dst", clock) as dst:
        dst.import_(data)
        mine = dst.plans.active()
        assert mine is not None
        dst.plans.check(mine.id, 0)  # the same id now differs from the export
        changed = dst.plans.get(mine.id)
        with pytest.raises(ImportConflict):
            dst.import_(data)
        assert dst.plans.get(mine.id) == changed
        dst.import_(data, replace=True)
        assert dst.plans.get(mine.id) == mine


def test_import_of_a_second_active_plan_in_a_scope(tmp_path: Path, clock: FakeClock) -> None:
    _populate(tmp_path / "src", clock)
    with _open(tmp_path / "src", clock) as src:
        data = src.export()
    with _other_store(tmp_path / "dst", clock) as dst:
        local = dst.plans.start("local", ["y"])
        with pytest.raises(ImportConflict):
            dst.import_(data)
        assert dst.plans.list() == [local] and dst.facts.list() == []  # all or nothing
        dst.import_(data, replace=True)
        assert dst.plans.get(local.id).status == "paused"
        active = dst.plans.active()
        assert active is not None and active.title == "second"


def test_malformed_plan_in_import_changes_nothing(tmp_path: Path, clock: FakeClock) -> None:
    _populate(tmp_path / "src", clock)
    with _open(tmp_path / "src", clock) as src:
        data = src.export()
    data["plans"][0]["status"] = "finished"
    with _other_store(tmp_path / "dst", clock) as dst:
        with pytest.raises(InvalidInput):
            dst.import_(data)
        assert dst.plans.list() == [] and dst.facts.list() == []


def test_clock_sets_timestamps(root: Path) -> None:
    clock = FakeClock(datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC))
    with _open(root, clock) as mem:
        plan = mem.plans.start("p", STEPS)
        clock.advance(timedelta(hours=1).total_seconds())
        checked = mem.plans.check(plan.id, 2)
    assert plan.created_at == datetime(2030, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert checked.updated_at == datetime(2030, 5, 6, 8, 8, 9, tzinfo=UTC)
