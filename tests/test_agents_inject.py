"""What a coding agent is told: the session-start text and the per-prompt text of both scopes."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from tiermem import Memory
from tiermem.agents.inject import START_HEADING, prompt_context, prompt_query, start_context
from tiermem.errors import InvalidInput
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tokens import count_tokens

pytestmark = pytest.mark.usefixtures("backend")

PERSON, PROJECT = "maya", "project-0123456789abcdef"


@dataclass
class State:
    given: set[str] = field(default_factory=set)


@pytest.fixture
def scopes(root: Path, clock: FakeClock) -> Iterator[tuple[Memory, Memory]]:
    def open_(user: str) -> Memory:
        return Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id=user,
                      agent_name="coding", coding_person=PERSON)

    with open_(PERSON) as person, open_(PROJECT) as project:
        yield person, project


def fill(person: Memory, project: Memory) -> None:
    person.facts.add("Indents with tabs, never spaces", "preference", 0.95)
    project.facts.add("The billing API lives in services/ledgerd", "knowledge", 0.9)
    project.core.write("- The shop is a Django monolith with a Go billing service\n")
    plan = project.plans.start("Move invoices to ledgerd", ["Add the invoice table", "Port the PDF export"])
    project.plans.check(plan.id, 0)
    project.daily.append("Note", "Deploys of ledgerd go through the staging cluster first")


def test_start_text_holds_both_scopes_core_plan_and_notes(scopes: tuple[Memory, Memory]) -> None:
    person, project = scopes
    fill(person, project)
    state = State()
    text = start_context(person, project, state, "startup", 1500)
    assert text.startswith(START_HEADING)
    assert "Core Memory:\n- The shop is a Django monolith with a Go billing service" in text
    assert "- [preference | 0.95] Indents with tabs, never spaces" in text
    assert "- [knowledge | 0.90] The billing API lives in services/ledgerd" in text
    assert "Next: Port the PDF export (item 1)" in text
    assert "Deploys of ledgerd go through the staging cluster first" in text
    assert count_tokens(text) <= 1500
    facts = {f.id for f in [*person.facts.list(), *project.facts.list()]}
    assert state.given == facts | {f"{PROJECT}:memory/2026-03-14.md#L4-L4"}  # the note, as a search cites it


def test_start_text_keeps_within_a_small_budget(scopes: tuple[Memory, Memory]) -> None:
    person, project = scopes
    fill(person, project)
    for n in range(40):
        project.facts.add(f"Module number {n} of the shop has its own owner and release train", "knowledge", 0.6)
    text = start_context(person, project, State(), "startup", 200)
    assert count_tokens(text) <= 200
    assert "Indents with tabs" in text  # the most confident facts stay


def test_empty_memory_says_nothing(scopes: tuple[Memory, Memory]) -> None:
    person, project = scopes
    assert start_context(person, project, State(), "startup", 1500) == ""
    assert prompt_context(person, project, State(), "where is the billing API?", 600) == ""


def test_prompt_text_is_relevant_memory_not_given_before(scopes: tuple[Memory, Memory]) -> None:
    person, project = scopes
    fill(person, project)
    state = State()
    text = prompt_context(person, project, state, "where is the billing API?", 600)
    assert "- [knowledge | 0.90] The billing API lives in services/ledgerd" in text
    assert "Indents with tabs" not in text and "staging cluster" not in text
    assert prompt_context(person, project, state, "where is the billing API?", 600) == ""  # given already
    notes = prompt_context(person, project, state, "how do we deploy ledgerd to staging", 600)
    assert "Deploys of ledgerd go through the staging cluster first" in notes and "billing API" not in notes
    assert prompt_context(person, project, state, "what is the weather in Paris", 600) == ""


def test_prompt_reads_the_person_scope_and_skips_what_the_start_gave(scopes: tuple[Memory, Memory]) -> None:
    person, project = scopes
    fill(person, project)
    fresh = prompt_context(person, project, State(), "tabs or spaces for indentation?", 600)
    assert "Indents with tabs, never spaces" in fresh
    state = State()
    start_context(person, project, state, "startup", 1500)
    assert prompt_context(person, project, state, "tabs or spaces for indentation?", 600) == ""
    assert prompt_context(person, project, state, "how do we deploy ledgerd to staging", 600) == ""  # a recent note


def test_compact_forgets_what_the_session_was_given(scopes: tuple[Memory, Memory], clock: FakeClock) -> None:
    person, project = scopes
    project.daily.append("Note", "Hotfixes of ledgerd may skip the staging cluster")
    clock.advance(5 * 86400)  # older than the recent notes of the start text
    fill(person, project)
    state = State()
    start_context(person, project, state, "startup", 1500)
    query = "may ledgerd hotfixes skip the staging cluster?"
    assert "Hotfixes of ledgerd" in prompt_context(person, project, state, query, 600)
    assert prompt_context(person, project, state, query, 600) == ""
    start_context(person, project, state, "resume", 1500)  # the conversation is still there
    assert prompt_context(person, project, state, query, 600) == ""
    start_context(person, project, state, "compact", 1500)
    assert "Hotfixes of ledgerd" in prompt_context(person, project, state, query, 600)


class CountingEmbedder(HashEmbedder):
    """The hash embedder, keeping every text it was asked for."""

    def __init__(self, dim: int = 256) -> None:
        super().__init__(dim)
        self.texts: list[str] = []

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        return super().embed(texts)


def test_a_prompt_is_embedded_once_for_both_scopes(root: Path, clock: FakeClock) -> None:
    """The resident server's memories share one embedder: the query is embedded once (P8)."""
    embedder = CountingEmbedder()
    # a prompt about two things covers half of each fact's terms at best, under the hash
    # embedder's injection floor (0.97): a lower floor lets both scopes answer
    options = {"embedder": embedder, "clock": clock, "timezone": "UTC", "agent_name": "coding", "coding_person": PERSON,
               "search_inject_min_score": 0.6}
    with Memory(root, user_id=PERSON, **options) as person, Memory(root, user_id=PROJECT, **options) as project:
        fill(person, project)
        assert person.search("warm", k=1, min_score=0) and project.search("warm", k=1, min_score=0)
        embedder.texts.clear()
        text = prompt_context(person, project, State(), "where is the billing API? tabs?", 600)
    assert "services/ledgerd" in text and "Indents with tabs" in text
    assert embedder.texts == ["where is the billing API? tabs?"]


