"""Retries with exponential backoff, shared by the chat providers.

The SDKs' own retry loops are switched off (``max_retries=0``) so that one loop, here, decides:
which errors are worth another attempt (429, 408/409, 5xx, connection errors, timeouts), how
long to wait (``base_delay * 2**attempt``, capped, or the server's ``Retry-After``), and how
the final failure is reported (a :class:`~tiermem.errors.ProviderError` raised ``from`` the SDK
error). ``sleep`` is injectable so tests never wait.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from tiermem.calls.trace import note_attempt
from tiermem.errors import ProviderError

if TYPE_CHECKING:
    from tiermem.models.registry import ProviderOptions

log = logging.getLogger(__name__)

T = TypeVar("T")
Verdict = Literal["retry", "reject", "fail"]
"""How an SDK error is handled: ``retry`` after a pause; ``reject`` = the server refused this
request shape (HTTP 400/422), the caller may try a simpler one; ``fail`` at once."""

_RETRY_STATUS = frozenset({408, 409, 429})
_REJECT_STATUS = frozenset({400, 422})


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how patiently a provider call is repeated.

    ``max_retries`` extra attempts after the first; the pause before retry ``n`` (0-based) is
    ``min(max_delay, base_delay * 2**n)`` plus up to ``jitter`` of itself at random, or the
    server's ``Retry-After`` when it asks for longer (still capped at ``max_delay``).
    """

    max_retries: int = 3
    base_delay: float = 0.5
    max_delay: float = 20.0
    jitter: float = 0.1
    sleep: Callable[[float], None] = time.sleep

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (0 for the first retry)."""
        wait = min(self.max_delay, self.base_delay * (2**attempt))
        if self.jitter > 0 and wait > 0:
            wait += random.uniform(0, self.jitter * wait)
        if retry_after is not None and math.isfinite(retry_after) and retry_after > wait:
            wait = retry_after
        return float(max(0.0, min(self.max_delay, wait)))


def classify_sdk_error(exc: BaseException, connection_error: type[BaseException]) -> Verdict:
    """Sort an error of an OpenAI/Anthropic-style SDK (both expose ``status_code`` on HTTP
    errors and share an ``APIConnectionError`` base for network failures and timeouts)."""
    if isinstance(exc, connection_error):
        return "retry"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status in _RETRY_STATUS or status >= 500:
            return "retry"
        if status in _REJECT_STATUS:
            return "reject"
    return "fail"


def retry_after_seconds(exc: BaseException) -> float | None:
    """The ``Retry-After`` (or ``retry-after-ms``) header of an HTTP error, if it has one."""
    response: Any = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    try:
        millis = headers.get("retry-after-ms")
        if millis is not None:
            return float(millis) / 1000.0
        seconds = headers.get("retry-after")
        return float(seconds) if seconds is not None else None
    except (TypeError, ValueError):
        return None  # an HTTP date or junk: fall back to our own backoff


class Rejected(Exception):
    """Internal: the server refused the request shape (HTTP 400/422); carries the SDK error."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(describe_error(cause))
        self.cause = cause


def call_with_retries(
    call: Callable[[], T],
    *,
    policy: RetryPolicy,
    classify: Callable[[BaseException], Verdict],
    what: str,
    foreign: tuple[type[BaseException], ...],
) -> T:
    """Run ``call``; retry what ``classify`` calls ``retry``; raise :class:`Rejected` for
    ``reject`` and :class:`ProviderError` (from the SDK error) for the rest or when retries
    run out. Only exceptions of the ``foreign`` types are handled; others propagate. Each attempt
    is reported to the LLM call log (:func:`tiermem.calls.note_attempt`: latency, error)."""
    attempt = 0
    while True:
        started = time.perf_counter()
        try:
            result = call()
        except foreign as exc:
            note_attempt((time.perf_counter() - started) * 1000, describe_error(exc))
            verdict = classify(exc)
            if verdict == "reject":
                raise Rejected(exc) from exc
            if verdict == "fail" or attempt >= policy.max_retries:
                tries = f" after {attempt + 1} attempts" if attempt else ""
                raise ProviderError(f"{what} failed{tries}: {describe_error(exc)}") from exc
            wait = policy.delay(attempt, retry_after_seconds(exc))
            log.warning("%s: %s; retry %d/%d in %.2fs", what, describe_error(exc), attempt + 1,
                        policy.max_retries, wait)
            policy.sleep(wait)
            attempt += 1
        else:
            note_attempt((time.perf_counter() - started) * 1000)
            return result


def describe_error(exc: BaseException) -> str:
    """A one-line description: class name, HTTP status when there is one, message."""
    status = getattr(exc, "status_code", None)
    head = type(exc).__name__ + (f" (HTTP {status})" if isinstance(status, int) else "")
    message = " ".join(str(exc).split())
    if len(message) > 300:
        message = message[:300] + "..."
    return f"{head}: {message}" if message else head


def token_count(value: object) -> int | None:
    """A token count from a provider's usage object, or ``None`` when it is not a count."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def retry_from_options(options: ProviderOptions) -> RetryPolicy:
    """A :class:`RetryPolicy` from ``options.max_retries`` and ``options.extra``
    (``retry_base_delay``, ``retry_max_delay`` in seconds)."""
    extra = options.extra or {}
    base = extra.get("retry_base_delay")
    cap = extra.get("retry_max_delay")
    return RetryPolicy(
        max_retries=max(0, int(options.max_retries)),
        base_delay=0.5 if base is None else float(base),
        max_delay=20.0 if cap is None else float(cap),
    )
