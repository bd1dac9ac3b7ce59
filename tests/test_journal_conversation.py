"""One journal writer (R8, R9): session flush, update queue and ingest journal each message of a
conversation once, whole, whichever sees it first; digests of redacted text and position."""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.storage.chunks import ChunkRepository
from tiermem.storage.journal import FlushHashRepository
from tiermem.testing import FakeClock, ScriptedChatModel
from tiermem.tiers.conversation import NumberedMessage, conversation_digest
from tiermem.tiers.markdown import parse_records
from tiermem.tiers.turns import to_message

pytestmark = pytest.mark.usefixtures("backend")

START = datetime(2026, 3, 14, 9, 30, tzinfo=UTC)
CODE = "```python\n" + "\n".join(f"def step_{n}(x):\n    return x + {n}  # keep\n" for n in range(120)) + "```"
BIG = "Here is my whole script, please keep it:\n\n" + CODE + "\n\n  - and an indented note\n# not a heading"
KEY = "sk-proj-" + "Q1w2E3r4T5y6U7i8O9p0A1s2D3f4G5h6"
THREAD: list[dict[str, Any]] = [
    {"role": "user", "content": "I'm moving to Lisbon in August."},
    {"role": "assistant", "content": "ok"},
    {"role": "user", "content": BIG},
    {"role": "assistant", "content": "ok"},  # the same text at another position: a message of its own
    {"role": "user", "content": f"My key is {KEY}, keep it safe."},
    {"role": "assistant", "content": "Done."},
]


def open_memory(root: Path, clock: FakeClock | None = None, **settings: Any) -> Memory:
    settings.setdefault("llm", "none")
    return Memory(root, embedder="hash", clock=clock or FakeClock(START), timezone="UTC", **settings)


def records(mem: Memory) -> list[str]:
    return [r.text for day in mem.daily.days() for r in parse_records(mem.daily.read(day))]


def expected(thread: list[dict[str, Any]]) -> list[str]:
    return [f"{m['role']}: {m['content']}".replace(KEY, "[REDACTED:openai_key]") for m in thread]


def test_the_big_message_is_long_multiline_code() -> None:
    assert len(BIG) > 5000 and BIG.count("\n") > 100


@pytest.mark.parametrize("first", ["session", "queue"])
def test_session_and_queue_on_one_conversation_journal_each_message_once_and_whole(tmp_path: Path,
                                                                                  first: str) -> None:
    with open_memory(tmp_path) as mem:
        session = mem.session("chat-42")
        for message in THREAD:
            session.add_message(message)
        mem.queue.add("chat-42", session.messages)  # the README quick start
        if first == "session":
            session.end()
            assert mem.queue.flush(timeout=20)
        else:
            assert mem.queue.flush(timeout=20)
            session.end()
        assert records(mem) == expected(THREAD)
        kinds = [line for line in mem.daily.read().splitlines() if line.startswith("## ")]
        assert len(kinds) == 1 and kinds[0].startswith("## Session Notes" if first == "session" else "## Conversation")
        assert KEY not in mem.daily.read()
        indexed = ChunkRepository(mem.db).chunks("default")
        assert sum("Lisbon" in c.text for c in indexed) == 1  # one record, so one search hit


def test_trimmed_turns_and_the_queue_thread_share_positions(tmp_path: Path) -> None:
    with open_memory(tmp_path, session_max_tokens=400) as mem:
        session = mem.session("long")
        for message in THREAD:
            session.add_message(message)
        assert len(session.messages) < len(THREAD)  # trims happened: the session keeps counting
        mem.queue.add("long", THREAD)  # the whole thread so far
        assert mem.queue.flush(timeout=20)
        session.end()
        assert records(mem) == expected(THREAD)


def test_a_restart_does_not_rewrite(tmp_path: Path) -> None:
    clock = FakeClock(START)
    with open_memory(tmp_path, clock) as mem:
        mem.queue.add("t1", THREAD[:4])
        assert mem.queue.flush(timeout=20)
    clock.advance(3600)
    with open_memory(tmp_path, clock) as mem:  # a new process sees the whole thread again, twice
        session = mem.session("t1")
        for message in THREAD:
            session.add_message(message)
        session.end()
        mem.queue.add("t1", THREAD)
        assert mem.queue.flush(timeout=20)
        assert records(mem) == expected(THREAD)
        blocks = [line for line in mem.daily.read().splitlines() if line.startswith("## ")]
        assert [b.split(" (")[0] for b in blocks] == ["## Conversation", "## Session Notes"]


def test_the_digest_is_of_redacted_text_and_position() -> None:
    from tiermem.redact import redact

    def digest(position: int, role: str, text: str) -> str:
        return conversation_digest(NumberedMessage(position, to_message({"role": role, "content": text})), redact)

    assert digest(3, "user", f"key {KEY}") == digest(3, "user", redact(f"key {KEY}"))
    assert digest(3, "user", f"key {KEY}") != digest(4, "user", f"key {KEY}")
    assert digest(3, "user", f"key {KEY}") != digest(3, "assistant", f"key {KEY}")


