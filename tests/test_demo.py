"""``tiermem demo``: the whole loop, told truthfully.

Without an LLM the demo runs on its scripted model (canned replies anchored to the sample
conversation); the replies go through the real parser, fact store, dream runner and support
check, and the tests look at what ended up on disk. The demo runs twice on one root (module
fixture) to check idempotence; with an LLM it runs against the local fake OpenAI server. Both
on SQLite and on PostgreSQL (the module fixture makes a schema of its own).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from fake_openai_server import FakeLLMServer, RecordedRequest
from rich.console import Console

from tiermem import Memory, ProviderError
from tiermem.cli.demo import QUESTIONS, REPLAY_TAIL, Question, load_sample, place_replay
from tiermem.cli.demo_model import NOTHING_NEW, DemoChatModel, ReplyBook
from tiermem.cli.demo_view import SCRIPTED_NOTICE, DemoView, answer_rank
from tiermem.dream.prompt import DailySource, build_dream_messages
from tiermem.dream.support import SupportChecker
from tiermem.extract.parse import parse_extraction
from tiermem.extract.prompt import build_extraction_messages
from tiermem.search.thread import LIFTED_LEGEND, LIFTED_MARK
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tiers.records import summary_request
from tiermem.tiers.turns import to_message

# every TIERMEM_* variable of the caller unset (None), so the module fixture is isolated too
ENV: dict[str, str | None] = {**{k: None for k in os.environ if k.startswith("TIERMEM_")},
                              "TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC", "COLUMNS": "200"}
BOOK = ReplyBook.bundled()
SAMPLE = load_sample()
REMEMBERED = {row["remember"]["content"] for row in SAMPLE if "remember" in row}
CANNED_FACTS = {f["content"] for e in BOOK.extractions for f in e.new_facts}
REMOVED = {c for e in BOOK.extractions for c in e.remove}
CANNED_BULLETS = [line[2:] for line in BOOK.dream_memory if line.startswith("- ")]


def run_demo(root: Path, env: dict[str, str | None]) -> str:
    from tiermem.cli.main import cli

    result = CliRunner().invoke(cli, ["--root", str(root), "demo"], env=env)
    assert result.exit_code == 0, result.output
    return result.output


def open_store(root: Path, url: str | None = None) -> Memory:
    """The demo's store: under ``root``, or in the PostgreSQL schema of ``url`` (mirrored under ``root``)."""
    return Memory(root, embedder=HashEmbedder(), timezone="UTC", database_url=url)


@dataclass(frozen=True)
class Snapshot:
    journal: dict[str, str]
    facts: list[tuple[str, str]]
    core: str
    diaries: dict[str, str]

    @classmethod
    def of(cls, root: Path, url: str | None) -> Snapshot:
        with open_store(root, url) as mem:
            journal = {d.isoformat(): mem.daily.read(d) for d in mem.daily.days()}
            facts = sorted((f.id, f.content) for f in mem.facts.list())
            core = mem.core.read()
        diaries = {p.name: p.read_text(encoding="utf-8") for p in (root / "memory" / "dreams").glob("*.md")}
        return cls(journal, facts, core, diaries)


@dataclass(frozen=True)
class TwoRuns:
    root: Path  # a copy of the store as the first run left it
    first: str
    second: str
    after_first: Snapshot
    after_second: Snapshot
    url: str | None  # PostgreSQL: the store's database (the roots hold its mirror)


def _two_runs(root: Path, url: str | None) -> TwoRuns:
    env = {**ENV, "TIERMEM_DATABASE_URL": url}
    first = run_demo(root, env)
    copy = shutil.copytree(root, root.with_name("after-first-run"))
    after_first = Snapshot.of(copy, url)  # before the second run (on PostgreSQL the copy shares the store)
    second = run_demo(root, env)
    return TwoRuns(copy, first, second, after_first, Snapshot.of(root, url), url)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[TwoRuns]:
    root = tmp_path_factory.mktemp("demo") / "store"
    if request.param == "sqlite":
        yield _two_runs(root, None)
        return
    from pg_helpers import fresh_schema

    with fresh_schema() as url:
        yield _two_runs(root, url)


