"""Keyword statistics are per scope (issue 16): one user's data never moves another user's ranking
or scores, nor which query terms the keyword budget affords; and weighing terms against the budget
counts no more than it needs (issue 24)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.facts.store import NewFact
from tiermem.storage.search import DfTerm, open_search_index
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Scope

pytestmark = pytest.mark.usefixtures("backend")

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)
QUERIES = ("bees honey", "where does Alice keep the hive", "lavender garden roof", "honey jars for the market",
           "bees", "Alice")


def open_memory(root: Path, clock: FakeClock, user: str, agent: str = "default", **settings: Any) -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user, agent_name=agent,
                  **settings)


def results(mem: Memory) -> dict[str, list[tuple[str, float]]]:
    return {query: [(hit.ref, hit.score) for hit in mem.search(query, k=20, min_score=0)] for query in QUERIES}


def fill_alice(alice: Memory) -> None:
    alice.facts.add_many([NewFact("Alice keeps bees on the roof"), NewFact("Alice sells honey jars at the market"),
                          NewFact("The lavender garden feeds the bees"), NewFact("Alice's hive sits by the chimney")])
    alice.daily.append("Notes", ["Alice harvested honey from the roof hive", "the bees liked the lavender"], at=NOON)


@pytest.mark.parametrize("budget", [5000, 12])  # 12: the budget must drop terms in the big scopes
def test_another_users_data_leaves_results_and_scores_unchanged(root: Path, clock: FakeClock, budget: int) -> None:
    settings = {"search_keyword_budget": budget}
    with open_memory(root, clock, "alice", **settings) as alice:
        fill_alice(alice)
        before = results(alice)
        assert all(before.values()) and any(len(hits) > 1 for hits in before.values())
        with open_memory(root, clock, "bob", **settings) as bob, \
                open_memory(root, clock, "alice", "helper", **settings) as helper:
            # the same words, many times over, in another user's facts and journal and in another
            # agent's facts of the same user: all outside alice/default's scope
            bob.facts.add_many([NewFact(f"Bob's bees number {i} make honey for the market") for i in range(60)])
            bob.daily.append("Notes", [f"bob checked hive {i}; the bees and the honey are fine" for i in range(40)],
                             at=NOON)
            helper.facts.add_many([NewFact(f"Alice asked about lavender and bees, note {i}") for i in range(30)])
        after = results(alice)
    assert after == before


def test_document_frequencies_are_counted_within_the_scope(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "alice") as alice, open_memory(root, clock, "bob") as bob:
        alice.facts.add_many([NewFact(f"common word {i} of alice") for i in range(7)] + [NewFact("a rare zebra")])
        alice.daily.append("Notes", ["a common record in the journal"], at=NOON)
        bob.facts.add_many([NewFact(f"common word {i} of bob") for i in range(40)])
        index = open_search_index(alice.db)
        keys = index.index_terms(["common", "zebra", "absent"])
        terms = [DfTerm(word, tuple(k)) for word, k in zip(("common", "zebra", "absent"), keys, strict=True)]
        scope = Scope("alice", "default")
        assert index.doc_freqs("text", terms, scope) == [8, 1, 0]  # 7 facts + the user's journal record
        assert index.doc_freqs("text", terms, Scope("bob", "default")) == [40, 0, 0]
        assert index.doc_freqs("text", terms, scope, cap=3) == [4, 1, 0]  # stops past the cap
        assert index.doc_freqs("words", terms[:1], Scope("carol", "default")) == [0]
        assert index.count(scope) == 9


def test_a_store_of_one_scope_counts_store_wide_with_the_same_result(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "alice") as alice:
        alice.facts.add_many([NewFact(f"common word {i}") for i in range(5)])
        alice.daily.append("Notes", ["a common record"], at=NOON)
        index = open_search_index(alice.db)
        scope = Scope("alice", "default")
        terms = [DfTerm(word, tuple(k)) for word, k in zip(("common", "record"),
                                                           index.index_terms(["common", "record"]), strict=True)]
        assert index.only_scope(scope)
        assert index.doc_freqs("text", terms, None) == index.doc_freqs("text", terms, scope) == [6, 1]
        assert index.doc_freqs("grams", [DfTerm("com", ("com",))], None, cap=2) == [3]
        with open_memory(root, clock, "alice", "helper") as helper:
            helper.facts.add("the helper's own common fact")
            assert not index.only_scope(scope)
            assert not index.only_scope(Scope("alice", "helper"))
            assert index.doc_freqs("text", terms, scope) == [6, 1]
            assert index.doc_freqs("text", terms, None) == [7, 1]
        assert not index.only_scope(Scope("bob", "default"))


@contextmanager
def statements(mem: Memory, backend: str) -> Iterator[list[str]]:
    """The SQL statements ``mem``'s store runs in the block (SQLite: this thread's connection)."""
    run: list[str] = []
    if backend == "postgres":
        from tiermem.storage.postgres.trips import count_round_trips

        with count_round_trips(mem.db) as trips:
            yield run
        run.extend(trips.statements)
        return
    conn = mem.db.conn
    conn.set_trace_callback(run.append)
    try:
        yield run
    finally:
        conn.set_trace_callback(None)


def test_a_common_words_substrings_are_not_counted_gram_by_gram(root: Path, clock: FakeClock, backend: str) -> None:
    """Words the word index finds too little of are also looked for as trigram phrases, each
    weighed against ``search_keyword_budget`` by its grams' matches. A word whose grams already cost
    more than the budget is left out, so its other grams are not counted: "migration ledger" (11
    grams, in every record) costs one capped count per word."""
    with open_memory(root, clock, "alice", search_keyword_budget=30) as alice:
        alice.daily.append("Notes", [f"step {i} of the ledger migration" for i in range(60)], at=NOON)
        with statements(alice, backend) as run:
            hits = alice.search("migration ledger", k=5, min_score=0)
    gram_counts = [sql for sql in run if "COUNT(*)" in sql and ("search_grams" in sql or "grams @@" in sql)]
    assert len(hits) == 5  # by their vectors: both words are over the budget
    assert sum(sql.count("COUNT(*)") for sql in gram_counts) == 2, run  # PostgreSQL: both in one statement


def test_warm_gram_counts_are_planned_for_their_gram(root: Path, clock: FakeClock, backend: str) -> None:
    """PostgreSQL plans a statement that psycopg has prepared (its sixth run on a connection) for
    any parameters after five more runs: a gram count with the gram as a parameter then reads the
    scope's rows one by one (a sequential scan, 100k rows at 100k items) instead of the gram's
    entries in the gram index. So in a warm process no gram count runs with parameters: each
    statement holds its gram and is planned for it."""
    if backend != "postgres":
        pytest.skip("PostgreSQL's plan cache")
    words = ["zorbex", "quaffle", "vintrop", "malgory", "hestrin", "purvane", "doltisk", "ambrel",
             "cravoun", "sintelm", "borquel", "taminex", "lurvid", "ostrenk", "fendral", "giblath"]
    with open_memory(root, clock, "alice", search_keyword_budget=30) as alice:
        alice.daily.append("Notes", [f"step {i} of the ledger migration" for i in range(60)], at=NOON)
        for i in range(0, len(words) - 2, 2):  # new words each time: new grams, the same statement
            alice.search(f"{words[i]} {words[i + 1]}", k=5, min_score=0)
        with statements(alice, backend) as run:
            alice.search(f"{words[-2]} {words[-1]} migration", k=5, min_score=0)
    gram_counts = [sql for sql in run if "COUNT(*)" in sql and "grams @@" in sql]
    assert sum(sql.count("COUNT(*)") for sql in gram_counts) >= 4, run  # the new words' grams, each counted
    assert [sql for sql in gram_counts if "$1" in sql] == []


def test_odd_characters_in_a_counted_term_or_scope_are_values(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "alice") as alice:
        alice.facts.add_many([NewFact("it's 100% done? yes"), NewFact("a back\\slash")])
        index = open_search_index(alice.db)
        odd = [DfTerm(t, (t,)) for t in ("it's", "100%", "done?", "back\\slash", "') OR TRUE --")]
        counts = index.doc_freqs("grams", odd, Scope("alice", "default"), cap=5)
        assert counts == index.doc_freqs("grams", odd, None, cap=5) and counts[-1] == 0
        assert index.doc_freqs("grams", [DfTerm("don", ("don",))], Scope("alice", "default"), cap=5) == [1]
        assert index.doc_freqs("grams", [DfTerm("don", ("don",))], Scope("al'?%\\", "default'?"), cap=5) == [0]


def test_word_counts_are_the_budget_count_and_within_it_the_text_count(root: Path, clock: FakeClock) -> None:
    """``word_counts`` (PostgreSQL: one visit of each match gives both) counts what ``doc_freqs``
    counts: a word's items by text or context (stopping past the cap) and, within the cap, those
    holding it in their own text; a word in the context of records only counts there."""
    with open_memory(root, clock, "alice") as alice:
        fill_alice(alice)
        alice.daily.append("Notes", ["the queen stayed", "rain all day", "a quiet morning", "swarm season"], at=NOON)
        index = open_search_index(alice.db)
        texts = ["queen", "bees", "honey", "swarm", "alice"]
        terms = [DfTerm(word, tuple(keys)) for word, keys in zip(texts, index.index_terms(texts), strict=True)]
        for scope in (Scope("alice", "default"), None):
            words, text = index.doc_freqs("words", terms, scope, cap=3), index.doc_freqs("text", terms, scope)
            pairs = index.word_counts(terms, scope, cap=3)
            assert pairs == [(w, t if w <= 3 else None) for w, t in zip(words, text, strict=True)]
            assert any(w > t > 0 for w, t in pairs if t is not None), pairs  # context matches counted apart
            assert any(t is None for _, t in pairs), pairs