def test_a_search_takes_the_query_vector_only_of_its_own_query_and_model(root: Path, clock: FakeClock) -> None:
    embedder, other = CountingEmbedder(), CountingEmbedder(dim=32)
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem, \
            Memory(root, embedder=other, clock=clock, timezone="UTC", user_id="other") as elsewhere:
        mem.facts.add("The billing API lives in services/ledgerd", "knowledge", 0.9)
        expected = mem.search("billing API", k=3, min_score=0)
        given = mem.embed_query("billing API")
        embedder.texts.clear()
        assert mem.search("billing API", k=3, min_score=0, query_vector=given) == expected
        assert embedder.texts == []
        assert mem.search("ledgerd", k=3, min_score=0, query_vector=given)[0].text.endswith("ledgerd")
        assert embedder.texts == ["ledgerd"]  # another query: embedded itself
        foreign = elsewhere.embed_query("billing API")  # another model: not used
        assert mem.search("billing API", k=3, min_score=0, query_vector=foreign) == expected
        with pytest.raises(InvalidInput):
            mem.search("billing API", query_vector=given.vector)  # type: ignore[arg-type]


def test_the_person_scopes_journal_is_not_searched_for_a_prompt(scopes: tuple[Memory, Memory]) -> None:
    """The journal lives in the project scope; the person scope holds facts (R74)."""
    person, project = scopes
    fill(person, project)
    person.daily.append("Note", "Deploys of the payroll service go through the blue cluster")
    project.daily.append("Note", "Deploys of the ledger service go through the green cluster")
    text = prompt_context(person, project, State(), "how do deploys go through the cluster?", 600)
    assert "green cluster" in text and "blue cluster" not in text


def test_prompt_query_drops_context_a_client_put_into_the_prompt() -> None:
    prompt = "<hook_context>Memory from tiermem: tabs</hook_context>\n\nwhere is billing?\x00"
    assert prompt_query(prompt) == "where is billing?"
    assert prompt_query("<hook_context>x</hook_context>") == ""
    assert len(prompt_query("word " * 5000)) <= 4000


def test_what_tiermem_injects_is_recognised_in_the_transcript() -> None:
    """A client that stores our context in its transcript must not have it journaled back as what the user said."""
    from tiermem.agents.context_text import INJECTED_PREFIX
    from tiermem.agents.inject import PROMPT_HEADING

    assert START_HEADING.startswith(INJECTED_PREFIX) and PROMPT_HEADING.startswith(INJECTED_PREFIX)
