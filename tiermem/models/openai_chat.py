"""Chat models over the OpenAI Chat Completions API: ``openai:MODEL`` and
``openai-compatible:MODEL`` (Ollama, vLLM, LM Studio, llama.cpp server, ... at ``base_url``).

One client, the official ``openai`` SDK, imported when a model is built (never by
``import tiermem``). The SDK's own retries are off; :mod:`tiermem.models.retry` retries 429,
408/409, 5xx, connection errors and timeouts with exponential backoff, and every SDK error
leaves as a :class:`~tiermem.errors.ProviderError` (``raise ... from exc``).

Structured output (R25): with ``json_schema`` the request carries
``response_format={"type": "json_schema", ...}``. A server that refuses it (HTTP 400/422) is
asked again with ``{"type": "json_object"}``, then with no ``response_format``; the first mode
that the server accepts is remembered for later calls. If every mode is refused, the error was
not about the format: nothing is remembered and the first refusal is raised.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from typing import TYPE_CHECKING, Any, Literal

from tiermem.calls.trace import note_usage
from tiermem.errors import ConfigError, ProviderError
from tiermem.models.retry import (
    Rejected,
    RetryPolicy,
    call_with_retries,
    classify_sdk_error,
    retry_from_options,
    token_count,
)

if TYPE_CHECKING:
    from tiermem.models.registry import ProviderOptions

log = logging.getLogger(__name__)

StructuredMode = Literal["json_schema", "json_object", "none"]
_MODES: tuple[StructuredMode, ...] = ("json_schema", "json_object", "none")
PLACEHOLDER_API_KEY = "tiermem-no-key"
"""Sent to OpenAI-compatible servers when no key is configured (local servers ignore it; the
SDK refuses to start without one)."""


class OpenAIChat:
    """A :class:`~tiermem.models.protocols.ChatModel` over ``/chat/completions``.

    ``compatible=True`` means a non-OpenAI server: ``base_url`` is required and a missing API
    key is replaced by :data:`PLACEHOLDER_API_KEY`. ``temperature`` and ``max_tokens`` are sent
    only when set (reasoning models reject some values). ``retry`` defaults to
    ``RetryPolicy()``; pass one with a fake ``sleep`` in tests.
    """

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        compatible: bool = False,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
    ) -> None:
        provider = "openai-compatible" if compatible else "openai"
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{provider} needs a model name, e.g. '{provider}:gpt-4o-mini'")
        base_url = base_url or os.environ.get("OPENAI_BASE_URL") or None
        if compatible and not base_url:
            raise ConfigError(
                f"{provider}:{model} needs a base URL (llm_base_url=..., TIERMEM_LLM_BASE_URL, "
                "e.g. http://localhost:11434/v1 for Ollama)"
            )
        # never send the OpenAI key to another host: compatible servers get their own variable
        key = api_key or os.environ.get("TIERMEM_LLM_API_KEY" if compatible else "OPENAI_API_KEY") or None
        if key is None:
            if not compatible:
                raise ConfigError(f"openai:{model} needs an API key: set OPENAI_API_KEY")
            key = PLACEHOLDER_API_KEY
        try:
            import openai
        except ImportError as exc:  # pragma: no cover - openai is a core dependency
            raise ConfigError("the 'openai' package is not installed: pip install openai") from exc
        self._openai = openai
        self._client = openai.OpenAI(api_key=key, base_url=base_url, timeout=timeout, max_retries=0)
        self.model = model.strip()
        self.provider = provider
        self.compatible = compatible
        self.retry = retry or RetryPolicy()
        self.temperature = temperature
        self.max_tokens = max_tokens
        self._mode: StructuredMode = "json_schema"
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"{self.provider}:{self.model}"

    @property
    def structured_mode(self) -> StructuredMode:
        """The ``response_format`` mode used for calls with a schema (after any downgrade)."""
        return self._mode

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        if json_schema is None:
            return self._attempt(messages, None, "none")
        start = self._mode
        for mode in _MODES[_MODES.index(start):-1]:
            try:
                text = self._attempt(messages, json_schema, mode)
            except Rejected as exc:
                log.info("%s refused response_format %s (%s); trying a simpler mode",
                         self.model_id, mode, exc)
                continue
            return self._remember(start, mode, text)
        # plain mode; if the server refuses this too, the refusal was not about the format
        return self._remember(start, "none", self._attempt(messages, json_schema, "none"))

    def _remember(self, start: StructuredMode, mode: StructuredMode, text: str) -> str:
        if mode != start:
            with self._lock:
                self._mode = mode
            log.warning("%s: structured output downgraded from %s to %s for later calls",
                        self.model_id, start, mode)
        return text

    # -- internals ----------------------------------------------------------------------------
    def _attempt(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None,
                 mode: StructuredMode) -> str:
        kwargs = self._request(messages, schema, mode)
        try:
            response = call_with_retries(
                lambda: self._client.chat.completions.create(**kwargs),
                policy=self.retry,
                classify=lambda exc: classify_sdk_error(exc, self._openai.APIConnectionError),
                what=f"{self.model_id} chat completion",
                foreign=(self._openai.OpenAIError, ValueError),
            )
        except Rejected as exc:
            if schema is None or mode == "none":  # nothing simpler to fall back to
                raise ProviderError(f"{self.model_id} refused the request: {exc}") from exc.cause
            raise
        usage = getattr(response, "usage", None)  # for the call log; absent on some compatible servers
        note_usage(token_count(getattr(usage, "prompt_tokens", None)),
                   token_count(getattr(usage, "completion_tokens", None)))
        return _reply_text(response, self.model_id)

    def _request(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None,
                 mode: StructuredMode) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"model": self.model, "messages": list(messages)}
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if self.max_tokens is not None:
            # OpenAI's newer models take only max_completion_tokens; other servers know max_tokens
            kwargs["max_tokens" if self.compatible else "max_completion_tokens"] = self.max_tokens
        if schema is not None and mode == "json_schema":
            kwargs["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema_name(schema), "schema": schema, "strict": is_strict(schema)},
            }
        elif schema is not None and mode == "json_object":
            kwargs["response_format"] = {"type": "json_object"}
        return kwargs


def _reply_text(response: Any, model_id: str) -> str:
    """The assistant text of a completion; a body without one is a ProviderError."""
    try:
        choice = response.choices[0]
        message = choice.message
        content = message.content
    except (AttributeError, IndexError, KeyError, TypeError) as exc:
        raise ProviderError(f"{model_id} sent a malformed response (no choices[0].message)") from exc
    if content is None:
        refusal = getattr(message, "refusal", None)
        raise ProviderError(f"{model_id} returned no content" + (f" (refusal: {refusal})" if refusal else ""))
    if not isinstance(content, str):
        raise ProviderError(f"{model_id} returned non-text content ({type(content).__name__})")
    if getattr(choice, "finish_reason", None) == "length":
        log.warning("%s stopped at its token limit; the reply is truncated", model_id)
    return content


def schema_name(schema: dict[str, Any]) -> str:
    """``response_format.json_schema.name``: the schema's title, cleaned, else ``response``."""
    title = str(schema.get("title") or "response")
    cleaned = re.sub(r"[^A-Za-z0-9_-]", "_", title)[:64]
    return cleaned or "response"


