"""``mem.queue``: debounced, durable background processing of conversation updates.

``add`` commits the item to the outbox (a table of the store, SQLite or PostgreSQL) before it
returns (R34) and resets the queue's one debounce timer (R29). A daemon thread (R31) processes
due items one after another with a pause between them (R32); each item's work (LLM calls) runs
in a ``ThreadPoolExecutor(max_workers=4)`` so the agent never waits. Failures keep the item
with its error and retry with backoff; after ``max_attempts`` the item is dead-lettered until
``retry_dead()``. Time comes from the injected clock; a clock with a ``sleep(seconds)`` method
(``FakeClock``) also provides the pauses.

Each item is taken under a lease (:mod:`tiermem.storage.outbox`) of :func:`lease_seconds`; while
its work runs, a heartbeat renews the lease every ``heartbeat_seconds`` (wall-clock seconds; the
lease itself is measured on the injected clock), so another process never takes a slow extraction
while this one is alive, and does take it once this one is gone. Every drain first recovers
items whose lease ran out or whose claimer died (an interruption counts as an attempt), and the
worker wakes when the earliest lease of another claimer runs out. Any number of processes, on
any number of hosts when the store is PostgreSQL, may drain one queue: each claim takes a
different item.
"""

from __future__ import annotations

import atexit
import logging
import math
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from tiermem import faults, validate
from tiermem.clock import Clock
from tiermem.config import Settings
from tiermem.errors import InvalidInput, TiermemError
from tiermem.models.retry import RetryPolicy
from tiermem.storage.outbox import DEFAULT_LEASE_SECONDS, OutboxItem, OutboxRepository
from tiermem.types import Scope

log = logging.getLogger(__name__)

Processor = Callable[[OutboxItem, bool], object]  # (item, force) -> anything


class Deferred(Exception):
    """Raised by a processor that did its part now and wants the rest of the item later
    (e.g. extraction waits for a bigger batch of turns); not a failure."""

    def __init__(self, until: datetime, reason: str) -> None:
        super().__init__(reason)
        self.until = until
Preparer = Callable[[Any], list[dict[str, Any]]]
_POLL_SECONDS = 0.25
HELD_POLL_SECONDS = 0.05  # a flush waiting for an item another session holds (see UpdateQueue._held_elsewhere)
EXTRACTION_CALLS = 2  # an extraction call, and its one retry after a reply that does not parse
LEASE_MARGIN_SECONDS = 60.0  # embedding the new facts, the database, the journal
MAX_HEARTBEAT_SECONDS = 30.0


def lease_seconds(settings: Settings) -> float:
    """How long a claim holds: ``queue_lease_seconds``, or (None) longer than the slowest item the
    providers allow — :data:`EXTRACTION_CALLS` calls, each up to ``provider_max_retries + 1``
    attempts of ``provider_timeout_seconds`` plus the worst-case backoff between them — plus
    :data:`LEASE_MARGIN_SECONDS`. 548 s with the defaults (60 s timeout, 3 retries)."""
    if settings.queue_lease_seconds is not None:
        return float(settings.queue_lease_seconds)
    retries = settings.provider_max_retries
    retry = RetryPolicy(max_retries=retries)
    backoff = sum(min(retry.max_delay, retry.base_delay * float(2 ** n) * (1 + retry.jitter)) for n in range(retries))
    per_call = (retries + 1) * settings.provider_timeout_seconds + backoff
    return EXTRACTION_CALLS * per_call + LEASE_MARGIN_SECONDS


