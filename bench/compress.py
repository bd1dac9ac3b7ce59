"""Tokens before/after DCP-style compression on the coding-agent transcripts.

    python bench/compress.py [--protect-turns 4] [--purge-errors-after 2] [--json] [FILE ...]

Without FILE, runs on every transcript in tests/fixtures/transcripts/. Tokens are cl100k tokens of
the message text plus tool call names and arguments (``tiermem.compress`` counts them the same
way). Also prints the tokens saved per rule and the median time per call.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from tiermem.compress import check_tool_pairs, compress

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "transcripts"


def measure(path: Path, protect_turns: int, purge_errors_after: int, repeats: int) -> dict[str, Any]:
    doc = json.loads(path.read_text(encoding="utf-8"))
    messages = doc["messages"]
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        result = compress(messages, protect_turns, purge_errors_after=purge_errors_after)
        timings.append((time.perf_counter() - started) * 1000)
    problems = check_tool_pairs(result.messages)
    if problems:
        raise SystemExit(f"{path.name}: compression broke tool pairs: {problems[:3]}")
    by_rule: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    for action in result.actions:
        by_rule[action.rule] += action.tokens_saved
        counts[action.rule] += 1
    return {
        "transcript": doc.get("name", path.stem),
        "shape": doc.get("shape", "?"),
        "messages": len(messages),
        "tokens_before": result.tokens_before,
        "tokens_after": result.tokens_after,
        "tokens_saved": result.tokens_saved,
        "saved_ratio": round(result.tokens_saved / result.tokens_before, 4) if result.tokens_before else 0.0,
        "saved_by_rule": dict(sorted(by_rule.items())),
        "actions_by_rule": dict(sorted(counts.items())),
        "median_ms": round(statistics.median(timings), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--protect-turns", type=int, default=4)
    parser.add_argument("--purge-errors-after", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5, help="timing repeats per transcript")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    files = args.files or sorted(FIXTURES.glob("*.json"))
    rows = [measure(path, args.protect_turns, args.purge_errors_after, args.repeats) for path in files]
    before = sum(row["tokens_before"] for row in rows)
    after = sum(row["tokens_after"] for row in rows)
    total = {
        "tokens_before": before,
        "tokens_after": after,
        "tokens_saved": before - after,
        "saved_ratio": round((before - after) / before, 4) if before else 0.0,
    }
    settings = {"protect_turns": args.protect_turns, "purge_errors_after": args.purge_errors_after}
    if args.json:
        print(json.dumps({"settings": settings, "transcripts": rows, "total": total}, indent=2))
        return 0
    print(f"settings: {settings}")
    print(
        f"{'transcript':<10} {'shape':<9} {'msgs':>4} {'before':>7} {'after':>7} {'saved':>7} {'saved%':>7} {'ms':>6}"
    )
    for row in rows:
        print(
            f"{row['transcript']:<10} {row['shape']:<9} {row['messages']:>4} {row['tokens_before']:>7} "
            f"{row['tokens_after']:>7} {row['tokens_saved']:>7} {100 * row['saved_ratio']:>6.1f}% "
            f"{row['median_ms']:>6.1f}"
        )
        print(f"{'':<10} saved by rule: {row['saved_by_rule']}  actions: {row['actions_by_rule']}")
    print(
        f"{'total':<10} {'':<9} {'':>4} {before:>7} {after:>7} {before - after:>7} {100 * total['saved_ratio']:>6.1f}%"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
