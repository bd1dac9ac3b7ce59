"""Chaos: N SIGKILLs of a writer process, every restart checked (issue 14; tests/test_chaos.py runs 27).

The harness is tests/chaos_helpers.py: a writer (forked from a server that has tiermem loaded)
does ``queue.add`` of three-message steps of long-lived threads, ``queue.flush`` (a scripted LLM
extracts in half the lives), ``facts.add``, ``daily.append`` and sessions that end and are queued
under the same id; it is SIGKILLed after a random 0-0.6 s (and once at each fault-injection point
of a write). After every kill a copy of the store is restarted: the queue must drain (dead items
only with a reason; they are retried and checked too), every acknowledged write must be there
exactly once, no record twice, and ``tiermem doctor`` must pass.

    python bench/chaos.py [--kills 1000] [--seed 14] [--fault-rounds 3] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from chaos_helpers import FAULT_POINTS, ChaosResult, read_acks, run_chaos  # noqa: E402


def _progress(run: int, result: ChaosResult) -> None:
    if (run + 1) % 50 == 0:
        print(f"  {run + 1} lives, {sum(result.acked.values())} acknowledged writes checked,"
              f" {len(result.problems)} problems", file=sys.stderr, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=14)
    parser.add_argument("--fault-rounds", type=int, default=3, help="kills at each fault point")
    parser.add_argument("--work", type=Path, default=None, help="keep the store and the acknowledgements here")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        work = args.work or Path(scratch)
        work.mkdir(parents=True, exist_ok=True)
        result = run_chaos(work / "store", work, args.kills, args.seed, args.fault_rounds, progress=_progress)
        size = sum(p.stat().st_size for p in (work / "store").rglob("*") if p.is_file())
        acks = len(read_acks(work / "acks.jsonl"))
    figures = {
        "random_kills": result.kills,
        "fault_kills": result.fault_kills,
        "fault_points": len(FAULT_POINTS),
        "restarts_checked": result.restarts_checked,
        "acknowledged_writes": acks,
        "exactly_once_checks": sum(result.acked.values()),  # each write, at every restart after it
        "checks_by_kind": dict(result.acked),
        "dead_items": len(result.dead),  # distinct items dead-lettered at some point (retried by the check)
        "dead_reasons": dict(Counter(reason.split(":")[0] for reason in result.dead.values())),
        "problems": len(result.problems),
        "seconds": round(result.seconds, 1),
        "seconds_per_life": round(result.seconds / max(1, result.restarts_checked), 3),
        "store_bytes_at_end": size,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
    else:
        for key, value in figures.items():
            print(f"{key:30} {value}")
    for problem in result.problems[:20]:
        print("PROBLEM", problem)
    sys.exit(1 if result.problems else 0)


if __name__ == "__main__":
    main()
