"""What one search of a scope costs does not grow with what the store holds elsewhere (issue 23, P8).

The resident server answers each prompt with searches of a small person scope and of a project
scope of thousands of journal records. These tests count SQLite's virtual-machine steps (a
progress handler called every step) for the parts of a search that used to read every item of
the scope, or of every scope: the measure does not depend on the machine's load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.facts.store import NewFact
from tiermem.search import fts
from tiermem.search.keywords import KeywordSearch
from tiermem.search.loaded import LoadedIndexer
from tiermem.search.thread import FileLines
from tiermem.storage.embeddings import EmbeddingRepository
from tiermem.storage.search import DfTerm, DocFilter, Ranked, open_search_index
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = [pytest.mark.usefixtures("backend"), pytest.mark.sqlite_only]


def open_memory(root: Path, clock: FakeClock, user: str, **settings: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user, agent_name="coding",
                  **settings)


@contextmanager
def counted_steps(mem: Memory) -> Iterator[list[int]]:
    """The SQLite steps run on ``mem``'s connection in the block (``steps[0]``)."""
    steps = [0]

    def step() -> int:
        steps[0] += 1
        return 0

    conn = mem.db.conn
    conn.set_progress_handler(step, 1)
    try:
        yield steps
    finally:
        conn.set_progress_handler(None, 1)


def steps_of(mem: Memory, work: Callable[[], object]) -> int:
    with counted_steps(mem) as steps:
        work()
    return steps[0]


def embeddings(mem: Memory) -> EmbeddingRepository:
    return mem.db.parts.embeddings(mem.db)


def journal(mem: Memory, records: int) -> None:
    for day in range(0, records, 100):
        mem.daily.append("Conversation", [f"user: step {i} of the ledger migration" for i in range(day, day + 100)])


def test_finding_a_scopes_unembedded_items_does_not_read_its_embedded_ones(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "project-small") as small, open_memory(root, clock, "project-big") as big:
        journal(small, 100)
        journal(big, 2000)
        small_steps = steps_of(small, lambda: embeddings(small).unembedded(256, 0, small.scope))
        big_steps = steps_of(big, lambda: embeddings(big).unembedded(256, 0, big.scope))
    with open_memory(root, clock, "project-big", embed_on_write=False) as later:
        later.daily.append("Conversation", ["user: a step not embedded yet", "user: another one"])
        pending = [doc.text for doc in embeddings(later).unembedded(256, 0, later.scope)]
        assert embeddings(later).unembedded(256, 0, small.scope) == []
    assert pending == ["user: a step not embedded yet", "user: another one"]
    assert big_steps < 2 * small_steps + 100, (small_steps, big_steps)


def test_a_small_scopes_word_match_does_not_rank_the_other_scopes_items(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "person") as person, open_memory(root, clock, "project-big") as big:
        person.facts.add_many([NewFact(f"Prefers the ledger module {i} reviewed first") for i in range(20)])
        journal(big, 2000)  # "ledger" in every record of another scope
        index = open_search_index(person.db)

        def match() -> Ranked:
            return index.match_words(["ledger"], [["ledger"]], person.scope, DocFilter(), 50, 0.75)

        def plain() -> list[tuple[int, float]]:  # every item matched and ranked, then filtered by scope
            rows = person.db.conn.execute(
                "SELECT d.id, -bm25(search_words, 1.0, 0.75) AS score FROM search_words JOIN search_docs d"
                " ON d.id = search_words.rowid WHERE search_words MATCH '\"ledger\"' AND d.user_id = 'person'"
                " ORDER BY score DESC LIMIT 50").fetchall()
            return [(int(r[0]), float(r[1])) for r in rows]

        found, expected = match(), plain()
        steps, plain_steps = steps_of(person, match), steps_of(person, plain)
    assert len(found) == 20 and sorted(found) == sorted(expected)  # the same items, the same scores
    assert steps < plain_steps / 2, (steps, plain_steps)


