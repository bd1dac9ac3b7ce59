"""A stale-while-revalidate cache for tool results (R58, R59).

``SWRCache(ttl, stale_ttl).get(tool, params, fetch)`` keys a value by (project, tool, stable hash
of params). The age of a value decides what ``get`` does:

- ``age < ttl``: fresh, returned as it is;
- ``ttl <= age < ttl + stale_ttl``: stale, returned at once, and one background revalidation
  (a daemon thread) calls ``fetch`` again; callers arriving meanwhile get the stale value too
  and start nothing. If the revalidation fails, the error is logged and the stale value stays;
- otherwise (missing or expired): ``fetch`` runs in the caller's thread; concurrent callers
  for the same key wait for that one call (single flight). Its error propagates to all of them
  and nothing is cached.

``invalidate(tool=None)`` drops values (all, or one tool's); ``switch_project`` moves to another
project and drops everything. A fetch that was running when its key was invalidated still
answers the callers waiting for it, but its value is not stored. The size is bounded: past
``max_entries`` the least recently used value is evicted. At most ``max_revalidations`` background
revalidations run at once; a stale read beyond that is served without starting one (a later read
starts it). ``wait_idle(timeout)`` waits for running revalidations (tests, shutdown). Time comes
from the injected clock; no wall-clock waits anywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from tiermem.clock import Clock, SystemClock
from tiermem.errors import InvalidInput

log = logging.getLogger(__name__)

T = TypeVar("T")
CacheKey = tuple[str | None, str, str]  # (project, tool, params hash)


def _json_fallback(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(repr(item) for item in value)
    return repr(value)


def params_hash(params: Any) -> str:
    """A stable hash of ``params``: canonical JSON (sorted keys, compact); values JSON cannot
    hold are written with ``repr`` (sets sorted first). Objects whose ``repr`` changes from run
    to run (the default ``<object at 0x...>``) give keys that never match."""
    try:
        text = json.dumps(params, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=_json_fallback)
    except (TypeError, ValueError):  # keys that cannot be sorted, circular references
        text = "repr:" + repr(params)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class CacheStats:
    """Counters since the cache was made. ``misses`` counts callers that found no usable value
    (waiters of a shared fetch included); ``fetches`` counts the synchronous fetches run."""

    hits: int
    stale_hits: int
    misses: int
    fetches: int
    revalidations: int
    revalidation_errors: int
    evictions: int
    size: int


@dataclass
class _Entry:
    value: Any
    stored_at: float


class _Flight:
    """One running fetch for a key; other callers wait on it."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.discarded = False  # set when the key was invalidated meanwhile: do not store
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def result(self) -> Any:
        self.done.wait()
        if self.error is not None:
            raise self.error
        return self.value


