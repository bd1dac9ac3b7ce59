"""Extraction figures that need no model: request size, parse time, redaction and provider
overhead (the real ``openai`` client against the local fake server from the tests).

    python bench/extraction.py [--json] [--repeats N]

Prints: cl100k tokens of the system prompt and of a typical request (50 existing facts, all six
summaries, 10 turns); median parse time per reply over the reply fixtures; redaction throughput
on 1 MB of chat text with secrets sprinkled in; median wall time of one ``complete()`` round
trip through the SDK and local HTTP, next to a bare ``http.client`` POST to the same server (floor).
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import time
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fake_openai_server import FakeLLMServer  # noqa: E402

from tiermem.extract.parse import parse_extraction  # noqa: E402
from tiermem.extract.prompt import build_extraction_messages, render_system_prompt  # noqa: E402
from tiermem.models.openai_chat import OpenAIChat  # noqa: E402
from tiermem.redact import redact  # noqa: E402
from tiermem.tokens import count_tokens  # noqa: E402
from tiermem.types import SUMMARY_KEYS  # noqa: E402

FIXTURES = ROOT / "tests" / "fixtures" / "extraction_replies"


def _median_ms(fn: Any, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        fn()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def request_tokens() -> dict[str, int]:
    existing = [(i, f"Fact number {i} about the user's projects and preferences in some detail", "knowledge", 0.8)
                for i in range(1, 51)]
    summary = "Two sentences of summary text about this part of the user's life so far."
    summaries = {key: summary for key in SUMMARY_KEYS}
    turns = [{"role": "user" if i % 2 == 0 else "assistant",
              "content": "A typical chat message of about thirty words, asking or answering something about "
                         "the user's work, plans, tools, family or hobbies, with a detail or two."} for i in range(10)]
    messages = build_extraction_messages(existing, summaries, turns, date(2026, 11, 22))
    return {"system_prompt_tokens": count_tokens(render_system_prompt(date(2026, 11, 22))),
            "request_tokens_50_facts_10_turns": sum(count_tokens(m["content"]) for m in messages)}


def parse_ms(repeats: int) -> float:
    pairs = [(p.with_suffix(".txt").read_text(encoding="utf-8"), set(json.loads(p.read_text())["valid_short_ids"]))
             for p in sorted(FIXTURES.glob("*.json")) if "expected" in json.loads(p.read_text())]

    def run_all() -> None:
        for raw, ids in pairs:
            parse_extraction(raw, ids)

    return _median_ms(run_all, repeats) / len(pairs)


def redact_mb_per_s() -> float:
    line = ("I told the assistant about my project and it suggested a refactor; we talked for a while "
            "about tests, deadlines and the weather in Porto. ")
    secret = "key sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z password=hunter2\n"
    text = (line * 20 + secret) * (1_000_000 // (len(line) * 20 + len(secret)))
    seconds = _median_ms(lambda: redact(text), 3) / 1000
    return len(text.encode()) / 1e6 / seconds


def round_trip_ms(repeats: int) -> dict[str, float]:
    with FakeLLMServer(lambda request: "ok") as server:
        llm = OpenAIChat("bench", base_url=server.url, compatible=True)
        messages = [{"role": "user", "content": "hello"}]
        llm.complete(messages)
        sdk = _median_ms(lambda: llm.complete(messages), repeats)
        host, port = server.base_url.removeprefix("http://").split(":")
        body = json.dumps({"model": "bench", "messages": messages})

        def bare() -> None:
            conn = http.client.HTTPConnection(host, int(port))
            conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
            conn.getresponse().read()
            conn.close()

        floor = _median_ms(bare, repeats)
    return {"sdk_round_trip_ms": sdk, "bare_http_floor_ms": floor, "ratio": sdk / floor}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--repeats", type=int, default=50)
    args = parser.parse_args()
    figures: dict[str, Any] = {**request_tokens(), "parse_ms_per_reply": parse_ms(args.repeats),
                               "redact_mb_per_s": redact_mb_per_s(), **round_trip_ms(args.repeats)}
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for key, value in figures.items():
        print(f"{key:36} {value:.3f}" if isinstance(value, float) else f"{key:36} {value}")


if __name__ == "__main__":
    main()
