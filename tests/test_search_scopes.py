"""Scopes never leak (R49): facts belong to (user, agent), Markdown records to the user."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

NOON = datetime(2026, 3, 14, 12, 0, tzinfo=UTC)


def open_memory(root: Path, clock: FakeClock, user: str, agent: str = "default") -> Memory:
    return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user, agent_name=agent)


def test_a_user_never_sees_another_users_facts_or_records(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "alice") as alice, open_memory(root, clock, "bob") as bob:
        alice.facts.add("Alice keeps bees on the roof")
        alice.daily.append("Notes", ["alice talked about her bees and honey"], at=NOON)
        bob.facts.add("Bob keeps bees in the valley and sells honey")
        bob.daily.append("Notes", ["bob harvested honey from his bees"], at=NOON)
        bob.core.write("- Bob is a beekeeper who loves bees\n")

        for query in ("bees", "honey", "Bob beekeeper valley", "alice roof"):
            alice_hits = alice.search(query, k=50, min_score=0)  # every candidate, weak ones too
            assert alice_hits, query
            assert all("bob" not in hit.text.casefold() for hit in alice_hits), query
            bob_hits = bob.search(query, k=50, min_score=0)
            assert all("alice" not in hit.text.casefold() for hit in bob_hits), query
        assert {hit.tier for hit in bob.search("bees", k=50)} == {"fact", "daily", "core"}


def test_agents_of_one_user_have_own_facts_but_share_the_journal(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "carol", "coder") as coder, open_memory(root, clock, "carol", "writer") as writer:
        coder.facts.add("The coder agent prefers tabs over spaces")
        writer.facts.add("The writer agent prefers the Oxford comma")
        coder.daily.append("Notes", ["carol mentioned tabs and the Oxford comma today"], at=NOON)

        coder_facts = [h.text for h in coder.search("prefers tabs Oxford comma", k=50) if h.tier == "fact"]
        writer_facts = [h.text for h in writer.search("prefers tabs Oxford comma", k=50) if h.tier == "fact"]
        assert coder_facts == ["The coder agent prefers tabs over spaces"]
        assert writer_facts == ["The writer agent prefers the Oxford comma"]
        for mem in (coder, writer):
            daily = [h.text for h in mem.search("tabs Oxford comma", k=50) if h.tier == "daily"]
            assert daily == ["carol mentioned tabs and the Oxford comma today"]


def test_vector_only_search_respects_scopes(root: Path, clock: FakeClock) -> None:
    settings = {"search_keyword_weight": 0.0}
    with Memory(root, embedder=HashEmbedder(), clock=clock, user_id="u1", **settings) as one, \
            Memory(root, embedder=HashEmbedder(), clock=clock, user_id="u2", **settings) as two:
        one.facts.add("quantum chromodynamics lecture notes")
        for i in range(30):
            two.facts.add(f"quantum chromodynamics lecture notes part {i}")
        hits = one.search("quantum chromodynamics lecture notes", k=100)
        assert [h.text for h in hits] == ["quantum chromodynamics lecture notes"]


def test_same_text_in_two_scopes_is_two_items(root: Path, clock: FakeClock) -> None:
    with open_memory(root, clock, "u1") as one, open_memory(root, clock, "u2") as two:
        a = one.facts.add("Shared sentence about gardening")
        b = two.facts.add("Shared sentence about gardening")
        assert a is not None and b is not None
        assert [h.ref for h in one.search("gardening")] == [a.id]
        assert [h.ref for h in two.search("gardening")] == [b.id]
        one.facts.delete(a.id)
        assert one.search("gardening") == []
        assert [h.ref for h in two.search("gardening")] == [b.id]
