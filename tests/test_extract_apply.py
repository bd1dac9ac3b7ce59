"""``mem.extract``: both sides of the LLM step — what was sent and what ended up stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiermem import ConfigError, ExtractionError, Memory, ProviderError
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

pytestmark = pytest.mark.usefixtures("backend")

TURNS = [
    {"role": "user", "content": "I moved to Lisbon last month and I now work at Acme on billing."},
    {"role": "assistant", "content": "Congratulations on the move! How is Acme so far?"},
]


def reply(new_facts: list[dict[str, object]], remove: list[int] | None = None,
          top_of_mind: str | None = None) -> str:
    empty = {"summary": "", "shouldUpdate": False}
    user = {"workContext": empty, "personalContext": empty, "topOfMind": empty}
    if top_of_mind:
        user["topOfMind"] = {"summary": top_of_mind, "shouldUpdate": True}
    history = {"recentMonths": empty, "earlierContext": empty, "longTermBackground": empty}
    return json.dumps({"user": user, "history": history, "newFacts": new_facts, "factsToRemove": remove or []})


def memory(root: Path, clock: FakeClock, model: ScriptedChatModel) -> Memory:
    return Memory(root, llm=model, embedder=HashEmbedder(), clock=clock, timezone="UTC")


def test_prompt_has_turns_existing_facts_and_date(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([reply([{"content": "Lives in Lisbon", "category": "context", "confidence": 0.9}])])
    with memory(root, clock, model) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.95)
        report = mem.extract(TURNS, thread_id="t1")
        sent = model.requests[0].text
        assert "I moved to Lisbon last month" in sent
        assert "Prefers dark mode" in sent and "2026-03-14" in sent
        assert [f.content for f in report.added] == ["Lives in Lisbon"]
        stored = {f.content: f for f in mem.facts.list()}
        assert stored["Lives in Lisbon"].source == "t1" and stored["Lives in Lisbon"].category == "context"
        assert model.remaining == []


def test_removal_by_short_id_tombstones_and_summaries_update(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([
        reply([{"content": "Lives in Lisbon", "category": "context", "confidence": 0.9}], remove=[1],
              top_of_mind="Settling into the new job"),
        reply([{"content": "Lives in Porto", "category": "context", "confidence": 0.9}]),
    ])
    with memory(root, clock, model) as mem:
        old = mem.facts.add("Lives in Porto", "context", 0.8)
        assert old is not None
        report = mem.extract(TURNS)
        assert [f.id for f in report.removed] == [old.id]
        assert report.summaries_updated == ["topOfMind"]
        assert mem.facts.summaries() == {"topOfMind": "Settling into the new job"}
        assert "Current Focus: Settling into the new job" in mem.format_for_injection()
        second = mem.extract([{"role": "user", "content": "Porto was lovely."}])
        assert second.added == [] and "tombstoned" in second.skipped[0][1]
        assert [f.content for f in mem.facts.list()] == ["Lives in Lisbon"]
        actions = [e.action for e in mem.facts.history()]
        assert "deleted" in actions and "skipped" in actions and "summary" in actions


def test_low_confidence_duplicates_and_bad_items_are_reported(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([reply([
        {"content": "Works at Acme", "category": "context", "confidence": 0.3},
        {"content": "prefers dark MODE", "category": "preference", "confidence": 0.9},
        {"content": "Likes jazz", "category": "opinion", "confidence": 0.9},
        {"content": "Works on billing", "category": "Context", "confidence": "85%"},
    ])])
    with memory(root, clock, model) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.95)
        report = mem.extract(TURNS)
        assert [(f.content, f.confidence) for f in report.added] == [("Works on billing", 0.85)]
        reasons = " | ".join(r for _, r in report.skipped)
        assert "below threshold" in reasons and "duplicate" in reasons
        assert report.dropped and "opinion" in report.dropped[0][0]


def test_unparseable_twice_raises_with_raw_and_changes_nothing(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel(["Sure! Here are the facts: none really.", "I cannot produce JSON today."])
    with memory(root, clock, model) as mem:
        with pytest.raises(ExtractionError) as info:
            mem.extract(TURNS)
        assert "JSON today" in info.value.raw
        assert "could not be used" in model.requests[1].messages[-1]["content"]
        assert mem.facts.list() == []


def test_provider_error_propagates(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([ProviderError("HTTP 503 from provider")])
    with memory(root, clock, model) as mem, pytest.raises(ProviderError):
        mem.extract(TURNS)


def test_secrets_and_injected_memory_never_reach_the_model(root: Path, clock: FakeClock) -> None:
    model = ScriptedChatModel([reply([])])
    key = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6"
    turns = [{"role": "user", "content": f"my key is {key} please remember"}]
    with memory(root, clock, model) as mem:
        mem.extract(turns)
        assert key not in model.requests[0].text


def test_no_llm_is_a_clear_error(mem: Memory) -> None:
    with pytest.raises(ConfigError, match="no LLM"):
        mem.extract(TURNS)