def test_a_fact_search_does_not_rank_the_scopes_journal(root: Path, clock: FakeClock) -> None:
    """A project scope: a few facts, thousands of journal records holding the same words."""
    with open_memory(root, clock, "project-big") as project:
        project.facts.add_many([NewFact(f"The ledger module {i} is deployed last") for i in range(20)])
        journal(project, 2000)
        index = open_search_index(project.db)
        facts = DocFilter(tiers=("fact",))

        def match() -> Ranked:
            return index.match_words(["ledger"], [["ledger"]], project.scope, facts, 50, 0.75)

        def plain() -> list[tuple[int, float]]:
            rows = project.db.conn.execute(
                "SELECT d.id, -bm25(search_words, 1.0, 0.75) AS score FROM search_words JOIN search_docs d"
                " ON d.id = search_words.rowid WHERE search_words MATCH '\"ledger\"' AND d.tier = 'fact'"
                " ORDER BY score DESC LIMIT 50").fetchall()
            return [(int(r[0]), float(r[1])) for r in rows]

        found, expected = match(), plain()
        steps, plain_steps = steps_of(project, match), steps_of(project, plain)
        daily = index.match_words(["ledger"], [["ledger"]], project.scope, DocFilter(tiers=("daily",)), 5000, 0.75)
    assert len(found) == 20 and sorted(found) == sorted(expected)
    assert len(daily) == 2000  # the journal's own search still finds every record
    assert steps < plain_steps / 2, (steps, plain_steps)


def test_which_terms_an_item_holds_is_read_from_the_item_not_from_every_occurrence(root: Path,
                                                                                    clock: FakeClock) -> None:
    with open_memory(root, clock, "person") as person, open_memory(root, clock, "project-big") as big:
        person.facts.add_many([NewFact(f"Prefers the ledger module {i} reviewed first") for i in range(20)])
        index = open_search_index(person.db)
        ids = [doc_id for doc_id, _ in index.match_words(["ledger"], [["ledger"]], person.scope, DocFilter(), 50,
                                                         0.75)]

        def held() -> dict[int, dict[str, set[str]]]:
            return index.held_terms(["ledger", "review", "absent"], ids)

        alone, alone_steps = held(), steps_of(person, held)
        journal(big, 2000)  # "ledger" in every record of another scope
        shared, shared_steps = held(), steps_of(person, held)
    assert len(alone) == 20 and shared == alone
    assert all(terms == {"ledger": {"text"}, "review": {"text"}} for terms in alone.values())
    assert shared_steps < 2 * alone_steps + 100, (alone_steps, shared_steps)


def test_a_records_neighbours_are_read_without_the_rest_of_its_file(root: Path, clock: FakeClock) -> None:
    def neighbours_read(mem: Memory) -> int:
        index = open_search_index(mem.db)
        ids = [doc_id for doc_id, _ in index.match_words(["step"], [["step"]], mem.scope, DocFilter(), 5000, 0.75)]
        rows = index.docs(sorted(ids)[40:43])  # three records in the middle of the day's file
        lines = FileLines.read(mem.db, mem.scope, rows)
        texts = {doc_id: row.text for doc_id, row in index.docs(ids).items()}
        around = {texts[doc_id]: (texts.get(near.before or 0), texts.get(near.after or 0))
                  for doc_id, near in lines.around(rows).items()}
        assert around == {f"user: step {i} of the ledger migration": (f"user: step {i - 1} of the ledger migration",
                                                                      f"user: step {i + 1} of the ledger migration")
                          for i in (40, 41, 42)}
        return steps_of(mem, lambda: FileLines.read(mem.db, mem.scope, rows))

    with open_memory(root, clock, "project-small") as small, open_memory(root, clock, "project-big") as big:
        journal(small, 100)  # one file of 100 records
        journal(big, 2000)  # one file of 2,000 records
        small_steps, big_steps = neighbours_read(small), neighbours_read(big)
    assert big_steps < 2 * small_steps + 100, (small_steps, big_steps)


def test_counting_a_scope_that_is_the_whole_store_does_not_read_each_item(root: Path, clock: FakeClock) -> None:
    """A search weighs its terms by the scope's item count; in a store of one scope the store's own
    count is the same number, and SQLite takes it from the table's pages."""
    with open_memory(root, clock, "project-big") as big:
        index = open_search_index(big.db)
        journal(big, 100)
        small_steps = steps_of(big, lambda: index.count(big.scope))
        journal(big, 2000)
        counted, big_steps = index.count(big.scope), steps_of(big, lambda: index.count(big.scope))
        held = big.db.conn.execute("SELECT COUNT(*) FROM search_docs").fetchone()[0]
    with open_memory(root, clock, "person") as person:  # now two scopes: each counted by its own items
        person.facts.add_many([NewFact(f"Prefers the ledger module {i} reviewed first") for i in range(3)])
        index = open_search_index(person.db)
        assert (index.count(person.scope), index.count(big.scope)) == (3, held)
    assert counted == held >= 2100
    assert big_steps < small_steps + 100, (small_steps, big_steps)


