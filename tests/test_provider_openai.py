"""The real ``openai`` SDK against a local HTTP server: requests, retries, errors, downgrade."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
from fake_openai_server import FakeLLMServer, RecordedRequest, Reply, ReplySpec, chat_reply, error_reply

from tiermem.errors import ConfigError, ProviderError
from tiermem.models.openai_chat import PLACEHOLDER_API_KEY, OpenAIChat, is_strict
from tiermem.models.protocols import ChatModel
from tiermem.models.registry import ProviderOptions, make_llm
from tiermem.models.retry import RetryPolicy

SCHEMA: dict[str, Any] = {
    "title": "answer",
    "type": "object",
    "properties": {"x": {"type": "integer"}},
    "required": ["x"],
    "additionalProperties": False,
}
MESSAGES = [{"role": "system", "content": "Be terse."}, {"role": "user", "content": "hi"}]


class Sleeps:
    """A fake ``sleep`` that records the requested pauses."""

    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as srv:
        yield srv


def _chat(server: FakeLLMServer, sleeps: Sleeps, **kwargs: Any) -> OpenAIChat:
    policy = RetryPolicy(max_retries=kwargs.pop("max_retries", 3), base_delay=0.5, jitter=0.0, sleep=sleeps)
    return OpenAIChat("gpt-4o-mini", base_url=server.url, api_key="sk-test", retry=policy, **kwargs)


def test_request_body_and_reply(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add('{"x": 1}')
    llm = _chat(server, sleeps, temperature=0.0, max_tokens=300)
    assert isinstance(llm, ChatModel)
    assert llm.complete(MESSAGES, json_schema=SCHEMA) == '{"x": 1}'
    (req,) = server.requests
    assert req.path == "/v1/chat/completions"
    assert req.headers["authorization"] == "Bearer sk-test"
    assert req.body["model"] == "gpt-4o-mini"
    assert req.body["messages"] == MESSAGES
    assert req.body["temperature"] == 0.0
    assert req.body["max_completion_tokens"] == 300
    assert req.body["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
    }
    assert sleeps.calls == []


def test_no_schema_sends_no_response_format(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add("plain answer")
    assert _chat(server, sleeps).complete(MESSAGES) == "plain answer"
    body = server.requests[0].body
    assert "response_format" not in body and "temperature" not in body and "max_completion_tokens" not in body


def test_429_then_success_honours_retry_after(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(error_reply(429, "slow down", headers={"retry-after": "3"}, error_type="rate_limit"), "ok")
    assert _chat(server, sleeps).complete(MESSAGES) == "ok"
    assert server.call_count == 2
    assert sleeps.calls == [3.0]


def test_500_twice_then_success_backs_off_exponentially(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(error_reply(500, "boom"), error_reply(503, "busy"), "fine")
    assert _chat(server, sleeps).complete(MESSAGES) == "fine"
    assert server.call_count == 3
    assert sleeps.calls == [0.5, 1.0]
    assert server.remaining == []


def test_persistent_500_raises_provider_error_after_retries(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(*[error_reply(500, "down")] * 3)
    with pytest.raises(ProviderError, match="after 3 attempts") as info:
        _chat(server, sleeps, max_retries=2).complete(MESSAGES)
    assert server.call_count == 3
    assert sleeps.calls == [0.5, 1.0]
    assert type(info.value.__cause__).__name__ == "InternalServerError"


def test_auth_error_fails_at_once(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(error_reply(401, "Incorrect API key provided", error_type="invalid_request_error"))
    with pytest.raises(ProviderError, match="HTTP 401.*Incorrect API key"):
        _chat(server, sleeps).complete(MESSAGES)
    assert server.call_count == 1 and sleeps.calls == []


def test_connection_drop_is_retried(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(Reply(drop=True), "after the drop")
    assert _chat(server, sleeps).complete(MESSAGES) == "after the drop"
    assert server.call_count == 2 and sleeps.calls == [0.5]


def test_timeout_maps_to_provider_error(server: FakeLLMServer, sleeps: Sleeps) -> None:
    server.add(Reply(delay=5.0, body=chat_reply("too late")))
    with pytest.raises(ProviderError, match="APITimeoutError") as info:
        _chat(server, sleeps, timeout=0.2, max_retries=0).complete(MESSAGES)
    assert type(info.value.__cause__).__name__ == "APITimeoutError"


@pytest.mark.parametrize(
    ("body", "match"),
    [
        (Reply(body="this is not json"), "JSONDecodeError"),
        (Reply(body="plain text body", content_type="text/plain"), "malformed response"),
        ({"choices": []}, "malformed response"),
        ({"unexpected": "shape"}, "malformed response"),
        (chat_reply(None, refusal="I can't help with that"), "refusal: I can't help"),
    ],
    ids=["not-json", "text-plain", "no-choices", "wrong-shape", "refusal"],
)
def test_malformed_bodies_raise_provider_error(server: FakeLLMServer, sleeps: Sleeps, body: ReplySpec,
                                               match: str) -> None:
    server.add(body)
    with pytest.raises(ProviderError, match=match):
        _chat(server, sleeps).complete(MESSAGES)
    assert server.call_count == 1


def test_truncated_reply_is_returned_and_logged(server: FakeLLMServer, sleeps: Sleeps,
                                                caplog: pytest.LogCaptureFixture) -> None:
    server.add(chat_reply('{"x": [1, 2', finish_reason="length"))
    with caplog.at_level(logging.WARNING, logger="tiermem.models.openai_chat"):
        assert _chat(server, sleeps).complete(MESSAGES) == '{"x": [1, 2'
    assert "truncated" in caplog.text


def _refuses(*refused: str) -> Any:
    """A responder that answers 400 to the listed response_format types."""

    def respond(request: RecordedRequest) -> ReplySpec:
        kind = (request.body.get("response_format") or {}).get("type", "none")
        if kind in refused:
            return error_reply(400, f"response_format type {kind} is not supported",
                               error_type="invalid_request_error")
        return f'{{"mode": "{kind}"}}'

    return respond


def _kinds(server: FakeLLMServer) -> list[str]:
    return [(r.body.get("response_format") or {}).get("type", "none") for r in server.requests]


def test_compatible_server_downgrades_to_json_object_once(sleeps: Sleeps) -> None:
    with FakeLLMServer(_refuses("json_schema")) as server:
        llm = OpenAIChat("llama3.1:8b", base_url=server.url, compatible=True,
                         retry=RetryPolicy(jitter=0, sleep=sleeps))
        assert llm.complete(MESSAGES, json_schema=SCHEMA) == '{"mode": "json_object"}'
        assert llm.structured_mode == "json_object"
        assert llm.complete(MESSAGES, json_schema=SCHEMA) == '{"mode": "json_object"}'
        assert _kinds(server) == ["json_schema", "json_object", "json_object"]  # remembered
        assert server.requests[0].headers["authorization"] == f"Bearer {PLACEHOLDER_API_KEY}"
    assert sleeps.calls == []


def test_compatible_server_downgrades_to_plain(sleeps: Sleeps) -> None:
    with FakeLLMServer(_refuses("json_schema", "json_object")) as server:
        llm = OpenAIChat("qwen2.5", base_url=server.url, compatible=True, retry=RetryPolicy(sleep=sleeps))
        assert llm.complete(MESSAGES, json_schema=SCHEMA) == '{"mode": "none"}'
        llm.complete(MESSAGES, json_schema=SCHEMA)
        assert _kinds(server) == ["json_schema", "json_object", "none", "none"]
        assert llm.structured_mode == "none"


def test_refusal_of_every_mode_is_an_error_and_not_remembered(sleeps: Sleeps) -> None:
    with FakeLLMServer(_refuses("json_schema", "json_object", "none")) as server:
        llm = OpenAIChat("qwen2.5", base_url=server.url, compatible=True, retry=RetryPolicy(sleep=sleeps))
        with pytest.raises(ProviderError, match="refused the request.*HTTP 400"):
            llm.complete(MESSAGES, json_schema=SCHEMA)
        assert _kinds(server) == ["json_schema", "json_object", "none"]
        assert llm.structured_mode == "json_schema"


def test_openai_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        OpenAIChat("gpt-4o-mini")


def test_compatible_needs_a_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(ConfigError, match="base URL"):
        make_llm("openai-compatible:llama3.1", ProviderOptions())


def test_key_from_environment(monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer, sleeps: Sleeps) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    server.add("ok")
    OpenAIChat("gpt-4o-mini", base_url=server.url, retry=RetryPolicy(sleep=sleeps)).complete(MESSAGES)
    assert server.requests[0].headers["authorization"] == "Bearer sk-from-env"


def test_registry_builds_working_models(server: FakeLLMServer) -> None:
    server.add(error_reply(502, "gateway"), "from registry", "from openai")
    options = ProviderOptions(base_url=server.url, max_retries=1, timeout=5.0,
                              extra={"retry_base_delay": 0.0, "temperature": 0.2, "max_tokens": 50})
    llm = make_llm("openai-compatible:llama3.1:8b", options)
    assert isinstance(llm, OpenAIChat) and llm.model == "llama3.1:8b"
    assert llm.complete(MESSAGES) == "from registry"
    body = server.requests[-1].body
    assert body["model"] == "llama3.1:8b" and body["max_tokens"] == 50 and body["temperature"] == 0.2
    openai_llm = make_llm("openai:gpt-4o-mini", ProviderOptions(base_url=server.url, api_key="sk-x"))
    assert openai_llm is not None and openai_llm.complete(MESSAGES) == "from openai"
    assert make_llm("none", ProviderOptions()) is None


def test_is_strict_checks_every_object() -> None:
    assert is_strict(SCHEMA)
    loose = {"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {}}}},
             "required": ["a"], "additionalProperties": False}
    assert not is_strict(loose)


def test_compatible_server_never_gets_the_openai_key(
    monkeypatch: pytest.MonkeyPatch, server: FakeLLMServer, sleeps: Sleeps
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret")
    monkeypatch.delenv("TIERMEM_LLM_API_KEY", raising=False)
    server.add("ok", "ok")
    OpenAIChat("llama3.1", base_url=server.url, compatible=True, retry=RetryPolicy(sleep=sleeps)).complete(MESSAGES)
    assert "sk-openai-secret" not in server.requests[0].headers["authorization"]
    monkeypatch.setenv("TIERMEM_LLM_API_KEY", "local-key")
    OpenAIChat("llama3.1", base_url=server.url, compatible=True, retry=RetryPolicy(sleep=sleeps)).complete(MESSAGES)
    assert server.requests[1].headers["authorization"] == "Bearer local-key"
