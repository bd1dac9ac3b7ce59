"""extract_once: one call, one retry that quotes the parse error, typed failures."""

from __future__ import annotations

import json
from datetime import date

import pytest
from fake_openai_server import FakeLLMServer, error_reply

from tiermem.errors import ExtractionError, ProviderError
from tiermem.extract.parse import NewFact
from tiermem.extract.prompt import EXTRACTION_SCHEMA, build_extraction_messages
from tiermem.extract.run import extract_once
from tiermem.models.openai_chat import OpenAIChat
from tiermem.models.retry import RetryPolicy
from tiermem.testing import ScriptedChatModel

GOOD = json.dumps({"newFacts": [{"content": "Keeps bees", "category": "knowledge", "confidence": 0.9}],
                   "factsToRemove": [1]})
MESSAGES = build_extraction_messages([(1, "Has no hobbies", "knowledge", 0.6)], {},
                                     [{"role": "user", "content": "I started keeping bees this spring."}],
                                     date(2026, 11, 22))


def test_good_reply_needs_one_call() -> None:
    llm = ScriptedChatModel([GOOD])
    result = extract_once(llm, MESSAGES, valid_short_ids={1})
    assert result.new_facts == (NewFact("Keeps bees", "knowledge", 0.9),)
    assert result.facts_to_remove == (1,)
    (request,) = llm.requests
    assert request.messages == MESSAGES and request.json_schema == EXTRACTION_SCHEMA
    assert llm.remaining == []


def test_retry_quotes_the_parse_error_and_the_reply() -> None:
    bad = "Sure! The user keeps bees."
    llm = ScriptedChatModel([bad, GOOD])
    result = extract_once(llm, MESSAGES, valid_short_ids={1})
    assert [f.content for f in result.new_facts] == ["Keeps bees"]
    first, second = llm.requests
    assert second.messages[: len(MESSAGES)] == MESSAGES
    assert second.messages[-2] == {"role": "assistant", "content": bad}
    quoted = second.messages[-1]
    assert quoted["role"] == "user"
    assert "could not be used: the reply contains no JSON object" in quoted["content"]
    assert llm.remaining == []


def test_two_unusable_replies_raise_with_the_raw_reply() -> None:
    llm = ScriptedChatModel(["<think>let me think about", '{"answer": "bees"}'])
    with pytest.raises(ExtractionError, match="after one retry.*newFacts") as info:
        extract_once(llm, MESSAGES, valid_short_ids={1})
    assert info.value.raw == '{"answer": "bees"}'
    assert "inside a <think> block" in llm.requests[1].messages[-1]["content"]
    assert llm.remaining == []


def test_provider_error_propagates_without_retry() -> None:
    llm = ScriptedChatModel([ProviderError("HTTP 503"), GOOD])
    with pytest.raises(ProviderError, match="503"):
        extract_once(llm, MESSAGES, valid_short_ids={1})
    assert len(llm.requests) == 1 and llm.remaining == [GOOD]


def test_provider_error_on_the_retry_propagates() -> None:
    llm = ScriptedChatModel(["no json", ProviderError("connection reset")])
    with pytest.raises(ProviderError, match="connection reset"):
        extract_once(llm, MESSAGES, valid_short_ids={1})


def test_prompt_examples_echoed_by_the_model_are_dropped() -> None:
    reply = json.dumps({"newFacts": [
        {"content": "Prefers dark mode in every editor", "category": "preference", "confidence": 0.95},
        {"content": "Keeps bees", "category": "knowledge", "confidence": 0.9}], "factsToRemove": []})
    result = extract_once(ScriptedChatModel([reply]), MESSAGES, valid_short_ids={1})
    assert [f.content for f in result.new_facts] == ["Keeps bees"]
    assert result.dropped[-1].reason.startswith("repeats an example of the prompt")


def test_example_sentence_kept_when_the_conversation_says_it() -> None:
    messages = build_extraction_messages([], {}, [{"role": "user", "content": "I prefer dark mode, always."}],
                                         date(2026, 11, 22))
    reply = json.dumps({"newFacts": [{"content": "Prefers dark mode", "category": "preference",
                                      "confidence": 0.95}], "factsToRemove": []})
    result = extract_once(ScriptedChatModel([reply]), messages)
    assert result.new_facts == (NewFact("Prefers dark mode", "preference", 0.95),)


def test_through_the_real_openai_client() -> None:
    fenced = "```json\n" + GOOD + "\n```"
    with FakeLLMServer([error_reply(503, "loading model"), "I could not find facts.", fenced]) as server:
        llm = OpenAIChat("qwen2.5:7b", base_url=server.url, compatible=True,
                         retry=RetryPolicy(jitter=0.0, sleep=lambda s: None))
        result = extract_once(llm, MESSAGES, valid_short_ids={1})
        assert server.remaining == [] and server.unexpected == 0
        bodies = [r.body for r in server.requests]
    assert result.new_facts == (NewFact("Keeps bees", "knowledge", 0.9),)
    assert bodies[0]["response_format"]["json_schema"]["schema"] == EXTRACTION_SCHEMA
    assert bodies[1]["messages"] == MESSAGES  # the 503 was retried with the same request
    assert bodies[2]["messages"][-2] == {"role": "assistant", "content": "I could not find facts."}
    assert "no JSON object" in bodies[2]["messages"][-1]["content"]
