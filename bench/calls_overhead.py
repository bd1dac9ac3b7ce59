"""What the LLM call log (issue 17) adds to each model call: an instant model (returns a fixed
reply, no network) called raw (the floor) and through ``Memory.llm`` (the logging wrapper, one row
written per call), in the same run, on SQLite and, with ``--postgres``, on PostgreSQL.

    python bench/calls_overhead.py [--calls 300] [--postgres]

Prints the median and p95 per call of each and the logged overhead (median difference); the
figures are latencies of this process on a shared machine, not of a provider.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from tiermem import Memory
from tiermem.calls import unwrap_model
from tiermem.testing import HashEmbedder

MESSAGES = [{"role": "system", "content": "You extract facts."},
            {"role": "user", "content": "I moved to Lisbon in March and I drink green tea every morning. " * 8}]


class Instant:
    """A chat model that answers at once (what is left is tiermem's own cost)."""

    model_id = "bench:instant"

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        return '{"newFacts": []}'


def timed(call: Any, n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def p95(values: list[float]) -> float:
    return sorted(values)[int(0.95 * (len(values) - 1))]


def run(root: Path, calls: int, **settings: Any) -> None:
    with Memory(root, llm=Instant(), embedder=HashEmbedder(), timezone="UTC", **settings) as mem:
        logged = mem.llm
        assert logged is not None
        raw = unwrap_model(logged)
        timed(lambda: logged.complete(MESSAGES), 20)  # warm-up: tokenizer, connection, table
        floor = timed(lambda: raw.complete(MESSAGES), calls)
        with_log = timed(lambda: logged.complete(MESSAGES), calls)
        rows = mem.calls.totals().calls
    label = mem.db.backend
    print(f"{label:9s} raw      median {statistics.median(floor):.3f} ms  p95 {p95(floor):.3f} ms")
    print(f"{label:9s} logged   median {statistics.median(with_log):.3f} ms  p95 {p95(with_log):.3f} ms"
          f"  (+{statistics.median(with_log) - statistics.median(floor):.3f} ms a call; {rows} rows)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--postgres", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run(Path(tmp) / "sqlite", args.calls)
        if args.postgres:
            import sys

            sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
            from pg_helpers import fresh_schema

            with fresh_schema() as url:
                run(Path(tmp) / "pg", args.calls, database_url=url)


if __name__ == "__main__":
    main()
