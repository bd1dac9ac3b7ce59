"""``embed_on_write = false`` (issue 23): a process that only writes (a coding agent's hook) leaves
new facts and journal records without a vector instead of loading the embedder; the next search —
in another process, or the same one — embeds them first, so nothing stays unfindable by vector."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from queue_helpers import rows, sql
from transfer_helpers import CountingEmbedder

from tiermem import Memory
from tiermem.search import indexer
from tiermem.storage.journal import FlushHashRepository
from tiermem.storage.search import open_search_index
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


def unembedded(root: Path) -> int:
    return int(rows(root, "SELECT COUNT(*) AS n FROM search_docs WHERE embed_hash IS NULL")[0]["n"])


def write(mem: Memory) -> None:
    mem.facts.add("Indents Python with tabs", "preference", 0.9)
    mem.daily.append("Conversation", ["user: the billing API lives in services/ledgerd"])


def test_a_writer_without_embedding_leaves_the_items_to_the_next_search(root: Path, clock: FakeClock) -> None:
    writer = CountingEmbedder()
    with Memory(root, embedder=writer, clock=clock, timezone="UTC", embed_on_write=False) as mem:
        write(mem)
        assert writer.texts == 0
        assert unembedded(root) >= 2
    reader = CountingEmbedder()
    clock.advance(timedelta(seconds=1).total_seconds())
    with Memory(root, embedder=reader, clock=clock, timezone="UTC") as mem:  # another process's Memory
        hits = mem.search("where does the billing API live", min_score=0.0)
        assert reader.texts > 1  # the query, and the items first
        assert unembedded(root) == 0 and mem.vector_status().missing == 0
        assert any("services/ledgerd" in hit.text for hit in hits)
        assert mem.search("tabs indentation", min_score=0.0)[0].text == "Indents Python with tabs"


def test_the_writer_itself_embeds_them_at_its_next_search(root: Path, clock: FakeClock) -> None:
    embedder = CountingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC", embed_on_write=False) as mem:
        write(mem)
        assert embedder.texts == 0
        hits = mem.search("tabs indentation", min_score=0.0)
        assert embedder.texts > 1 and unembedded(root) == 0
        assert hits[0].text == "Indents Python with tabs"


def test_by_default_new_items_are_embedded_right_after_the_write(root: Path, clock: FakeClock) -> None:
    embedder = CountingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem:
        write(mem)
        assert embedder.texts > 0 and unembedded(root) == 0


def test_a_writer_embeds_its_own_scopes_items_not_another_scopes(root: Path, clock: FakeClock) -> None:
    """A write embeds the new items of the scope it wrote; another scope's pending items (left by a
    process that does not embed) stay for that scope's next search, so writers of different scopes
    never queue behind each other's vector writes (issue 25)."""
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC", user_id="bob",
                embed_on_write=False) as bob:
        write(bob)
        left = bob.vector_status().missing
    assert left >= 2
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC", user_id="ada") as ada:
        write(ada)
        assert ada.vector_status().missing == 0  # its own items: embedded after the write
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        assert bob.vector_status().missing == left  # ada's write did not embed bob's
        assert bob.search("where does the billing API live", min_score=0.0)
        assert bob.vector_status().missing == 0  # bob's search did


def test_an_append_embeds_its_own_records_not_the_same_users_pending_ones(root: Path, clock: FakeClock) -> None:
    """Writers of one user: each append embeds only the records it wrote. The user's other pending
    items (another writer's, still to be embedded by it, or left by a process that does not embed)
    stay for their writer or the next search: an append never takes on the others' embedding, so
    its time does not grow with how many writers the user has (issue 25)."""
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC", embed_on_write=False) as hook:
        hook.daily.append("Conversation", ["user: the billing API lives in services/ledgerd"])
        left = hook.vector_status().missing
    assert left >= 1
    embedder = CountingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem:
        mem.daily.append("Note", "the deploy runs on Fridays")
        assert embedder.texts > 0
        assert mem.vector_status().missing == left  # its own record embedded, the hook's left pending
        assert any("services/ledgerd" in hit.text for hit in mem.search("billing API", min_score=0.0))
        assert mem.vector_status().missing == 0  # the search embedded it


