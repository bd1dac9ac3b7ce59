"""Round trips to the PostgreSQL server of a conversation's journal write (issue 25: what one queue
item does while it holds its user's journal lock). Where the Daily files are rows of the database,
the append and the record of its digests commit in one transaction, so the write needs no
write-ahead intent (SQLite's files are files: there it does); its reads go ahead with the lock.
Ceiling: 3 round trips, as a Daily append (``tests/test_postgres_round_trips.py``)."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("psycopg")

from pg_helpers import fresh_schema  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.queue.process import CONVERSATION_KIND, conversation_journal  # noqa: E402
from tiermem.storage.journal import FlushHashRepository  # noqa: E402
from tiermem.storage.postgres.trips import count_round_trips  # noqa: E402
from tiermem.testing import HashEmbedder  # noqa: E402
from tiermem.tiers.conversation import numbered  # noqa: E402
from tiermem.tiers.turns import to_message  # noqa: E402

WARM, RUNS = 12, 6
CEILING = 3


@pytest.fixture
def url() -> Iterator[str]:
    with fresh_schema() as fresh:
        yield fresh


def test_a_queue_items_journal_write_takes_three_round_trips(tmp_path: Path, url: str) -> None:
    with Memory(tmp_path / "mem", embedder=HashEmbedder(), timezone="UTC", database_url=url,
                embed_on_write=False, queue_replay=False) as mem:
        journal = conversation_journal(mem, FlushHashRepository(mem.db))
        counts: list[int] = []
        worst: list[str] = []
        for i in range(WARM + RUNS):
            thread = numbered(to_message(m) for m in [{"role": "user", "content": f"thread {i}: hello"},
                                                      {"role": "assistant", "content": f"thread {i}: hi"}])
            with count_round_trips(mem.db) as trips:
                result = journal.write(f"thread-{i}", CONVERSATION_KIND, thread)
            assert result.written == 2 and result.records == 2
            if i >= WARM:
                worst = trips.statements if not counts or trips.count > max(counts) else worst
                counts.append(trips.count)
        text = mem.daily.read()
        assert all(f"thread {i}: hello" in text and f"thread {i}: hi" in text for i in range(WARM + RUNS))
        again = journal.write(f"thread-{WARM + RUNS - 1}", CONVERSATION_KIND, thread)  # the last one: once
        assert again.written == 0 and again.skipped == 2
        assert mem.db.rows("SELECT COUNT(*) FROM journal_intents")[0][0] == 0
    found = statistics.median_high(counts)
    assert found <= CEILING, f"{found} round trips (ceiling {CEILING}):\n  " + "\n  ".join(worst)