# --- the scripted demo, end to end -----------------------------------------------------------
def test_scripted_demo_says_so_and_shows_every_step(runs: TwoRuns) -> None:
    out = runs.first
    assert SCRIPTED_NOTICE in out and "No LLM configured" not in out
    for marker in ("1. Sessions (Context tier) -> Daily journal -> extraction", "2. Daily tier", "3. Core tier",
                   "4. Deep Dream", "5. The next session", "Deep Dream: written",
                   "support check: every bullet is supported by the journal",
                   "mem.format_for_injection(query='When is Maya moving to Lisbon?')", "mem.system_context().text",
                   "Core Memory:", "Relevant notes:", "The model replies were scripted"):
        assert marker in out, marker
    assert "Found an existing store" not in out


def test_extraction_corrects_the_move_from_june_to_august(runs: TwoRuns) -> None:
    facts = {content for _, content in runs.after_first.facts}
    assert "Is moving to Lisbon in August" in facts
    assert not [f for f in facts if "June" in f]
    # every canned fact went through the store; the June one was removed by the correction
    assert facts == REMEMBERED | CANNED_FACTS - REMOVED
    with open_store(runs.root, runs.url) as mem:
        deleted = [e for e in mem.facts.history() if e.action == "deleted"]
        assert [(e.content, e.reason) for e in deleted] == [
            ("Is moving from Berlin to Lisbon in June", "removed by extraction (outdated or corrected)")]
    assert "- deleted: Is moving from Berlin to Lisbon in June" in runs.first


def test_dream_writes_every_canned_bullet_as_supported(runs: TwoRuns) -> None:
    with open_store(runs.root, runs.url) as mem:
        assert mem.core.items() == CANNED_BULLETS
    (diary,) = runs.after_first.diaries.values()
    assert BOOK.dream_diary in diary
    assert "## Personal\n- Moving to Lisbon in August, not June; the apartment fell through." in runs.after_first.core


def test_journal_holds_each_message_once_whole_and_the_summaries(runs: TwoRuns) -> None:
    journal = "".join(runs.after_first.journal.values())
    assert len(runs.after_first.journal) == 3
    assert "[SCHEDULED]" not in journal and "You have 3 open pull requests" not in journal
    for row in SAMPLE:
        if "[SCHEDULED]" in row["content"] or row["content"].startswith("You have 3 open"):
            continue
        first_line = f"- {row['role']}: {row['content'].splitlines()[0]}"
        assert journal.count(first_line + "\n") == 1, first_line
    assert "  now = datetime.now(timezone.utc)\n" in journal  # multi-line content kept whole
    for canned in BOOK.summary_lines:  # every summary anchor was asked about
        assert f"- {canned.line}\n" in journal, canned.line


def test_next_session_injection_has_core_and_cites_the_august_record(runs: TwoRuns) -> None:
    with open_store(runs.root, runs.url) as mem:
        text = mem.format_for_injection(query=QUESTIONS[0].text)
        assert "\nCore Memory:\n" in f"\n{text}"
        core = text.split("Core Memory:\n", 1)[1].split("\n\n", 1)[0]
        assert core.splitlines()[0] == "- Moving to Lisbon in August, not June; the apartment fell through."
        notes = text.split("Relevant notes:\n", 1)[1].splitlines()
        cited = [re.match(r"- \d{4}-\d\d-\d\d \((memory/(\d{4}-\d\d-\d\d)\.md)#L(\d+)\): (.*)$", n) for n in notes]
        august = [m for m in cited if m is not None and "Lisbon in August" in m.group(4)]
        assert august, notes
        path, _, line = august[0].group(1), august[0].group(2), int(august[0].group(3))
        assert "Lisbon in August" in (runs.root / path).read_text(encoding="utf-8").splitlines()[line - 1]
        assert text.index("Core Memory:") < text.index("Facts:") < text.index("Relevant notes:")
        assert "Core Memory:" in mem.system_context().text


