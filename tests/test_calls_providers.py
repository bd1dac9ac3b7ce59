"""Every provider path fills the LLM call log: the real OpenAI and Anthropic SDKs against the local
fake server (chat with a retried 500 and a parse failure, embeddings with a retried 500), the
registry's ``openai:MODEL`` and ``openai-compatible:MODEL`` built by ``Memory``. Both backends."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest, Reply, ReplySpec, error_reply

from tiermem import Memory, ProviderError
from tiermem.embedders.openai import OpenAIEmbedder
from tiermem.models.anthropic_chat import AnthropicChat
from tiermem.models.openai_chat import OpenAIChat
from tiermem.models.retry import RetryPolicy
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tokens import count_tokens

pytestmark = pytest.mark.usefixtures("backend")

TEA = {"content": "Drinks green tea", "category": "preference", "confidence": 0.9}
GOOD_EXTRACTION = json.dumps({"user": None, "history": None, "factsToRemove": [], "newFacts": [TEA]})
TURNS = [{"role": "user", "content": "I drink green tea every morning."}]
HI = [{"role": "user", "content": "hi"}]


def embeddings_body(count: int, dim: int = 4, usage: int | None = 7) -> dict[str, Any]:
    data = [{"object": "embedding", "index": i, "embedding": [0.1 * (i + 1), 0.2, 0.3, 0.4][:dim]}
            for i in range(count)]
    return {"object": "list", "data": data, "model": "text-embedding-3-small",
            "usage": {} if usage is None else {"prompt_tokens": usage, "total_tokens": usage}}


def test_openai_chat_retried_500_and_parse_failure(root: Path, clock: FakeClock) -> None:
    sleeps: list[float] = []
    with FakeLLMServer([error_reply(500, "boom"), "not json at all", GOOD_EXTRACTION]) as server:
        llm = OpenAIChat("gpt-4o-mini", base_url=server.url, api_key="sk-test",
                         retry=RetryPolicy(jitter=0.0, sleep=sleeps.append))
        with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC",
                    prices={"openai:gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}) as mem:
            report = mem.extract(TURNS)
            rows = mem.calls.list()
        assert server.call_count == 3 and sleeps == [0.5]
    assert [f.content for f in report.added] == ["Drinks green tea"]
    ok, parse_failed, retried = rows  # newest first
    assert (retried.outcome, retried.attempt, retried.error) == (
        "retried", 1, "InternalServerError (HTTP 500): Error code: 500 - boom")
    assert (retried.prompt_tokens, retried.cost) == (0, None)
    assert (parse_failed.outcome, parse_failed.attempt) == ("parse_failed", 2)
    assert (ok.outcome, ok.attempt) == ("ok", 1)
    for row in (ok, parse_failed):
        assert (row.provider, row.model, row.purpose) == ("openai", "gpt-4o-mini", "extraction")
        # the fake server reports usage: 10 prompt and 5 completion tokens
        assert (row.prompt_tokens, row.completion_tokens, row.tokens_counted) == (10, 5, False)
        assert row.cost == pytest.approx((10 * 0.15 + 5 * 0.6) / 1e6)
    assert all(r.latency_ms > 0 for r in rows)


def test_openai_chat_failure_after_retries_is_provider_error(root: Path, clock: FakeClock) -> None:
    with FakeLLMServer([error_reply(503, "busy"), error_reply(503, "still busy")]) as server:
        llm = OpenAIChat("gpt-4o-mini", base_url=server.url, api_key="sk-test",
                         retry=RetryPolicy(max_retries=1, jitter=0.0, sleep=lambda s: None))
        with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            with pytest.raises(ProviderError):
                mem.extract(TURNS)
            rows = mem.calls.list()
    assert [(r.outcome, r.attempt) for r in rows] == [("provider_error", 2), ("retried", 1)]
    assert rows[0].error is not None and "failed after 2 attempts" in rows[0].error


def test_openai_structured_output_refused_then_downgraded(root: Path, clock: FakeClock) -> None:
    def respond(request: RecordedRequest) -> ReplySpec:
        if request.body.get("response_format", {}).get("type") == "json_schema":
            return error_reply(400, "response_format json_schema is not supported", error_type="invalid_request_error")
        return GOOD_EXTRACTION

    with FakeLLMServer(respond) as server:
        llm = OpenAIChat("local", base_url=server.url, compatible=True)
        with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            mem.extract(TURNS)
            rows = mem.calls.list()
    assert [(r.outcome, r.attempt, r.provider) for r in rows] == [("ok", 2, "openai-compatible"),
                                                                  ("retried", 1, "openai-compatible")]


def test_registry_openai_model_built_by_memory(root: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    with FakeLLMServer(["hello"]) as server, Memory(root, llm="openai:gpt-4o-mini", llm_base_url=server.url,
                                                     embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            assert mem.llm is not None and mem.llm.complete(HI) == "hello"
            (row,) = mem.calls.list()
    assert (row.provider, row.model, row.purpose, row.outcome, row.prompt_tokens) == (
        "openai", "gpt-4o-mini", "other", "ok", 10)


def test_compatible_server_without_usage_is_counted(root: Path, clock: FakeClock) -> None:
    body = {"id": "x", "object": "chat.completion", "created": 1, "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "counted reply"},
                         "finish_reason": "stop"}]}
    with FakeLLMServer([body]) as server, Memory(root, llm="openai-compatible:m", llm_base_url=server.url,
                                                 embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            assert mem.llm is not None
            mem.llm.complete(HI)
            (row,) = mem.calls.list()
    assert row.tokens_counted and (row.prompt_tokens, row.completion_tokens) == (count_tokens("hi"),
                                                                                 count_tokens("counted reply"))


def test_anthropic_overloaded_then_ok(root: Path, clock: FakeClock) -> None:
    sleeps: list[float] = []
    with FakeLLMServer([error_reply(529, "Overloaded", error_type="overloaded_error"), "hello"]) as server:
        llm = AnthropicChat("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.base_url,
                            retry=RetryPolicy(jitter=0.0, sleep=sleeps.append))
        with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            assert mem.llm is not None and mem.llm.complete(HI) == "hello"
            rows = mem.calls.list()
    ok, retried = rows
    assert (retried.outcome, retried.provider, retried.model) == ("retried", "anthropic", "claude-haiku-4-5")
    assert retried.error is not None and "HTTP 529" in retried.error
    assert (ok.outcome, ok.attempt, ok.prompt_tokens, ok.completion_tokens) == ("ok", 2, 10, 5)
    assert not ok.tokens_counted


def test_anthropic_error_is_provider_error(root: Path, clock: FakeClock) -> None:
    with FakeLLMServer([error_reply(401, "invalid x-api-key", error_type="authentication_error")]) as server:
        llm = AnthropicChat("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.base_url)
        with Memory(root, llm=llm, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
            with pytest.raises(ProviderError):
                mem.extract(TURNS)
            (row,) = mem.calls.list()
    assert (row.outcome, row.purpose, row.provider) == ("provider_error", "extraction", "anthropic")
    assert row.error is not None and "HTTP 401" in row.error


def test_openai_embeddings_retried_500_then_ok(root: Path, clock: FakeClock) -> None:
    with FakeLLMServer([Reply(status=500, body={"error": {"message": "boom"}}, headers={"retry-after-ms": "1"}),
                        embeddings_body(2)]) as server:
        embedder = OpenAIEmbedder("text-embedding-3-small", base_url=server.url, api_key="sk-test", dimensions=4)
        with Memory(root, llm="none", embedder=embedder, clock=clock, timezone="UTC",
                    prices={"openai:text-embedding-3-small": {"input_per_mtok": 0.02, "output_per_mtok": 0}}) as mem:
            vectors = mem.embedder.embed(["green tea", "black coffee"])
            rows = mem.calls.list(purpose="embed")
        assert server.call_count == 2
    assert vectors.shape == (2, 4) and np.isfinite(vectors).all()
    ok, retried = rows
    assert (retried.outcome, retried.error, retried.attempt) == ("retried", "HTTP 500", 1)
    assert (ok.outcome, ok.attempt, ok.prompt_tokens, ok.completion_tokens) == ("ok", 2, 7, 0)
    assert not ok.tokens_counted
    assert (ok.provider, ok.model) == ("openai", "text-embedding-3-small@4d")
    assert ok.cost == pytest.approx(7 * 0.02 / 1e6)


def test_compatible_embeddings_malformed_reply_and_counted_tokens(root: Path, clock: FakeClock) -> None:
    with FakeLLMServer([embeddings_body(1, usage=None), {"data": "nonsense"}]) as server:
        embedder = OpenAIEmbedder("nomic", provider="openai-compatible", base_url=server.url, max_retries=0,
                                  dimensions=4)
        with Memory(root, llm="none", embedder=embedder, clock=clock, timezone="UTC") as mem:
            mem.embedder.embed(["green tea"])
            with pytest.raises(ProviderError):
                mem.embedder.embed(["green tea"])
            failed, ok = mem.calls.list()
    assert (ok.outcome, ok.tokens_counted, ok.prompt_tokens) == ("ok", True, count_tokens("green tea"))
    assert failed.outcome == "provider_error" and "malformed" in (failed.error or "")


def test_local_embedders_make_no_rows(root: Path, clock: FakeClock) -> None:
    with Memory(root, llm="none", embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.facts.add("Drinks green tea", "preference", 0.9)
        assert mem.search("green tea")
        assert mem.calls.list() == [] and mem.calls.totals().calls == 0


def test_registry_embedder_built_by_memory_is_logged(root: Path, clock: FakeClock) -> None:
    with FakeLLMServer([embeddings_body(1, usage=3)]) as server, Memory(
            root, llm="none", embedder="openai-compatible:nomic-embed", embedder_base_url=server.url, clock=clock,
            timezone="UTC") as mem:
        assert mem.embedder.embed(["tea"]).shape == (1, 4)
        (row,) = mem.calls.list()
    assert (row.purpose, row.provider, row.model, row.prompt_tokens, row.outcome) == (
        "embed", "openai-compatible", "nomic-embed", 3, "ok")
