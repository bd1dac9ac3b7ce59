"""The MCP server (R62): tools, resources and errors through the official SDK's client.

Most tests talk to the server in process (``Client(server)``: the SDK's dispatcher, argument
validation and result conversion, without a subprocess); one drives ``tiermem mcp`` over stdio
as a client would, one over streamable HTTP. Every scenario runs under a deadline.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

from tiermem import Memory
from tiermem.cli.main import cli
from tiermem.mcp.server import build_server
from tiermem.mcp.tools import TOOL_NAMES
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

HTTP_TOKEN = "token-of-the-round-trip-test"
IN_PROCESS_DEADLINE = 30.0
SUBPROCESS_DEADLINE = 90.0  # two busy cores: interpreter + SDK start-up dominates

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL


def run_with(mem: Memory, scenario: Callable[[Client], Awaitable[None]]) -> None:
    async def main() -> None:
        with anyio.fail_after(IN_PROCESS_DEADLINE):
            async with Client(build_server(mem)) as client:
                await scenario(client)

    anyio.run(main)


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    """A tool call that must succeed; its structured result."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def call_error(client: Client, name: str, **arguments: Any) -> str:
    """A tool call that must fail with an error result; its text."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, result.structured_content
    text = result.content[0].text  # type: ignore[union-attr]
    assert "Traceback" not in text
    return str(text)


async def read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return str(result.contents[0].text)  # type: ignore[union-attr]


# --- in process ----------------------------------------------------------------------------
def test_lists_every_tool_with_described_arguments(mem: Memory) -> None:
    async def scenario(client: Client) -> None:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == set(TOOL_NAMES)
        remember = tools["remember"]
        assert remember.input_schema["required"] == ["content"]
        assert "preference" in remember.input_schema["properties"]["category"]["enum"]
        assert remember.input_schema["properties"]["confidence"]["maximum"] == 1
        assert all(tool.description for tool in tools.values())
        uris = {str(r.uri) for r in (await client.list_resources()).resources}
        assert uris == {"memory://core", "memory://daily/today", "memory://injection"}

    run_with(mem, scenario)


def test_remember_stores_and_reports_skips_with_their_reason(mem: Memory) -> None:
    async def scenario(client: Client) -> None:
        added = await call(client, "remember", content="Prefers dark mode", category="preference",
                           confidence=0.9)
        assert added["status"] == "remembered"
        fact_id = added["fact"]["id"]
        duplicate = await call(client, "remember", content="prefers  DARK mode")
        assert duplicate == {"status": "skipped", "reason": f"duplicate of {fact_id}",
                             "content": "prefers  DARK mode"}
        weak = await call(client, "remember", content="Maybe likes tea", confidence=0.2)
        assert weak["status"] == "skipped" and "below threshold" in weak["reason"]
        listed = await call(client, "list_facts")
        assert [f["id"] for f in listed["facts"]] == [fact_id] and listed["count"] == 1
        assert (await call(client, "list_facts", category="goal"))["facts"] == []

    run_with(mem, scenario)
    assert [(f.content, f.category, f.confidence) for f in mem.facts.list()] == [
        ("Prefers dark mode", "preference", 0.9)]


def test_bad_input_is_an_error_result_and_changes_nothing(mem: Memory) -> None:
    kept = mem.facts.add("Lives in Lyon")
    assert kept is not None

    async def scenario(client: Client) -> None:
        assert "confidence must be within [0, 1]" in await call_error(client, "remember", content="x", confidence=2)
        assert "category 'opinion' is not one of" in await call_error(client, "remember", content="x",
                                                                      category="opinion")
        assert "content must not be empty" in await call_error(client, "remember", content="   ")
        assert "validation error" in await call_error(client, "remember", content="x", confidence="high")
        assert "FactNotFound: no fact 'fact_00000000'" in await call_error(client, "forget", id="fact_00000000")
        assert "FactNotFound" in await call_error(client, "forget", id="../../etc/passwd")
        assert "either text or lines" in await call_error(client, "daily_note")
        assert "either text or lines" in await call_error(client, "daily_note", text="a", lines=["b"])
        assert "k must be an integer in [1, 100]" in await call_error(client, "recall", query="x", k=0)
        assert "NotFound: no plan" in await call_error(client, "plan_check", plan_id="plan_00000000", index=0)
        assert "Unknown tool" in await call_error(client, "drop_database")

    run_with(mem, scenario)
    assert [f.id for f in mem.facts.list()] == [kept.id]
    assert mem.daily.days() == []


def test_forget_removes_the_fact(mem: Memory) -> None:
    fact = mem.facts.add("Uses vim keybindings", "preference")
    assert fact is not None

    async def scenario(client: Client) -> None:
        gone = await call(client, "forget", id=fact.id)
        assert gone["status"] == "forgotten" and gone["fact"]["content"] == "Uses vim keybindings"
        assert (await call(client, "list_facts"))["facts"] == []
        assert "FactNotFound" in await call_error(client, "forget", id=fact.id)

    run_with(mem, scenario)
    assert mem.facts.list() == []


def test_daily_note_and_resources(mem: Memory) -> None:
    mem.core.write("## Work\n- Ships tiermem v1 in March\n")
    mem.facts.add("Prefers dark mode", "preference", 0.95)

    async def scenario(client: Client) -> None:
        assert await read(client, "memory://daily/today") == ""
        note = await call(client, "daily_note", lines=["Chose SQLite for storage", "Dropped Redis"],
                          kind="Decision")
        assert note == {"status": "appended", "path": "memory/2026-03-14.md", "lines": 2}
        await call(client, "daily_note", text="Lunch with Ana")
        today = await read(client, "memory://daily/today")
        assert today.startswith("# Daily Memory: 2026-03-14\n")
        assert "## Decision (09:30)\n- Chose SQLite for storage\n- Dropped Redis\n" in today
        assert "## Note (09:30)\n- Lunch with Ana\n" in today
        assert await read(client, "memory://daily/2026-03-14") == today
        assert "- Ships tiermem v1 in March" in await read(client, "memory://core")
        assert "- [preference | 0.95] Prefers dark mode" in await read(client, "memory://injection")
        with pytest.raises(MCPError, match="not YYYY-MM-DD"):
            await client.read_resource("memory://daily/2026-13-01")

    run_with(mem, scenario)
    assert mem.daily.read().count("- ") == 3


def test_plan_tools_keep_work_across_calls(mem: Memory) -> None:
    async def scenario(client: Client) -> None:
        assert await call(client, "plan_active") == {"plan": None, "prompt": None}
        plan = await call(client, "plan_start", title="Ship v1", checklist=["write tests", "release"])
        assert plan["status"] == "active" and plan["progress"] == {"done": 0, "total": 2}
        checked = await call(client, "plan_check", plan_id=plan["id"], index=0)
        assert checked["progress"] == {"done": 1, "total": 2}
        active = await call(client, "plan_active", session_id="s-2")
        assert active["plan"]["id"] == plan["id"] and "Next: release (item 1)" in active["prompt"]
        assert "item index" in await call_error(client, "plan_check", plan_id=plan["id"], index=-1)
        assert (await call(client, "plan_pause", plan_id=plan["id"]))["status"] == "paused"
        assert (await call(client, "plan_list", status="paused"))["count"] == 1
        assert (await call(client, "plan_resume", plan_id=plan["id"]))["status"] == "active"
        assert (await call(client, "plan_complete", plan_id=plan["id"]))["status"] == "completed"
        assert "cannot check items" in await call_error(client, "plan_check", plan_id=plan["id"], index=1)

    run_with(mem, scenario)
    [stored] = mem.plans.list()
    assert stored.status == "completed" and stored.progress == (1, 2) and stored.session_ids == ("s-2",)


def test_recall_finds_what_was_remembered(mem: Memory) -> None:
    async def scenario(client: Client) -> None:
        added = await call(client, "remember", content="Deploys run on Fridays at noon", category="context")
        await call(client, "remember", content="Likes green tea", category="preference")
        found = await call(client, "recall", query="when do deploys run", k=5)
        top = found["hits"][0]
        assert (top["text"], top["tier"], top["ref"]) == ("Deploys run on Fridays at noon", "fact",
                                                          added["fact"]["id"])
        assert isinstance(top["score"], float)
        await call(client, "daily_note", text="Moved the deploys to Thursday")
        daily = (await call(client, "recall", query="deploys Thursday", tier="daily"))["hits"]
        assert [(h["tier"], h["text"]) for h in daily[:1]] == [("daily", "Moved the deploys to Thursday")]
        assert daily[0]["ref"].startswith("memory/2026-03-14.md#L") and {h["tier"] for h in daily} == {"daily"}

    run_with(mem, scenario)


def test_recall_has_a_relevance_floor_and_says_when_nothing_clears_it(mem: Memory) -> None:
    mem.facts.add("Prefers dark mode in every editor", "preference")
    mem.facts.add("Lives in Lyon with two cats", "context")

    async def scenario(client: Client) -> None:
        schema = {t.name: t for t in (await client.list_tools()).tools}["recall"].input_schema
        assert schema["properties"]["min_score"]["maximum"] == 1 and "min_score" not in schema.get("required", [])
        everything = await call(client, "recall", query="dark mode editor", min_score=0)
        assert everything["min_score"] == 0 and len(everything["hits"]) == 2
        assert everything["message"] == "2 hit(s) scored above the relevance floor (0.00), best first."
        low, high = everything["hits"][-1]["score"], everything["hits"][0]["score"]
        assert 0 <= low < high <= 1
        cut = (low + high) / 2
        kept = await call(client, "recall", query="dark mode editor", min_score=cut)
        assert [h["text"] for h in kept["hits"]] == ["Prefers dark mode in every editor"]
        assert kept["min_score"] == cut and f"({cut:.2f})" in kept["message"]
        nothing = await call(client, "recall", query="quantum chromodynamics", tier="core")
        assert nothing["hits"] == [] and nothing["message"] == (
            f"No memories scored above the relevance floor ({nothing['min_score']:.2f}) for this query.")
        assert "min_score must be within [0, 1]" in await call_error(client, "recall", query="x", min_score=1.5)
        assert "min_score must be within [0, 1]" in await call_error(client, "recall", query="x", min_score=-0.1)

    run_with(mem, scenario)


def test_recall_uses_the_configured_floor(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, search_min_score=0.97) as mem:
        mem.daily.append("Note", "Lunch with Ana")

        async def scenario(client: Client) -> None:
            found = await call(client, "recall", query="what about lunch", tier="fact")
            assert found["hits"] == [] and found["min_score"] == 0.97
            assert found["message"] == "No memories scored above the relevance floor (0.97) for this query."
            assert (await call(client, "recall", query="lunch Ana", min_score=0))["hits"][0]["tier"] == "daily"

        run_with(mem, scenario)


def test_dream_consolidates_daily_notes(root: Path, clock: FakeClock) -> None:
    llm = ScriptedChatModel(["[MEMORY]\n## Work\n- Chose SQLite for storage\n\n[DREAM]\nKept the storage decision."])
    with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Decision", ["Chose SQLite for storage"])

        async def scenario(client: Client) -> None:
            assert "validation error" in await call_error(client, "dream", days="many")
            result = await call(client, "dream", days=1)
            assert result["status"] == "written", result

        run_with(mem, scenario)
        assert llm.remaining == [] and "Chose SQLite for storage" in llm.requests[0].text
        assert mem.core.items() == ["Chose SQLite for storage"]


def test_dream_without_llm_says_why_it_skipped(mem: Memory) -> None:
    mem.daily.append("Note", ["Chose SQLite for storage"])

    async def scenario(client: Client) -> None:
        result = await call(client, "dream")
        assert result["status"] == "skipped" and "LLM" in result["reason"]
        assert "lookback_days must be an integer" in await call_error(client, "dream", days=0)

    run_with(mem, scenario)
    assert not mem.core.path.exists()


def test_mcp_command_usage_and_lazy_sdk(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--root", str(tmp_path), "mcp", "--host", "0.0.0.0"])
    assert result.exit_code == 2 and "only apply with --http PORT" in result.output
    assert "Example:" in CliRunner().invoke(cli, ["mcp", "--help"]).output
    probe = "import sys, tiermem, tiermem.cli.main; print(sorted(m for m in sys.modules if m.split('.')[0] == 'mcp'))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"


# --- over the wire -------------------------------------------------------------------------
def _server_env(**extra: str) -> dict[str, str]:
    env = {"TIERMEM_EMBEDDER": "hash", "TIERMEM_LLM": "none", "TIERMEM_CACHE_DIR": os.environ["TIERMEM_CACHE_DIR"]}
    if "TIERMEM_DATABASE_URL" in os.environ:  # the postgres backend: the server uses the test's schema
        env["TIERMEM_DATABASE_URL"] = os.environ["TIERMEM_DATABASE_URL"]
    env.update(extra)
    return env


def test_stdio_server_end_to_end(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    params = StdioServerParameters(command=sys.executable, args=["-m", "tiermem.cli.main", "--root", str(root), "mcp"],
                                   env=_server_env(TIERMEM_USER="alice"))

    async def main() -> None:
        with anyio.fail_after(SUBPROCESS_DEADLINE), (tmp_path / "server.log").open("w") as errlog:
            async with Client(stdio_client(params, errlog=errlog), read_timeout_seconds=60) as client:
                assert {t.name for t in (await client.list_tools()).tools} == set(TOOL_NAMES)
                added = await call(client, "remember", content="Prefers dark mode", category="preference")
                fact_id = added["fact"]["id"]
                hits = (await call(client, "recall", query="dark mode"))["hits"]
                assert [(h["tier"], h["ref"]) for h in hits[:1]] == [("fact", fact_id)]
                assert "confidence must be within [0, 1]" in await call_error(client, "remember", content="x",
                                                                              confidence=2)
                assert "category 'opinion'" in await call_error(client, "remember", content="x", category="opinion")
                assert "FactNotFound" in await call_error(client, "forget", id="fact_00000000")
                await call(client, "daily_note", text="Talked about themes")
                assert "- Talked about themes" in await read(client, "memory://daily/today")
                assert "Prefers dark mode" in await read(client, "memory://injection")
                assert await read(client, "memory://core") == ""
                await call(client, "forget", id=fact_id)
                assert (await call(client, "list_facts"))["facts"] == []
                again = (await call(client, "recall", query="dark mode"))["hits"]
                assert fact_id not in [h["ref"] for h in again]

    anyio.run(main)
    with Memory(root, user_id="alice", embedder="hash") as alice, Memory(root, embedder="hash") as default:
        assert alice.facts.list() == [] and alice.facts.history()[-1].action == "deleted"
        assert "- Talked about themes" in alice.daily.read()
        assert default.facts.history() == []  # the scope came from TIERMEM_USER


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, **_server_env(TIERMEM_MCP_TOKEN=HTTP_TOKEN)}
    log = (tmp_path / "http.log").open("w")
    proc = subprocess.Popen([sys.executable, "-m", "tiermem.cli.main", "--root", str(tmp_path / "mem"), "mcp",
                             "--http", str(port)], env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + SUBPROCESS_DEADLINE
        while True:
            assert proc.poll() is None, (tmp_path / "http.log").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the HTTP server did not start"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
        log.close()


def test_streamable_http_round_trip(http_server: str, tmp_path: Path) -> None:
    async def main() -> None:
        with anyio.fail_after(SUBPROCESS_DEADLINE):
            http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {HTTP_TOKEN}"}, timeout=60)
            async with http, Client(streamable_http_client(http_server, http_client=http),
                                    read_timeout_seconds=60) as client:
                added = await call(client, "remember", content="Runs Postgres 16", category="context")
                listed = await call(client, "list_facts")
                assert [f["id"] for f in listed["facts"]] == [added["fact"]["id"]]
                assert "Runs Postgres 16" in await read(client, "memory://injection")

    anyio.run(main)
    log = (tmp_path / "http.log").read_text()
    assert f"tiermem MCP server on {http_server}" in log and "bearer token required" in log
