"""Cost of ``mem.system_context()`` when nothing changed versus a full re-render (R57).

    python bench/system_context.py [--facts 500] [--repeats 200] [--json]

Fills a fresh memory (facts, summaries, an active plan, two daily files), then times, in the
same run: a build with no epoch moved (epoch checks only), a build after one plan check (only
the plan re-renders) and a forced full re-render (``invalidate()`` first: the floor it saves).
Also plan write throughput (``check`` + ``uncheck``, one transaction each).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder


def _median_ms(call: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def run(facts: int, repeats: int) -> dict[str, Any]:
    clock = FakeClock(datetime(2026, 11, 22, 9, 0, tzinfo=UTC))
    with tempfile.TemporaryDirectory() as root, Memory(root, embedder=HashEmbedder(), clock=clock,
                                                      timezone="UTC", max_facts=facts + 10) as mem:
        from tiermem.facts.store import NewFact

        mem.facts.add_many([NewFact(f"Fact number {i} about the project setup and the user's habits", "knowledge",
                                    0.5 + (i % 50) / 100) for i in range(facts)])
        mem.facts.set_summaries({"workContext": "Builds a compiler in Rust", "topOfMind": "Parser error recovery"})
        plan = mem.plans.start("Port the parser", [f"step {i}" for i in range(20)])
        mem.daily.append("Session Notes", [f"user: note {i}" for i in range(30)])
        clock.advance(86400)
        mem.daily.append("Session Notes", [f"user: later note {i}" for i in range(30)])
        builder = mem.system_context_builder()
        text = mem.system_context().text
        unchanged = _median_ms(mem.system_context, repeats)

        def full() -> None:
            builder.invalidate()
            mem.system_context()

        full_ms = _median_ms(full, max(repeats // 4, 10))
        plan_times = []
        for index in range(repeats):
            (mem.plans.check if index % 2 == 0 else mem.plans.uncheck)(plan.id, 0)
            started = time.perf_counter()
            result = mem.system_context()
            plan_times.append((time.perf_counter() - started) * 1000)
            assert result.rerendered == ["plan"], result.rerendered
        plan_ms = statistics.median(plan_times)
        write_ms = _median_ms(lambda: mem.plans.check(plan.id, 1) and mem.plans.uncheck(plan.id, 1), repeats) / 2
        return {
            "facts": facts,
            "text_chars": len(text),
            "unchanged_build_ms": round(unchanged, 4),
            "plan_changed_build_ms": round(plan_ms, 4),
            "full_render_ms": round(full_ms, 4),
            "ratio_unchanged_to_full": round(unchanged / full_ms, 4),
            "plan_write_ms": round(write_ms, 4),
        }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--facts", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=200)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = run(args.facts, args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key:>24}: {value}")


if __name__ == "__main__":
    main()
