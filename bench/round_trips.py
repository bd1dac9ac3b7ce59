"""Round trips to the PostgreSQL server per write (issue 25 item 2): a Daily append of 1 and of 10
records, a fact add (new, and a duplicate), and the update queue's enqueue, claim and done.

Counted by :func:`tiermem.storage.postgres.trips.count_round_trips` (libpq's protocol trace of every
connection the store's pool lends). Each operation runs ``--warm`` times first (psycopg prepares a
statement it has run five times on a connection, which costs one round trip once), then ``--runs``
times measured; the table gives the median and the largest count, and the first call's.

    python bench/round_trips.py [--url URL] [--statements]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

RECORDS_10 = [f"record {i} of a ten-record block about the deployment plan" for i in range(10)]


def _operations(mem: Any) -> dict[str, Callable[[int], Any]]:
    from tiermem.storage.outbox import OutboxRepository

    outbox = OutboxRepository(mem.db)
    claimed: list[Any] = []
    at = datetime(2026, 11, 28, 12, tzinfo=UTC)

    def claim(i: int) -> None:
        item = outbox.claim(at, ignore_backoff=True)
        assert item is not None, "nothing to claim"
        claimed.append(item)

    def done(i: int) -> None:
        assert outbox.done(claimed.pop()), "done lost its claim"

    return {
        "daily append, 1 record": lambda i: mem.daily.append("Note", f"one record number {i}"),
        "daily append, 10 records": lambda i: mem.daily.append("Note", [f"{r} #{i}" for r in RECORDS_10]),
        "fact add": lambda i: mem.facts.add(f"fact number {i} about {uuid.uuid4().hex}"),
        "fact add, duplicate": lambda i: mem.facts.add("the one fact that is always there"),
        "queue enqueue": lambda i: outbox.put(f"thread-{i}", mem.scope, [{"role": "user", "content": "hi"}], at),
        "queue claim": claim,
        "queue done": done,
    }


def measure(mem: Any, warm: int, runs: int, show: bool) -> dict[str, tuple[int, float, int]]:
    """Operation -> (first call's count, median, max of the measured runs)."""
    from tiermem.storage.postgres.trips import count_round_trips

    mem.facts.add("the one fact that is always there")
    mem.daily.read()
    results: dict[str, tuple[int, float, int]] = {}
    operations = _operations(mem)
    counts: dict[str, list[int]] = {name: [] for name in operations}
    shown: dict[str, list[str]] = {}
    for i in range(warm + runs):  # in rounds, as a queue runs them: enqueue, claim, done
        for name, operation in operations.items():
            with count_round_trips(mem.db) as trips:
                operation(i)
            counts[name].append(trips.count)
            shown[name] = trips.statements
    for name, found in counts.items():
        measured = found[warm:]
        results[name] = (found[0], statistics.median(measured), max(measured))
        if show:
            print(f"-- {name}: {found[-1]} round trips on its last call")
            for sql in shown[name]:
                print("   ", sql[:160])
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", help="a PostgreSQL URL (default: bench/pgserver.py's private server)")
    parser.add_argument("--warm", type=int, default=12)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--statements", action="store_true", help="print each operation's statements")
    args = parser.parse_args()
    import psycopg
    from pgserver import server_url

    from tiermem import Memory
    from tiermem.testing import HashEmbedder

    base = server_url(args.url)
    for embed in (True, False):
        schema = f"rt_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA {schema}")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector SCHEMA public")
        url = f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema},public"
        try:
            with tempfile.TemporaryDirectory() as root, Memory(
                    Path(root), embedder=HashEmbedder(), timezone="UTC", database_url=url,
                    embed_on_write=embed, queue_replay=False) as mem:
                results = measure(mem, args.warm, args.runs, args.statements)
        finally:
            with psycopg.connect(base, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA {schema} CASCADE")
        print(f"\nembed_on_write = {str(embed).lower()}")
        print("| operation | first call | median | max |")
        print("|---|---|---|---|")
        for name, (first, median, most) in results.items():
            print(f"| {name} | {first} | {median:g} | {most} |")


if __name__ == "__main__":
    main()