def test_each_question_finds_its_answer_in_the_top_3(runs: TwoRuns) -> None:
    with open_store(runs.root, runs.url) as mem:
        for question in QUESTIONS:
            assert answer_rank(mem.search(question.text, k=3), question.answer) is not None, question
    for question in QUESTIONS:  # and the demo showed it
        assert re.search(rf"answer \({re.escape(repr(question.answer))}\) at rank [123] \(", runs.first), question
    assert "not in the top 3" not in runs.first


def test_second_run_adds_nothing_twice_and_says_what_it_found(runs: TwoRuns) -> None:
    before, after = runs.after_first, runs.after_second
    assert after.facts == before.facts
    assert after.core == before.core and after.diaries == before.diaries
    assert after.journal == before.journal
    records = sum(1 for text in before.journal.values() for line in text.splitlines() if line.startswith("- "))
    assert (f"Found an existing store here: 3 daily files ({records} records), {len(before.facts)} facts, "
            f"MEMORY.md with {len(CANNED_BULLETS)} bullets") in runs.second
    assert "This run added 0 journal records and 0 facts" in runs.second
    assert "Deep Dream: skipped - the daily records are unchanged" in runs.second


def _result_tables(out: str) -> list[list[tuple[float, bool]]]:
    """The demo's result tables: each row's (score, marked as lifted), in rank order."""
    tables: list[list[tuple[float, bool]]] = []
    for line in out.split("5. The next session", 1)[1].splitlines():
        row = re.match(rf"^│ (\d+) +│ (\d\.\d{{3}})( {LIFTED_MARK})? +│", line)
        if row is None:
            continue
        if row.group(1) == "1":
            tables.append([])
        tables[-1].append((float(row.group(2)), row.group(3) is not None))
    return tables


def test_a_rank_above_a_higher_score_is_marked_and_explained(runs: TwoRuns) -> None:
    tables = _result_tables(runs.first)
    assert len(tables) == len(QUESTIONS)
    for rows in tables:
        for rank, (score, marked) in enumerate(rows):
            assert marked == any(below > score for below, _ in rows[rank + 1:]), rows
    # (whether a top 3 has a lifted reply varies: where a background summary lands in the journal
    # changes the scores; the next test shows a lifted hit for certain)
    marked_tables = sum(any(marked for _, marked in rows) for rows in tables)
    assert runs.first.count(LIFTED_LEGEND) == marked_tables  # one legend line under each such table


@pytest.mark.usefixtures("backend")
def test_demo_view_marks_a_reply_lifted_above_a_higher_score(tmp_path: Path) -> None:
    clock = FakeClock(datetime(2026, 3, 13, 21, 0, tzinfo=UTC))
    with Memory(tmp_path, embedder=HashEmbedder(), clock=clock, timezone="UTC", search_reply_support=0.8,
                search_min_score=0.0) as mem:
        # the day before, so no neighbour's words count for it: it scores above the reply (0.59 to
        # 0.08), below the reply's support from the question (1 - 0.92 * (1 - 0.8 * 1.0) = 0.82)
        mem.daily.append("Conversation", ["Caroline: The hospital cafeteria served soup."])
        clock.advance(86400)
        mem.daily.append("Conversation", ["Caroline: What do you do to destress after a long shift at the hospital?",
                                          "Melanie: Running along the river, it clears my head."])
        view = DemoView(mem, scripted=True)
        view.console = Console(file=io.StringIO(), width=200)
        view._ask(Question("destress after a long shift at the hospital", "Running"))
        out = view.console.file.getvalue()
    assert [(rank, marked) for rows in _result_tables("5. The next session\n" + out)
            for rank, (_, marked) in enumerate(rows, 1)] == [(1, False), (2, True), (3, False)]
    assert out.count(LIFTED_LEGEND) == 1 and "answer ('Running') at rank 2 (daily)" in out


def _stamps(mem: Memory) -> list[datetime]:
    """Every moment the store records: facts, the audit, MEMORY.md versions, the journal's blocks."""
    stamps = [t for f in mem.facts.list() for t in (f.created_at, f.updated_at)]
    stamps += [entry.at for entry in mem.facts.history()] + [v.created_at for v in mem.dream_versions()]
    for day in mem.daily.days():
        for hhmm in re.findall(r"^## .* \((\d\d:\d\d)\)$", mem.daily.read(day), re.MULTILINE):
            stamps.append(datetime.combine(day, datetime.strptime(hhmm, "%H:%M").time(), UTC))
    return stamps


