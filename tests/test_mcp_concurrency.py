"""Many MCP clients on one ``Memory`` at once (issue 14 item 15): no global lock, no errors, no
lost write; a read never waits for a write; writes take turns in arrival order.

Clients talk to the server in process (``Client(server)``): the SDK runs each tool call on a
worker thread, as it does over HTTP, so the calls of different clients really overlap.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import numpy.typing as npt
import pytest
from mcp import Client

from tiermem import Memory
from tiermem.concurrency import FairLock, ReadWriteLock, lazy_property
from tiermem.mcp.server import build_server
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

DEADLINE = 60.0
WAIT = 10.0  # how long a read may take while a write is stuck (it should take milliseconds)


async def call(client: Client, name: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def eventually(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` (a thread reaching a known state) for up to :data:`DEADLINE` seconds."""
    deadline = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


# --- the MCP server --------------------------------------------------------------------------
def test_eight_clients_mixing_recall_and_remember(mem: Memory) -> None:
    server = build_server(mem)
    clients, rounds = 8, 5
    errors: list[str] = []

    async def client_session(number: int) -> None:
        async with Client(server) as client:
            for step in range(rounds):
                word = f"zq{number}x{step}"  # a word only this fact has
                content = f"Client {number} keeps its notes under {word} in step {step}"
                result = await client.call_tool("remember", {"content": content, "category": "context"})
                if result.is_error or (result.structured_content or {}).get("status") != "remembered":
                    errors.append(f"remember {number}/{step}: {result.content}")
                    continue
                found = await call(client, "recall", query=f"notes under {word}", k=5, min_score=0)
                if content not in [hit["text"] for hit in found["hits"]]:  # its own write, at once
                    errors.append(f"client {number} did not find step {step}: {found['hits']}")
                await call(client, "recall", query=f"what does client {(number + 1) % clients} keep", min_score=0)

    async def main() -> None:
        with anyio.fail_after(DEADLINE):
            async with anyio.create_task_group() as group:
                for number in range(clients):
                    group.start_soon(client_session, number)

    anyio.run(main)
    assert errors == []
    stored = {fact.content for fact in mem.facts.list()}
    assert len(stored) == clients * rounds
    assert all(f"Client {n} keeps its notes under zq{n}x{s} in step {s}" in stored
               for n in range(clients) for s in range(rounds))
    assert len({hit.ref for hit in mem.search("keeps its notes", k=100, min_score=0)}) == clients * rounds


