"""A search embeds the pending items of its own scope only (issue 23, P8).

Items written with ``embed_on_write = false`` (the coding agents' hooks) wait without a vector. The
resident server holds a ``Memory`` per scope and embeds each scope's pending items in the
background; a prompt's search of the person scope used to embed every scope's pending items
first — after a long transcript was saved, 2,000 journal records of the project, 72 s at 10k
records — which a search of one scope never needs.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")


class CountingEmbedder(HashEmbedder):
    """The hash embedder, keeping every text it was asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return super().embed(texts)


def test_a_search_embeds_only_its_own_scopes_pending_items(root: Path, clock: FakeClock) -> None:
    embedder = CountingEmbedder()
    options = {"embedder": embedder, "clock": clock, "timezone": "UTC", "embed_on_write": False}
    with Memory(root, user_id="person", agent_name="coding", **options) as person, \
            Memory(root, user_id="project-a", agent_name="coding", **options) as project:
        person.facts.add("Always indents with tabs", "preference", 0.9)
        assert person.search("tabs", k=3, min_score=0)  # the person scope is loaded and embedded
        project.daily.append("Conversation", [f"user: the ledger service step {i} of the migration"
                                              for i in range(20)])
        embedder.texts.clear()
        assert person.search("indents", k=3, min_score=0)
        assert not [text for text in embedder.texts if "ledger" in text]
        assert project.vector_status().missing > 0  # still pending: the project's own work
        assert person.embed_pending() == 0  # the person scope has nothing pending
        assert project.vector_status().missing > 0
        assert project.embed_pending() > 0
        assert project.vector_status().missing == 0
        assert "migration" in project.search("ledger migration step", k=3)[0].text
