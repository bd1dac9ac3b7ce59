"""Costs of the file tiers: daily appends, the index refresh before a search, session adds.

    python bench/tiers.py [--json]

Prints medians (µs per call) of:
- ``daily.append`` of one record through ``Memory`` (file lock, write, incremental index, the search
  listener with the hash embedder) and through a bare ``DailyJournal`` (no index), as its floor;
- ``refresh_index()`` over 90 daily files of 50 records + ``MEMORY.md`` when nothing changed (stat
  only) and when one file was edited by hand (hash + re-index of that file);
- ``session.add`` without a trim and with a trim (extractive record written, no LLM);
- wall time of 4 processes appending 500 records each to one day (all lines checked).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tiermem import Memory
from tiermem.paths import UserPaths
from tiermem.testing import FakeClock
from tiermem.tiers.daily import DailyJournal

START = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)
CHILD = """
import sys
from datetime import datetime, timezone
from tiermem import Memory
from tiermem.testing import FakeClock
clock = FakeClock(datetime(2026, 3, 14, 9, 0, tzinfo=timezone.utc))
with Memory(sys.argv[1], llm="none", embedder="hash", clock=clock, timezone="UTC") as mem:
    for i in range(500):
        mem.daily.append("Note", f"process {sys.argv[2]} record {i}")
"""


def median_us(call: Callable[[int], Any], n: int) -> float:
    times = []
    for i in range(n):
        started = time.perf_counter()
        call(i)
        times.append((time.perf_counter() - started) * 1e6)
    return round(statistics.median(times), 1)


def open_memory(root: Path, **settings: Any) -> Memory:
    return Memory(root, llm="none", embedder="hash", clock=FakeClock(START), timezone="UTC", **settings)


def appends(root: Path) -> dict[str, float]:
    with open_memory(root / "a") as mem:
        mem.daily.append("Note", "warm up")
        full = median_us(lambda i: mem.daily.append("Note", f"user: record number {i} about tea"), 500)
    bare = DailyJournal(UserPaths.for_user(root / "b", "default"), FakeClock(START), UTC)
    floor = median_us(lambda i: bare.append("Note", f"user: record number {i} about tea"), 500)
    return {"append_us": full, "append_floor_us": floor, "append_ratio": round(full / floor, 2)}


def refresh(root: Path) -> dict[str, float]:
    with open_memory(root / "r") as mem:
        for day in range(90):
            mem.daily.append("Note", [f"record {day}-{i} of a day" for i in range(50)],
                             at=START - timedelta(days=day))
        mem.core.write("".join(f"- core bullet {i}\n" for i in range(100)))
        mem.refresh_index()
        unchanged = median_us(lambda i: mem.refresh_index(), 50)
        path = mem.daily.path_for(START.date())

        def edit(i: int) -> None:
            path.write_text(path.read_text(encoding="utf-8") + f"- hand edit {i}\n", encoding="utf-8")
            assert mem.refresh_index() == [mem.daily.paths.relative(path)]

        edited = median_us(edit, 20)
    return {"refresh_unchanged_us": unchanged, "refresh_one_edited_us": edited}


def sessions(root: Path) -> dict[str, float]:
    with open_memory(root / "s") as mem:
        big = mem.session("big", max_tokens=10_000_000)
        plain = median_us(lambda i: big.add("user", f"message {i} about the garden and the weather"), 500)
        small = mem.session("small", max_tokens=200)
        for i in range(20):
            small.add("user", f"message {i} about the garden and the weather " * 3)

        def trimming(i: int) -> None:
            small.add("user", f"question {i} about the garden and the weather " * 3)
            small.add("assistant", f"answer {i} about the garden and the weather " * 3)

        trim = median_us(trimming, 100)
    return {"session_add_us": plain, "session_add_pair_with_trims_us": trim}


def processes(root: Path) -> dict[str, float]:
    target = root / "p"
    Memory(target, llm="none", embedder="hash").close()
    started = time.perf_counter()
    children = [subprocess.Popen([sys.executable, "-c", CHILD, str(target), str(w)]) for w in range(4)]
    for child in children:
        if child.wait() != 0:
            raise SystemExit("a child process failed")
    wall = time.perf_counter() - started
    lines = (target / "memory" / "2026-03-14.md").read_text(encoding="utf-8").splitlines()
    records = {line for line in lines if line.startswith("- process ")}
    if len(records) != 2000:
        raise SystemExit(f"expected 2000 records, found {len(records)}")
    return {"four_processes_2000_appends_s": round(wall, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        result: dict[str, float] = {}
        for part in (appends, refresh, sessions, processes):
            result.update(part(root))
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:34} {value}")


if __name__ == "__main__":
    main()