def is_strict(schema: Any) -> bool:
    """True if OpenAI's strict mode accepts ``schema``: every object lists all its properties
    as required and sets ``additionalProperties: false`` (checked recursively)."""
    if isinstance(schema, list):
        return all(is_strict(item) for item in schema)
    if not isinstance(schema, dict):
        return True
    if schema.get("type") == "object" or "properties" in schema:
        props = schema.get("properties", {})
        if schema.get("additionalProperties") is not False:
            return False
        if not isinstance(props, dict) or set(schema.get("required", [])) != set(props):
            return False
    return all(is_strict(value) for key, value in schema.items() if key not in ("enum", "const", "default"))


def _float(extra: dict[str, Any], key: str) -> float | None:
    value = extra.get(key)
    return None if value is None else float(value)


def _build(model: str, options: ProviderOptions, compatible: bool) -> OpenAIChat:
    extra = options.extra or {}
    max_tokens = extra.get("max_tokens")
    return OpenAIChat(
        model,
        base_url=options.base_url,
        api_key=options.api_key,
        compatible=compatible,
        timeout=options.timeout,
        retry=retry_from_options(options),
        temperature=_float(extra, "temperature"),
        max_tokens=None if max_tokens is None else int(max_tokens),
    )


def make_openai(model: str, options: ProviderOptions) -> OpenAIChat:
    """Registry factory for ``openai:MODEL``."""
    return _build(model, options, compatible=False)


def make_openai_compatible(model: str, options: ProviderOptions) -> OpenAIChat:
    """Registry factory for ``openai-compatible:MODEL`` (needs ``options.base_url``)."""
    return _build(model, options, compatible=True)