class SWRCache:
    """Stale-while-revalidate cache; see the module documentation. Thread-safe."""

    def __init__(
        self,
        ttl: float,
        stale_ttl: float,
        clock: Clock | None = None,
        *,
        max_entries: int = 1024,
        project: str | None = None,
        max_revalidations: int = 4,
    ) -> None:
        for name, value in (("ttl", ttl), ("stale_ttl", stale_ttl)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InvalidInput(f"{name} must be a finite number of seconds >= 0, got {value!r}")
        for name, count in (("max_entries", max_entries), ("max_revalidations", max_revalidations)):
            if isinstance(count, bool) or not isinstance(count, int) or count < 1:
                raise InvalidInput(f"{name} must be an integer >= 1, got {count!r}")
        if project is not None and not isinstance(project, str):
            raise InvalidInput(f"project must be a string or None, got {type(project).__name__}")
        self._ttl = float(ttl)
        self._stale_ttl = float(stale_ttl)
        self._clock: Clock = clock or SystemClock()
        self._max_entries = max_entries
        self._max_revalidations = max_revalidations
        self._project = project
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._entries: OrderedDict[CacheKey, _Entry] = OrderedDict()
        self._flights: dict[CacheKey, _Flight] = {}
        self._background = 0
        self._counts = dict.fromkeys(
            ("hits", "stale_hits", "misses", "fetches", "revalidations", "revalidation_errors", "evictions"), 0
        )

    @property
    def project(self) -> str | None:
        return self._project

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def get(self, tool: str, params: Any, fetch: Callable[[], T]) -> T:
        """The value for (tool, params): cached, stale (revalidated in the background) or fetched."""
        if not isinstance(tool, str) or not tool:
            raise InvalidInput("tool must be a non-empty string")
        if not callable(fetch):
            raise InvalidInput("fetch must be a zero-argument callable")
        digest = params_hash(params)
        now = self._now()
        with self._lock:
            key: CacheKey = (self._project, tool, digest)
            entry = self._entries.get(key)
            if entry is not None:
                age = now - entry.stored_at
                if age < self._ttl + self._stale_ttl:
                    self._entries.move_to_end(key)
                    if age < self._ttl:
                        self._counts["hits"] += 1
                    else:
                        self._counts["stale_hits"] += 1
                        self._start_revalidation(key, now, fetch)
                    return cast(T, entry.value)
            self._counts["misses"] += 1
            flight = self._flights.get(key)
            if flight is None:
                flight = self._flights[key] = _Flight(now)
                self._counts["fetches"] += 1
                owner = True
            else:
                owner = False
        if not owner:
            return cast(T, flight.result())
        return self._fetch_now(key, flight, fetch)

    def _now(self) -> float:
        return self._clock.now().timestamp()

    def _fetch_now(self, key: CacheKey, flight: _Flight, fetch: Callable[[], T]) -> T:
        try:
            value = fetch()
        except BaseException as exc:
            flight.error = exc
            with self._lock:
                if self._flights.get(key) is flight:
                    del self._flights[key]
            flight.done.set()
            raise
        flight.value = value
        with self._lock:
            self._finish(key, flight)
        flight.done.set()
        return value

    def _start_revalidation(self, key: CacheKey, now: float, fetch: Callable[[], Any]) -> None:
        """Start the one background fetch for a stale key (lock held)."""
        if key in self._flights or self._background >= self._max_revalidations:
            return
        flight = self._flights[key] = _Flight(now)
        self._background += 1
        self._counts["revalidations"] += 1
        thread = threading.Thread(
            target=self._revalidate, args=(key, flight, fetch), name=f"tiermem-swr-{key[1]}", daemon=True
        )
        thread.start()

    def _revalidate(self, key: CacheKey, flight: _Flight, fetch: Callable[[], Any]) -> None:
        try:
            flight.value = fetch()
        except BaseException as exc:  # a background thread: log it, keep the stale value
            flight.error = exc
            log.warning("revalidating %s failed; keeping the stale value: %s", key[1], exc, exc_info=exc)
        with self._idle:
            if flight.error is None:
                self._finish(key, flight)
            else:
                self._counts["revalidation_errors"] += 1
                if self._flights.get(key) is flight:
                    del self._flights[key]
            self._background -= 1
            self._idle.notify_all()
        flight.done.set()

    def _finish(self, key: CacheKey, flight: _Flight) -> None:
        """Store a fetched value unless its key was invalidated meanwhile (lock held)."""
        if self._flights.get(key) is flight:
            del self._flights[key]
        if flight.discarded:
            return
        self._entries[key] = _Entry(flight.value, flight.started)
        self._entries.move_to_end(key)
        while len(self._entries) > self._max_entries:
            self._entries.popitem(last=False)
            self._counts["evictions"] += 1

    def invalidate(self, tool: str | None = None) -> int:
        """Drop every value (``tool=None``) or the values of one tool; returns how many."""
        with self._lock:
            return self._invalidate(tool)

    def _invalidate(self, tool: str | None) -> int:
        doomed = [key for key in self._entries if tool is None or key[1] == tool]
        for key in doomed:
            del self._entries[key]
        for key in [key for key in self._flights if tool is None or key[1] == tool]:
            self._flights.pop(key).discarded = True
        return len(doomed)

    def switch_project(self, project: str | None) -> None:
        """Work on another project from now on; everything cached so far is dropped (R59)."""
        if project is not None and not isinstance(project, str):
            raise InvalidInput(f"project must be a string or None, got {type(project).__name__}")
        with self._lock:
            self._project = project
            self._invalidate(None)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no background revalidation runs; False if ``timeout`` passed first."""
        with self._idle:
            return self._idle.wait_for(lambda: self._background == 0, timeout)

    def stats(self) -> CacheStats:
        with self._lock:
            return CacheStats(**self._counts, size=len(self._entries))
