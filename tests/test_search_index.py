"""The vector side of the index (R46, R47): incremental updates, the embedding cache, model changes."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

pytestmark = pytest.mark.usefixtures("backend")

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
NO_FLOOR = {"search_min_score": 0.0}


class CountingEmbedder(HashEmbedder):
    """HashEmbedder that records every text it was asked to embed."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__(dim)
        self.seen: list[str] = []
        self.calls = 0

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.seen.extend(texts)
        self.calls += 1
        return super().embed(texts)


def vector_memory(root: Path, clock: FakeClock, embedder: HashEmbedder, **settings: object) -> Memory:
    """Search by vectors only, so a hit proves the in-memory matrix holds the item. ``NO_FLOOR``: a
    vector-only score of the hash embedder stays under its default floor (docs/search.md); tests
    that check what is in the index and not what clears the floor search without one."""
    return Memory(root, embedder=embedder, clock=clock, timezone="UTC", search_keyword_weight=0.0, **settings)


def test_add_update_delete_are_visible_to_the_next_search(root: Path, clock: FakeClock) -> None:
    with vector_memory(root, clock, HashEmbedder(), **NO_FLOOR) as mem:
        mem.facts.add("placeholder fact about the weather")
        assert mem.search("weather")  # the index is loaded now
        fact = mem.facts.add("The user keeps bees in the garden")
        assert fact is not None
        assert mem.search("bees garden", k=1)[0].ref == fact.id

        mem.facts.update(fact.id, content="The user grows tomatoes in the greenhouse")
        top = mem.search("tomatoes greenhouse", k=1)[0]
        assert (top.ref, top.text) == (fact.id, "The user grows tomatoes in the greenhouse")
        assert all("bees" not in h.text for h in mem.search("bees garden", k=10))

        mem.facts.update(fact.id, category="goal")
        assert [h.ref for h in mem.search("tomatoes", k=10, category="goal")] == [fact.id]

        mem.facts.delete(fact.id)
        assert all(h.ref != fact.id for h in mem.search("tomatoes greenhouse", k=10))


def test_writes_of_another_process_are_picked_up(root: Path, clock: FakeClock) -> None:
    with vector_memory(root, clock, HashEmbedder()) as reader:
        reader.facts.add("first fact about sailing")
        assert reader.search("sailing")
        with vector_memory(root, clock, HashEmbedder()) as writer:  # its own connections and index
            added = writer.facts.add("second fact about kayaking rivers")
            assert added is not None
            first = next(f for f in writer.facts.list() if f.content == "first fact about sailing")
            writer.facts.delete(first.id)
        hits = reader.search("kayaking rivers sailing", k=10)
        assert [h.ref for h in hits] == [added.id]


def test_daily_records_and_core_bullets_are_indexed_on_write(root: Path, clock: FakeClock) -> None:
    embedder = CountingEmbedder()
    with vector_memory(root, clock, embedder, **NO_FLOOR) as mem:
        mem.daily.append("Notes", ["went sailing on the lake", "bought new oars"], at=NOON)
        mem.core.write("## Hobbies\n- Sailing on weekends\n")
        assert any("went sailing on the lake" in t for t in embedder.seen)  # embedded at write time
        assert any("Sailing on weekends" in t for t in embedder.seen)
        hits = mem.search("sailing lake", k=3)
        assert hits[0].tier == "daily" and hits[0].text == "went sailing on the lake"
        assert hits[0].ref.startswith("memory/2026-03-14.md#L") and hits[0].date == "2026-03-14"
        core = [h for h in hits if h.tier == "core"]
        assert core and core[0].ref.startswith("MEMORY.md#L") and core[0].text == "Sailing on weekends"


def test_facts_are_embedded_at_write_time_in_one_batch(root: Path, clock: FakeClock) -> None:
    from tiermem.facts.store import NewFact

    embedder = CountingEmbedder()
    with vector_memory(root, clock, embedder) as mem:
        mem.facts.add_many([NewFact(f"batch fact number {i} about topic {i % 7}") for i in range(300)])
        assert embedder.calls == 2  # 300 texts, 256 per call: nothing one by one
        assert len(embedder.seen) == 300
        before = embedder.calls
        assert mem.search("topic 3", k=5)
        assert embedder.calls == before + 1  # only the query


