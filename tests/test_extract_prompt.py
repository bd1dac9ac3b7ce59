"""What the extraction request contains: date from the clock, short ids, summaries, turns."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from tiermem.errors import InvalidInput
from tiermem.extract.prompt import (
    EXTRACTION_SCHEMA,
    MAX_TURN_CHARS,
    build_extraction_messages,
    prompt_template,
    render_system_prompt,
)
from tiermem.models.openai_chat import is_strict
from tiermem.testing import FakeClock
from tiermem.types import CATEGORIES

TURNS = [{"role": "user", "content": "I moved to Porto last month."},
         {"role": "assistant", "content": "Nice! How do you like it?"}]


def test_request_shows_date_ids_summaries_and_turns() -> None:
    clock = FakeClock(datetime(2026, 11, 22, 9, 30, tzinfo=UTC))
    messages = build_extraction_messages(
        [(1, "Lives in Lisbon", "knowledge", 0.9), (2, "Prefers  tea\nover coffee", "preference", 0.75)],
        {"workContext": "Backend engineer.", "recentMonths": "Changed teams."},
        TURNS,
        clock.now().date(),
    )
    assert [m["role"] for m in messages] == ["system", "user"]
    system, user = messages[0]["content"], messages[1]["content"]
    assert "Today is 2026-11-22 (Sunday)." in system and "{{today}}" not in system
    assert "[1] (knowledge, 0.90) Lives in Lisbon" in user
    assert "[2] (preference, 0.75) Prefers tea over coffee" in user
    assert "user.workContext: Backend engineer." in user
    assert "history.recentMonths: Changed teams." in user
    assert "user.topOfMind: (empty)" in user
    assert "[user]\nI moved to Porto last month.\n\n[assistant]\nNice! How do you like it?" in user
    assert user.index("EXISTING FACTS") < user.index("NEW CONVERSATION")


def test_date_is_rendered_at_call_time_not_frozen() -> None:
    clock = FakeClock(datetime(2026, 12, 31, 23, 0, tzinfo=UTC))
    first = build_extraction_messages([], {}, TURNS, clock.now().date())[0]["content"]
    clock.advance(timedelta(hours=2).total_seconds())
    second = build_extraction_messages([], {}, TURNS, clock.now().date())[0]["content"]
    assert "2026-12-31 (Thursday)" in first and "2027-01-01 (Friday)" in second
    assert render_system_prompt(datetime(2027, 1, 1, 5, tzinfo=UTC)) == second


def test_no_existing_facts_and_content_blocks() -> None:
    turns = [{"role": "user", "content": [{"type": "text", "text": "I use Arch"}, {"type": "image_url"}]},
             {"role": "assistant", "content": ""}]
    user = build_extraction_messages([], {}, turns, datetime(2026, 1, 1).date())[1]["content"]
    assert "EXISTING FACTS (id, category, confidence)\n(none)" in user
    assert "[user]\nI use Arch" in user and "[assistant]" not in user


def test_long_turn_is_cut() -> None:
    turns = [{"role": "user", "content": "a" * (MAX_TURN_CHARS + 500)}]
    user = build_extraction_messages([], {}, turns, datetime(2026, 1, 1).date())[1]["content"]
    assert "[... 500 more characters cut]" in user and "a" * (MAX_TURN_CHARS + 1) not in user


@pytest.mark.parametrize(
    ("existing", "summaries", "turns"),
    [([], {"mood": "x"}, TURNS), ([(1, "a", "goal", 0.9), (1, "b", "goal", 0.9)], {}, TURNS),
     ([("1", "a", "goal", 0.9)], {}, TURNS), ([], {}, []), ([], {}, [{"role": "user", "content": "  "}])],
    ids=["unknown-summary", "duplicate-id", "string-id", "no-turns", "blank-turns"],
)
def test_bad_input_is_rejected(existing: list[tuple[int, str, str, float]], summaries: dict[str, str],
                               turns: list[dict[str, str]]) -> None:
    with pytest.raises(InvalidInput):
        build_extraction_messages(existing, summaries, turns, datetime(2026, 1, 1).date())


def test_schema_is_strict_and_lists_categories() -> None:
    assert is_strict(EXTRACTION_SCHEMA)
    item = EXTRACTION_SCHEMA["properties"]["newFacts"]["items"]
    assert item["properties"]["category"]["enum"] == list(CATEGORIES)
    assert set(EXTRACTION_SCHEMA["required"]) == {"user", "history", "newFacts", "factsToRemove"}


def test_template_is_package_data_with_placeholder() -> None:
    template = prompt_template()
    assert template.count("{{today}}") == 1
    for category in CATEGORIES:
        assert category in template
