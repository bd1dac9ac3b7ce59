"""``tiermem ingest``: a transcript through the Daily tier and extraction, over the real OpenAI
client against a local fake server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from fake_openai_server import FakeLLMServer, RecordedRequest, Reply

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.testing import HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


def extraction(request: RecordedRequest) -> str:
    """Answers each extraction with one fact naming the city its turns mention."""
    text = request.messages[-1]["content"]
    city = "Kyoto" if "Kyoto" in text else "Lisbon" if "Lisbon" in text else None  # newest first
    facts = [{"content": f"Talked about {city}", "category": "context", "confidence": 0.9}] if city else []
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


def transcript(tmp_path: Path) -> Path:
    rows: list[dict[str, Any]] = [
        {"role": "user", "content": "I just moved to Lisbon.", "thread_id": "a", "timestamp": "2026-03-10T09:00:00Z"},
        {"role": "assistant", "content": "Welcome to Lisbon!", "thread_id": "a", "timestamp": "2026-03-10T09:00:05Z"},
        {"role": "user", "content": "Planning a trip to Kyoto.", "thread_id": "a", "timestamp": "2026-03-11T20:00:00Z"},
        {"role": "assistant", "content": "Kyoto in spring is lovely.", "thread_id": "a",
         "timestamp": "2026-03-11T20:00:09Z"},
        {"role": "user", "content": "Bob here, I like chess.", "thread_id": "b", "user_id": "bob"},
    ]
    path = tmp_path / "chat.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return path


def test_ingest_writes_daily_files_by_date_and_extracts(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with FakeLLMServer(extraction) as server:
        env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "openai-compatible:llama3.1",
               "TIERMEM_LLM_BASE_URL": server.url, "TIERMEM_TIMEZONE": "UTC"}
        runner = CliRunner()
        result = runner.invoke(cli, ["--root", str(root), "ingest", str(transcript(tmp_path)), "--json"], env=env)
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout)  # stderr says the store was created
        assert report["messages"] == 5 and report["threads"] == 2
        assert report["llmCalls"] == 3 == server.call_count  # two days of thread a, one batch of bob
        again = runner.invoke(cli, ["--root", str(root), "ingest", str(transcript(tmp_path)), "--json"], env=env)
        assert json.loads(again.output)["llmCalls"] == 0 and server.call_count == 3
    with Memory(root, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert "I just moved to Lisbon." in mem.daily.read("2026-03-10")
        assert "Kyoto in spring" in mem.daily.read("2026-03-11")
        assert {f.content for f in mem.facts.list()} == {"Talked about Lisbon", "Talked about Kyoto"}
        assert all(f.source == "a" for f in mem.facts.list())
        bob = mem.for_scope("bob")
        assert "Bob here, I like chess." in bob.daily.read(bob.daily.today())


def test_ingest_without_llm_still_writes_the_journal(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    result = CliRunner().invoke(cli, ["--root", str(root), "ingest", str(transcript(tmp_path))],
                                env={"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"})
    assert result.exit_code == 0 and "no LLM configured" in result.output
    with Memory(root, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert "Welcome to Lisbon!" in mem.daily.read("2026-03-10")


def test_bad_transcripts_fail_cleanly(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    for body in ("not json at all", '[{"role": "user"}]', '{"role": "user", "content": "x", "user_id": "../x"}',
                 '{"role": "user", "content": "x", "timestamp": "yesterday"}'):
        path = tmp_path / "bad.jsonl"
        path.write_text(body)
        result = CliRunner().invoke(cli, ["--root", str(root), "ingest", str(path)], env={"TIERMEM_EMBEDDER": "hash"})
        assert result.exit_code == 1, (body, result.output)
        assert "Traceback" not in result.output
    assert not (root / "memory").exists()


def test_search_daily_reindex_and_queue_commands(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_TIMEZONE": "UTC"}
    runner = CliRunner()
    runner.invoke(cli, ["--root", str(root), "ingest", str(transcript(tmp_path))], env=env)
    result = runner.invoke(cli, ["--root", str(root), "search", "moved to Lisbon", "--json"], env=env)
    assert result.exit_code == 0
    hits = json.loads(result.output)
    assert hits[0]["tier"] == "daily" and hits[0]["ref"].startswith("memory/2026-03-10.md#L")
    result = runner.invoke(cli, ["--root", str(root), "daily", "2026-03-11"], env=env)
    assert result.exit_code == 0 and result.output.startswith("# Daily Memory: 2026-03-11")
    assert runner.invoke(cli, ["--root", str(root), "daily", "1999-01-01"], env=env).exit_code == 1
    result = runner.invoke(cli, ["--root", str(root), "reindex", "--json"], env=env)
    assert result.exit_code == 0 and json.loads(result.output)["files"] == 2
    result = runner.invoke(cli, ["--root", str(root), "queue", "status", "--json"], env=env)
    assert result.exit_code == 0 and json.loads(result.output) == []


def unavailable(request: RecordedRequest) -> Reply:
    return Reply(status=503, body={"error": {"message": "the model is down"}})


def test_ingest_queues_what_it_could_not_extract(tmp_path: Path) -> None:
    """R67: the LLM is down: the journal is written, every thread left to extract is in the queue
    (the one that failed counts an attempt, with its error), the report says so, and the queue
    extracts it once the LLM is back; at queue_max_attempts the item is dead until `queue retry`."""
    root = tmp_path / "mem"
    base = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "openai-compatible:llama3.1", "TIERMEM_TIMEZONE": "UTC",
            "TIERMEM_PROVIDER_MAX_RETRIES": "0", "TIERMEM_QUEUE_MAX_ATTEMPTS": "2"}
    runner = CliRunner()
    with FakeLLMServer(unavailable) as down:
        env = {**base, "TIERMEM_LLM_BASE_URL": down.url}
        result = runner.invoke(cli, ["--root", str(root), "ingest", str(transcript(tmp_path))], env=env)
        assert result.exit_code == 1 and "Traceback" not in result.output
        assert down.call_count == 1  # no more calls to a model that is down
        assert "2 threads queued" in result.output and "tiermem queue retry" in result.output
        status = json.loads(runner.invoke(cli, ["--root", str(root), "queue", "status", "--json"], env=env).stdout)
        assert sorted((row["thread"], row["user"], row["status"], row["attempts"]) for row in status) == [
            ("a", "default", "pending", 1), ("b", "bob", "pending", 0)]
        assert "503" in next(row["error"] for row in status if row["thread"] == "a")
        flush = runner.invoke(cli, ["--root", str(root), "queue", "flush"], env=env)  # still down (twice: at close too)
        assert "items left" in flush.output
        status = json.loads(runner.invoke(cli, ["--root", str(root), "queue", "status", "--json"], env=env).stdout)
        assert {(row["thread"], row["status"]) for row in status} == {("a", "dead"), ("b", "dead")}
    with Memory(root, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert "I just moved to Lisbon." in mem.daily.read("2026-03-10")  # journaled on their days
        assert "Kyoto in spring" in mem.daily.read("2026-03-11")
        assert mem.facts.list() == []
    with FakeLLMServer(extraction) as back:
        env = {**base, "TIERMEM_LLM_BASE_URL": back.url}
        retry = runner.invoke(cli, ["--root", str(root), "queue", "retry"], env=env)
        assert retry.exit_code == 0 and "retried 2 items; queue empty" in retry.output, retry.output
        assert back.call_count == 2  # thread a's two days in one extraction, bob's thread
    with Memory(root, embedder=HashEmbedder(), timezone="UTC") as mem:
        assert [(f.content, f.source) for f in mem.facts.list()] == [("Talked about Kyoto", "a")]
        assert mem.daily.read("2026-03-10").count("I just moved to Lisbon.") == 1
        assert mem.daily.read(mem.daily.today()).count("Kyoto") == 0  # the queue journaled nothing again
