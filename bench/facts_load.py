"""Issue 14 item 14: ``facts.add_many`` is linear — per-fact cost at several scope sizes.

    python bench/facts_load.py [--facts 100000] [--batch 1000] [--embed none|hash] [--json]

Three runs in fresh stores (SQLite in a temp directory, WAL, ``synchronous=NORMAL``):

- *load*: ``--facts`` facts into an empty scope, in batches of ``--batch`` (one ``add_many`` each,
  one transaction each, ``max_facts`` out of the way); the per-fact µs of the batches that start
  at 0, 10%, 20%, … of the load;
- *into a full-size scope*: one ``add_many`` of 1,000 new facts into that scope;
- *at the cap*: the same with ``max_facts`` = the scope's size: each new fact evicts the weakest
  kept one, or is skipped when it is weaker than every kept fact.

``--embed none`` (default) drives :class:`~tiermem.facts.store.FactStore` directly: the fact rows,
the audit rows and the search-index triggers (FTS5 words and trigrams) are in the loop, no vectors.
``--embed hash`` goes through ``Memory.facts`` with the hash embedder, so each new fact is also
embedded and its vector stored (the default local model would add its own, size-independent, cost).
Facts are ~12-word sentences; confidences vary so the eviction index has work to do.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from tiermem import Memory
from tiermem.clock import SystemClock
from tiermem.facts.store import FactPolicy, FactStore, NewFact
from tiermem.storage.facts import FactRepository
from tiermem.storage.sqlite.db import Database
from tiermem.testing import HashEmbedder
from tiermem.types import Scope

SUBJECTS = ["The user", "My sister", "Our team lead", "The client", "My neighbour", "The new intern"]
VERBS = ["prefers", "recently bought", "often talks about", "wants to learn", "is allergic to", "works on"]
OBJECTS = ["dark roast coffee", "a red electric bicycle", "the quarterly budget report", "Spanish lessons",
           "peanuts and shellfish", "an open source database", "mountain hiking trips", "vintage jazz records"]


def facts(tag: str, n: int, first: int = 0) -> list[NewFact]:
    """``n`` distinct facts numbered from ``first``."""
    rng = random.Random(f"{tag} {first}")
    return [NewFact(f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} ({tag} {i})",
                    confidence=round(rng.uniform(0.6, 1.0), 2)) for i in range(first, first + n)]


@contextmanager
def fact_store(root: Path, embed: str, max_facts: int) -> Iterator[FactStore]:
    """The scope's fact store: through ``Memory`` with the hash embedder, or bare (no vectors)."""
    if embed == "hash":
        with Memory(root, embedder=HashEmbedder(), max_facts=max_facts, queue_replay=False) as mem:
            yield mem.facts
        return
    db = Database(root / "tiermem.db")
    try:
        yield FactStore(FactRepository(db), Scope(), SystemClock(), FactPolicy(0.5, max_facts))
    finally:
        db.close()


def timed(store: FactStore, items: list[NewFact]) -> tuple[float, float, int]:
    """Wall and CPU seconds of one ``add_many`` of ``items``, and how many it stored. (CPU time
    shows the work done when other processes share the machine; the two agree on an idle one.)"""
    wall, cpu = time.perf_counter(), time.process_time()
    results = store.add_many(items)
    return time.perf_counter() - wall, time.process_time() - cpu, sum(r is not None for r in results)


def run(total: int, batch: int, embed: str) -> dict[str, Any]:
    marks = {round(total * k / 10) // batch * batch for k in range(10)}
    load: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        seconds = cpu_seconds = 0.0
        with fact_store(root, embed, max_facts=10 * total + 10_000) as store:
            for start in range(0, total, batch):
                took, cpu, _ = timed(store, facts("load", batch, start))
                seconds, cpu_seconds = seconds + took, cpu_seconds + cpu
                if start in marks:
                    load.append({"scope_size": start, "us_per_fact": round(took / batch * 1e6, 1),
                                 "cpu_us_per_fact": round(cpu / batch * 1e6, 1)})
            assert store.count() == total
            into = timed(store, facts("new", 1000))
        with fact_store(root, embed, max_facts=total + 1000) as store:  # now at the cap: each one evicts
            capped = timed(store, facts("capped", 1000))  # the others were weaker than every kept fact
            assert store.count() == total + 1000
    return {"embed": embed, "facts": total, "batch": batch, "load_seconds": round(seconds, 1),
            "load_cpu_seconds": round(cpu_seconds, 1), "load_us_per_fact": round(seconds / total * 1e6, 1),
            "load_by_size": load, "into_full_scope_1000_seconds": round(into[0], 3),
            "into_full_scope_1000_cpu_seconds": round(into[1], 3), "at_cap_1000_seconds": round(capped[0], 3),
            "at_cap_1000_cpu_seconds": round(capped[1], 3), "at_cap_stored": capped[2]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000)
    parser.add_argument("--embed", choices=("none", "hash"), default="none")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.facts, args.batch, args.embed)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.facts} facts into an empty scope ({args.embed} embedding): {result['load_seconds']} s"
          f" ({result['load_cpu_seconds']} s CPU), {result['load_us_per_fact']} µs/fact")
    for row in result["load_by_size"]:
        print(f"  batch at scope size {row['scope_size']:>7}: {row['us_per_fact']:>7} µs/fact"
              f" ({row['cpu_us_per_fact']} CPU)")
    print(f"1000 more into the {args.facts}-fact scope: {result['into_full_scope_1000_seconds']} s"
          f" ({result['into_full_scope_1000_cpu_seconds']} s CPU)")
    print(f"1000 more at the cap: {result['at_cap_1000_seconds']} s ({result['at_cap_1000_cpu_seconds']} s CPU;"
          f" {result['at_cap_stored']} stored, each evicting the weakest kept fact; the rest were weaker than"
          " every kept fact)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
