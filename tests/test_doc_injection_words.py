"""docs/coding-agents.md, "What the prompt hook injects": with the default local embedder a prompt
sharing a fact's words gets it injected, the same question in other words is found only when asked
(the explicit floor), and the docs' floors are the ones in force."""

from __future__ import annotations

from pathlib import Path

from tiermem import Memory

FACT = "The billing API lives in services/ledgerd"
DOC = Path(__file__).resolve().parents[1] / "docs" / "coding-agents.md"


def test_the_prompt_hook_injects_by_words_and_recall_finds_the_paraphrase(tmp_path: Path) -> None:
    with Memory(tmp_path, timezone="UTC") as mem:  # the default embedder: local MiniLM
        mem.facts.add(FACT, "knowledge")
        explicit, inject = mem.search_floor("explicit"), mem.search_floor("inject")
        words = mem.search("where does the billing API live?", min_score=inject)
        other_words = "where is the code for invoicing?"
        assert [hit.text for hit in words] == [FACT]
        assert mem.search(other_words, min_score=inject) == []
        assert [hit.text for hit in mem.search(other_words)] == [FACT]  # explicit floor: found when asked
    text = " ".join(DOC.read_text(encoding="utf-8").split())
    assert f"its floor ({inject:g})" in text and f"explicit questions ({explicit:g})" in text
