"""Cost of the durability levels (issue 14): ``queue.add`` and ``daily.append`` under
``sqlite_synchronous = "normal"`` (the default) and ``"full"`` (docs/durability.md).

Each level gets a fresh store in a temporary directory (under ``--dir`` if given: put it on the disk
you care about — tmpfs makes fsync free). ``queue.add`` queues a growing three-message-step thread
(the call commits one outbox row); ``daily.append`` appends one record (``full`` also fsyncs the
file). Wall time per call, after a warm-up; levels are interleaved in rounds so that other load on
the machine hits both alike.

    python bench/durability.py [--calls 400] [--rounds 4] [--dir PATH] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem import Memory
from tiermem.testing import HashEmbedder

LEVELS = ("normal", "full")


def _thread(n: int) -> list[dict[str, str]]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} of the thread"}
            for i in range(n)]


def _measure(root: Path, level: str, calls: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {"queue.add": [], "daily.append": []}
    with Memory(root, embedder=HashEmbedder(), sqlite_synchronous=level, debounce_seconds=3600,
                queue_replay=False, shutdown_flush_seconds=0) as mem:
        mem.queue.add("warm-up", _thread(3))
        mem.daily.append("Bench", "warm-up")
        for i in range(calls):
            thread = _thread(3 * (i % 20 + 1))
            start = time.perf_counter()
            mem.queue.add(f"t{i // 20}", thread)
            times["queue.add"].append(time.perf_counter() - start)
            start = time.perf_counter()
            mem.daily.append("Bench", f"note {i}")
            times["daily.append"].append(time.perf_counter() - start)
    return times


def _summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"median_us": round(statistics.median(ordered) * 1e6, 1),
            "p95_us": round(ordered[int(0.95 * (len(ordered) - 1))] * 1e6, 1),
            "calls": len(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=400, help="calls per level and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--dir", type=Path, default=None, help="where the stores go (a temporary directory in it)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="tiermem-durability-", dir=args.dir) as work:
        result = _run(Path(work), args.calls, args.rounds)
    print(json.dumps(result, indent=2) if args.json else _table(result))


def _run(base: Path, calls: int, rounds: int) -> dict[str, Any]:
    collected: dict[str, dict[str, list[float]]] = {level: {"queue.add": [], "daily.append": []} for level in LEVELS}
    for round_ in range(rounds):
        for level in LEVELS:
            for op, samples in _measure(base / f"{level}-{round_}", level, calls).items():
                collected[level][op] += samples
    result: dict[str, Any] = {"dir": str(base), "filesystem": _filesystem(base), "load_average": os.getloadavg()[0]}
    for level in LEVELS:
        result[level] = {op: _summary(samples) for op, samples in collected[level].items()}
    for op in ("queue.add", "daily.append"):
        result[f"{op} full/normal"] = round(result["full"][op]["median_us"] / result["normal"][op]["median_us"], 2)
    return result


def _filesystem(path: Path) -> str:
    best = ("", "?")
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            for line in mounts:
                _, point, kind, *_ = line.split()
                if str(path.resolve()).startswith(point) and len(point) > len(best[0]):
                    best = (point, kind)
    except OSError:
        pass
    return best[1]


def _table(result: dict[str, Any]) -> str:
    lines = [f"store in {result['dir']} ({result['filesystem']}), load average {result['load_average']:.1f}"]
    for level in LEVELS:
        for op, figures in result[level].items():
            lines.append(f"{level:7} {op:13} median {figures['median_us']:>9.1f} µs   p95 {figures['p95_us']:>9.1f} µs")
    lines += [f"{op} full/normal: ×{result[f'{op} full/normal']}" for op in ("queue.add", "daily.append")]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