@dataclass(frozen=True)
class QueuePolicy:
    enabled: bool = True
    debounce_seconds: float = 30.0
    update_delay_seconds: float = 0.5
    max_attempts: int = 5
    backoff_base_seconds: float = 10.0
    backoff_max_seconds: float = 3600.0
    lease_seconds: float = DEFAULT_LEASE_SECONDS  # on the injected clock
    heartbeat_seconds: float = MAX_HEARTBEAT_SECONDS  # wall-clock seconds between lease renewals

    @classmethod
    def from_settings(cls, settings: Settings) -> QueuePolicy:
        """The policy the settings ask for; the heartbeat beats at least four times per lease."""
        lease = lease_seconds(settings)
        return cls(settings.enabled, settings.debounce_seconds, settings.update_delay_seconds,
                   settings.queue_max_attempts, lease_seconds=lease,
                   heartbeat_seconds=min(MAX_HEARTBEAT_SECONDS, lease / 4))

    def backoff(self, attempts: int) -> float:
        """Seconds before the next try of an item that had ``attempts`` attempts before this failure."""
        return float(min(self.backoff_base_seconds * (2 ** attempts), self.backoff_max_seconds))


def _close_at_exit(ref: weakref.ref[UpdateQueue]) -> None:
    queue = ref()
    if queue is not None:
        queue.close(timeout=10.0)


