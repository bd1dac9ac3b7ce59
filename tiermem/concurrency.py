"""In-process concurrency primitives: how one ``Memory`` serves many threads (an MCP server's
worker threads, an agent's tools) at once.

- :class:`lazy_property`: ``functools.cached_property`` whose first computation runs once per
  instance even when threads race for it (since Python 3.12 ``cached_property`` has no lock, and
  two threads could each build a search engine or start an update queue).
- :class:`FairLock`: a mutex handed over in arrival order, with a timeout. A SQLite write in one
  process waits on it instead of on SQLite's busy handler, which sleeps and lets a late thread
  overtake one that has waited longer.
- :class:`ReadWriteLock`: many readers at once or one writer. Held only around in-memory work
  (never around I/O, an embedder call or a write transaction), so a reader waits at most for an
  in-memory update of a few microseconds. A waiting writer stops new readers from entering, so a
  steady stream of reads cannot starve it. Neither side is re-entrant.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar, overload

_T = TypeVar("_T")
_INIT_LOCK = "_lazy_property_lock"


class lazy_property(Generic[_T]):
    """A cached property computed once per instance under that instance's (re-entrant) lock.

    Like ``cached_property``, the value lands in the instance's ``__dict__``, so later reads cost
    a plain attribute lookup and ``"name" in obj.__dict__`` tells whether it was computed.
    """

    def __init__(self, func: Callable[[Any], _T]) -> None:
        self.func = func
        self.name = func.__name__
        self.__doc__ = func.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> lazy_property[_T]: ...

    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...

    def __get__(self, instance: object | None, owner: type | None = None) -> _T | lazy_property[_T]:
        if instance is None:
            return self
        values = instance.__dict__
        if self.name in values:  # another thread finished it between the lookup and here
            return values[self.name]  # type: ignore[no-any-return]
        lock: threading.RLock = values.setdefault(_INIT_LOCK, threading.RLock())  # setdefault is atomic
        with lock:
            if self.name not in values:
                values[self.name] = self.func(instance)
            return values[self.name]  # type: ignore[no-any-return]


class FairLock:
    """A mutex that waiting threads get in the order they asked for it (first come, first served)."""

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._locked = False
        self._waiters: deque[threading.Lock] = deque()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """Take the lock; False when not ``blocking`` and it is held, or when ``timeout`` ran out."""
        with self._mutex:
            if not self._locked and not self._waiters:
                self._locked = True
                return True
            if not blocking:
                return False
            baton = threading.Lock()
            baton.acquire()
            self._waiters.append(baton)
        if baton.acquire(timeout=timeout):  # released by release(): the lock is ours
            return True
        with self._mutex:
            try:
                self._waiters.remove(baton)
            except ValueError:  # handed over just after the timeout: it is ours after all
                return True
            return False

    def release(self) -> None:
        """Hand the lock to the longest waiting thread, or free it."""
        with self._mutex:
            if not self._locked:
                raise RuntimeError("release of an unlocked FairLock")
            if self._waiters:
                self._waiters.popleft().release()  # stays locked: ownership moves on
            else:
                self._locked = False

    def locked(self) -> bool:
        with self._mutex:
            return self._locked

    def __enter__(self) -> FairLock:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


class ReadWriteLock:
    """Shared reading, exclusive writing; a waiting writer goes before readers that come after it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._readers = 0
        self._writing = False
        self._writers_waiting = 0

    @contextmanager
    def reading(self) -> Iterator[None]:
        with self._cond:
            while self._writing or self._writers_waiting:
                self._cond.wait()
            self._readers += 1
        try:
            yield
        finally:
            with self._cond:
                self._readers -= 1
                if not self._readers:
                    self._cond.notify_all()

    @contextmanager
    def writing(self) -> Iterator[None]:
        with self._cond:
            self._writers_waiting += 1
            try:
                while self._writing or self._readers:
                    self._cond.wait()
            finally:
                self._writers_waiting -= 1
            self._writing = True
        try:
            yield
        finally:
            with self._cond:
                self._writing = False
                self._cond.notify_all()
