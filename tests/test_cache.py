"""SWRCache (R58, R59): fresh / stale / expired, one revalidation, single flight, invalidation."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tiermem.cache import SWRCache, params_hash
from tiermem.errors import InvalidInput
from tiermem.testing import FakeClock

T0 = datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
JOIN = 10.0  # generous upper bound for joining threads; never waited out when things work


class Source:
    """A fetch function that counts its calls and can be held until released."""

    def __init__(self, hold: bool = False) -> None:
        self.calls = 0
        self.started = threading.Event()
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self._lock = threading.Lock()
        self.fail_with: BaseException | None = None

    def __call__(self) -> str:
        with self._lock:
            self.calls += 1
            number = self.calls
        self.started.set()
        assert self.release.wait(JOIN), "test never released the fetch"
        if self.fail_with is not None:
            raise self.fail_with
        return f"v{number}"


def run_threads(count: int, target: Callable[[int], None]) -> None:
    threads = [threading.Thread(target=target, args=(i,)) for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(JOIN)
        assert not thread.is_alive()


def wait_until(predicate: Callable[[], bool]) -> None:
    deadline = time.monotonic() + JOIN
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.001)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(T0)


def test_fresh_within_ttl_then_stale_then_expired(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=300, clock=clock)
    source = Source()
    assert cache.get("read_file", {"path": "a.py"}, source) == "v1"
    clock.advance(59.9)
    assert cache.get("read_file", {"path": "a.py"}, source) == "v1"  # fresh: no fetch
    assert source.calls == 1

    clock.advance(0.1)  # age == ttl: stale from here on
    assert cache.get("read_file", {"path": "a.py"}, source) == "v1"  # stale value at once
    assert cache.wait_idle(JOIN)
    assert source.calls == 2
    assert cache.get("read_file", {"path": "a.py"}, source) == "v2"  # revalidated value, fresh

    clock.advance(60 + 300)  # age == ttl + stale_ttl: expired, fetched synchronously
    assert cache.get("read_file", {"path": "a.py"}, source) == "v3"
    assert cache.wait_idle(JOIN) and source.calls == 3
    stats = cache.stats()
    assert (stats.hits, stats.stale_hits, stats.misses, stats.revalidations, stats.fetches) == (2, 1, 2, 1, 2)


def test_stale_value_is_returned_while_revalidation_still_runs(clock: FakeClock) -> None:
    cache = SWRCache(ttl=10, stale_ttl=100, clock=clock)
    source = Source()
    cache.get("grep", "TODO", source)
    source.release.clear()
    clock.advance(20)
    assert cache.get("grep", "TODO", source) == "v1"
    assert source.started.wait(JOIN) and not source.release.is_set()  # fetch still held
    assert cache.wait_idle(timeout=0.01) is False
    source.release.set()
    assert cache.wait_idle(JOIN)
    assert cache.get("grep", "TODO", source) == "v2"


def test_exactly_one_revalidation_for_8_concurrent_callers_of_a_stale_key(clock: FakeClock) -> None:
    cache = SWRCache(ttl=10, stale_ttl=100, clock=clock)
    source = Source()
    cache.get("list_dir", ".", source)
    source.release.clear()
    clock.advance(11)
    barrier = threading.Barrier(8)
    seen: list[str] = []

    def caller(_: int) -> None:
        barrier.wait(JOIN)
        seen.append(cache.get("list_dir", ".", source))

    run_threads(8, caller)  # all return while the one revalidation is held
    assert seen == ["v1"] * 8
    source.release.set()
    assert cache.wait_idle(JOIN)
    assert source.calls == 2
    stats = cache.stats()
    assert stats.stale_hits == 8 and stats.revalidations == 1
    assert cache.get("list_dir", ".", source) == "v2"


def test_single_flight_for_a_missing_key(clock: FakeClock) -> None:
    cache = SWRCache(ttl=10, stale_ttl=10, clock=clock)
    source = Source(hold=True)
    results: list[str] = []

    def caller(_: int) -> None:
        results.append(cache.get("search", {"q": "x"}, source))

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    wait_until(lambda: cache.stats().misses == 8)  # every caller has joined the one flight
    source.release.set()
    for thread in threads:
        thread.join(JOIN)
    assert results == ["v1"] * 8
    assert source.calls == 1 and cache.stats().fetches == 1


def test_error_of_a_synchronous_fetch_reaches_every_waiter_and_caches_nothing(clock: FakeClock) -> None:
    cache = SWRCache(ttl=10, stale_ttl=10, clock=clock)
    source = Source(hold=True)
    source.fail_with = OSError("disk on fire")
    errors: list[BaseException] = []

    def caller(_: int) -> None:
        try:
            cache.get("read_file", "x", source)
        except OSError as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    wait_until(lambda: cache.stats().misses == 4)
    source.release.set()
    for thread in threads:
        thread.join(JOIN)
    assert len(errors) == 4 and all(str(e) == "disk on fire" for e in errors)
    assert source.calls == 1 and len(cache) == 0
    source.fail_with = None
    assert cache.get("read_file", "x", source) == "v2"  # nothing was cached: fetched again


def test_revalidation_error_keeps_the_stale_value_and_is_logged(
    clock: FakeClock, caplog: pytest.LogCaptureFixture
) -> None:
    cache = SWRCache(ttl=10, stale_ttl=100, clock=clock)
    source = Source()
    cache.get("fetch_url", "https://x", source)
    clock.advance(15)
    source.fail_with = TimeoutError("upstream timeout")
    with caplog.at_level(logging.WARNING, logger="tiermem.cache"):
        assert cache.get("fetch_url", "https://x", source) == "v1"
        assert cache.wait_idle(JOIN)
    assert "upstream timeout" in caplog.text and "fetch_url" in caplog.text
    assert cache.stats().revalidation_errors == 1
    source.fail_with = None
    assert cache.get("fetch_url", "https://x", source) == "v1"  # still served, and retried
    assert cache.wait_idle(JOIN)
    assert source.calls == 3 and cache.get("fetch_url", "https://x", source) == "v3"


def test_invalidate_one_tool_or_everything(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=60, clock=clock)
    reads, greps = Source(), Source()
    cache.get("read_file", "a", reads)
    cache.get("read_file", "b", reads)
    cache.get("grep", "a", greps)
    assert cache.invalidate("read_file") == 2
    assert cache.get("grep", "a", greps) == "v1"  # other tool untouched
    assert cache.get("read_file", "a", reads) == "v3"
    assert cache.invalidate() == 2
    assert cache.get("grep", "a", greps) == "v2"


def test_project_switch_invalidates_everything(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=60, clock=clock, project="alpha")
    source = Source()
    assert cache.get("read_file", "README.md", source) == "v1"
    cache.switch_project("beta")
    assert cache.project == "beta" and len(cache) == 0
    assert cache.get("read_file", "README.md", source) == "v2"
    cache.switch_project("alpha")  # back again: nothing from before survives
    assert cache.get("read_file", "README.md", source) == "v3"


def test_a_fetch_running_during_invalidation_is_not_stored(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=60, clock=clock)
    source = Source(hold=True)
    got: list[str] = []
    thread = threading.Thread(target=lambda: got.append(cache.get("read_file", "a", source)))
    thread.start()
    assert source.started.wait(JOIN)
    cache.invalidate("read_file")  # e.g. the file was just edited
    source.release.set()
    thread.join(JOIN)
    assert got == ["v1"]  # the caller that asked before still gets its answer
    assert len(cache) == 0
    assert cache.get("read_file", "a", source) == "v2"


def test_lru_bound(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=0, clock=clock, max_entries=3)
    source = Source()
    for key in ("k1", "k2", "k3"):
        cache.get("t", key, source)
    cache.get("t", "k1", source)  # k1 is now the most recently used
    cache.get("t", "k4", source)  # evicts k2
    assert len(cache) == 3 and cache.stats().evictions == 1
    calls = source.calls
    for key in ("k1", "k3", "k4"):
        cache.get("t", key, source)
    assert source.calls == calls  # all still cached
    cache.get("t", "k2", source)
    assert source.calls == calls + 1


def test_params_hash_is_canonical() -> None:
    assert params_hash({"a": 1, "b": [1, 2]}) == params_hash({"b": [1, 2], "a": 1})
    assert params_hash({"a": 1}) != params_hash({"a": "1"})
    assert params_hash({"s": {3, 1, 2}}) == params_hash({"s": {2, 3, 1}})
    assert params_hash(Path("/x")) == params_hash(Path("/x")) != params_hash(Path("/y"))
    assert params_hash({(1, 2): "tuple key"}) == params_hash({(1, 2): "tuple key"})
    assert params_hash({1: "a", "1": "b"}) != params_hash({1: "b", "1": "a"})


def test_same_params_in_any_key_order_hit_the_cache(clock: FakeClock) -> None:
    cache = SWRCache(ttl=60, stale_ttl=0, clock=clock)
    source = Source()
    cache.get("grep", {"pattern": "x", "path": "src"}, source)
    assert cache.get("grep", {"path": "src", "pattern": "x"}, source) == "v1"
    assert source.calls == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"ttl": -1, "stale_ttl": 0},
        {"ttl": float("nan"), "stale_ttl": 0},
        {"ttl": 1, "stale_ttl": "5"},
        {"ttl": 1, "stale_ttl": 1, "max_entries": 0},
        {"ttl": 1, "stale_ttl": 1, "project": 3},
    ],
)
def test_bad_settings_are_rejected(kwargs: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput):
        SWRCache(**kwargs)


def test_bad_get_arguments_are_rejected(clock: FakeClock) -> None:
    cache = SWRCache(ttl=1, stale_ttl=1, clock=clock)
    with pytest.raises(InvalidInput):
        cache.get("", {}, lambda: 1)
    with pytest.raises(InvalidInput):
        cache.get("t", {}, "not callable")  # type: ignore[arg-type]


def test_thread_safety_under_8_threads(clock: FakeClock) -> None:
    cache = SWRCache(ttl=5, stale_ttl=5, clock=clock, max_entries=16)
    counter = 0
    counter_lock = threading.Lock()
    failures: list[str] = []

    def fetcher(tool: str, key: int) -> Callable[[], tuple[str, int, int]]:
        def fetch() -> tuple[str, int, int]:
            nonlocal counter
            with counter_lock:
                counter += 1
                return (tool, key, counter)

        return fetch

    def worker(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(400):
            tool, key = rng.choice(["read_file", "grep"]), rng.randrange(24)
            value = cache.get(tool, {"key": key}, fetcher(tool, key))
            if value[:2] != (tool, key):
                failures.append(f"{tool}/{key} got {value}")
            roll = rng.random()
            if roll < 0.05:
                clock.advance(rng.uniform(0, 8))
            elif roll < 0.06:
                cache.invalidate(rng.choice([None, "grep"]))

    run_threads(8, worker)
    assert cache.wait_idle(JOIN)
    assert failures == []
    stats = cache.stats()
    assert stats.hits + stats.stale_hits + stats.misses == 8 * 400
    assert stats.hits > 0 and stats.misses > 0 and stats.size <= 16
    assert counter == stats.fetches + stats.revalidations