class UpdateQueue:
    """The queue of one Memory (it serves any scope; items carry their own)."""

    def __init__(self, outbox: OutboxRepository, processor: Processor, prepare: Preparer, clock: Clock,
                 policy: QueuePolicy, default_scope: Scope) -> None:
        self.outbox = outbox
        self.processor = processor
        self.prepare = prepare
        self.clock = clock
        self.policy = policy
        self.default_scope = default_scope
        self._cond = threading.Condition()
        self._work_lock = threading.Lock()  # one drain at a time (worker thread or flush)
        self._due_at: datetime | None = None
        self._nowait = False
        self._busy = 0
        self._stopped = False
        self._thread: threading.Thread | None = None
        self._executor: ThreadPoolExecutor | None = None
        atexit.register(_close_at_exit, weakref.ref(self))

    # --- the agent's side --------------------------------------------------------------
    def add(self, thread_id: str, messages: Any, user_id: str | None = None, agent_name: str | None = None) -> None:
        """Queue the thread so far; committed before return; resets the debounce timer."""
        if not self.policy.enabled:
            return
        self._put(thread_id, messages, user_id, agent_name)
        with self._cond:
            self._due_at = self.clock.now() + timedelta(seconds=self.policy.debounce_seconds)
            self._cond.notify_all()
        self._ensure_thread()

    def add_nowait(self, thread_id: str, messages: Any, user_id: str | None = None,
                   agent_name: str | None = None) -> None:
        """Queue and process at once in the background thread (extraction is not held back for a
        bigger batch)."""
        if not self.policy.enabled:
            return
        self._put(thread_id, messages, user_id, agent_name)
        self.wake(now=True)

    def _put(self, thread_id: str, messages: Any, user_id: str | None, agent_name: str | None) -> None:
        scope = Scope(validate.name(user_id, "user_id") if user_id is not None else self.default_scope.user_id,
                      validate.name(agent_name, "agent_name") if agent_name is not None
                      else self.default_scope.agent_name)
        prepared = self.prepare(messages)
        self.outbox.put(validate.thread_id(thread_id), scope, prepared, self.clock.now())

    # --- processing ----------------------------------------------------------------------
    def wake(self, now: bool = False) -> None:
        """Re-check the timer (after a clock change); ``now=True`` processes at once."""
        with self._cond:
            if now:
                self._nowait = True
            self._cond.notify_all()
        self._ensure_thread()

    def process_due(self) -> int:
        """Process what is due now (debounce elapsed, or add_nowait); returns items handled."""
        with self._cond:
            force = self._nowait
            due = force or (self._due_at is not None and self.clock.now() >= self._due_at)
            if not due:
                return 0
            self._due_at, self._nowait = None, False
            self._busy += 1  # set with the timer cleared, so wait_idle never sees a gap
        try:
            return self._drain(ignore_backoff=False, force=force)
        finally:
            self._set_busy(-1)

    def flush(self, timeout: float | None = None) -> bool:
        """Process every pending item now (shutdown). True if nothing is left unprocessed
        (dead-lettered items count as unprocessed until ``retry_dead``)."""
        if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                    or not math.isfinite(timeout) or timeout < 0):
            raise InvalidInput(f"timeout must be None or a finite number of seconds >= 0, got {timeout!r}")
        deadline = None if timeout is None else time.monotonic() + timeout
        self._set_busy(+1)
        try:
            self._drain(ignore_backoff=True, force=True, deadline=deadline, patient=True)
        finally:
            self._set_busy(-1)
        return not self.outbox.counts()

    def _drain(self, ignore_backoff: bool, force: bool, deadline: float | None = None, patient: bool = False) -> int:
        """Claim and process items until none is left (``patient``: a flush, which also waits for
        items another session holds, :meth:`_held_elsewhere`)."""
        handled = 0
        with self._work_lock:
            self._recover()
            seen: set[int] = set()
            while deadline is None or time.monotonic() < deadline:
                item = self.outbox.claim(self.clock.now(), ignore_backoff, self.policy.lease_seconds)
                if item is None and patient and self._held_elsewhere(deadline):
                    continue
                if item is None or item.id in seen:
                    if item is not None:  # failed earlier in this drain: leave it for later
                        self.outbox.release(item)
                    break
                seen.add(item.id)
                faults.point("queue.claimed")
                if handled:
                    self._pause()
                self._process(item, force)
                handled += 1
            self._watch_leases()
        return handled

    def _held_elsewhere(self, deadline: float | None) -> bool:
        """After a flush's claim found nothing: True, after a short wait, when an item was still
        pending or a dead claimer's item was taken back. A claim that ignores the backoff leaves a
        pending item only when another session holds its row (PostgreSQL claims skip held rows):
        a ``put`` or another worker's claim in flight, or the claim of a process killed a moment
        ago whose server session has not ended yet (on a loaded machine it runs on for a while,
        then rolls the claim back, or commits it as a dead claimer's: the recovery takes that
        back, now or at the next look). Stopping there would end the flush with the item not
        processed. False when nothing is left to wait for or the deadline has passed."""
        left = self.outbox.counts()
        if not (left.get("pending") or left.get("processing")):
            return False
        recovered = self._recover()
        pause = HELD_POLL_SECONDS if deadline is None else min(HELD_POLL_SECONDS, deadline - time.monotonic())
        if pause <= 0 or not (left.get("pending") or recovered):
            return False
        time.sleep(pause)  # real time: the other session's, not the injected clock's
        return True

    def _recover(self) -> int:
        count = self.outbox.recover(self.clock.now(), self.policy.lease_seconds, self.policy.max_attempts)
        if count:
            log.warning("recovered %d queue items from claims whose lease ran out or whose process is gone", count)
        return count

    def _watch_leases(self) -> None:
        """Wake when the earliest lease of an item another claimer holds runs out."""
        try:
            end = self.outbox.next_lease_end()
        except TiermemError:
            return
        if end is not None:
            self._wake_at(end)
            self._ensure_thread()

    def _run_with_heartbeat(self, item: OutboxItem, force: bool) -> None:
        """Run the processor for ``item`` in the pool; renew its lease while it runs."""
        future: Future[object] = self._pool().submit(self.processor, item, force)
        held = True
        while not wait([future], timeout=self.policy.heartbeat_seconds).done:
            if not held:
                continue  # taken over: nothing left to renew; wait for the work to finish
            try:
                if not self.outbox.renew(item, self.clock.now(), self.policy.lease_seconds):
                    held = False
                    log.warning("queue item %s: the lease ran out and another claimer took it (it may be"
                                " processed twice; each message is still journaled once)", item.id)
            except TiermemError as exc:  # e.g. a locked database: try again at the next beat
                log.warning("queue item %s: could not renew its lease: %s", item.id, exc)
        future.result()

    def _process(self, item: OutboxItem, force: bool) -> None:
        try:
            self._run_with_heartbeat(item, force)
            faults.point("queue.processed")
        except Deferred as later:
            self.outbox.defer(item, later.until)
            log.debug("queue item %s deferred until %s: %s", item.id, later.until, later)
            self._wake_at(later.until)
            return
        except Exception as exc:  # any failure keeps the item: never lose an update
            retry_at = self.clock.now() + timedelta(seconds=self.policy.backoff(item.attempts))
            status = self.outbox.failed(item, f"{type(exc).__name__}: {exc}", retry_at, self.policy.max_attempts)
            log.warning("queue item %s (thread %s) failed, now %s: %s", item.id, item.thread_id, status, exc)
            if status == "pending":
                self._wake_at(retry_at)
            return
        if not self.outbox.done(item):
            log.warning("queue item %s was taken over by another claimer before it finished", item.id)

    def _wake_at(self, moment: datetime) -> None:
        with self._cond:
            if self._due_at is None or moment < self._due_at:
                self._due_at = moment

    def _pause(self) -> None:
        delay = self.policy.update_delay_seconds
        if delay <= 0:
            return
        sleeper = getattr(self.clock, "sleep", None)
        (sleeper if callable(sleeper) else time.sleep)(delay)

    def _pool(self) -> ThreadPoolExecutor:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="tiermem-llm")
        return self._executor

    def _set_busy(self, delta: int) -> None:
        with self._cond:
            self._busy += delta
            self._cond.notify_all()

    # --- the background thread -----------------------------------------------------------
    def start(self) -> None:
        """Replay: items left pending by an earlier process become due now."""
        if not self.policy.enabled:
            return
        self._recover()
        if self.outbox.items("pending"):
            with self._cond:
                self._due_at = self.clock.now()
            self._ensure_thread()
        else:
            self._watch_leases()

    def _ensure_thread(self) -> None:
        with self._cond:
            if self._thread is not None or self._stopped:
                return
            self._thread = threading.Thread(target=self._run, name="tiermem-queue", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            with self._cond:
                if self._stopped:
                    return
                if not self._nowait:
                    wait = self._seconds_until_due()
                    if wait is None or wait > 0:
                        self._cond.wait(timeout=min(wait if wait is not None else _POLL_SECONDS, _POLL_SECONDS))
                        continue
            try:
                self.process_due()
            except Exception:  # the worker must survive anything (e.g. a locked database)
                log.exception("queue worker error")

    def _seconds_until_due(self) -> float | None:
        if self._due_at is None:
            return None
        return (self._due_at - self.clock.now()).total_seconds()

    def _is_due(self) -> bool:
        wait = self._seconds_until_due()
        return wait is not None and wait <= 0

    def wait_idle(self, timeout: float = 10.0) -> bool:
        """Block until nothing is due or being processed (tests, shutdown)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while self._busy or self._nowait or self._is_due():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(timeout=min(remaining, _POLL_SECONDS))
        return True

    # --- inspection ----------------------------------------------------------------------
    def pending(self, scope: Scope | None = None) -> list[OutboxItem]:
        """Items not processed yet (pending, processing or dead) — for read-your-writes (R35)."""
        return [i for i in self.outbox.items(scope=scope) if i.status in ("pending", "processing", "dead")]

    def retry_dead(self, ids: Sequence[int] | None = None) -> int:
        """Put dead-lettered items (all, or those of ``ids``) back in the queue; returns how many."""
        if ids is not None:
            ids = [validate.positive_int(i, "item id", 2**62) for i in ids]
        count = self.outbox.retry_dead(self.clock.now(), ids)
        if count:
            self.wake(now=True)
        return count


    def close(self, timeout: float | None = 10.0) -> None:
        """Drain what is pending (bounded by ``timeout``), then stop the thread and the pool."""
        with self._cond:
            if self._stopped:
                return
        try:
            if self.policy.enabled and self.outbox.items("pending"):
                self.flush(timeout)
        except Exception:
            log.exception("queue flush at close failed; items stay in the outbox")
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self._executor is not None:
            self._executor.shutdown(wait=False)
