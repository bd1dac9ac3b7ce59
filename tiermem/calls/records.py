"""What one row of the call log says, and the sums over many (the fixed API of ``tiermem.calls``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Why tiermem called a model. ``other``: a call made outside tiermem's pipelines (a user calling
#: ``mem.llm.complete`` directly, a plugin).
CALL_PURPOSES: tuple[str, ...] = ("extraction", "session_summary", "dream", "compression", "embed", "other")

#: How one attempt ended: ``ok``; ``retried`` (it failed and another attempt followed: the row of the
#: retry comes next); ``parse_failed`` (the model answered, the pipeline could not use the answer);
#: ``provider_error`` (the call failed for good).
CALL_OUTCOMES: tuple[str, ...] = ("ok", "retried", "parse_failed", "provider_error")


@dataclass(frozen=True)
class CallRecord:
    """One attempt of one model call. ``tokens_counted``: the provider reported no usage, tiermem
    counted the tokens (cl100k, :mod:`tiermem.tokens`). ``cost`` in USD from the ``prices`` setting
    (``None``: no price for the model, or a failed attempt nothing was billed for). ``prompt`` and
    ``completion`` only with ``log_prompts = true``, redacted."""

    id: int
    at: str
    purpose: str
    provider: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    tokens_counted: bool
    latency_ms: float
    outcome: str
    attempt: int
    error: str | None
    cost: float | None
    prompt: str | None
    completion: str | None

    @property
    def model_id(self) -> str:
        """``provider:model``, the key of the ``prices`` table."""
        return f"{self.provider}:{self.model}"

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


@dataclass(frozen=True)
class CallTotals:
    """Sums over the log (or its rows since a moment): ``cost`` is ``None`` when no row has a price."""

    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    by_purpose: dict[str, int] = field(default_factory=dict)
    by_outcome: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"calls": self.calls, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost": self.cost,
                "by_purpose": dict(self.by_purpose), "by_outcome": dict(self.by_outcome)}
