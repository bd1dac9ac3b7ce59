"""P3, P5, P6: batched write throughput, ``import tiermem`` time, resident memory at 100k facts.

    python bench/write.py --json [--n 2000] [--batch 500] [--rss-facts 100000] [--embedder local]

- facts/s: ``mem.facts.add_many`` of ``n`` facts of ~12 words in batches, embedding included (the
  default embedder), in a fresh store; the time spent in the embedder is reported beside it;
- ``import tiermem``: median wall time of a fresh interpreter importing it (5 runs);
- RSS: a fresh process opens a store of ``rss-facts`` facts (vectors stored for the embedder's
  model, written directly as in ``bench/search.py``, so building it does not take an hour of
  embedding), loads the embedder, runs one search and reports its resident set size.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

SUBJECTS = ["The user", "My sister", "Our team lead", "The client", "My neighbour", "The new intern"]
VERBS = ["prefers", "recently bought", "often talks about", "wants to learn", "is allergic to", "works on"]
OBJECTS = ["dark roast coffee", "a red electric bicycle", "the quarterly budget report", "Spanish lessons",
           "peanuts and shellfish", "an open source database", "mountain hiking trips", "vintage jazz records"]
TAILS = ["every weekend", "since last spring", "at the downtown office", "before the holidays",
         "with close friends", "for the next project", "during long flights", "in the early morning"]


def fact_texts(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        parts = [SUBJECTS[rng.integers(len(SUBJECTS))], VERBS[rng.integers(len(VERBS))],
                 OBJECTS[rng.integers(len(OBJECTS))], TAILS[rng.integers(len(TAILS))]]
        out.append(" ".join(parts) + f" (note {i})")
    return out


class TimedEmbedder:
    """Wraps the embedder to measure the time spent embedding."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0
        self.texts = 0

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    @property
    def model_id(self) -> str:
        return str(self.inner.model_id)

    def embed(self, texts: list[str]) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started
            self.texts += len(texts)


def throughput(n: int, batch: int, embedder_name: str) -> dict[str, Any]:
    from tiermem import Memory
    from tiermem.facts.store import NewFact
    from tiermem.models.registry import ProviderOptions, make_embedder

    embedder = TimedEmbedder(make_embedder(embedder_name, ProviderOptions()))
    embedder.embed(["warm up the model"])  # load time is not write time
    embedder.seconds, embedder.texts = 0.0, 0
    texts = fact_texts(n)
    with tempfile.TemporaryDirectory(prefix="tiermem-write-") as tmp, \
            Memory(tmp, embedder=embedder, max_facts=n + 1) as mem:
        started = time.perf_counter()
        for start in range(0, n, batch):
            mem.facts.add_many([NewFact(t) for t in texts[start:start + batch]])
        seconds = time.perf_counter() - started
        stored = mem.facts.count()
        assert mem.vector_status().missing == 0
    return {"facts": stored, "seconds": round(seconds, 2), "facts_per_s": round(stored / seconds, 1),
            "embed_seconds": round(embedder.seconds, 2),
            "embed_texts_per_s": round(embedder.texts / embedder.seconds, 1) if embedder.seconds else None,
            "batch": batch, "embedder": embedder.model_id}


def import_time(runs: int = 5) -> float:
    code = "import time; t = time.perf_counter(); import tiermem; print(time.perf_counter() - t)"
    times = [float(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout)
             for _ in range(runs)]
    return round(statistics.median(times), 4)


RSS_CHILD = """
import json, resource, sys, time
from tiermem import Memory
root, embedder = sys.argv[1], sys.argv[2]
t = time.perf_counter()
with Memory(root, embedder=embedder, max_facts=10**7) as mem:
    hits = mem.search("what coffee does the user prefer", k=10)
    status = mem.vector_status()
    rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
    print(json.dumps({"rss_mb": round(rss / 2**20, 1), "peak_rss_mb": round(
        resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1), "items": status.items,
        "first_search_s": round(time.perf_counter() - t, 2), "hits": len(hits)}))
"""


def rss(facts: int, embedder_name: str, cache: Path) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import search as search_bench

    from tiermem.models.registry import ProviderOptions, make_embedder

    model = make_embedder(embedder_name, ProviderOptions()).model_id
    folder = cache / f"rss-n{facts}-{model.replace('/', '_')}-v{search_bench.FORMAT}"
    if not (folder / "complete").exists():
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "tiermem.db").unlink(missing_ok=True)
        search_bench.MODEL = model
        vocab = search_bench.vocabulary(20_000, np.random.default_rng(0))
        search_bench.build(folder / "tiermem.db", facts, vocab)
        (folder / "complete").touch()
    out = subprocess.run([sys.executable, "-c", RSS_CHILD, str(folder), embedder_name], capture_output=True,
                         text=True, check=True)
    return json.loads(out.stdout) | {"facts": facts}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000, help="facts written for the throughput figure")
    parser.add_argument("--batch", type=int, default=500)
    parser.add_argument("--rss-facts", type=int, default=100_000)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--cache", default="/tmp/tiermem-bench")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    result = {"write": throughput(args.n, args.batch, args.embedder), "import_s": import_time(),
              "rss": rss(args.rss_facts, args.embedder, Path(args.cache))}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