def test_unchanged_text_is_never_embedded_again(root: Path, clock: FakeClock) -> None:
    embedder = CountingEmbedder()
    with vector_memory(root, clock, embedder) as mem:
        mem.core.write("- alpha bullet\n- beta bullet\n")
        mem.search("alpha")
        embedder.seen.clear()
        mem.core.write("- alpha bullet\n- beta bullet\n- gamma bullet\n")  # re-indexes the whole file
        mem.search("gamma")
        new_texts = [t for t in embedder.seen if t != "gamma"]
        assert all("gamma" in t for t in new_texts) and new_texts  # alpha/beta came from the cache

        fact = mem.facts.add("a fact that will be renamed")
        assert fact is not None
        mem.facts.update(fact.id, content="a fact that was renamed")
        embedder.seen.clear()
        mem.facts.update(fact.id, content="a fact that will be renamed")  # back to known text
        assert embedder.seen == []


def test_items_written_behind_the_search_engine_are_embedded_on_search(root: Path, clock: FakeClock) -> None:
    from tiermem.facts.store import FactPolicy, FactStore
    from tiermem.storage.facts import FactRepository

    with vector_memory(root, clock, HashEmbedder(), **NO_FLOOR) as mem:
        alone = FactStore(FactRepository(mem.db), mem.scope, clock, FactPolicy())  # no listener
        fact = alone.add("written by a bare fact store about lighthouses")
        assert fact is not None
        assert mem.search("lighthouses", k=1)[0].ref == fact.id


