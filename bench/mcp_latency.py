"""Latency of the MCP server over stdio against the bare library calls it wraps.

    python bench/mcp_latency.py [--calls 50] [--starts 3] [--embedder hash] [--json]

Spawns ``tiermem --root TMP mcp`` with the SDK's stdio client. Prints the median time from spawn
to the first ``tools/list`` answer (cold start: interpreter, tiermem, SDK), and for
``remember``, ``recall`` and ``list_facts`` the median round trip over stdio, the median of the
same library call in process (``mem.facts.add``, ``mem.search``, ``mem.facts.list``; the floor)
and their difference (what the protocol adds). The hash embedder keeps the model out of the
figures unless ``--embedder local`` is given.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.stdio import StdioServerParameters, stdio_client

from tiermem import Memory


def _params(root: Path, embedder: str) -> StdioServerParameters:
    return StdioServerParameters(command=sys.executable, args=["-m", "tiermem.cli.main", "--root", str(root), "mcp"],
                                 env={"TIERMEM_EMBEDDER": embedder, "TIERMEM_LLM": "none"})


async def _cold_start(root: Path, embedder: str) -> float:
    started = time.perf_counter()
    with open(root / "server.log", "a") as errlog:
        async with Client(stdio_client(_params(root, embedder), errlog=errlog)) as client:
            await client.list_tools()
            return (time.perf_counter() - started) * 1000


async def _round_trips(root: Path, embedder: str, calls: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"remember": [], "recall": [], "list_facts": []}
    with open(root / "server.log", "a") as errlog:
        async with Client(stdio_client(_params(root, embedder), errlog=errlog)) as client:
            await client.call_tool("recall", {"query": "warm up"})
            for i in range(calls):
                for name, args in (("remember", {"content": f"Fact number {i} about project {i % 7}"}),
                                   ("recall", {"query": f"project {i % 7}"}),
                                   ("list_facts", {})):
                    started = time.perf_counter()
                    result = await client.call_tool(name, args)
                    timings[name].append((time.perf_counter() - started) * 1000)
                    if result.is_error:
                        raise SystemExit(f"{name} failed: {result.content}")
    return timings


def _floor(root: Path, embedder: str, calls: int) -> dict[str, list[float]]:
    timings: dict[str, list[float]] = {"remember": [], "recall": [], "list_facts": []}
    with Memory(root, embedder=embedder, llm="none") as mem:
        mem.search("warm up")
        for i in range(calls):
            started = time.perf_counter()
            mem.facts.add(f"Fact number {i} about project {i % 7}")
            middle = time.perf_counter()
            mem.search(f"project {i % 7}")
            last = time.perf_counter()
            mem.facts.list()
            ended = time.perf_counter()
            timings["remember"].append((middle - started) * 1000)
            timings["recall"].append((last - middle) * 1000)
            timings["list_facts"].append((ended - last) * 1000)
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        starts = []
        for i in range(args.starts):
            (base / f"start{i}").mkdir()
            starts.append(anyio.run(_cold_start, base / f"start{i}", args.embedder))
        (base / "wire").mkdir()
        wire = anyio.run(_round_trips, base / "wire", args.embedder, args.calls)
        floor = _floor(base / "floor", args.embedder, args.calls)
    report: dict[str, Any] = {"cold_start_ms": round(statistics.median(starts), 1), "calls": args.calls,
                              "embedder": args.embedder, "tools": {}}
    for name in wire:
        over, bare = statistics.median(wire[name]), statistics.median(floor[name])
        report["tools"][name] = {"stdio_ms": round(over, 2), "floor_ms": round(bare, 2),
                                 "overhead_ms": round(over - bare, 2)}
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print(f"cold start to first tools/list: {report['cold_start_ms']} ms (median of {args.starts})")
    for name, row in report["tools"].items():
        print(f"{name:>11}: stdio {row['stdio_ms']:7.2f} ms  library {row['floor_ms']:7.2f} ms  "
              f"protocol +{row['overhead_ms']:.2f} ms")


if __name__ == "__main__":
    main()