def test_scheduled_pairs_are_stripped_and_positions_stay_those_of_the_thread(tmp_path: Path) -> None:
    thread = [THREAD[0], THREAD[1], {"role": "user", "content": "[SCHEDULED] any reminders?"},
              {"role": "assistant", "content": "None due."}, {"role": "user", "content": "ok"},
              {"role": "assistant", "content": "ok"}]
    with open_memory(tmp_path) as mem:
        mem.queue.add("s", thread[:2])
        assert mem.queue.flush(timeout=20)
        session = mem.session("s")
        for message in thread:
            session.add_message(message)
        session.end()
        assert records(mem) == expected([thread[0], thread[1], thread[4], thread[5]])


def test_with_an_llm_the_verbatim_record_and_a_summary_block_are_both_written(tmp_path: Path) -> None:
    model = ScriptedChatModel(["- User moves to Lisbon in August.", "- User shared a script."])
    with open_memory(tmp_path, llm=model, session_max_tokens=1000) as mem:
        summaries: list[str] = []
        session = mem.session("llm", on_summary=summaries.append)
        for message in THREAD[:3]:
            session.add_message(message)  # the big message trims the first turn
        assert records(mem)[:2] == expected(THREAD[:2])  # the verbatim record is there at once
        assert mem.wait_idle(10)
        session.end()
        assert mem.wait_idle(10)
        assert model.remaining == []
        headings = [line.split(" (")[0] for line in mem.daily.read().splitlines() if line.startswith("## ")]
        assert headings == ["## Trimmed Context", "## Session Summary", "## Session Notes", "## Session Summary"]
        assert records(mem) == [*expected(THREAD[:2]), "User moves to Lisbon in August.", expected(THREAD)[2],
                                "User shared a script."]
        assert session.summary == "- User moves to Lisbon in August.\n- User shared a script."
        assert summaries[-1] == session.summary
        sent = str(model.requests[0].messages)
        assert "moving to Lisbon in August" in sent and "2026-03-14" in sent


def test_a_replayed_session_does_not_write_its_summary_block_again(tmp_path: Path) -> None:
    clock = FakeClock(START)
    for attempt in range(2):  # a restart, then the agent replays the same conversation
        model = ScriptedChatModel([f"- Summary, take {attempt}."])
        with open_memory(tmp_path, clock, llm=model) as mem:
            session = mem.session("again")
            for message in THREAD[:2]:
                session.add_message(message)
            session.end()
            assert mem.wait_idle(10)
            assert model.remaining == []  # the running summary is made again ...
            assert session.summary == f"- Summary, take {attempt}."
            journal = mem.daily.read()
    assert journal.count("## Session Summary") == 1 and "take 0" in journal  # ... the block is written once
    assert journal.count("## Session Notes") == 1


def test_dedup_governs_the_daily_write_only_not_the_running_summary(tmp_path: Path) -> None:
    with open_memory(tmp_path) as mem:
        mem.queue.add("seen", THREAD[:2])
        assert mem.queue.flush(timeout=20)
        summaries: list[str] = []
        session = mem.session("seen", on_summary=summaries.append)
        for message in THREAD[:2]:
            session.add_message(message)
        session.end()
        assert records(mem) == expected(THREAD[:2])  # written once, by the queue
        assert "Session Notes" not in mem.daily.read()
        assert summaries == ["- user: I'm moving to Lisbon in August.\n- assistant: ok"]


def test_two_writers_flushing_one_conversation_at_once_write_it_once(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Two stores on one root (as two processes would be) flush the same conversation at the same
    moment; whoever checks the digests first holds the journal lock until it has recorded them."""
    inside = [0]
    guard = threading.Lock()
    both_inside = threading.Event()
    original = FlushHashRepository.seen

    def seen(self: FlushHashRepository, namespace: str, digests: Any) -> set[str]:
        if namespace.endswith(":race"):
            with guard:
                inside[0] += 1
                if inside[0] == 2:
                    both_inside.set()
            both_inside.wait(0.4)  # holding the lock, a writer waits for company that never comes
            with guard:
                inside[0] -= 1
        return original(self, namespace, digests)

    monkeypatch.setattr(FlushHashRepository, "seen", seen)
    with open_memory(tmp_path) as one, open_memory(tmp_path) as two:
        first, second = one.session("race"), two.session("race")
        for message in THREAD:
            first.add_message(message)
            second.add_message(message)
        threads = [threading.Thread(target=s.end) for s in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
        assert not both_inside.is_set()
        assert records(one) == expected(THREAD)
        assert one.daily.read().count("## Session Notes") == 1


def test_ingest_and_the_queue_share_the_conversation(tmp_path: Path) -> None:
    from tiermem.ingest import ingest

    with open_memory(tmp_path) as mem:
        report = ingest(mem, [{**m, "thread_id": "imported"} for m in THREAD[:3]])
        assert report.daily_lines == 3
        mem.queue.add("imported", THREAD)
        assert mem.queue.flush(timeout=20)
        again = ingest(mem, [{**m, "thread_id": "imported"} for m in THREAD])
        assert again.daily_lines == 0
        assert records(mem) == expected(THREAD)


def test_retention_forgets_digests_older_than_the_window(tmp_path: Path) -> None:
    clock = FakeClock(START)
    with open_memory(tmp_path, clock, daily_retention_days=30) as mem:
        mem.queue.add("old", THREAD[:2])
        assert mem.queue.flush(timeout=20)
        rows = "SELECT namespace FROM flush_hashes"
        assert {r[0] for r in mem.db.conn.execute(rows)} == {"conv:default:default:old"}
        clock.advance(31 * 86400)
        mem.daily.apply_retention()
        assert list(mem.db.conn.execute(rows)) == []