def test_model_change_is_detected_and_reindex_fills_in(root: Path, clock: FakeClock,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    with vector_memory(root, clock, HashEmbedder(256)) as mem:
        for text in ("bees in the garden", "dark mode editor", "sailing on the lake"):
            mem.facts.add(text)
        status = mem.vector_status()
        assert (status.model, status.missing, status.model_changed) == ("hash-256", 0, False)

    new_model = CountingEmbedder(128)
    with caplog.at_level(logging.WARNING), vector_memory(root, clock, new_model) as mem:
        status = mem.vector_status()
        assert status.model_changed and status.index_model == "hash-256" and status.model == "hash-128"
        assert status.missing == 3
        assert any("reindex" in r.getMessage() for r in caplog.records)
        assert mem.search("bees garden") == []  # vectors only, and none for the new model yet

        progress: list[tuple[int, int]] = []
        result = mem.reindex_vectors(progress=lambda done, total: progress.append((done, total)))
        assert (result.model, result.items, result.embedded) == ("hash-128", 3, 3)
        assert progress[-1] == (3, 3)
        after = mem.vector_status()
        assert (after.missing, after.model_changed) == (0, False)
        assert mem.search("bees garden", k=1)[0].text == "bees in the garden"
        assert mem.reindex_vectors().embedded == 0  # nothing left to do

    with vector_memory(root, clock, HashEmbedder(256)) as mem:  # the old vectors were kept
        assert mem.vector_status().missing == 0
        mem.reindex_vectors(drop_other_models=True)
        assert set(mem.vector_status().models) == {"hash-256"}


def test_new_items_get_vectors_of_the_model_in_use(root: Path, clock: FakeClock) -> None:
    with vector_memory(root, clock, HashEmbedder(256)) as mem:
        mem.facts.add("old fact about pottery")
    with vector_memory(root, clock, HashEmbedder(128)) as mem:
        fact = mem.facts.add("new fact about ceramics glaze")
        assert fact is not None
        assert [h.ref for h in mem.search("ceramics glaze")] == [fact.id]
        assert mem.vector_status().missing == 1  # only the old one


class Flaky(HashEmbedder):
    """HashEmbedder that fails while ``fail`` is set (an embedding service that is down)."""

    fail = True

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        if self.fail:
            raise RuntimeError("embedding service down")
        return super().embed(texts)


def test_embedder_failure_on_write_keeps_the_fact_and_retries_on_search(root: Path, clock: FakeClock) -> None:
    embedder = Flaky()
    with vector_memory(root, clock, embedder) as mem:
        fact = mem.facts.add("fact written while the embedder is down")
        assert fact is not None and mem.facts.get(fact.id) == fact
        embedder.fail = False
        assert mem.search("embedder down", k=1)[0].ref == fact.id


def test_an_index_that_fell_behind_a_pruned_removal_log_reloads(root: Path, clock: FakeClock) -> None:
    from tiermem.storage.search import SearchRepository

    with vector_memory(root, clock, HashEmbedder(), **NO_FLOOR) as reader:
        keep = reader.facts.add("fact about violins that stays")
        gone = reader.facts.add("fact about violins that goes")
        assert keep is not None and gone is not None
        assert len(reader.search("violins", k=10)) == 2
        with vector_memory(root, clock, HashEmbedder()) as writer:
            writer.facts.delete(gone.id)
            SearchRepository(writer.db).prune_removed_log(keep=0)  # the log no longer covers the delete
        assert [h.ref for h in reader.search("violins", k=10)] == [keep.id]


def test_a_removal_log_pruned_while_it_is_read_is_never_taken_for_complete(root: Path, clock: FakeClock) -> None:
    from tiermem.storage.search import SearchRepository

    class PrunedMeanwhile(SearchRepository):
        """The log as one reader sees it when another writer prunes it right after the reader
        looked at the prune mark."""

        def _pruned_below(self) -> int:
            below = super()._pruned_below()
            SearchRepository(self.db).prune_removed_log(keep=0)
            return below

    with vector_memory(root, clock, HashEmbedder()) as mem:
        facts = [mem.facts.add(f"fact number {i} about violins") for i in range(3)]
        _, start = SearchRepository(mem.db).high_water()
        for fact in facts:
            assert fact is not None
            mem.facts.delete(fact.id)
        gone, complete = PrunedMeanwhile(mem.db).removed_since("default", start)
        assert not complete or len(gone) == 3  # all three, or "reload": never a part taken for the whole


def _writers_and_searchers(mem: Memory) -> int:
    """Two threads add 40 facts each while two threads search; then how many of the 81 facts a
    search by vectors alone finds."""
    import threading

    errors: list[BaseException] = []
    mem.facts.add("seed fact about astronomy")

    def write(prefix: str) -> None:
        try:
            for i in range(40):
                mem.facts.add(f"{prefix} fact number {i} about astronomy")
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    def read() -> None:
        try:
            for _ in range(40):
                assert mem.search("astronomy", k=5)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(p,)) for p in ("alpha", "beta")]
    threads += [threading.Thread(target=read) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    return len(mem.search("astronomy fact number", k=1000))


def test_concurrent_writers_and_searchers(root: Path, clock: FakeClock) -> None:
    with vector_memory(root, clock, HashEmbedder()) as mem:
        assert _writers_and_searchers(mem) == 81


@pytest.mark.sqlite_only  # the race was the loaded index's; PostgreSQL's runs: the test above and the bench
def test_concurrent_writers_and_searchers_again_and_again(tmp_path: Path, clock: FakeClock) -> None:
    """The cheap version of ``bench/index_race.py`` (hundreds of runs, threads and processes):
    before issue 22 item 8a about one run in ten lost a fact's place in the loaded index."""
    found = []
    for run in range(6):
        with vector_memory(tmp_path / f"mem{run}", clock, HashEmbedder()) as mem:
            found.append(_writers_and_searchers(mem))
    assert found == [81] * 6


@pytest.mark.sqlite_only  # the index loaded into the process is SQLite's (PostgreSQL searches in the database)
def test_a_scope_loaded_between_a_facts_commit_and_its_embedding_still_finds_it(
        root: Path, clock: FakeClock, caplog: pytest.LogCaptureFixture) -> None:
    """The race of issue 22 item 8a, one step at a time: a writer commits a fact and then stores
    its vector; a search loading the scope in between read the fact without a vector, passed
    over it, and never read it again (the index reads only ids above what it has read), so the
    fact stayed invisible to vector search until a reindex."""
    embedder = Flaky()
    embedder.fail = False
    with vector_memory(root, clock, embedder) as mem:
        mem.facts.add("seed fact about music")
        embedder.fail = True  # the writer has committed the fact but not stored its vector yet
        fact = mem.facts.add("fact about violins")
        assert fact is not None
        embedder.fail = False
        with caplog.at_level(logging.WARNING):
            mem._search.indexer.sync(mem.scope)  # what a search does first: load the scope
            assert [hit.ref for hit in mem.search("violins", k=10)] == [fact.id]
        assert "no vector" not in caplog.text