def test_a_record_whose_vector_write_was_lost_is_embedded_again_by_the_next_search(
        root: Path, clock: FakeClock) -> None:
    """PostgreSQL commits a vector write without waiting for the WAL flush: a server crash may lose
    it, leaving the state before it (the items' ``embed_hash`` NULL, their vectors absent). Those
    items are pending again, and the next search of their scope embeds them."""
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC") as mem:
        write(mem)
        assert unembedded(root) == 0
    sql(root, "DELETE FROM embeddings")  # as if the vector write had never committed
    sql(root, "UPDATE search_docs SET embed_hash = NULL")
    assert unembedded(root) >= 2
    reader = CountingEmbedder()
    with Memory(root, embedder=reader, clock=clock, timezone="UTC") as mem:
        hits = mem.search("where does the billing API live", min_score=0.0)
        assert unembedded(root) == 0 and mem.vector_status().missing == 0
        assert reader.texts > 1 and any("services/ledgerd" in hit.text for hit in hits)


class BatchEmbedder(HashEmbedder):
    """:class:`HashEmbedder` (our stand-in for an external model) that records each call's size."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[int] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.batches.append(len(texts))
        return super().embed(texts)


def test_a_write_of_more_chunks_than_a_batch_is_embedded_a_batch_at_a_time(
        root: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write that adds many chunks (a re-indexed large MEMORY.md emits them all) embeds them
    ``PENDING_BATCH`` at a time, as the pending items are, not all in one go; each gets its vector."""
    monkeypatch.setattr(indexer, "PENDING_BATCH", 3)
    embedder = BatchEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem:
        embedder.batches.clear()
        mem.daily.append("Note", [f"record {word} number {i}" for i, word in enumerate("abcdefghij")])
        assert unembedded(root) == 0 and mem.vector_status().missing == 0
        chunks = int(rows(root, "SELECT COUNT(*) AS n FROM search_docs WHERE source = 'chunk'")[0]["n"])
    # a batch's texts: its 3 chunks (their sentences) and the chunk before the first (its context)
    assert chunks == 10 and len(embedder.batches) >= 4 and max(embedder.batches) <= 4, embedder.batches


def test_chunks_files_and_digests_are_found_by_any_number_of_ids(root: Path, clock: FakeClock) -> None:
    """The reads by a list of ids (one array on PostgreSQL, a placeholder each on SQLite), past
    one statement's 500 and with ids that match nothing."""
    with Memory(root, embedder=CountingEmbedder(), clock=clock, timezone="UTC", embed_on_write=False) as mem:
        mem.daily.append("Note", ["the first record", "the second record", "the third record"])
        found = mem.db.rows("SELECT d.id, d.ref, c.user_id, c.path FROM search_docs d JOIN chunks c"
                            " ON d.ref = CAST(c.id AS TEXT) WHERE d.source = 'chunk' ORDER BY d.id", (), "test")
        ids, refs = [int(r[0]) for r in found], [int(r[1]) for r in found]
        absent = list(range(10**6, 10**6 + 600))
        pending = mem.db.parts.embeddings(mem.db).unembedded_chunks([*absent, *reversed(refs)])
        assert [doc.id for doc in pending] == ids and len(ids) == 3
        windows = open_search_index(mem.db).file_windows([*absent, *ids], 4, 2)
        assert [(w.user_id, w.path, [item[0] for item in w.items], w.asked) for w in windows] == [
            (found[0][2], found[0][3], ids, [0, 1, 2])]
        hashes = FlushHashRepository(mem.db)
        with mem.db.transaction():
            hashes.remember("ns", [f"d{i}" for i in range(0, 1200, 2)], datetime.now(UTC))
        assert hashes.seen("ns", [f"d{i}" for i in range(1200)]) == {f"d{i}" for i in range(0, 1200, 2)}
