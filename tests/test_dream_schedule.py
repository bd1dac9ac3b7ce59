"""The Deep Dream scheduler (R42): daily times, cron expressions, ticks on a fake clock, the thread."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from dream_helpers import GOOD_REPLY, open_memory, seed

from tiermem import ConfigError
from tiermem.dream.schedule import DreamScheduler, Schedule
from tiermem.testing import FakeClock

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, tz: ZoneInfo | None = None) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz or UTC)


def schedule(spec: str) -> Schedule:
    parsed = Schedule.parse(spec)
    assert parsed is not None
    return parsed


@pytest.mark.parametrize("spec", [None, "none", "off", " None ", ""])
def test_off(spec: str | None) -> None:
    assert Schedule.parse(spec) is None


@pytest.mark.parametrize(("spec", "now", "expected"), [
    ("03:00", "2026-03-14T02:59:00", "2026-03-14T03:00:00"),
    ("03:00", "2026-03-14T03:00:00", "2026-03-15T03:00:00"),  # strictly after
    ("3:05", "2026-03-14T09:30:00", "2026-03-15T03:05:00"),
    ("*/15 * * * *", "2026-03-14T09:31:10", "2026-03-14T09:45:00"),
    ("30 2 * * 1-5", "2026-03-14T00:00:00", "2026-03-16T02:30:00"),  # the 14th is a Saturday
    ("0 0 13 * 5", "2026-03-01T00:00:00", "2026-03-06T00:00:00"),  # day 13 OR Friday (cron rule)
    ("0 4 1 jan,jul *", "2026-03-14T00:00:00", "2026-07-01T04:00:00"),
    ("0 6 * * sun", "2026-03-14T00:00:00", "2026-03-15T06:00:00"),
    ("0 6 * * 7", "2026-03-14T00:00:00", "2026-03-15T06:00:00"),  # 7 is Sunday too
    ("@daily", "2026-03-14T09:00:00", "2026-03-15T00:00:00"),
    ("0 0 29 2 *", "2026-03-14T00:00:00", "2028-02-29T00:00:00"),
])
def test_next_after(spec: str, now: str, expected: str) -> None:
    assert schedule(spec).next_after(at(now), UTC) == at(expected)


def test_local_time_in_the_configured_zone() -> None:
    # 03:00 in Berlin is 02:00 UTC in winter and 01:00 UTC in summer (after the switch on 29 March)
    daily = schedule("03:00")
    assert daily.next_after(at("2026-03-14T12:00:00"), BERLIN) == at("2026-03-15T03:00:00", BERLIN)
    assert daily.next_after(at("2026-03-14T12:00:00"), BERLIN).astimezone(UTC).hour == 2
    assert daily.next_after(at("2026-07-01T12:00:00"), BERLIN).astimezone(UTC).hour == 1


@pytest.mark.parametrize("spec", ["25:00", "* * *", "61 * * * *", "0 0 * 13 *", "*/0 * * * *", "a b c d e",
                                  "0 0 * * funday", "² * * * *", "*/² * * * *", "0 ١ * * *", "9" * 5000 + " * * * *"])
def test_bad_specs_are_config_errors(spec: str) -> None:
    with pytest.raises(ConfigError, match="dream_schedule"):
        Schedule.parse(spec)


def test_a_date_that_never_comes_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="never matches"):
        schedule("0 0 31 2 *").next_after(at("2026-01-01T00:00:00"), UTC)


def test_tick_runs_once_when_due_and_moves_to_the_next_day() -> None:
    clock = FakeClock(at("2026-03-14T02:00:00"))
    runs: list[datetime] = []
    scheduler = DreamScheduler(schedule("03:00"), clock, UTC, lambda: runs.append(clock.now()))
    assert scheduler.next_run == at("2026-03-14T03:00:00")
    assert scheduler.tick() is False and runs == []
    clock.set(at("2026-03-14T03:00:00"))
    assert scheduler.tick() is True and runs == [at("2026-03-14T03:00:00")]
    assert scheduler.tick() is False and scheduler.next_run == at("2026-03-15T03:00:00")


def test_missed_runs_run_once_not_once_per_slot() -> None:
    clock = FakeClock(at("2026-03-14T02:00:00"))
    runs: list[int] = []
    scheduler = DreamScheduler(schedule("03:00"), clock, UTC, lambda: runs.append(1))
    clock.set(at("2026-03-18T10:00:00"))  # asleep for four nights
    assert scheduler.tick() is True and scheduler.tick() is False
    assert runs == [1] and scheduler.next_run == at("2026-03-19T03:00:00")


def test_a_failing_job_does_not_stop_the_schedule(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(at("2026-03-14T03:00:00"))

    def boom() -> None:
        raise RuntimeError("provider down")

    scheduler = DreamScheduler(schedule("*/10 * * * *"), clock, UTC, boom)
    clock.advance(600)
    assert scheduler.tick() is True and "scheduled Deep Dream failed" in caplog.text
    clock.advance(600)
    assert scheduler.tick() is True and scheduler.runs == 2


def test_the_thread_runs_the_job_when_the_clock_reaches_the_time() -> None:
    clock = FakeClock(at("2026-03-14T02:59:00"))
    ran = threading.Event()
    scheduler = DreamScheduler(schedule("03:00"), clock, UTC, ran.set, poll_seconds=0.01)
    scheduler.start()
    try:
        assert not ran.wait(0.05)
        clock.set(at("2026-03-14T03:00:00"))
        assert ran.wait(10)
    finally:
        scheduler.stop()
    assert not scheduler.running


@pytest.mark.usefixtures("backend")
def test_memory_scheduler_dreams_over_the_configured_days(root: Path) -> None:
    clock = FakeClock(at("2026-03-14T09:30:00"))
    mem, llm = open_memory(root, clock, [GOOD_REPLY], dream_schedule="10:00", dream_lookback_days=2)
    with mem:
        seed(mem)
        scheduler = mem.start_dream_scheduler(poll_seconds=0.01)
        assert scheduler is not None and scheduler.running
        assert mem.start_dream_scheduler() is scheduler  # one per Memory
        clock.set(at("2026-03-14T10:00:00"))
        deadline = time.monotonic() + 20
        while scheduler.runs == 0 and time.monotonic() < deadline:
            time.sleep(0.01)  # waiting for the thread's work, not for a timer
        assert scheduler.runs == 1 and len(llm.requests) == 1
        assert "=== 2026-03-13 (Friday) ===" in llm.requests[0].text  # two days: yesterday and today
        assert "Claire found a flat in Schwabing with 3 rooms." in mem.core.items()
    assert not scheduler.running  # close() stopped it


@pytest.mark.usefixtures("backend")
def test_memory_scheduler_off(root: Path) -> None:
    mem, _ = open_memory(root, FakeClock(at("2026-03-14T09:30:00")), [], dream_schedule="none")
    with mem:
        assert mem.start_dream_scheduler() is None
        assert mem.start_dream_scheduler("off") is None
