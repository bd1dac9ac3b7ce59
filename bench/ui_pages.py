"""Issue 22 item 17: the web viewer's Facts page at 100k facts, and a Journal day of 20k records.

    python bench/ui_pages.py [--facts 100000] [--records 20000] [--runs 7] [--json]

One SQLite store in a temp directory, thrown away after: ``--facts`` facts in one scope, 10% of
them ``preference``, written straight into the ``facts`` table in one transaction with the
search-index trigger set aside (``add_many`` takes minutes for 100k facts, mostly in that trigger;
the Facts page without a query reads only the ``facts`` table and its indexes: no search index,
vectors or audit rows); and one Daily file of ``--records`` records, written as the journal
writes it (the page reads the file). Each page is fetched ``--runs`` times through the guarded
viewer app (Starlette's TestClient, in process: routing, guards, rendering, no network); the
median and the worst time, and the page size, are printed. Target (issue 22): ≤ 200 ms per Facts
page at 100k facts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from tiermem import Memory
from tiermem.clock import utc_iso
from tiermem.testing import HashEmbedder
from tiermem.tiers.markdown import parse_records
from tiermem.ui.app import build_app
from tiermem.ui.guard import ui_options
from tiermem.ui.pages.facts import PAGE_SIZE
from tiermem.validate import normalise

DAY = "2026-03-14"
SEARCH_TRIGGER = "facts_search_insert"
WORDS = ["coffee", "bicycle", "budget", "Spanish", "hiking", "jazz", "database", "garden", "Lisbon", "chess"]


def load_facts(mem: Memory, n: int) -> None:
    """``n`` facts over a minute of creation times, 50 confidences, every tenth a preference."""
    rows = []
    for i in range(n):
        content = f"The user mentioned {WORDS[i % 10]} and {WORDS[(i // 10) % 10]} in note {i}"
        at = utc_iso(datetime(2026, 3, 14, 9, 30, i * 60 // n, tzinfo=UTC))
        rows.append((f"fact_{i:08x}", "default", "default", content, normalise(content),
                     "preference" if i % 10 == 0 else "knowledge", round(0.5 + (i % 50) / 100, 2), at, at, None))
    with mem.db.transaction() as conn:
        trigger = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?",
                               (SEARCH_TRIGGER,)).fetchone()[0]
        conn.execute(f"DROP TRIGGER {SEARCH_TRIGGER}")
        conn.executemany("INSERT INTO facts (id, user_id, agent_name, content, norm, category, confidence,"
                         " created_at, updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
        conn.execute(trigger)


def write_day(mem: Memory, records: int) -> None:
    """A Daily file of ``records`` records in blocks of 50, as ``daily.append`` writes them."""
    blocks = [f"## Session Notes ({9 + b // 60 % 12:02d}:{b % 60:02d})\n" + "".join(
        f"- user: line {i} of a long day about {WORDS[i % 10]}\n" for i in range(b * 50, min(records, b * 50 + 50)))
        for b in range(-(-records // 50))]
    path = mem.root / "memory" / f"{DAY}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Daily Memory: {DAY}\n\n" + "\n".join(blocks), encoding="utf-8")


def timed(client: TestClient, path: str, params: dict[str, str], runs: int) -> dict[str, Any]:
    seconds, size = [], 0
    for _ in range(runs):
        began = time.perf_counter()
        answer = client.get(path, params=params)
        seconds.append(time.perf_counter() - began)
        assert answer.status_code == 200, (path, params, answer.status_code)
        size = len(answer.content)
    return {"path": path, "params": params, "median_ms": round(statistics.median(seconds) * 1000, 1),
            "max_ms": round(max(seconds) * 1000, 1), "bytes": size}


def run(facts: int, records: int, runs: int) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp, Memory(Path(tmp), embedder=HashEmbedder(), timezone="UTC",
                                                      max_facts=facts + 1, queue_replay=False) as mem:
        began = time.perf_counter()
        load_facts(mem, facts)
        write_day(mem, records)
        assert mem.facts.count() == facts and len(parse_records(mem.daily.read(DAY))) == records
        loaded = time.perf_counter() - began
        last = max(1, -(-facts // PAGE_SIZE))
        pages = [("/facts", {}), ("/facts", {"page": str(last // 2)}), ("/facts", {"page": str(last)}),
                 ("/facts", {"category": "preference", "page": "2"}), ("/journal", {}),
                 ("/journal", {"day": DAY, "start": str(records // 2)})]
        with TestClient(build_app(mem, ui_options(8767)), base_url="http://127.0.0.1:8767") as client:
            client.get("/facts")  # warm: imports, the first connection
            results = [timed(client, path, params, runs) for path, params in pages]
    return {"facts": facts, "records": records, "runs": runs, "load_seconds": round(loaded, 1), "pages": results,
            "cpus": os.cpu_count(), "load_average": [round(x, 2) for x in os.getloadavg()]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--facts", type=int, default=100_000)
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = run(args.facts, args.records, args.runs)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    print(f"{args.facts} facts and a day of {args.records} records loaded in {result['load_seconds']} s;"
          f" {result['cpus']} CPUs, load average {result['load_average']}")
    for row in result["pages"]:
        query = "&".join(f"{k}={v}" for k, v in row["params"].items())
        print(f"  {row['path']}{'?' + query if query else '':<32} median {row['median_ms']:>7} ms,"
              f" max {row['max_ms']:>7} ms, {row['bytes']:>9,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
