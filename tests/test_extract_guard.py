"""Injected memory never reaches extraction; turns are filtered and scrubbed."""

from __future__ import annotations

from tiermem.extract.guard import INJECTION_END, INJECTION_START, clean_turns, strip_injected_memory, wrap_injection
from tiermem.redact import redact

INJECTION = """User Context:
- Work: Backend engineer at Finlytics
- Current Focus: Billing migration

History:
- Recent: Moved to Porto

Facts:
- [preference | 0.95] Prefers dark mode
- [knowledge | 0.80] Has a cat named Miso
..."""


def test_marked_block_is_removed() -> None:
    text = f"Before.\n{wrap_injection(INJECTION)}\nI adopted a dog."
    assert strip_injected_memory(text) == "Before.\n\nI adopted a dog."


def test_unterminated_marker_removes_the_rest() -> None:
    assert strip_injected_memory(f"Hi.\n{INJECTION_START}\nFacts:\n- [goal | 0.90] Run") == "Hi."


def test_unmarked_injection_format_is_removed() -> None:
    text = f"{INJECTION}\n\nI also started learning Rust."
    assert strip_injected_memory(text) == "I also started learning Rust."


def test_similar_user_text_is_kept() -> None:
    text = ("History: I studied it for years.\nFacts:\n- the sky is blue\n"
            "- [hobby | 0.9] not a tiermem category\n- [goal | 0.9 ] wrong spacing")
    assert strip_injected_memory(text) == text


def test_bare_fact_lines_are_removed() -> None:
    text = "As you know:\n- [goal | 0.85] Wants to run a marathon\nAnyway, I signed up for Berlin."
    assert strip_injected_memory(text) == "As you know:\nAnyway, I signed up for Berlin."


def test_clean_turns_filters_roles_strips_and_scrubs() -> None:
    turns = [
        {"role": "system", "content": wrap_injection(INJECTION)},
        {"role": "user", "content": f"{INJECTION_START}{INJECTION}{INJECTION_END}"},
        {"role": "user", "content": "My key is sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z, I keep bees."},
        {"role": "tool", "content": "{\"weather\": \"sunny\"}"},
        {"role": "assistant", "content": [{"type": "text", "text": "Bees are great."}]},
    ]
    assert clean_turns(turns, scrub=redact) == [
        {"role": "user", "content": "My key is [REDACTED:openai_key], I keep bees."},
        {"role": "assistant", "content": "Bees are great."},
    ]
