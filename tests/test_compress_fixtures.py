"""Compression on the three long coding-agent transcripts, the pair validator, and the summary."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tiermem.compress import check_tool_pairs, compress
from tiermem.testing import ScriptedChatModel

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "transcripts"
NAMES = ["invoicer", "fetchkit", "retryq"]


def load(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))
    return doc


def turn_starts(messages: list[dict[str, Any]]) -> list[int]:
    """Written independently of the library: a user message without tool_result blocks."""
    starts = []
    for index, message in enumerate(messages):
        content = message["content"]
        is_result = isinstance(content, list) and any(b.get("type") == "tool_result" for b in content)
        if message["role"] == "user" and not is_result:
            starts.append(index)
    return starts


def test_fixtures_are_long_realistic_and_cover_both_shapes() -> None:
    shapes = set()
    for name in NAMES:
        doc = load(name)
        messages = doc["messages"]
        shapes.add(doc["shape"])
        assert 60 <= len(messages) <= 150
        assert len(turn_starts(messages)) >= 5
        assert check_tool_pairs(messages) == []
    assert shapes == {"openai", "anthropic"}
    assert any(
        b.get("is_error") for m in load("fetchkit")["messages"] if isinstance(m["content"], list) for b in m["content"]
    )


def test_fixtures_match_their_generator() -> None:
    run = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "make_transcripts.py"), "--check"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout + run.stderr


@pytest.mark.parametrize("protect_turns", [0, 2, 4])
@pytest.mark.parametrize("name", NAMES)
def test_compression_of_a_transcript_is_safe(name: str, protect_turns: int) -> None:
    messages = load(name)["messages"]
    snapshot = json.dumps(messages)
    result = compress(messages, protect_turns, purge_errors_after=2)

    assert json.dumps(messages) == snapshot  # input untouched
    assert check_tool_pairs(result.messages) == []  # no orphaned or split pairs
    assert [m["role"] for m in result.messages] == [m["role"] for m in messages]
    assert result.tokens_saved > 0
    assert result.tokens_saved == sum(action.tokens_saved for action in result.actions)

    starts = turn_starts(messages)
    assert json.dumps(result.messages[: starts[0] + 1]) == json.dumps(messages[: starts[0] + 1])
    if protect_turns:
        protected_from = starts[-protect_turns]
        assert json.dumps(result.messages[protected_from:]) == json.dumps(messages[protected_from:])
        assert all(action.index < protected_from for action in result.actions)
    changed = {i for i, (a, b) in enumerate(zip(messages, result.messages, strict=True)) if a != b}
    assert changed == {action.index for action in result.actions}


@pytest.mark.parametrize("name", NAMES)
def test_compression_is_idempotent(name: str) -> None:
    once = compress(load(name)["messages"], 2)
    twice = compress(once.messages, 2)
    assert twice.actions == [] and twice.messages == once.messages


def test_each_rule_fires_on_the_transcripts() -> None:
    rules = {name: {a.rule for a in compress(load(name)["messages"], 0).actions} for name in NAMES}
    assert "superseded_output" in rules["invoicer"] and "purged_error_input" in rules["invoicer"]
    assert "purged_error_input" in rules["fetchkit"]  # Anthropic is_error
    assert "duplicate_message" in rules["retryq"]  # the CI log pasted twice


# -- the validator ---------------------------------------------------------------------------


def _first(messages: list[dict[str, Any]], predicate: Any) -> int:
    return next(i for i, m in enumerate(messages) if predicate(m))


def test_validator_reports_a_missing_result_openai() -> None:
    messages = copy.deepcopy(load("invoicer")["messages"])
    index = _first(messages, lambda m: m["role"] == "tool")
    call_id = messages[index]["tool_call_id"]
    del messages[index]
    problems = check_tool_pairs(messages)
    assert len(problems) == 1 and call_id in problems[0] and "no result" in problems[0]


def test_validator_reports_a_result_without_its_call() -> None:
    messages = copy.deepcopy(load("retryq")["messages"])
    index = _first(messages, lambda m: bool(m.get("tool_calls")))
    del messages[index]
    problems = check_tool_pairs(messages)
    assert len(problems) == 1 and "answers no pending call" in problems[0]


def test_validator_reports_a_result_after_an_intervening_message() -> None:
    messages = copy.deepcopy(load("invoicer")["messages"])
    index = _first(messages, lambda m: m["role"] == "tool")
    messages.insert(index, {"role": "assistant", "content": "thinking"})
    problems = check_tool_pairs(messages)
    assert any("no result" in p for p in problems) and any("answers no pending call" in p for p in problems)


def test_validator_anthropic_rules() -> None:
    messages = copy.deepcopy(load("fetchkit")["messages"])
    parallel = _first(
        messages, lambda m: m["role"] == "assistant" and sum(b.get("type") == "tool_use" for b in m["content"]) > 1
    )
    results = messages[parallel + 1]["content"]
    moved = results.pop()  # one result goes missing from the answering message
    problems = check_tool_pairs(messages)
    assert len(problems) == 1 and moved["tool_use_id"] in problems[0]
    results.append(moved)
    results.insert(0, {"type": "text", "text": "here you go"})  # text before tool_result blocks
    assert check_tool_pairs(messages) == [f"message {parallel + 1}: tool_result blocks must come before other blocks"]
    del results[0]
    assert check_tool_pairs(messages) == []
    messages[parallel]["content"][-1]["id"] = messages[parallel]["content"][0]["id"]  # duplicate id
    assert any("duplicate tool call id" in p for p in check_tool_pairs(messages))


def test_validator_reports_a_pending_call_at_the_end() -> None:
    messages = copy.deepcopy(load("retryq")["messages"])
    assert messages[-2]["role"] == "tool" and check_tool_pairs(messages[:-1]) == []
    cut = messages[:-2]  # ends with the assistant's call, its result not there yet
    assert check_tool_pairs(cut) == [
        f"message {len(cut) - 1}: tool call {cut[-1]['tool_calls'][0]['id']!r} has no result at the end"
    ]


# -- the optional running summary ------------------------------------------------------------


def test_summary_folds_in_what_was_removed() -> None:
    messages = load("invoicer")["messages"]
    llm = ScriptedChatModel(["The tests first failed on ISO dates and VAT rounding; both were fixed."])
    result = compress(messages, 4, llm=llm, summary="Session started: fix failing tests.")
    assert result.summary == "The tests first failed on ISO dates and VAT rounding; both were fixed."
    assert result.summary_error is None and llm.remaining == []
    (request,) = llm.requests
    assert request.messages[0]["role"] == "system" and "never invent" in request.messages[0]["content"].lower()
    sent = request.messages[1]["content"]
    assert "Session started: fix failing tests." in sent
    assert "does not match format '%d/%m/%Y'" in sent  # from the superseded first pytest run
    assert "input of a failed edit_file call" in sent
    assert result.tokens_saved > 0


def test_summary_is_not_requested_when_nothing_was_lost() -> None:
    llm = ScriptedChatModel([])
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    result = compress(messages, 0, llm=llm, summary="before")
    assert result.summary == "before" and llm.requests == []


@pytest.mark.parametrize("reply", [RuntimeError("provider down"), "   "])
def test_summary_failure_keeps_the_previous_summary_and_says_why(reply: Any) -> None:
    llm = ScriptedChatModel([reply])
    result = compress(load("retryq")["messages"], 2, llm=llm, summary="earlier summary")
    assert result.summary == "earlier summary"
    assert result.summary_error and ("provider down" in result.summary_error or "empty" in result.summary_error)
    assert result.tokens_saved > 0 and check_tool_pairs(result.messages) == []