def test_the_demo_stamps_nothing_later_than_the_clock(runs: TwoRuns) -> None:
    now = datetime.now(UTC)  # the demo ran before this line (the journal is in UTC: TIERMEM_TIMEZONE)
    with open_store(runs.root, runs.url) as mem:
        stamps = _stamps(mem)
    assert len(stamps) > 50 and max(stamps) <= now, max(stamps)
    diaries = [date.fromisoformat(name.removesuffix(".md")) for name in runs.after_first.diaries]
    assert diaries and max(diaries) <= now.date()


@pytest.mark.parametrize("now", ["2026-03-14T00:30", "2026-03-14T06:04", "2026-03-14T13:00", "2026-03-14T23:59"])
def test_the_replay_is_over_before_now_and_ends_as_late_as_it_can(now: str) -> None:
    moment = datetime.fromisoformat(now).replace(tzinfo=UTC)
    replay = place_replay(SAMPLE, moment)
    last = max(replay.when(m) for m in SAMPLE)
    assert last + REPLAY_TAIL <= moment  # the replay, its session end and the next session: all before now
    assert last + REPLAY_TAIL + timedelta(days=1) > moment  # a day later would not be (no day skipped)
    assert min(replay.when(m) for m in SAMPLE).date() == replay.today - timedelta(days=2)


def test_the_demo_answers_each_question_with_the_default_embedder(tmp_path: Path) -> None:
    """The README's first command, as a reader runs it: the local model, not the hashing one
    (issue 22, item 13). Each answer in the top 3, and by a margin: above the floor by 0.15."""
    env = {**ENV, "TIERMEM_EMBEDDER": None, "TIERMEM_CACHE_DIR": os.environ["TIERMEM_CACHE_DIR"]}
    out = run_demo(tmp_path / "store", env)
    assert "embedder: all-MiniLM-L6-v2" in out and "not in the top 3" not in out
    with Memory(tmp_path / "store", timezone="UTC") as mem:
        for question in QUESTIONS:
            hits = mem.search(question.text, k=3)
            rank = answer_rank(hits, question.answer)
            assert rank is not None and hits[rank - 1].score >= mem.search_floor() + 0.15, (question, hits)
            assert re.search(rf"answer \({re.escape(repr(question.answer))}\) at rank {rank} \(", out), question


# --- the scripted model ------------------------------------------------------------------------
def test_scripted_model_answers_by_what_is_asked_not_by_call_order() -> None:
    model = DemoChatModel()
    correction = "Correction: I'm moving to Lisbon in August, not June — the apartment fell through."
    dream = build_dream_messages("", [DailySource(date(2026, 3, 14), f"- user: {correction}")], date(2026, 3, 14))
    summary = summary_request([to_message({"role": "user", "content": correction})], "", date(2026, 3, 14))
    june = (4, "Is moving from Berlin to Lisbon in June", "context", 0.9)
    extraction = build_extraction_messages([june], {}, [{"role": "user", "content": correction}], date(2026, 3, 14))

    assert model.complete(dream).startswith("[MEMORY]\n## Work\n")
    assert model.complete(summary) == ("- Correction: user is moving to Lisbon in August, not June; "
                                       "the apartment fell through.")
    result = parse_extraction(model.complete(extraction), {4})
    assert [f.content for f in result.new_facts] == ["Is moving to Lisbon in August"]
    assert result.facts_to_remove == (4,)  # the id the prompt showed for the June fact
    assert "August" in result.summaries["personalContext"]
    assert len(model.requests) == 3


def test_scripted_model_removes_only_facts_the_prompt_shows_and_knows_nothing_else() -> None:
    model = DemoChatModel()
    other = [{"role": "user", "content": "I like tea."}]
    request = build_extraction_messages([], {}, [{"role": "user", "content": "Tomás approved the 3.12 rollout."}],
                                        date(2026, 3, 14))
    assert parse_extraction(model.complete(request), set()).facts_to_remove == ()
    nothing = parse_extraction(model.complete(build_extraction_messages([], {}, other, date(2026, 3, 14))), set())
    assert nothing.is_empty
    summary = summary_request([to_message(other[0])], "", date(2026, 3, 14))
    assert model.complete(summary) == f"- {NOTHING_NEW}"
    with pytest.raises(ProviderError, match="TIERMEM_LLM"):
        model.complete([{"role": "user", "content": "Summarise this text."}])


