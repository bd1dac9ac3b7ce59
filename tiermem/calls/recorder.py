"""Turns the trace of one model call into rows of the call log, and never fails the call.

One row per attempt: a failed attempt that was followed by another is ``retried``, the last one of
a call that failed for good is ``provider_error``; a successful one is ``ok`` until the pipeline
says it could not use the reply (``parse_failed``, :func:`tiermem.calls.note_parse_failure`).
Tokens: as the provider reported them, else counted (:func:`tiermem.tokens.count_tokens`); a failed
attempt bills nothing (0 tokens, no cost). The prompt and reply texts are stored only with
``log_prompts = true``, redacted (:mod:`tiermem.redact`, the store's redactor) either way.
Old rows go when a write finds the last clean-up an hour old: rows older than
``call_log_retention_days`` are deleted (of every scope; one indexed DELETE).
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from tiermem.calls.records import CallRecord
from tiermem.calls.trace import Attempt, CallTrace
from tiermem.clock import utc_iso
from tiermem.storage.call_log import CallLogRepository

if TYPE_CHECKING:
    from tiermem.clock import Clock
    from tiermem.config import Settings
    from tiermem.storage.sql import Database
    from tiermem.types import Scope

log = logging.getLogger(__name__)

PRUNE_EVERY = timedelta(hours=1)
MAX_STORED_CHARS = 200_000  # a logged prompt or reply is cut here
MAX_ERROR_CHARS = 1000


@dataclass(frozen=True)
class CallInput:
    """What one call sent and got: chat messages (dicts) or embedding inputs (strings)."""

    purpose: str
    model_id: str  # "provider:model"
    sent: Sequence[Any]
    reply: str | None = None
    failure: BaseException | None = None


def split_model_id(model_id: str) -> tuple[str, str]:
    provider, _, model = model_id.partition(":")
    return (provider, model) if model else ("custom", provider)


def _flat(sent: Sequence[Any]) -> str:
    """The text of messages or inputs, for counting tokens."""
    parts: list[str] = []
    for item in sent:
        content = item.get("content", "") if isinstance(item, dict) else item
        parts.append(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def _clip(text: str, limit: int) -> str:
    text = text.encode("utf-8", "replace").decode("utf-8")  # lone surrogates cannot be stored
    return text if len(text) <= limit else text[:limit] + f"[... {len(text) - limit} more characters]"


class CallRecorder:
    """Writes the rows of one Memory's scope."""

    def __init__(self, db: Database, settings: Settings, clock: Clock, scope: Scope) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock
        self.repo = CallLogRepository(db, scope)
        self._lock = threading.Lock()
        self._next_prune: datetime | None = None

    def record(self, call: CallInput, trace: CallTrace, total_ms: float) -> int | None:
        """Write the rows of ``call``; the id of its last row (``None`` when nothing was written)."""
        if self.db.read_only:
            return None
        try:
            ids = self.repo.insert(self._rows(call, trace.attempts, total_ms))
        except Exception as exc:  # the log is a record, never a reason for a model call to fail
            log.warning("could not write the LLM call log (%s: %s); the call itself is unaffected",
                        type(exc).__name__, exc)
            return None
        try:  # the rows are written: a failed clean-up must not lose their id (a parse failure marks it)
            self._prune()
        except Exception as exc:
            log.warning("could not remove old rows of the LLM call log (%s: %s); the call is logged",
                        type(exc).__name__, exc)
        return ids[-1] if ids else None

    def mark_parse_failed(self, row_id: int, error: str) -> None:
        try:
            self.repo.set_outcome(row_id, "parse_failed", self._error(error))
        except Exception as exc:
            log.warning("could not mark call %d of the LLM call log as parse_failed (%s)", row_id, exc)

    # --- internals ---------------------------------------------------------------------------
    def _attempts(self, call: CallInput, attempts: list[Attempt], total_ms: float) -> list[Attempt]:
        """The attempts the provider reported, else one for the whole call (a model tiermem does
        not instrument: the scripted test model, a user's own); a failure the provider did not
        report (a reply it could not read) ends the last one."""
        out = [Attempt(a.latency_ms, a.error, a.prompt_tokens, a.completion_tokens, a.counted) for a in attempts]
        failure = None if call.failure is None else f"{type(call.failure).__name__}: {call.failure}"
        if not out:
            out.append(Attempt(total_ms, failure))
        elif failure is not None and out[-1].error is None:
            out[-1].error = failure
        return out

    def _rows(self, call: CallInput, attempts: list[Attempt], total_ms: float) -> list[CallRecord]:
        provider, model = split_model_id(call.model_id)
        price = self.settings.prices.for_model(call.model_id)
        at = utc_iso(self.clock.now())
        keep = self.settings.log_prompts
        prompt = self._prompt(call.sent) if keep else None
        done = self._attempts(call, attempts, total_ms)
        rows: list[CallRecord] = []  # id 0: given by the database on insert
        for number, attempt in enumerate(done, start=1):
            last = number == len(done)
            if attempt.error is not None:
                final = last and call.failure is not None  # the failure the caller got says most
                error = f"{type(call.failure).__name__}: {call.failure}" if final else attempt.error
                rows.append(CallRecord(0, at, call.purpose, provider, model, 0, 0, False, attempt.latency_ms,
                                       "provider_error" if final else "retried", number, self._error(error), None,
                                       prompt, None))
                continue
            counted = attempt.counted or attempt.prompt_tokens is None
            p = attempt.prompt_tokens if attempt.prompt_tokens is not None else self._count(_flat(call.sent))
            c = attempt.completion_tokens
            if c is None:
                c = self._count(call.reply or "") if last else 0
            reply = _clip(self.db.redactor.tree(call.reply), MAX_STORED_CHARS) if keep and last and call.reply else None
            cost = None if price is None else price.cost(p, c)
            rows.append(CallRecord(0, at, call.purpose, provider, model, p, c, counted, attempt.latency_ms, "ok",
                                   number, None, cost, prompt, reply))
        return rows

    @staticmethod
    def _count(text: str) -> int:
        from tiermem.tokens import count_tokens

        return count_tokens(text)

    def _prompt(self, sent: Sequence[Any]) -> str:
        """The messages as JSON, redacted whole (tool calls, their arguments, JSON inside strings; R68)."""
        plain = json.loads(json.dumps(list(sent), ensure_ascii=False, default=str))  # what will be stored
        return _clip(json.dumps(self.db.redactor.tree(plain), ensure_ascii=False), MAX_STORED_CHARS)

    def _error(self, error: str) -> str:
        return self.db.redactor.text(_clip(" ".join(error.split()), MAX_ERROR_CHARS))

    def _prune(self) -> None:
        now = self.clock.now()
        with self._lock:
            if self._next_prune is not None and now < self._next_prune:
                return
            self._next_prune = now + PRUNE_EVERY
        cutoff = now - timedelta(days=self.settings.call_log_retention_days)
        removed = self.repo.prune(utc_iso(cutoff))
        if removed:
            log.info("call log: removed %d rows older than %d days", removed, self.settings.call_log_retention_days)
