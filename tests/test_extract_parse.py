"""Item-by-item robustness of parse_extraction beyond the fixture shapes."""

from __future__ import annotations

import json
import logging

import pytest

from tiermem.errors import ExtractionError
from tiermem.extract.jsontext import strip_thinking
from tiermem.extract.parse import NewFact, parse_extraction


def _facts(*items: object) -> str:
    return json.dumps({"newFacts": list(items), "factsToRemove": []})


@pytest.mark.parametrize(
    ("given", "expected"),
    [(0.9, 0.9), ("0.9", 0.9), ("85%", 0.85), (90, 0.9), ("90", 0.9), (1, 1.0), (0, 0.0),
     ("high", 0.9), ("Very High", 0.95), ("medium", 0.7), ("low", 0.3)],
)
def test_confidence_forms(given: object, expected: float) -> None:
    result = parse_extraction(_facts({"content": "Likes tea", "category": "preference", "confidence": given}), set())
    assert result.new_facts == (NewFact("Likes tea", "preference", expected),)


@pytest.mark.parametrize("given", [True, None, "unsure", 101, -1, "NaN", float("inf"), [0.9]])
def test_unusable_confidence_drops_only_that_fact(given: object) -> None:
    raw = _facts({"content": "Likes tea", "category": "preference", "confidence": given},
                 {"content": "Likes cake", "category": "preference", "confidence": 0.8})
    result = parse_extraction(raw, set())
    assert [f.content for f in result.new_facts] == ["Likes cake"]
    assert len(result.dropped) == 1 and "confidence" in result.dropped[0].reason
    assert "Likes tea" in result.dropped[0].item


def test_invalid_content_is_dropped_with_reason(caplog: pytest.LogCaptureFixture) -> None:
    raw = _facts({"content": "", "category": "goal", "confidence": 0.9},
                 {"content": "x" * 5000, "category": "goal", "confidence": 0.9},
                 {"content": "bad\x00byte", "category": "goal", "confidence": 0.9},
                 {"content": 42, "category": "goal", "confidence": 0.9},
                 {"content": "Runs daily", "category": "behavior", "confidence": 0.9},
                 {"content": "runs   DAILY", "category": "behavior", "confidence": 0.7},
                 7)
    with caplog.at_level(logging.INFO, logger="tiermem.extract.parse"):
        result = parse_extraction(raw, set())
    assert result.new_facts == (NewFact("Runs daily", "behavior", 0.9),)
    reasons = [d.reason for d in result.dropped]
    assert reasons[0] == "content must not be empty"
    assert "limit is 4000" in reasons[1]
    assert "control or binary" in reasons[2]
    assert reasons[3] == "content is not text"
    assert reasons[4] == "repeats another new fact of this reply"
    assert reasons[5] == "a int, not an object"
    assert caplog.text.count("extraction: dropped") == 6


def test_removal_ids_are_mapped_checked_and_deduplicated() -> None:
    raw = json.dumps({"newFacts": [], "factsToRemove": [1, "1", "Fact #2", {"id": 3}, "[4]", "id: 9", True, 1.5]})
    result = parse_extraction(raw, {1, 2, 3, 4})
    assert result.facts_to_remove == (1, 2, 3, 4)
    assert [d.reason for d in result.dropped] == ["unknown fact id 9", "not a fact id", "not a fact id"]


def test_removals_as_a_comma_separated_string() -> None:
    result = parse_extraction('{"newFacts": [], "factsToRemove": "2, 3"}', {2, 3})
    assert result.facts_to_remove == (2, 3)


def test_summary_rules() -> None:
    raw = json.dumps({
        "user": {
            "workContext": {"summary": "Writes Go.", "shouldUpdate": "yes"},
            "personalContext": {"summary": "", "shouldUpdate": True},
            "topOfMind": {"summary": "Echoed old text", "shouldUpdate": False},
        },
        "history": {"recent": "Moved to Oslo in 2026.", "earlierContext": {"summary": 5, "shouldUpdate": True},
                    "longTermBackground": {"summary": "x", "shouldUpdate": "maybe"}},
        "newFacts": [],
    })
    result = parse_extraction(raw, set())
    assert result.summaries == {"workContext": "Writes Go.", "recentMonths": "Moved to Oslo in 2026."}
    assert sorted(d.reason for d in result.dropped) == [
        "shouldUpdate is not a boolean",
        "shouldUpdate is true but the summary is empty",
        "summary is not text",
    ]


def test_truncated_inside_removal_ids_drops_the_partial_id() -> None:
    raw = '{"newFacts": [], "factsToRemove": [1, 2'  # the 2 might have been 23
    result = parse_extraction(raw, {1, 2, 23})
    assert result.facts_to_remove == (1,)
    assert result.truncated and result.dropped[0].reason.startswith("unfinished item")


def test_truncated_after_a_complete_item_keeps_everything() -> None:
    raw = '{"newFacts": [{"content": "Likes tea", "category": "preference", "confidence": 0.9},'
    result = parse_extraction(raw, set())
    assert result.new_facts == (NewFact("Likes tea", "preference", 0.9),)
    assert result.truncated and result.dropped == ()


def test_truncated_inside_a_summary_drops_that_summary_only() -> None:
    raw = ('{"user": {"workContext": {"summary": "Writes Go.", "shouldUpdate": true}, '
           '"topOfMind": {"summary": "Planning a move to', )
    result = parse_extraction(raw[0], set())
    assert result.summaries == {"workContext": "Writes Go."}
    assert "topOfMind" in result.dropped[0].item


@pytest.mark.parametrize(
    ("raw", "message"),
    [("", "empty"), ("   \n", "empty"), ("<think>hmm, the user", "inside a <think> block"),
     ("Sure, here you go: {", "cut off before any usable content"), ('{"foo": {"bar": 1}}', "no JSON object with"),
     ("No facts.", "no JSON object")],
)
def test_nothing_usable_raises_extraction_error_with_raw(raw: str, message: str) -> None:
    with pytest.raises(ExtractionError, match=message) as info:
        parse_extraction(raw, set())
    assert info.value.raw == raw


def test_first_recognised_candidate_wins_over_earlier_json() -> None:
    raw = 'Example format: {"a": 1}. Answer:\n{"newFacts": [{"content": "Uses Linux", "category": "knowledge", ' \
          '"confidence": 0.8}], "factsToRemove": []}'
    assert parse_extraction(raw, set()).new_facts == (NewFact("Uses Linux", "knowledge", 0.8),)


def test_strip_thinking_variants() -> None:
    assert strip_thinking("<think>a</think>{}")[0] == "{}"
    assert strip_thinking("<THINKING>a {x}</THINKING>\n{}")[0].strip() == "{}"
    assert strip_thinking("reasoning only closes</think>{}") == ("{}", False)
    assert strip_thinking("{} <think>never closes") == ("{} ", True)
