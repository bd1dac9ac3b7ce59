"""Issue 5: ``tiermem ingest`` of a 200-message transcript through the real OpenAI client against a
local fake server: extraction calls, prompt tokens per call, wall time.

    python bench/ingest.py [--json]
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from fake_openai_server import FakeLLMServer, RecordedRequest  # noqa: E402

from tiermem import Memory  # noqa: E402
from tiermem.ingest import ingest  # noqa: E402
from tiermem.tokens import count_tokens  # noqa: E402

TOPICS = ["the invoice service migration", "moving to Lisbon", "Portuguese classes", "Ana's birthday",
          "the on-call rota", "a climbing trip"]


def transcript() -> list[dict[str, Any]]:
    rows = []
    for i in range(100):
        day = 10 + i // 25
        stamp = f"2026-03-{day:02d}T{9 + (i % 25) // 3:02d}:{(i * 7) % 60:02d}:00Z"
        topic = TOPICS[i % len(TOPICS)]
        rows.append({"role": "user", "content": f"Update {i} on {topic}: it went fine, next step tomorrow.",
                     "thread_id": "main", "timestamp": stamp})
        rows.append({"role": "assistant", "content": f"Good to hear about {topic}. I'll remember that.",
                     "thread_id": "main", "timestamp": stamp})
    return rows


def reply(request: RecordedRequest) -> str:
    text = request.messages[-1]["content"]
    topic = max(TOPICS, key=text.rfind)  # the topic of the batch's last turn
    facts = [{"content": f"Is working on {topic}", "category": "context", "confidence": 0.8}]
    return json.dumps({"user": {}, "history": {}, "newFacts": facts, "factsToRemove": []})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = transcript()
    with FakeLLMServer(reply) as server, tempfile.TemporaryDirectory() as root:
        with Memory(root, llm="openai-compatible:bench", embedder="hash", llm_base_url=server.url,
                    timezone="UTC") as mem:
            began = time.perf_counter()
            report = ingest(mem, rows)
            wall = time.perf_counter() - began
        tokens = [sum(count_tokens(str(m.get("content", ""))) for m in r.messages) for r in server.requests]
    result = {"messages": len(rows), "llm_calls": report.llm_calls, "batches": report.batches,
              "prompt_tokens_median": statistics.median(tokens), "prompt_tokens_max": max(tokens),
              "facts_added": report.facts_added, "wall_s": round(wall, 2)}
    print(json.dumps(result) if args.json else "\n".join(f"{k}: {v}" for k, v in result.items()))


if __name__ == "__main__":
    main()
