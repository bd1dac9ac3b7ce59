"""Issue 15's "Done when": one memory in PostgreSQL, served by many processes at once.

Two ``tiermem mcp --http`` servers (two ports, two roots) and a ``tiermem worker`` (a third root),
all with ``TIERMEM_DATABASE_URL`` naming one fresh schema, are real subprocesses; the test talks to
both servers at the same time through the official ``mcp`` client SDK, as two agents on two hosts
would. What one server writes (facts, Daily notes, plans), the other reads at once; a conversation
queued by a third process (a web backend, here the test itself) is journaled and extracted by the
worker, with the LLM a local fake OpenAI server, and both servers see the result.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tiermem import Memory
from tiermem.testing import HashEmbedder

pytest.importorskip("psycopg")
START_DEADLINE = 60.0  # three interpreters importing the SDK on a busy machine
DEADLINE = 30.0
LISBON = "I just moved to Lisbon."


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _extraction(request: RecordedRequest) -> str:
    import json

    text = request.messages[-1]["content"]
    facts = [{"content": "Lives in Lisbon", "category": "context", "confidence": 0.9}] if "Lisbon" in text else []
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


class Fleet:
    """The subprocesses of the test, each with its own root and log; stopped with SIGTERM at the end."""

    def __init__(self, tmp_path: Path, env: dict[str, str]) -> None:
        self.tmp_path = tmp_path
        self.env = env
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> None:
        with (self.tmp_path / f"{name}.log").open("wb") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", "tiermem.cli.main", "--root", str(self.root(name)), *args],
                env={**self.env, **(env or {})}, stdout=log, stderr=subprocess.STDOUT)

    def root(self, name: str) -> Path:
        return self.tmp_path / name

    def log(self, name: str) -> str:
        return (self.tmp_path / f"{name}.log").read_text(errors="replace")

    def wait_for_port(self, name: str, port: int) -> None:
        deadline = time.monotonic() + START_DEADLINE
        while True:
            assert self.procs[name].poll() is None, self.log(name)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return
            except OSError:
                assert time.monotonic() < deadline, f"{name} did not start: {self.log(name)}"
                time.sleep(0.05)

    def stop(self) -> dict[str, int]:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        return {name: proc.wait(timeout=DEADLINE) for name, proc in self.procs.items()}


@contextmanager
def fleet(tmp_path: Path, url: str, llm_url: str) -> Iterator[tuple[Fleet, list[str]]]:
    """Servers ``a`` and ``b`` (their MCP URLs) and the ``worker``, all on the database ``url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("TIERMEM_")}
    env.update(TIERMEM_DATABASE_URL=url, TIERMEM_EMBEDDER="hash", TIERMEM_LLM="none", TIERMEM_TIMEZONE="UTC",
               TIERMEM_CACHE_DIR=str(tmp_path / "_cache"))
    procs = Fleet(tmp_path, env)
    ports = {"a": _free_port(), "b": _free_port()}
    try:
        for name, port in ports.items():
            procs.start(name, "mcp", "--http", str(port))
        procs.start("worker", "worker", "--poll", "0.2",
                    env={"TIERMEM_LLM": "openai-compatible:llama3.1", "TIERMEM_LLM_BASE_URL": llm_url,
                         "TIERMEM_EXTRACT_MIN_TURNS": "1"})
        for name, port in ports.items():
            procs.wait_for_port(name, port)
        yield procs, [f"http://127.0.0.1:{port}/mcp" for port in ports.values()]
    finally:
        codes = procs.stop()
    assert codes["worker"] == 0 and "tiermem worker stopping" in procs.log("worker"), procs.log("worker")


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def read(client: Client, uri: str) -> str:
    result = await client.read_resource(uri)
    return str(result.contents[0].text)  # type: ignore[union-attr]


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + DEADLINE
    while not await check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await anyio.sleep(0.1)


async def facts_and_notes(a: Client, b: Client) -> None:
    await call(a, "remember", content="Deploys happen on Fridays", category="context")
    assert [f["content"] for f in (await call(b, "list_facts"))["facts"]] == ["Deploys happen on Fridays"]
    hits = (await call(b, "recall", query="when do deploys happen", min_score=0))["hits"]
    assert hits and hits[0]["text"] == "Deploys happen on Fridays" and hits[0]["tier"] == "fact"
    await call(b, "daily_note", text="Paired with Maya on the billing bug", kind="Decision")
    assert "Paired with Maya on the billing bug" in await read(a, "memory://daily/today")
    hits = (await call(a, "recall", query="billing bug Maya", tier="daily", min_score=0))["hits"]
    assert hits and "billing bug" in hits[0]["text"] and hits[0]["ref"].startswith("memory/")


async def plans(a: Client, b: Client) -> None:
    started = await call(a, "plan_start", title="Ship v2", checklist=["write the docs", "tag the release"])
    seen = (await call(b, "plan_active"))["plan"]
    assert seen["id"] == started["id"] and seen["title"] == "Ship v2"
    await call(b, "plan_check", plan_id=started["id"], index=0)
    [plan] = (await call(a, "plan_list"))["plans"]
    assert [item["done"] for item in plan["items"]] == [True, False]


def test_two_servers_and_a_worker_share_one_postgres_memory(tmp_path: Path) -> None:
    from pg_helpers import fresh_schema

    async def agents(urls: list[str], producer: Memory) -> None:
        async with AsyncExitStack() as stack:
            http = await stack.enter_async_context(httpx2.AsyncClient(timeout=DEADLINE))
            a, b = [await stack.enter_async_context(Client(streamable_http_client(url, http_client=http),
                                                           read_timeout_seconds=DEADLINE)) for url in urls]
            await facts_and_notes(a, b)
            await plans(a, b)
            producer.queue.add("web-1", [{"role": "user", "content": LISBON}])  # the worker takes it

            async def extracted() -> bool:
                return "Lives in Lisbon" in [f["content"] for f in (await call(a, "list_facts"))["facts"]]

            await until(extracted, "the worker's extraction")
            assert "Lives in Lisbon" in [f["content"] for f in (await call(b, "list_facts"))["facts"]]
            assert LISBON in await read(b, "memory://daily/today")  # journaled by the worker

    with fresh_schema() as url, FakeLLMServer(_extraction) as llm, fleet(tmp_path, url, llm.url) as (procs, urls):
        # debounce of an hour: this process only queues; the worker processes
        with Memory(tmp_path / "web", database_url=url, embedder=HashEmbedder(), llm="none", timezone="UTC",
                    debounce_seconds=3600) as producer:
            anyio.run(agents, urls, producer)
            assert producer.queue.pending() == []
        assert llm.call_count == 1 and llm.unexpected == 0
        mirror = procs.root("b") / "memory"
        assert any("Paired with Maya" in p.read_text() for p in mirror.glob("*.md"))  # b's own write, mirrored