def test_a_large_scopes_word_search_does_not_count_its_items_on_every_search(root: Path, clock: FakeClock) -> None:
    """Whether the scope is small enough to confine the match to it is counted once, then again
    only when the store grew by more than 1% (either plan finds the same items)."""
    with open_memory(root, clock, "person") as person, open_memory(root, clock, "project-big") as big:
        person.facts.add_many([NewFact("Prefers the ledger module 1999 reviewed first")])
        journal(big, 2000)
        index = open_search_index(big.db)

        def match() -> Ranked:
            return index.match_words(["1999"], [["1999"]], big.scope, DocFilter(), 50, 0.75)

        with counted_steps(big) as first:
            found = match()
        with counted_steps(big) as again:
            assert match() == found
        journal(big, 100)  # 5% more items: counted again, once
        with counted_steps(big) as grown:
            now = match()
        with counted_steps(big) as after:
            assert match() == now
        texts = [row.text for row in index.docs([doc_id for doc_id, _ in found]).values()]
    assert "user: step 1999 of the ledger migration" in texts  # (its neighbours hold it as context)
    assert again[0] < first[0] / 2 and after[0] < grown[0] / 2, (first, again, grown, after)
    assert grown[0] > 2 * again[0], (again, grown)  # recounted after the store grew


def test_a_word_too_common_for_the_budget_is_not_counted_gram_by_gram(root: Path, clock: FakeClock) -> None:
    """The substring fallback weighs each word's 3-character grams against the keyword budget: once
    a word's grams already cost more than the budget, its other grams are not counted (it is left
    out either way)."""
    with open_memory(root, clock, "project-big", search_keyword_budget=300) as big:
        journal(big, 2000)  # "ledger" and "migration" in every record
        index = open_search_index(big.db)
        query = fts.parse("migration ledger")
        grams = [DfTerm(g, (g,)) for word in query.substrings for g in (word[i:i + 3] for i in range(len(word) - 2))]
        every_gram = steps_of(big, lambda: index.doc_freqs("grams", grams, None, 300))
        keywords = KeywordSearch(index, 300)
        words = fts.KeywordQuery(words=query.words)  # the same query without its substrings
        keywords.run(big.scope, words, DocFilter(), 50, 1.0)  # the words' counts, kept
        without = steps_of(big, lambda: keywords.run(big.scope, words, DocFilter(), 50, 1.0))
        with counted_steps(big) as steps:
            result = keywords.run(big.scope, query, DocFilter(), 50, 1.0)
    assert len(grams) == 11 and result.lists == [] and result.terms.terms == ()
    assert steps[0] - without < every_gram / 2, (steps, without, every_gram)


def test_a_one_scope_stores_vector_index_file_is_checked_without_testing_each_item(root: Path,
                                                                                   clock: FakeClock) -> None:
    """A new process checks a scope's saved vector index against the rows (their count and id
    sum); when the store holds that scope only, the store's items are counted instead, with no
    test of each."""
    with open_memory(root, clock, "project-big") as big:
        journal(big, 2000)
        big.search("ledger", k=5)  # saves the scope's index file
        item_count = big.db.conn.execute("SELECT COUNT(*) FROM search_docs").fetchone()[0]
    scoped = ("SELECT COUNT(*), COALESCE(SUM(id), 0) FROM search_docs WHERE user_id = ? AND agent_name IN (?, ?)"
              " AND id <= ?")
    with open_memory(root, clock, "project-big") as fresh:
        indexer = fresh._search.indexer
        assert isinstance(indexer, LoadedIndexer)
        scoped_steps = steps_of(fresh, lambda: fresh.db.rows(scoped, ["project-big", "coding", "*", 10**9]))
        with counted_steps(fresh) as load:
            index = indexer.sync(fresh.scope)
        assert indexer.load_sources[fresh.scope] == "file" and len(index) == item_count >= 2000
    assert load[0] < scoped_steps, (load, scoped_steps)