class GateEmbedder(HashEmbedder):
    """A hash embedder that stops on a text containing ``SLOW`` until :attr:`release` is set:
    a remember whose embedding takes as long as the test wants."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if any("SLOW" in text for text in texts):
            self.entered.set()
            assert self.release.wait(2 * WAIT), "the test never released the embedder"
        return super().embed(texts)


def test_a_recall_does_not_wait_for_a_stuck_remember(root: Path, clock: FakeClock) -> None:
    """Before: one lock around every tool call (and the vector index's lock held while embedding)
    made every reader wait for the slowest writer."""
    embedder = GateEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem:
        mem.facts.add("The harbour tides peak at noon")
        mem.search("warm up")  # the scope's vector index is loaded before the writer gets stuck
        server = build_server(mem)
        timings: dict[str, float] = {}

        async def writer() -> None:
            async with Client(server) as client:
                await call(client, "remember", content="SLOW fact: the tides turned early today")

        async def reader() -> None:
            async with Client(server) as client:
                await anyio.to_thread.run_sync(embedder.entered.wait, DEADLINE)  # the writer is stuck now
                started = time.monotonic()
                with anyio.fail_after(WAIT):
                    hits = (await call(client, "recall", query="tides", min_score=0))["hits"]
                    listed = await call(client, "list_facts")
                timings["read"] = time.monotonic() - started
                texts = [hit["text"] for hit in hits]
                assert "The harbour tides peak at noon" in texts
                assert "SLOW fact: the tides turned early today" in texts  # committed: keyword search has it
                assert listed["count"] == 2
                embedder.release.set()

        async def main() -> None:
            with anyio.fail_after(DEADLINE):
                async with anyio.create_task_group() as group:
                    group.start_soon(writer)
                    group.start_soon(reader)

        try:
            anyio.run(main)
        finally:
            embedder.release.set()
        assert timings["read"] < WAIT
        vector_hits = mem.search("the tides turned early", min_score=0)
        assert vector_hits[0].text == "SLOW fact: the tides turned early today"


# --- the primitives --------------------------------------------------------------------------
def test_fair_lock_hands_over_in_arrival_order() -> None:
    lock = FairLock()
    order: list[int] = []
    lock.acquire()
    threads = []
    for number in range(6):
        def take(n: int = number) -> None:
            with lock:
                order.append(n)

        thread = threading.Thread(target=take)
        thread.start()
        threads.append(thread)
        eventually(lambda n=number: len(lock._waiters) == n + 1, f"thread {number} to queue")
    lock.release()
    for thread in threads:
        thread.join(DEADLINE)
    assert order == list(range(6))
    assert not lock.locked()


def test_fair_lock_timeout_and_non_blocking() -> None:
    lock = FairLock()
    assert lock.acquire()
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(timeout=0.01) is False
    assert not lock._waiters  # a waiter that gave up left the queue
    lock.release()
    assert lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(RuntimeError):
        lock.release()


def test_read_write_lock_shares_reads_and_lets_a_waiting_writer_go_first() -> None:
    lock = ReadWriteLock()
    both_in = threading.Barrier(2, timeout=DEADLINE)
    log: list[str] = []

    def reader(name: str, barrier: threading.Barrier | None) -> None:
        with lock.reading():
            log.append(f"{name} in")
            if barrier is not None:
                barrier.wait()  # two readers inside at once, or this times out

    readers = [threading.Thread(target=reader, args=(f"r{i}", both_in)) for i in range(2)]
    for thread in readers:
        thread.start()
    for thread in readers:
        thread.join(DEADLINE)
    assert sorted(log) == ["r0 in", "r1 in"]

    log.clear()
    holding = threading.Event()
    done = threading.Event()

    def long_reader() -> None:
        with lock.reading():
            holding.set()
            assert done.wait(DEADLINE)

    def writer() -> None:
        with lock.writing():
            log.append("writer")

    first = threading.Thread(target=long_reader)
    first.start()
    assert holding.wait(DEADLINE)
    write = threading.Thread(target=writer)
    write.start()
    eventually(lambda: lock._writers_waiting == 1, "the writer to wait")
    late = threading.Thread(target=reader, args=("late reader", None))
    late.start()
    assert log == []  # the writer waits for the first reader; the late reader waits for the writer
    done.set()
    for thread in (first, write, late):
        thread.join(DEADLINE)
    assert log == ["writer", "late reader in"]


def test_lazy_property_is_computed_once_under_a_race(mem: Memory) -> None:
    class Holder:
        calls = 0

        @lazy_property
        def value(self) -> object:
            Holder.calls += 1
            time.sleep(0.01)  # widen the window in which other threads arrive
            return object()

    holder = Holder()
    start = threading.Barrier(8, timeout=DEADLINE)
    seen: list[object] = []

    def read() -> None:
        start.wait()
        seen.append(holder.value)

    threads = [threading.Thread(target=read) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert Holder.calls == 1 and len(seen) == 8 and all(v is seen[0] for v in seen)
    assert "value" in holder.__dict__

    engines: list[object] = []
    start = threading.Barrier(8, timeout=DEADLINE)

    def engine() -> None:
        start.wait()
        engines.append(mem._search)

    threads = [threading.Thread(target=engine) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert len(engines) == 8 and all(e is engines[0] for e in engines)


def test_writes_from_many_threads_all_land(mem: Memory) -> None:
    """Eight threads writing at once: every write lands once; none hits SQLite's busy timeout."""
    failures: list[BaseException] = []

    def write(number: int) -> None:
        try:
            for step in range(10):
                mem.facts.add(f"Thread {number} wrote fact number {step}")
                mem.daily.append("Note", f"thread {number} note {step}")
        except BaseException as exc:  # collected: a thread's exception would otherwise vanish
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(DEADLINE)
    assert failures == []
    assert len(mem.facts.list()) == 80
    daily = mem.daily.read()
    assert all(daily.count(f"thread {n} note {s}\n") == 1 for n in range(8) for s in range(10))
