"""The update queue (R28-R35): debounce on an injected clock, durability, retries, read-your-writes."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from queue_helpers import extraction as reply
from queue_helpers import rows

from tiermem import Memory, ProviderError
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")


def turn(text: str, answer: str = "Noted.") -> list[dict[str, str]]:
    return [{"role": "user", "content": text}, {"role": "assistant", "content": answer}]


class TimedModel(ScriptedChatModel):
    """A scripted model that also notes the (fake) time of each call."""

    def __init__(self, replies: list[Any], clock: FakeClock) -> None:
        super().__init__(replies)
        self.clock = clock
        self.times: list[datetime] = []

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.times.append(self.clock.now())
        return super().complete(messages, json_schema=json_schema)


@pytest.fixture
def model(clock: FakeClock) -> TimedModel:
    return TimedModel([], clock)


@pytest.fixture
def qmem(root: Path, clock: FakeClock, model: TimedModel) -> Iterator[Memory]:
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC",
                shutdown_flush_seconds=0, extract_min_turns=1) as memory:
        yield memory


def settle(mem: Memory) -> None:
    mem.queue.wake()
    assert mem.queue.wait_idle(timeout=20)


def outbox_rows(root: Path) -> list[tuple[str, str, str]]:
    return [(r["thread_id"], r["status"], r["messages"])
            for r in rows(root, "SELECT thread_id, status, messages FROM outbox ORDER BY id")]


def test_add_is_committed_before_it_returns(qmem: Memory, root: Path) -> None:
    qmem.queue.add("t1", turn("I live in Lisbon"))
    rows = outbox_rows(root)  # another connection sees it
    assert [(r[0], r[1]) for r in rows] == [("t1", "pending")]
    assert json.loads(rows[0][2])[0]["content"] == "I live in Lisbon"


def test_newer_item_replaces_pending_one_without_losing_turns(qmem: Memory, model: TimedModel,
                                                              clock: FakeClock, root: Path) -> None:
    first = turn("I live in Lisbon")
    qmem.queue.add("t1", first)
    qmem.queue.add("t1", first + turn("I work at Acme"))
    assert len(outbox_rows(root)) == 1
    model.replies.append(reply("Lives in Lisbon", "Works at Acme"))
    clock.advance(31)
    settle(qmem)
    assert len(model.requests) == 1
    sent = model.requests[0].text
    assert "I live in Lisbon" in sent and "I work at Acme" in sent
    assert {f.content for f in qmem.facts.list()} == {"Lives in Lisbon", "Works at Acme"}
    assert outbox_rows(root) == []


def test_each_enqueue_resets_the_one_debounce_timer(qmem: Memory, model: TimedModel, clock: FakeClock) -> None:
    qmem.queue.add("t1", turn("first thread"))
    clock.advance(20)
    qmem.queue.add("t2", turn("second thread"))
    clock.advance(20)  # 40 s after the first add, 20 s after the last: not due
    settle(qmem)
    assert model.requests == []
    model.replies += [reply("one"), reply("two")]
    clock.advance(11)
    settle(qmem)
    assert len(model.requests) == 2 and model.remaining == []


def test_small_batches_wait_for_more_turns_or_quiet(root: Path, clock: FakeClock) -> None:
    model = TimedModel([reply("Lives in Lisbon")], clock)
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC", shutdown_flush_seconds=0,
                extract_min_turns=3, extract_idle_seconds=300) as mem:
        thread = turn("I live in Lisbon")
        mem.queue.add("t1", thread)
        clock.advance(31)
        settle(mem)
        assert model.requests == [] and "I live in Lisbon" in mem.daily.read("2026-03-14")
        thread += turn("The weather is great")
        mem.queue.add("t1", thread)
        clock.advance(31)
        settle(mem)
        assert model.requests == []
        clock.advance(300)  # the thread went quiet: extract what accumulated, in one call
        settle(mem)
        assert len(model.requests) == 1
        assert "I live in Lisbon" in model.requests[0].text and "weather is great" in model.requests[0].text
        assert mem.daily.read("2026-03-14").count("I live in Lisbon") == 1


def test_enough_new_turns_extract_at_the_debounce(root: Path, clock: FakeClock) -> None:
    model = TimedModel([reply("x")], clock)
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, shutdown_flush_seconds=0,
                extract_min_turns=3) as mem:
        mem.queue.add("t1", turn("one") + turn("two") + turn("three"))
        clock.advance(31)
        settle(mem)
        assert len(model.requests) == 1


def test_pause_between_consecutive_updates(qmem: Memory, model: TimedModel, clock: FakeClock) -> None:
    for i in range(3):
        qmem.queue.add(f"t{i}", turn(f"message {i}"))
    model.replies += [reply("a"), reply("b"), reply("c")]
    clock.advance(30)
    settle(qmem)
    gaps = [(b - a).total_seconds() for a, b in zip(model.times, model.times[1:], strict=False)]
    assert gaps == [0.5, 0.5]


def test_add_nowait_processes_at_once(qmem: Memory, model: TimedModel) -> None:
    model.replies.append(reply("Has a cat named Miso"))
    qmem.queue.add_nowait("t1", turn("My cat Miso"))
    assert qmem.queue.wait_idle(timeout=20)
    assert [f.content for f in qmem.facts.list()] == ["Has a cat named Miso"]


def test_disabled_queue_is_a_no_op(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([])
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, enabled=False) as mem:
        mem.queue.add("t1", turn("hello"))
        mem.queue.add_nowait("t1", turn("hello"))
        assert mem.queue.flush(timeout=5)
    assert outbox_rows(root) == [] and model.requests == []


def test_failure_keeps_the_item_and_it_is_retried(qmem: Memory, model: TimedModel, clock: FakeClock,
                                                  root: Path) -> None:
    model.replies += [ProviderError("HTTP 503"), reply("Lives in Lisbon")]
    qmem.queue.add("t1", turn("I live in Lisbon"))
    clock.advance(31)
    settle(qmem)
    assert qmem.facts.list() == []
    (item,) = qmem.queue.pending()
    assert item.attempts == 1 and "503" in (item.last_error or "")
    clock.advance(5)  # still backing off
    settle(qmem)
    assert len(model.requests) == 1
    clock.advance(10)
    settle(qmem)
    assert [f.content for f in qmem.facts.list()] == ["Lives in Lisbon"]
    assert outbox_rows(root) == []


def test_dead_letter_after_max_attempts_and_retry(root: Path, clock: FakeClock) -> None:
    model = TimedModel([ProviderError("down"), ProviderError("down"), reply("Back")], clock)
    with Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, queue_max_attempts=2,
                shutdown_flush_seconds=0) as mem:
        mem.queue.add("t1", turn("hello there"))
        assert mem.queue.flush(timeout=10) is False
        clock.advance(3600)
        assert mem.queue.flush(timeout=10) is False
        assert [i.status for i in mem.queue.pending()] == ["dead"]
        assert mem.stats()["queue_dead"] == 1
        assert mem.queue.retry_dead() == 1
        assert mem.queue.flush(timeout=10) is True
        assert [f.content for f in mem.facts.list()] == ["Back"]


def test_extracted_messages_are_not_sent_again(qmem: Memory, model: TimedModel, clock: FakeClock) -> None:
    model.replies += [reply("Lives in Lisbon"), reply("Works at Acme")]
    thread = turn("I live in Lisbon")
    qmem.queue.add("t1", thread)
    qmem.queue.flush()
    qmem.queue.add("t1", thread + turn("I work at Acme"))
    qmem.queue.flush()
    second = model.requests[1].text
    assert "I work at Acme" in second and "I live in Lisbon" not in second


def test_without_llm_processing_writes_the_daily_record_only(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.queue.add("t1", turn("Booked flights to Tokyo for May", "Great, enjoy the trip!"))
        assert mem.queue.flush(timeout=10)
        text = mem.daily.read("2026-03-14")
        assert "## Conversation (09:30)" in text and "Booked flights to Tokyo for May" in text
        assert mem.facts.list() == []
        mem.queue.add("t1", turn("Booked flights to Tokyo for May", "Great, enjoy the trip!"))
        mem.queue.flush(timeout=10)
        assert mem.daily.read("2026-03-14").count("Booked flights") == 1


def test_scheduled_pairs_and_secrets_never_reach_the_model_or_disk(qmem: Memory, model: TimedModel,
                                                                   root: Path) -> None:
    key = "sk-proj-" + "Z9y8X7w6V5u4T3s2R1q0P9o8N7m6L5k4"
    model.replies.append(reply())
    qmem.queue.add("t1", [
        {"role": "user", "content": "[SCHEDULED] daily stand-up reminder"},
        {"role": "assistant", "content": "Reminder sent."},
        {"role": "user", "content": f"Use the key {key} for staging"},
    ])
    assert key not in json.dumps(outbox_rows(root))
    qmem.queue.flush()
    assert "SCHEDULED" not in model.requests[0].text and "stand-up" not in model.requests[0].text
    assert key not in model.requests[0].text and key not in qmem.daily.read("2026-03-14")


def test_pending_items_are_searchable_as_provisional(qmem: Memory, model: TimedModel) -> None:
    qmem.queue.add("t1", turn("My sister Ana is visiting from Porto next week"))
    hits = qmem.search("sister visiting from Porto", include_pending=True)
    assert hits and hits[0].provisional and "Ana" in hits[0].text
    assert all(not h.provisional for h in qmem.search("sister visiting from Porto"))
    model.replies.append(reply("Sister Ana visits from Porto next week"))
    qmem.queue.flush()
    hits = qmem.search("sister visiting from Porto", include_pending=True)
    assert not any(h.provisional for h in hits)
    assert any(h.tier == "fact" and "Ana" in h.text for h in hits)


@pytest.mark.parametrize("bad", [None, "text", [{"content": "no role"}], [{"role": "user", "content": "\x00bin"}],
                                 [{"role": "user", "content": "x" * 300_000}], [{"role": "user", "content": 5}]])
def test_bad_messages_are_rejected_and_nothing_is_queued(qmem: Memory, root: Path, bad: Any) -> None:
    from tiermem import InvalidInput

    with pytest.raises(InvalidInput):
        qmem.queue.add("t1", bad)
    with pytest.raises(InvalidInput):
        qmem.queue.add("", turn("ok"))
    assert outbox_rows(root) == []


_KILLED = """
import os, sys, time
from tiermem import Memory
from tiermem.testing import HashEmbedder
mem = Memory(sys.argv[1], embedder=HashEmbedder(), debounce_seconds=3600)
mem.queue.add("t1", [{"role": "user", "content": "I adopted a dog named Pixel"}])
print("added", flush=True)
time.sleep(60)
"""


def test_item_survives_sigkill_and_next_process_handles_it(root: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", _KILLED, str(root)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "added"
    proc.kill()
    proc.wait(timeout=10)
    model = ScriptedChatModel([reply("Has a dog named Pixel")])
    with Memory(root, llm=model, embedder=HashEmbedder(), extract_min_turns=1) as mem:  # the real clock
        assert mem.queue.wait_idle(timeout=20)  # replayed on open, due at once
        assert [f.content for f in mem.facts.list()] == ["Has a dog named Pixel"]
        assert "adopted a dog named Pixel" in model.requests[0].text


@pytest.mark.parametrize("bad", ["10", float("nan"), -1, True])
def test_flush_rejects_a_bad_timeout_and_keeps_the_item(root: Path, clock: FakeClock, bad: Any) -> None:
    from tiermem import InvalidInput

    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.queue.add("t1", turn("Booked flights to Tokyo for May"))
        with pytest.raises(InvalidInput, match="timeout"):
            mem.queue.flush(timeout=bad)
        assert [row[0] for row in outbox_rows(root)] != []  # still queued, not silently "done"
        assert mem.queue.flush(timeout=10) is True
