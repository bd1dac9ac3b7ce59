"""The real ``anthropic`` SDK against the local fake server."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest, ReplySpec, anthropic_reply, error_reply

from tiermem.errors import ConfigError, ProviderError
from tiermem.models.anthropic_chat import AnthropicChat, split_system
from tiermem.models.registry import ProviderOptions, make_llm
from tiermem.models.retry import RetryPolicy

SCHEMA: dict[str, Any] = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"],
                          "additionalProperties": False}


def _chat(server: FakeLLMServer, sleeps: list[float], **kwargs: Any) -> AnthropicChat:
    return AnthropicChat("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.base_url,
                         retry=RetryPolicy(jitter=0.0, sleep=sleeps.append), **kwargs)


def test_system_split_and_structured_output() -> None:
    sleeps: list[float] = []
    with FakeLLMServer(['{"x": 2}']) as server:
        reply = _chat(server, sleeps, max_tokens=512).complete(
            [{"role": "system", "content": "Rules."}, {"role": "user", "content": "Turns."}], json_schema=SCHEMA)
        assert reply == '{"x": 2}'
        (req,) = server.requests
    assert req.path == "/v1/messages"
    # the SDK sends the key as x-api-key or (newer versions) as a bearer token
    assert "sk-ant-test" in (req.headers.get("x-api-key") or req.headers.get("authorization", ""))
    assert req.body["system"] == "Rules."
    assert req.body["messages"] == [{"role": "user", "content": "Turns."}]
    assert req.body["max_tokens"] == 512
    assert req.body["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}


def test_overloaded_then_success() -> None:
    sleeps: list[float] = []
    with FakeLLMServer([error_reply(529, "Overloaded", error_type="overloaded_error"),
                        error_reply(429, "rate", error_type="rate_limit_error"), "ok"]) as server:
        assert _chat(server, sleeps).complete([{"role": "user", "content": "hi"}]) == "ok"
        assert server.call_count == 3
    assert sleeps == [0.5, 1.0]


def test_errors_map_to_provider_error() -> None:
    with FakeLLMServer([error_reply(401, "invalid x-api-key", error_type="authentication_error")]) as server:
        with pytest.raises(ProviderError, match="HTTP 401") as info:
            _chat(server, []).complete([{"role": "user", "content": "hi"}])
        assert server.call_count == 1
    assert info.value.__cause__ is not None


def test_refused_structured_output_falls_back_once() -> None:
    def respond(request: RecordedRequest) -> ReplySpec:
        if "output_config" in request.body:
            return error_reply(400, "output_config.format is not supported for this model",
                               error_type="invalid_request_error")
        return anthropic_reply('{"x": 3}')

    with FakeLLMServer(respond) as server:
        llm = _chat(server, [])
        assert llm.complete([{"role": "user", "content": "hi"}], json_schema=SCHEMA) == '{"x": 3}'
        assert llm.complete([{"role": "user", "content": "hi"}], json_schema=SCHEMA) == '{"x": 3}'
        assert ["output_config" in r.body for r in server.requests] == [True, False, False]
        assert llm.structured is False


def test_split_system_merges_and_starts_with_user() -> None:
    system, turns = split_system([
        {"role": "system", "content": "A"},
        {"role": "assistant", "content": "hello"},
        {"role": "system", "content": "B"},
        {"role": "user", "content": [{"type": "text", "text": "one"}]},
        {"role": "tool", "content": "two"},
    ])
    assert system == "A\n\nB"
    assert turns == [{"role": "user", "content": "(start)"}, {"role": "assistant", "content": "hello"},
                     {"role": "user", "content": "one\n\ntwo"}]


def test_missing_sdk_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "anthropic", None)  # what an absent optional extra looks like
    with pytest.raises(ConfigError, match=r"tiermem\[anthropic\]"):
        make_llm("anthropic:claude-haiku-4-5", ProviderOptions(api_key="sk-ant-x"))


def test_missing_key_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        make_llm("anthropic:claude-haiku-4-5", ProviderOptions())
