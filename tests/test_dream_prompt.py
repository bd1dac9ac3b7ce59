"""The Deep Dream request: both sources, dates, the budget and the rules (R36, R40)."""

from __future__ import annotations

from datetime import date

import pytest

from tiermem import InvalidInput
from tiermem.dream.prompt import DailySource, DreamBudget, build_dream_messages, prompt_template


def test_request_holds_memory_dailies_date_and_budget() -> None:
    dailies = [DailySource(date(2026, 3, 14), "# Daily Memory: 2026-03-14\n\n## Notes (10:00)\n- moved to Munich\n"),
               DailySource(date(2026, 3, 13), "# Daily Memory: 2026-03-13\n\n## Notes (09:00)\n- got a cat\n")]
    messages = build_dream_messages("## Home\n- Lives in Lyon.\n", dailies, date(2026, 3, 14),
                                    DreamBudget(max_bullets=40, max_tokens=900))
    system, user = messages[0]["content"], messages[1]["content"]
    assert [m["role"] for m in messages] == ["system", "user"]
    assert "Today is 2026-03-14 (Saturday)" in system
    assert "at most 40 bullets and about 900 tokens" in system
    assert "{{" not in system
    assert "ONLY information present in the two sources" in system and "Never invent" in system
    assert "[MEMORY]" in system and "[DREAM]" in system
    assert "CURRENT MEMORY.md\n## Home\n- Lives in Lyon." in user
    # oldest day first, each under its date
    assert user.index("=== 2026-03-13 (Friday) ===") < user.index("- got a cat") < user.index(
        "=== 2026-03-14 (Saturday) ===") < user.index("- moved to Munich")


def test_empty_memory_is_shown_as_empty() -> None:
    messages = build_dream_messages("", [DailySource(date(2026, 3, 14), "- a note\n")], date(2026, 3, 14))
    assert "CURRENT MEMORY.md\n(empty)\n" in messages[1]["content"]


def test_the_date_comes_from_the_caller_at_call_time() -> None:
    sources = [DailySource(date(2026, 3, 14), "- a note\n")]
    first = build_dream_messages("", sources, date(2026, 3, 14))[0]["content"]
    later = build_dream_messages("", sources, date(2027, 1, 2))[0]["content"]
    assert "Today is 2026-03-14" in first and "Today is 2027-01-02 (Saturday)" in later
    assert "{{today}}" in prompt_template()  # the template itself holds no date


@pytest.mark.parametrize("dailies", [[], [DailySource(date(2026, 3, 14), "  \n")]])
def test_no_daily_text_is_invalid(dailies: list[DailySource]) -> None:
    with pytest.raises(InvalidInput):
        build_dream_messages("- x\n", dailies, date(2026, 3, 14))


def test_budget_must_be_positive() -> None:
    with pytest.raises(InvalidInput):
        DreamBudget(max_bullets=0)
