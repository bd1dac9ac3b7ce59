"""The embedding pass after a write (``embed_on_write``), on both backends: every pending item is
embedded whatever the batch size, and the removal log is still trimmed, though PostgreSQL looks at
its size only every ``PRUNE_EVERY`` th write."""

from __future__ import annotations

from pathlib import Path

import pytest
from queue_helpers import rows

from tiermem import Memory
from tiermem.search import database, indexer
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


def _count(root: Path, sql: str) -> int:
    return int(rows(root, sql)[0]["n"])


@pytest.mark.parametrize("items", [3, 4, 5])  # fewer, as many and more than a batch's worth plus one
def test_every_pending_item_is_embedded_in_batches_of_any_fill(root: Path, clock: FakeClock,
                                                               monkeypatch: pytest.MonkeyPatch, items: int) -> None:
    """The pending read stops at a batch that came back short: a full last batch still gets one more read."""
    monkeypatch.setattr(indexer, "PENDING_BATCH", 2)
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", embed_on_write=False) as mem:
        for i in range(items):
            mem.facts.add(f"pending fact number {i} about the ledger")
        assert _count(root, "SELECT COUNT(*) AS n FROM search_docs WHERE embed_hash IS NULL") == items
        assert mem.embed_pending() == items
        assert _count(root, "SELECT COUNT(*) AS n FROM search_docs WHERE embed_hash IS NULL") == 0
        assert mem.search("pending fact number 4" if items == 5 else "pending fact number 0", k=1)


def test_the_removal_log_is_trimmed_within_a_bounded_number_of_writes(root: Path, clock: FakeClock,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    keep, every = 3, 4
    monkeypatch.setattr(indexer, "REMOVED_LOG_KEEP", keep)
    monkeypatch.setattr(database, "PRUNE_EVERY", every)
    sizes: list[int] = []
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        for i in range(24):
            fact = mem.facts.add(f"short-lived fact {i} about the ledger")
            assert fact is not None
            mem.facts.delete(fact.id)  # one row of the removal log
            sizes.append(_count(root, "SELECT COUNT(*) AS n FROM search_removed"))
    # past the limit it is cut back to the newest ``keep`` rows, at most ``every`` writes (two per fact) late
    assert max(sizes) <= keep + 1 + every
    assert sizes[-1] < 24 and min(sizes[8:]) <= keep + 1  # cut back (a delete may follow the cut)
