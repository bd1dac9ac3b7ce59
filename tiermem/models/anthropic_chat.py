"""Chat model over the Anthropic Messages API: ``anthropic:MODEL``.

Uses the official ``anthropic`` SDK (optional extra: ``pip install 'tiermem[anthropic]'``),
imported when the model is built. System messages are joined into the ``system`` parameter;
consecutive messages of one role are merged (the API wants user/assistant alternating,
starting with a user turn). Retries and error mapping as for OpenAI
(:mod:`tiermem.models.retry`). With ``json_schema`` the request asks for structured output
(``output_config={"format": {"type": "json_schema", "schema": ...}}``); a model that refuses
it (HTTP 400/422) is asked again without, and that is remembered.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import TYPE_CHECKING, Any

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

DEFAULT_MAX_TOKENS = 4096


class AnthropicChat:
    """A :class:`~tiermem.models.protocols.ChatModel` over ``/v1/messages``."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 60.0,
        retry: RetryPolicy | None = None,
        max_tokens: int = DEFAULT_MAX_TOKENS,
        temperature: float | None = None,
    ) -> None:
        if not isinstance(model, str) or not model.strip():
            raise ConfigError("anthropic needs a model name, e.g. 'anthropic:claude-haiku-4-5'")
        key = api_key or os.environ.get("ANTHROPIC_API_KEY") or None
        if key is None:
            raise ConfigError(f"anthropic:{model} needs an API key: set ANTHROPIC_API_KEY")
        try:
            import anthropic
        except ImportError as exc:
            raise ConfigError(
                "anthropic:MODEL needs the 'anthropic' package: pip install 'tiermem[anthropic]'"
            ) from exc
        self._anthropic = anthropic
        self._client = anthropic.Anthropic(api_key=key, base_url=base_url or None, timeout=timeout,
                                           max_retries=0)
        self.model = model.strip()
        self.retry = retry or RetryPolicy()
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._structured = True
        self._lock = threading.Lock()

    @property
    def model_id(self) -> str:
        return f"anthropic:{self.model}"

    @property
    def structured(self) -> bool:
        """Whether calls with a schema still ask for structured output (False after a refusal)."""
        return self._structured

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        if json_schema is not None and self._structured:
            try:
                return self._attempt(messages, json_schema)
            except Rejected as exc:
                log.info("%s refused structured output (%s); asking without it", self.model_id, exc)
            text = self._attempt(messages, None)
            with self._lock:
                self._structured = False
            log.warning("%s: structured output switched off for later calls", self.model_id)
            return text
        return self._attempt(messages, None)

    def _attempt(self, messages: list[dict[str, Any]], schema: dict[str, Any] | None) -> str:
        system, turns = split_system(messages)
        kwargs: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": turns}
        if system:
            kwargs["system"] = system
        if self.temperature is not None:
            kwargs["temperature"] = self.temperature
        if schema is not None:
            kwargs["output_config"] = {"format": {"type": "json_schema", "schema": schema}}
        try:
            response = call_with_retries(
                lambda: self._client.messages.create(**kwargs),
                policy=self.retry,
                classify=lambda exc: classify_sdk_error(exc, self._anthropic.APIConnectionError),
                what=f"{self.model_id} message",
                foreign=(self._anthropic.AnthropicError, ValueError),
            )
        except Rejected as exc:
            if schema is None:
                raise ProviderError(f"{self.model_id} refused the request: {exc}") from exc.cause
            raise
        _note_usage(response)
        return _reply_text(response, self.model_id)


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the text parts of a list of content blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [str(b.get("text", "")) for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(p for p in parts if p)
    return "" if content is None else str(content)


def split_system(messages: list[dict[str, Any]]) -> tuple[str, list[dict[str, str]]]:
    """Split OpenAI-style messages into Anthropic's ``system`` text and alternating turns.

    System messages are joined (blank line between); other roles but ``assistant`` count as
    ``user``; consecutive turns of one role are merged; a leading assistant turn gets an empty
    user turn before it (``"(start)"``), as the API requires a user turn first.
    """
    system_parts: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role = str(message.get("role", "user"))
        text = _text_of(message.get("content"))
        if role == "system":
            if text:
                system_parts.append(text)
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + text
        else:
            turns.append({"role": role, "content": text})
    if turns and turns[0]["role"] == "assistant":
        turns.insert(0, {"role": "user", "content": "(start)"})
    if not turns:
        turns.append({"role": "user", "content": "(start)"})
    return "\n\n".join(system_parts), turns


def _note_usage(response: Any) -> None:
    """The call log's token counts: input tokens include those written to and read from the prompt cache."""
    usage = getattr(response, "usage", None)
    prompt = token_count(getattr(usage, "input_tokens", None))
    if prompt is not None:
        prompt += sum(token_count(getattr(usage, name, None)) or 0
                      for name in ("cache_creation_input_tokens", "cache_read_input_tokens"))
    note_usage(prompt, token_count(getattr(usage, "output_tokens", None)))


def _reply_text(response: Any, model_id: str) -> str:
    try:
        blocks = list(response.content)
    except (AttributeError, TypeError) as exc:
        raise ProviderError(f"{model_id} sent a malformed response (no content blocks)") from exc
    texts = [str(getattr(b, "text", "")) for b in blocks if getattr(b, "type", None) == "text"]
    if not texts:
        raise ProviderError(f"{model_id} returned no text (stop_reason={getattr(response, 'stop_reason', None)})")
    if getattr(response, "stop_reason", None) == "max_tokens":
        log.warning("%s stopped at max_tokens; the reply is truncated", model_id)
    return "".join(texts)


def make_anthropic(model: str, options: ProviderOptions) -> AnthropicChat:
    """Registry factory for ``anthropic:MODEL`` (``options.extra``: ``max_tokens``,
    ``temperature``, ``retry_base_delay``, ``retry_max_delay``)."""
    extra = options.extra or {}
    temperature = extra.get("temperature")
    return AnthropicChat(
        model,
        api_key=options.api_key,
        base_url=options.base_url,
        timeout=options.timeout,
        retry=retry_from_options(options),
        max_tokens=int(extra.get("max_tokens") or DEFAULT_MAX_TOKENS),
        temperature=None if temperature is None else float(temperature),
    )
