"""What the pipelines and the providers tell the call log, through context variables.

Three channels, none of which needs the log itself (a provider used outside a ``Memory`` reports
into nothing):

- :func:`call_purpose` — a pipeline entry point says why it calls a model (a context manager, or a
  decorator); the calls made inside (in this thread or task) are logged under that purpose;
- :func:`note_attempt` / :func:`note_usage` — a provider reports each HTTP attempt (latency, the
  error of a failed one) and the token usage the server sent back; the logging wrapper around the
  call (:mod:`tiermem.calls.wrap`) collects them in a :class:`CallTrace` and writes one row per
  attempt;
- :func:`note_parse_failure` — a pipeline that could not use a reply marks the logged call that
  returned it (``parse_failed``): the JSON is parsed after the call, outside the provider.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field

from tiermem.calls.records import CALL_PURPOSES

DEFAULT_PURPOSE = "other"


@dataclass
class Attempt:
    """One request to a provider. Tokens ``None``: the server reported no usage."""

    latency_ms: float
    error: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    counted: bool = False  # the provider counted the tokens itself (no usage in the reply)


@dataclass
class CallTrace:
    """The attempts of the call in progress."""

    attempts: list[Attempt] = field(default_factory=list)


@dataclass(frozen=True)
class _Reply:
    """The last logged reply of this context and how to mark it unusable."""

    text: str
    mark: Callable[[str], None]


_PURPOSE: ContextVar[str | None] = ContextVar("tiermem_call_purpose", default=None)
_TRACE: ContextVar[CallTrace | None] = ContextVar("tiermem_call_trace", default=None)
_LAST_REPLY: ContextVar[_Reply | None] = ContextVar("tiermem_last_reply", default=None)


@contextmanager
def call_purpose(purpose: str) -> Iterator[None]:
    """Log the model calls made inside under ``purpose`` (one of :data:`CALL_PURPOSES`).
    Usable as a decorator: ``@call_purpose("dream")``."""
    if purpose not in CALL_PURPOSES:
        raise ValueError(f"unknown call purpose {purpose!r} (known: {', '.join(CALL_PURPOSES)})")
    token = _PURPOSE.set(purpose)
    try:
        yield
    finally:
        _PURPOSE.reset(token)


def current_purpose() -> str:
    return _PURPOSE.get() or DEFAULT_PURPOSE


@contextmanager
def tracing() -> Iterator[CallTrace]:
    """The trace the providers report into while the logging wrapper runs a call."""
    trace = CallTrace()
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


def tracing_active() -> bool:
    """True while a logged call runs in this context (providers skip work nobody will read)."""
    return _TRACE.get() is not None


def note_attempt(latency_ms: float, error: str | None = None) -> None:
    """A provider made one request (``error``: why it failed). No-op outside a logged call."""
    trace = _TRACE.get()
    if trace is not None:
        trace.attempts.append(Attempt(float(latency_ms), error))


def note_usage(prompt_tokens: int | None, completion_tokens: int | None, *, counted: bool = False) -> None:
    """The token usage of the last successful attempt (as the server reported it, or ``counted``)."""
    trace = _TRACE.get()
    if trace is None:
        return
    for attempt in reversed(trace.attempts):
        if attempt.error is None:
            attempt.prompt_tokens, attempt.completion_tokens = prompt_tokens, completion_tokens
            attempt.counted = counted
            return


def remember_reply(text: str, mark: Callable[[str], None]) -> None:
    """Called by the logging wrapper after a logged call returned ``text``."""
    _LAST_REPLY.set(_Reply(text, mark))


def note_parse_failure(reply: object, error: object) -> bool:
    """Mark the logged call that returned ``reply`` (the very string object) as ``parse_failed``
    with ``error``; False when that reply did not come from a logged call of this context."""
    last = _LAST_REPLY.get()
    if last is None or last.text is not reply:
        return False
    _LAST_REPLY.set(None)
    last.mark(str(error))
    return True
