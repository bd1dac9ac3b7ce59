"""P4: LLM economy of the update queue, and the agent-side cost of ``queue.add``.

A simulated day of chat: 5 threads of 20 user turns each (100 user turns). Threads start ten
minutes apart and overlap; within a thread the next user turn follows after the assistant's reply
(2-10 s) plus reading and typing time (log-normal, median 25 s, so some gaps exceed the debounce).
Time is a FakeClock; the model is a stand-in that answers an empty extraction and counts calls and
prompt tokens. ``add`` cost is measured in real time.

    python bench/queue_economy.py [--debounce 30] [--seed 7] [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
from datetime import UTC, datetime
from typing import Any

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.tokens import count_tokens

EMPTY = json.dumps({"user": {}, "history": {}, "newFacts": [], "factsToRemove": []})
TOPICS = ["the billing migration", "my trip to Kyoto", "the flaky CI job", "a birthday present for Ana",
          "learning Portuguese"]


class CountingModel:
    def __init__(self) -> None:
        self.prompt_tokens: list[int] = []

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.prompt_tokens.append(sum(count_tokens(str(m.get("content", ""))) for m in messages))
        return EMPTY


def schedule(rng: random.Random) -> list[tuple[float, int, int]]:
    """(time in seconds, thread, turn index) of every user turn."""
    events = []
    for thread in range(5):
        t = thread * 600 + rng.uniform(0, 120)
        for index in range(20):
            events.append((t, thread, index))
            t += rng.uniform(2, 10) + rng.lognormvariate(3.2, 0.6)  # reply + reading/typing (median ~25 s)
    return sorted(events)


def simulate(debounce: float, seed: int) -> dict[str, Any]:
    rng = random.Random(seed)
    clock = FakeClock(datetime(2026, 11, 22, 9, 0, tzinfo=UTC))
    model = CountingModel()
    threads: dict[int, list[dict[str, str]]] = {i: [] for i in range(5)}
    add_us: list[float] = []
    with tempfile.TemporaryDirectory() as root, Memory(root, llm=model, embedder=HashEmbedder(), clock=clock,
                                                        debounce_seconds=debounce, timezone="UTC") as mem:
        start = clock.now()
        for at, thread, index in schedule(rng):
            target = (at - (clock.now() - start).total_seconds())
            if target > 0:
                clock.advance(target)
                mem.queue.wake()
                mem.queue.wait_idle(timeout=30)
            threads[thread] += [
                {"role": "user", "content": f"Turn {index} about {TOPICS[thread]}: here is what happened next."},
                {"role": "assistant", "content": f"Thanks, noted about {TOPICS[thread]}. What else?"},
            ]
            began = time.perf_counter()
            mem.queue.add(f"thread-{thread}", list(threads[thread]))
            add_us.append((time.perf_counter() - began) * 1e6)
        clock.advance(debounce + 1)
        mem.queue.wake()
        mem.queue.wait_idle(timeout=30)
    return {
        "user_turns": 100,
        "threads": 5,
        "debounce_seconds": debounce,
        "extraction_calls": len(model.prompt_tokens),
        "prompt_tokens_median": statistics.median(model.prompt_tokens) if model.prompt_tokens else 0,
        "prompt_tokens_max": max(model.prompt_tokens, default=0),
        "add_median_us": round(statistics.median(add_us), 1),
        "add_p95_us": round(sorted(add_us)[int(len(add_us) * 0.95)], 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--debounce", type=float, default=30.0)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = simulate(args.debounce, args.seed)
    if args.json:
        print(json.dumps(result))
    else:
        for key, value in result.items():
            print(f"{key}: {value}")


if __name__ == "__main__":
    main()
