"""One true story (issue 13): an agent's week, end to end, through the public API.

Five sessions over five days (Monday to Friday), each a new process in spirit (the Memory is
closed and opened again every morning), with a scripted chat model and a fake clock: messages go
to ``mem.session`` and ``mem.queue`` as an agent would send them, facts are extracted, a Deep
Dream runs every night, a person edits ``MEMORY.md`` by hand on Wednesday, a fact is forgotten on
Thursday, and on Friday the store is exported and imported into a fresh root.

Every morning the test checks what the agent's next system prompt holds (Core bullets, facts,
the active plan, recent notes), that every message is journaled once and whole, that search
finds each day's key fact in the top 3 above the score floor while an off-topic query finds
nothing, and at the end that the imported store answers the same.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel
from tiermem.tiers.markdown import parse_records

MONDAY = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)
OFF_TOPIC = "quantum chromodynamics lattice"
pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL
LONG_CODE = "\n".join(["Here is the whole DAG file:", "```python"]
                      + [f"task_{i} = PythonOperator(task_id='t{i}', python_callable=run_{i})" for i in range(60)]
                      + ["```", "", "  Indented trailing note."])


def extraction(*facts: tuple[str, str, float], remove: tuple[int, ...] = ()) -> str:
    return json.dumps({"newFacts": [{"content": c, "category": k, "confidence": p} for c, k, p in facts],
                       "factsToRemove": list(remove)})


@dataclass
class Day:
    """One day of the week: the conversation, the extraction reply, the dream reply, the checks."""

    name: str
    thread: str
    messages: list[tuple[str, str]]
    extraction: str
    dream: str
    key_query: str
    key_answer: str  # a phrase of the record (or fact) that answers key_query
    facts_after: list[str] = field(default_factory=list)


WEEK = [
    Day("monday", "mon-kickoff",
        [("user", "Hi, I'm Ines. I work at Northwind as a data engineer."),
         ("assistant", "Nice to meet you, Ines! What are you working on?"),
         ("user", "My team is migrating the ETL pipelines from Airflow to Dagster this quarter."),
         ("assistant", "Good choice. Shall I keep a plan for the migration?"),
         ("user", "ok"),
         ("assistant", "ok")],
        extraction(("Works at Northwind as a data engineer", "knowledge", 0.95),
                   ("Team is migrating the ETL pipelines from Airflow to Dagster", "goal", 0.9)),
        "[MEMORY]\n## Work\n- Ines works at Northwind as a data engineer.\n"
        "- Her team is migrating the ETL pipelines from Airflow to Dagster.\n\n"
        "[DREAM]\nFirst day: recorded her job and the migration.\n",
        "Which orchestrator is the ETL moving to?", "Airflow to Dagster",
        ["Works at Northwind as a data engineer"]),
    Day("tuesday", "tue-daughter",
        [("user", "Quick personal note: my daughter Lena starts school in September."),
         ("assistant", "Exciting times for Lena!"),
         ("user", "Also, I prefer answers as bullet points."),
         ("assistant", "ok"),
         ("user", LONG_CODE),
         ("assistant", "ok")],
        extraction(("Daughter Lena starts school in September", "context", 0.9),
                   ("Prefers answers as bullet points", "preference", 0.85)),
        "[MEMORY]\n## Work\n- Ines works at Northwind as a data engineer.\n"
        "- Her team is migrating the ETL pipelines from Airflow to Dagster.\n\n"
        "## Personal\n- Her daughter Lena starts school in September.\n\n"
        "[DREAM]\nAdded Lena's school start.\n",
        "When does Lena start school?", "Lena starts school in September",
        ["Daughter Lena starts school in September", "Prefers answers as bullet points"]),
    Day("wednesday", "wed-metadata",
        [("user", "We picked Postgres 16 for the Dagster metadata database."),
         ("assistant", "Postgres 16 is a solid choice for the metadata store."),
         ("user", "My API key is sk-live-abcdefghijklmnopqrstuvwx1234, keep it safe."),
         ("assistant", "Please never paste keys here; I will not store it.")],
        extraction(("Chose Postgres 16 for the Dagster metadata database", "knowledge", 0.9)),
        "[MEMORY]\n## Work\n- Ines works at Northwind as a data engineer.\n"
        "- Her team is migrating the ETL pipelines from Airflow to Dagster.\n"
        "- They picked Postgres 16 for the Dagster metadata database.\n\n"
        "## Personal\n- Her daughter Lena starts school in September.\n- Favourite editor is Helix.\n\n"
        "[DREAM]\nAdded the metadata database; kept the hand-written editor note.\n",
        "Which database holds the Dagster metadata?", "Postgres 16",
        ["Chose Postgres 16 for the Dagster metadata database"]),
    Day("thursday", "thu-prose",
        [("user", "Forget the bullet points thing, plain prose is fine now."),
         ("assistant", "Understood, plain prose from now on."),
         ("user", "The first two pipelines run on Dagster in staging since this morning."),
         ("assistant", "Great milestone!")],
        # the model proposes the forgotten preference again: the tombstone keeps it out (R27)
        extraction(("Prefers answers as bullet points", "preference", 0.9),
                   ("First two pipelines run on Dagster in staging", "context", 0.85)),
        "[MEMORY]\n## Work\n- Ines works at Northwind as a data engineer.\n"
        "- Her team is migrating the ETL pipelines from Airflow to Dagster.\n"
        "- They picked Postgres 16 for the Dagster metadata database.\n"
        "- The first two pipelines run on Dagster in staging.\n\n"
        "## Personal\n- Her daughter Lena starts school in September.\n- Favourite editor is Helix.\n\n"
        "[DREAM]\nAdded the staging milestone.\n",
        "Which pipelines run in staging?", "first two pipelines run on Dagster in staging",
        ["First two pipelines run on Dagster in staging"]),
    Day("friday", "fri-retro",
        [("user", "Retro today: the migration is two weeks ahead of schedule."),
         ("assistant", "Well done to the whole team!")],
        extraction(("Migration is two weeks ahead of schedule", "context", 0.9)),
        "",  # no dream on Friday: the store is exported instead
        "How is the migration going against the schedule?", "two weeks ahead of schedule",
        ["Migration is two weeks ahead of schedule"]),
]


class WeekModel:
    """A chat model for the week: each request is routed by its system prompt to its own
    scripted model (extraction, Deep Dream), so background session summaries may interleave in
    any order. Session summaries get a fixed line."""

    def __init__(self) -> None:
        self.extract = ScriptedChatModel([])
        self.dream = ScriptedChatModel([])
        self.summaries: list[str] = []
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        system = str(messages[0].get("content", "")) if messages else ""
        if "long-term memory of an AI assistant about one user" in system and "consolidate" not in system:
            return self.extract.complete(messages, json_schema=json_schema)
        if "consolidate" in system:
            return self.dream.complete(messages, json_schema=json_schema)
        with self._lock:
            self.summaries.append(system)
        return "- The session covered the ETL migration and personal notes."


def open_memory(root: Path, model: WeekModel, clock: FakeClock, database_url: str | None = None) -> Memory:
    return Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", database_url=database_url)


@contextmanager
def another_store() -> Iterator[str | None]:
    """The database URL of a second, empty store: None on SQLite (a new root is a new store), a
    fresh schema on PostgreSQL (a new root alone would share the test's database)."""
    if "TIERMEM_DATABASE_URL" not in os.environ:
        yield None
        return
    from pg_helpers import fresh_schema

    with fresh_schema() as url:
        yield url


def run_session(mem: Memory, day: Day, clock: FakeClock) -> None:
    """The agent's loop: every message to the live session; the thread so far to the queue."""
    session = mem.session(day.thread)
    history: list[dict[str, str]] = []
    for role, text in day.messages:
        clock.advance(60)
        session.add(role, text)
        history.append({"role": role, "content": text})
        if role == "assistant":
            mem.queue.add(day.thread, history)
    session.end()
    mem.queue.flush(timeout=30)
    assert mem.wait_idle(30)


def journal_records(mem: Memory, day: datetime) -> list[str]:
    return [r.text for r in parse_records(mem.daily.read(day))]


def assert_journaled_once_and_whole(mem: Memory, day: Day, moment: datetime) -> None:
    records = journal_records(mem, moment)
    for position, (role, text) in enumerate(day.messages):
        expected = f"{role}: {mem_redacted(text)}"
        same_position = [m for m in day.messages if m == (role, text)]
        assert records.count(expected) == len(same_position), (position, expected[:60], records)


def mem_redacted(text: str) -> str:
    from tiermem.redact import redact

    return redact(text)


def assert_search_answers(mem: Memory, day: Day) -> None:
    hits = mem.search(day.key_query, k=3)
    assert any(day.key_answer.lower() in hit.text.lower() for hit in hits), (day.key_query, hits)
    floor = mem.search_floor()
    assert all(0.0 <= hit.score <= 1.0 and hit.score >= floor for hit in hits)
    assert mem.search(OFF_TOPIC, k=5) == []


def play_week(root: Path, model: WeekModel, clock: FakeClock) -> dict[str, Any]:
    """Runs Monday to Friday; returns what the checks need at the end."""
    seen: dict[str, Any] = {"contexts": []}
    for index, day in enumerate(WEEK):
        morning = MONDAY + timedelta(days=index)
        clock.set(morning)  # the morning of the day
        model.extract.replies.append(day.extraction)
        if day.dream:
            model.dream.replies.append(day.dream)
        with open_memory(root, model, clock) as mem:
            context = mem.system_context().text
            seen["contexts"].append(context)
            check_morning(mem, index, context)
            if day.name == "monday":
                mem.plans.start("Dagster migration", ["port the ingest DAG", "port the billing DAG"])
            if day.name == "wednesday":  # a person edits MEMORY.md by hand
                text = mem.core.path.read_text(encoding="utf-8")
                mem.core.path.write_text(text.rstrip("\n") + "\n- Favourite editor is Helix.\n", encoding="utf-8")
                assert "Favourite editor is Helix." in mem.system_context().text
            if day.name == "thursday":  # the user asks to forget a preference
                (fact,) = [f for f in mem.facts.list() if f.content == "Prefers answers as bullet points"]
                mem.facts.delete(fact.id)
            run_session(mem, day, clock)
            assert_journaled_once_and_whole(mem, day, clock.now())
            assert_search_answers(mem, day)
            contents = [f.content for f in mem.facts.list()]
            for expected in day.facts_after:
                assert expected in contents
            assert "Prefers answers as bullet points" not in contents or day.name in ("tuesday", "wednesday")
            if day.dream:
                clock.set(morning.replace(hour=23))  # the nightly dream
                result = mem.deep_dream(lookback_days=1)
                assert result.status == "written", result.reason
                assert result.dropped == [] or not result.dropped
                sent = model.dream.requests[-1].text
                assert day.messages[0][1][:40] in sent  # the day's journal reached the dream
    return seen


def check_morning(mem: Memory, index: int, context: str) -> None:
    """What the next session's system prompt holds after ``index`` days."""
    if index == 0:
        assert "Core Memory:" not in context
        return
    assert "Core Memory:" in context and "Facts:" in context
    assert "- Ines works at Northwind as a data engineer." in context  # Core bullet from Monday's dream
    assert "[knowledge | 0.95] Works at Northwind as a data engineer" in context
    assert "Dagster migration" in context  # the active plan with its continuation
    assert "port the ingest DAG" in context
    previous = WEEK[index - 1]
    assert previous.messages[0][1][:30] in context  # yesterday's notes
    if index >= 2:
        assert "Her daughter Lena starts school in September." in context
    if index >= 3:
        assert "Favourite editor is Helix." in context  # the hand edit survived Wednesday's dream
    if index >= 4:
        assert "Prefers answers as bullet points" not in context  # forgotten on Thursday


def test_an_agent_week_is_remembered_across_sessions(tmp_path: Path) -> None:
    root, model, clock = tmp_path / "store", WeekModel(), FakeClock(MONDAY)
    play_week(root, model, clock)
    assert model.extract.remaining == [] and model.dream.remaining == []
    assert len(model.extract.requests) == len(WEEK)  # one extraction per session
    # the extraction saw each day's messages, once each (nothing sent twice)
    for day, request in zip(WEEK, model.extract.requests, strict=True):
        assert day.messages[0][1][:40] in request.text
    # the secret never reached the journal, the model or the facts
    for path in (root / "memory").glob("*.md"):
        assert "sk-live-abcdefghijklmnopqrstuvwx1234" not in path.read_text(encoding="utf-8")
    assert all("sk-live-abcdefghijklmnopqrstuvwx1234" not in r.text for r in model.extract.requests)

    # Friday evening: export everything, import into a fresh root, and compare the answers
    friday = MONDAY + timedelta(days=4, hours=18)
    clock.set(friday)
    with open_memory(root, model, clock) as mem:
        data = mem.export()
        original = answers(mem)
    copy_root = tmp_path / "copy"
    with another_store() as other:
        with open_memory(copy_root, model, clock, other) as mem:
            mem.import_(json.loads(json.dumps(data)))
        with open_memory(copy_root, model, clock, other) as mem:
            assert answers(mem) == original


def answers(mem: Memory) -> dict[str, Any]:
    """What a user sees: the journal, search hits, the injection text, the system context."""
    days = [MONDAY + timedelta(days=i) for i in range(5)]
    return {
        "daily": [mem.daily.read(d) for d in days],
        "core": mem.core.items(),
        "facts": sorted((f.content, f.category, f.confidence) for f in mem.facts.list()),
        # hits of equal score in ref order: every item holding all of a query's terms scores 1.0,
        # and such ties rank by storage id (older first), which an import assigns afresh
        "search": {d.key_query: sorted(((h.ref, h.text, round(h.score, 6)) for h in mem.search(d.key_query, k=5)),
                                       key=lambda hit: (-hit[2], hit[0], hit[1]))
                   for d in WEEK},
        "inject": mem.format_for_injection(query=WEEK[0].key_query),
        "context": mem.system_context().text,
        "plan": mem.plans.active().title if mem.plans.active() else None,
    }


# --- the same week through the MCP server and the CLI, with the verbs they have ---------------


def _facts_of(day: Day) -> list[dict[str, Any]]:
    return list(json.loads(day.extraction)["newFacts"])


def test_the_week_through_mcp(tmp_path: Path) -> None:
    """Notes, remember, recall (with its floor message), forget, dream and the injection resource."""
    import anyio
    from mcp import Client

    from tiermem.mcp.server import build_server

    root, model, clock = tmp_path / "store", WeekModel(), FakeClock(MONDAY)

    async def day_of(client: Client, day: Day, index: int) -> None:
        if index > 0:
            injection = (await client.read_resource("memory://injection")).contents[0].text  # type: ignore[union-attr]
            assert "Core Memory:" in injection and "Ines works at Northwind as a data engineer." in injection
        if day.name == "wednesday":
            mem_core = root / "MEMORY.md"
            mem_core.write_text(mem_core.read_text(encoding="utf-8") + "- Favourite editor is Helix.\n",
                                encoding="utf-8")
        if day.name == "thursday":
            listed = (await client.call_tool("list_facts", {})).structured_content
            assert listed is not None
            (fact,) = [f for f in listed["facts"] if f["content"] == "Prefers answers as bullet points"]
            assert not (await client.call_tool("forget", {"id": fact["id"]})).is_error
        lines = [f"{role}: {text}" for role, text in day.messages]
        assert not (await client.call_tool("daily_note", {"lines": lines, "kind": "Conversation"})).is_error
        for fact in _facts_of(day):
            if fact["content"] == "Prefers answers as bullet points" and index >= 3:
                continue  # the user asked to forget it; an agent would not remember it again
            await client.call_tool("remember", {"content": fact["content"], "category": fact["category"],
                                                "confidence": fact["confidence"]})
        found = (await client.call_tool("recall", {"query": day.key_query, "k": 3})).structured_content
        assert found is not None and any(day.key_answer.lower() in h["text"].lower() for h in found["hits"])
        nothing = (await client.call_tool("recall", {"query": OFF_TOPIC})).structured_content
        assert nothing is not None and nothing["hits"] == [] and "No memories scored above" in nothing["message"]
        if day.dream:
            clock.set(clock.now().replace(hour=23))
            dreamed = (await client.call_tool("dream", {"days": 1})).structured_content
            assert dreamed is not None and dreamed["status"] == "written", dreamed

    for index, day in enumerate(WEEK):
        clock.set(MONDAY + timedelta(days=index))
        if day.dream:
            model.dream.replies.append(day.dream)
        with open_memory(root, model, clock) as mem:
            async def main(mem: Memory = mem, day: Day = day, index: int = index) -> None:
                with anyio.fail_after(60):
                    async with Client(build_server(mem)) as client:
                        await day_of(client, day, index)

            anyio.run(main)
    assert model.dream.remaining == [] and len(model.dream.requests) == 4
    with open_memory(root, model, clock) as mem:
        context = mem.system_context().text
        assert "Favourite editor is Helix." in context and "Prefers answers as bullet points" not in context
        assert_journaled_once_and_whole(mem, WEEK[1], MONDAY + timedelta(days=1))


def test_the_week_through_the_cli(tmp_path: Path) -> None:
    """note, remember, search (floor), inject, facts delete, daily, export and import."""
    from click.testing import CliRunner

    from tiermem.cli.main import cli

    runner = CliRunner(env={"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none", "TIERMEM_USER": None,
                            "TIERMEM_AGENT": None, "TIERMEM_HOME": None})
    root = tmp_path / "store"

    def run(*args: str, at: Path = root, url: str | None = None) -> str:
        env = {"TIERMEM_DATABASE_URL": url} if url else None
        result = runner.invoke(cli, ["--root", str(at), *args], catch_exceptions=False, env=env)
        assert result.exit_code == 0, result.output
        return result.stdout

    for index, day in enumerate(WEEK):
        if day.name == "wednesday":
            core = root / "MEMORY.md"
            core.write_text("## Work\n- Ines works at Northwind as a data engineer.\n- Favourite editor is Helix.\n",
                            encoding="utf-8")
        if day.name == "thursday":
            facts = json.loads(run("facts", "list", "--json"))
            facts = facts["facts"] if isinstance(facts, dict) else facts
            (fact,) = [f for f in facts if f["content"] == "Prefers answers as bullet points"]
            run("facts", "delete", fact["id"])
        for role, text in day.messages:
            run("note", "--kind", "Conversation", f"{role}: {text}")
        for fact in _facts_of(day):
            if fact["content"] == "Prefers answers as bullet points" and index >= 3:
                continue
            run("remember", fact["content"], "-c", fact["category"], "--confidence", str(fact["confidence"]))
        hits = json.loads(run("search", day.key_query, "-k", "3", "--json"))
        hits = hits["hits"] if isinstance(hits, dict) else hits
        assert any(day.key_answer.lower() in h["text"].lower() for h in hits), (day.key_query, hits)
        off = json.loads(run("search", OFF_TOPIC, "--json"))
        assert (off["hits"] if isinstance(off, dict) else off) == []
        if index >= 2:
            injected = run("inject", "--query", day.key_query)
            assert "Core Memory:" in injected and "Favourite editor is Helix." in injected
            assert "Relevant notes:" in injected
    backup = tmp_path / "backup.json"
    run("export", str(backup))
    copy = tmp_path / "copy"
    with another_store() as other:
        run("import", str(backup), at=copy, url=other)
        for args in (("daily", "--json"), ("search", WEEK[2].key_query, "--json"), ("inject", "--query", "Lena"),
                     ("facts", "list", "--json")):
            assert run(*args, at=copy, url=other).replace(str(copy), "ROOT") == run(*args).replace(str(root), "ROOT")
