"""When Deep Dream runs by itself (R42): a daily time or a 5-field cron expression, local time.

``dream_schedule`` is ``"HH:MM"`` (default ``"03:00"``), a cron expression
(``"minute hour day-of-month month day-of-week"`` with ``*``, lists, ranges, ``/step``, month and
weekday names; ``@daily``, ``@hourly``, ``@weekly``) or ``none``/``off`` for no scheduler. Cron
rule kept: when both day-of-month and day-of-week are restricted, a day matching either runs.

:class:`DreamScheduler` runs a job in a daemon thread of the process that holds the ``Memory``.
Its :meth:`~DreamScheduler.tick` does one step (run if due, compute the next time), so tests
drive it with a ``FakeClock`` and never wait. A run missed while the process was down or asleep
is run once when it notices, never once per missed slot.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

from tiermem import validate
from tiermem.clock import Clock
from tiermem.errors import ConfigError, InvalidInput

log = logging.getLogger(__name__)

OFF = frozenset({"", "none", "off", "false", "no", "disabled"})
_ALIASES = {"@daily": "0 0 * * *", "@midnight": "0 0 * * *", "@hourly": "0 * * * *", "@weekly": "0 0 * * 0"}
_MONTH_NAMES = "jan feb mar apr may jun jul aug sep oct nov dec"
_WEEKDAY_NAMES = "sun mon tue wed thu fri sat"
_MONTHS = {m: i for i, m in enumerate(_MONTH_NAMES.split(), start=1)}
_WEEKDAYS = {d: i for i, d in enumerate(_WEEKDAY_NAMES.split())}
_NO_NAMES: dict[str, int] = {}
_TIME = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)$")
_FIELDS: tuple[tuple[str, int, int, dict[str, int]], ...] = (
    ("minute", 0, 59, _NO_NAMES), ("hour", 0, 23, _NO_NAMES), ("day of month", 1, 31, _NO_NAMES),
    ("month", 1, 12, _MONTHS), ("day of week", 0, 7, _WEEKDAYS))
MAX_SEARCH_DAYS = 366 * 8  # 29 Feb on a Monday recurs within 28 years; 8 covers any Feb 29 / weekday gap


def _value(text: str, names: dict[str, int], what: str) -> int:
    lowered = text.lower()
    if lowered in names:
        return names[lowered]
    try:
        return validate.whole_number(text, what, 0, 10_000)  # the field's own range is checked after
    except InvalidInput:
        raise ConfigError(f"dream_schedule: {text[:40]!r} is not a valid {what}") from None


def _field(text: str, what: str, low: int, high: int, names: dict[str, int]) -> frozenset[int]:
    values: set[int] = set()
    for part in text.split(","):
        body, _, step_text = part.partition("/")
        step = _value(step_text, {}, f"{what} step") if step_text else 1
        if step < 1:
            raise ConfigError(f"dream_schedule: the {what} step must be at least 1")
        if body == "*":
            start, end = low, high
        elif "-" in body:
            first, _, last = body.partition("-")
            start, end = _value(first, names, what), _value(last, names, what)
        else:
            start = _value(body, names, what)
            end = high if step_text else start
        if not low <= start <= end <= high:
            raise ConfigError(f"dream_schedule: {part!r} is out of range for the {what} ({low}-{high})")
        values.update(range(start, end + 1, step))
    return frozenset(values)


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule; :meth:`next_after` gives the next run time."""

    spec: str
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]  # cron numbering: 0 = Sunday
    days_restricted: bool
    weekdays_restricted: bool

    @classmethod
    def parse(cls, spec: str | None) -> Schedule | None:
        """``None`` for "no schedule"; :class:`ConfigError` for anything unreadable."""
        if spec is None or spec.strip().lower() in OFF:
            return None
        text = _ALIASES.get(spec.strip().lower(), spec.strip())
        match = _TIME.match(text)
        if match:
            text = f"{int(match.group(2))} {int(match.group(1))} * * *"
        parts = text.split()
        if len(parts) != 5:
            raise ConfigError(f"dream_schedule {spec!r}: use HH:MM, a 5-field cron expression, or none")
        fields = [_field(p, what, low, high, names) for p, (what, low, high, names) in zip(parts, _FIELDS, strict=True)]
        weekdays = frozenset(d % 7 for d in fields[4])
        return cls(spec.strip(), fields[0], fields[1], fields[2], fields[3], weekdays,
                   parts[2] != "*", parts[4] != "*")

    def day_matches(self, day: date) -> bool:
        if day.month not in self.months:
            return False
        by_day = day.day in self.days
        by_weekday = (day.weekday() + 1) % 7 in self.weekdays
        if self.days_restricted and self.weekdays_restricted:
            return by_day or by_weekday
        return by_day and by_weekday

    def next_after(self, moment: datetime, tz: tzinfo) -> datetime:
        """The first scheduled time strictly after ``moment`` (aware), in ``tz``."""
        if moment.tzinfo is None:
            raise ValueError("moment must be timezone-aware")
        local = moment.astimezone(tz)
        day = local.date()
        for _ in range(MAX_SEARCH_DAYS):
            if self.day_matches(day):
                for hour in sorted(self.hours):
                    for minute in sorted(self.minutes):
                        candidate = datetime(day.year, day.month, day.day, hour, minute, tzinfo=tz)
                        if candidate > moment:
                            return candidate
            day += timedelta(days=1)
        raise ConfigError(f"dream_schedule {self.spec!r} never matches a real date")


class DreamScheduler:
    """Runs ``job`` at the times of ``schedule`` (see the module docstring)."""

    def __init__(self, schedule: Schedule, clock: Clock, tz: tzinfo, job: Callable[[], object],
                 poll_seconds: float = 30.0) -> None:
        self.schedule = schedule
        self.clock = clock
        self.tz = tz
        self.job = job
        self.poll_seconds = poll_seconds
        self.next_run = schedule.next_after(clock.now(), tz)
        self.runs = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def tick(self, now: datetime | None = None) -> bool:
        """Run the job if it is due (``now`` defaults to the clock); True if it ran."""
        with self._lock:
            now = self.clock.now() if now is None else now
            if now < self.next_run:
                return False
            self.next_run = self.schedule.next_after(now, self.tz)
        try:
            self.job()
        except Exception:  # a failed dream must not kill the scheduler; the next run retries
            log.exception("scheduled Deep Dream failed")
        self.runs += 1
        return True

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            wait = (self.next_run - self.clock.now()).total_seconds()
            self._stop.wait(min(self.poll_seconds, max(wait, 0.0)) or self.poll_seconds)

    def start(self) -> None:
        """Start the daemon thread (idempotent)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="tiermem-dream-scheduler", daemon=True)
        self._thread.start()
        log.info("Deep Dream scheduled (%s); next run %s", self.schedule.spec, self.next_run.isoformat())

    def stop(self, timeout: float | None = 10.0) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
        self._thread = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()
