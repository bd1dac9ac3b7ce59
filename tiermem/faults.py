"""Fault-injection points for crash tests (the chaos test, issue 14): off unless asked for.

A write path calls :func:`point` between its steps, e.g. ``point("journal.appended")`` after the
Daily append and before its digests are recorded. Nothing happens unless the point is armed:

- by the environment, ``TIERMEM_FAULTS="journal.appended:kill"`` (several separated by commas;
  ``name:action@n`` fires at the ``n``-th hit of the point in this process, default the first);
- or in-process with :func:`arm` (tests).

Actions: ``kill`` sends SIGKILL to the process itself (a crash at exactly that step: no
``finally``, no ``atexit``, nothing flushed); ``raise`` raises :class:`FaultInjected` (a
``StorageError``).

The points (each between two steps of one write):

=====================  ====================================================================
``journal.intent``     the write-ahead intent is committed, the Daily block not appended yet
``journal.appended``   the block is appended, its digests not recorded yet
``journal.recorded``   digests recorded, intent cleared; the writer has not returned yet
``queue.claimed``      an outbox item is claimed (leased), nothing done with it yet
``queue.journaled``    the item's messages are journaled, extraction not run yet
``queue.extracted``    extraction applied its facts, the extracted hashes not recorded yet
``queue.processed``    all work done, the item not marked done yet
=====================  ====================================================================
"""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

from tiermem import validate
from tiermem.errors import StorageError

ENV = "TIERMEM_FAULTS"
ACTIONS = ("kill", "raise")

_armed: dict[str, tuple[str, int]] = {}
_hits: Counter[str] = Counter()
_lock = threading.Lock()
_parsed: tuple[str, dict[str, tuple[str, int]]] = ("", {})


class FaultInjected(StorageError):
    """Raised at an armed point with the ``raise`` action (a storage failure at that step, so
    the write paths handle it as they handle a failed disk or database write)."""


def parse(spec: str) -> dict[str, tuple[str, int]]:
    """``"a:kill,b:raise@2"`` -> ``{"a": ("kill", 1), "b": ("raise", 2)}``; bad entries raise ValueError."""
    out: dict[str, tuple[str, int]] = {}
    for entry in filter(None, (part.strip() for part in spec.split(","))):
        name, _, rest = entry.partition(":")
        action, _, nth = (rest or "kill").partition("@")
        try:
            if action not in ACTIONS or not name:
                raise ValueError(action)
            out[name] = (action, validate.whole_number(nth, "N", 1) if nth else 1)
        except ValueError:  # InvalidInput is one too
            raise ValueError(f"bad fault spec {entry!r}: expected NAME[:kill|raise][@N]") from None
    return out


def arm(name: str, action: str = "raise", nth: int = 1) -> None:
    """Arm ``name`` in this process (``disarm()`` clears every in-process point)."""
    if action not in ACTIONS:
        raise ValueError(f"action must be one of {ACTIONS}")
    with _lock:
        _armed[name] = (action, nth)
        _hits[name] = 0


def disarm() -> None:
    with _lock:
        _armed.clear()
        _hits.clear()


def point(name: str) -> None:
    """A step boundary of a write; fires the fault armed for ``name``, if any."""
    global _parsed
    spec = os.environ.get(ENV, "")
    if not spec and not _armed:
        return
    with _lock:
        if spec != _parsed[0]:
            _parsed = (spec, parse(spec))
        armed = _armed.get(name) or _parsed[1].get(name)
        if armed is None:
            return
        _hits[name] += 1
        if _hits[name] != armed[1]:
            return
    if armed[0] == "kill":
        os.kill(os.getpid(), getattr(signal, "SIGKILL", signal.SIGTERM))
    raise FaultInjected(f"fault injected at {name}")