def test_canned_replies_only_restate_the_conversation() -> None:
    user_turns: dict[str, str] = {}
    for row in SAMPLE:
        if row["role"] == "user":
            user_turns[row["thread_id"]] = user_turns.get(row["thread_id"], "") + "\n" + row["content"]
    for canned in BOOK.extractions:
        assert canned.said in user_turns[canned.thread], canned.said
    for line in BOOK.summary_lines:
        assert any(line.said in turns for turns in user_turns.values()), line.said
    # the dream's own no-fabrication check, with each message of the sample as one record, on
    # a day of each weekday: the day's names count as source words, and the demo runs any day
    records = "\n".join(f"- {m['role']}: {m['content']}" for m in SAMPLE if "\n" not in m["content"])
    statements = [*CANNED_FACTS, *(s for e in BOOK.extractions for s in e.summaries.values()),
                  *(c.line for c in BOOK.summary_lines), *CANNED_BULLETS]
    for day in (date(2027, 1, 4) + timedelta(days=i) for i in range(7)):
        checker = SupportChecker("", [DailySource(day, records)])
        unsupported = [(v.text, v.reason) for v in checker.check(statements) if not v.supported]
        assert unsupported == [], day


@pytest.mark.usefixtures("backend")
def test_demo_view_lists_the_bullets_the_support_check_dropped(tmp_path: Path) -> None:
    book = replace(BOOK, dream_memory=("## Personal", "- Moving to Lisbon in August.", "- Owns a yacht in Monaco."))
    clock = FakeClock(datetime(2026, 3, 14, 21, 0, tzinfo=UTC))
    with Memory(tmp_path, llm=DemoChatModel(book), embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Session Notes", ["user: I'm moving to Lisbon in August."])
        result = mem.deep_dream()
        view = DemoView(mem, scripted=True)
        view.console = Console(file=io.StringIO(), width=200)
        view.dream(result)
        out = view.console.file.getvalue()
        assert mem.core.items() == ["Moving to Lisbon in August."]
    assert "Deep Dream: written" in out
    assert "1 bullet kept; support check: 1 dropped as not supported by the journal:" in out
    assert "dropped: Owns a yacht in Monaco.  (" in out and "- Moving to Lisbon in August." in out


# --- with a configured LLM -----------------------------------------------------------------------
def _model(request: RecordedRequest) -> str:
    system = request.messages[0]["content"]
    if "[MEMORY]" in system:
        return ("[MEMORY]\n## Work\n- Maya joined Fernhill as a backend engineer on the payments team.\n"
                "[DREAM]\nAdded her role from the journal.")
    if "Summarise" in system or "summar" in system.lower() and "newFacts" not in system:
        return "- Maya talked about her work."
    facts = [{"content": "Works at Fernhill", "category": "context", "confidence": 0.9}]
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


@pytest.mark.usefixtures("backend")
def test_demo_with_llm_uses_the_model_not_the_script(tmp_path: Path) -> None:
    with FakeLLMServer(_model) as server:
        env = {**ENV, "TIERMEM_LLM": "openai-compatible:llama3.1", "TIERMEM_LLM_BASE_URL": server.url,
               "TIERMEM_DATABASE_URL": os.environ.get("TIERMEM_DATABASE_URL")}
        out = run_demo(tmp_path, env)
        assert "Deep Dream: written" in out and SCRIPTED_NOTICE not in out
        assert "LLM: openai-compatible:llama3.1" in out
        assert server.requests
    with open_store(tmp_path) as mem:
        facts = {f.content for f in mem.facts.list()}
        assert facts == REMEMBERED | {"Works at Fernhill"}
        assert mem.core.items() == ["Maya joined Fernhill as a backend engineer on the payments team."]
