"""P3, P5, P6: batched write throughput, ``import tiermem`` time, resident memory at 100k facts.

    python bench/write.py --json [--n 2000] [--batch 500] [--rss-facts 100000] [--embedder local]
                         [--backend sqlite|postgres [--database-url URL]] [--runs 3] [--write-only]

- facts/s: ``mem.facts.add_many`` of ``n`` facts of ~12 words in batches, embedding included (the
  default embedder), in a fresh store; the time spent in the embedder is reported beside it;
  ``--runs`` alternates it with the bare embedder on the same texts in the same batches
  (``bare_texts_per_s``) and reports medians and the ratio facts/s : bare texts/s (the machine is
  shared: the ratio is the figure to compare across runs), wall and CPU time (``*_cpu``: this
  process's CPU seconds, all threads, which other processes on the machine barely move);
  ``--embedder none`` times the write path alone (a zero-cost embedder);
  ``--backend postgres``: a fresh schema on ``--database-url`` or the private benchmark server;
- ``import tiermem``: median wall time of a fresh interpreter importing it (5 runs);
- RSS: a fresh process opens a store of ``rss-facts`` facts (vectors stored for the embedder's
  model, written directly as in ``bench/search.py``, so building it does not take an hour of
  embedding), loads the embedder, runs one search and reports its resident set size.
"""

from __future__ import annotations

import argparse
import json
import os
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


class NullEmbedder:
    """``--embedder none``: the same unit vector for every text, at no cost (the write path alone)."""

    dim = 384
    model_id = "null-384"

    def embed(self, texts: list[str]) -> Any:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        out[:, 0] = 1.0
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


def load_embedder(name: str) -> TimedEmbedder:
    from tiermem.models.registry import ProviderOptions, make_embedder

    embedder = TimedEmbedder(NullEmbedder() if name == "none" else make_embedder(name, ProviderOptions()))
    embedder.embed(["warm up the model"])  # load time is not write time
    embedder.seconds, embedder.texts = 0.0, 0
    return embedder


def store_options(backend: str, url: str | None, run: int) -> dict[str, Any]:
    if backend != "postgres":
        return {}
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from pgserver import fresh_schema

    return {"database_url": fresh_schema(f"bench_write_{run}", url)}


def write_once(embedder: TimedEmbedder, texts: list[str], batch: int, options: dict[str, Any]) -> dict[str, Any]:
    from tiermem import Memory
    from tiermem.facts.store import NewFact

    embedder.seconds, embedder.texts = 0.0, 0
    with tempfile.TemporaryDirectory(prefix="tiermem-write-") as tmp, \
            Memory(tmp, embedder=embedder, max_facts=len(texts) + 1, **options) as mem:
        started, cpu = time.perf_counter(), time.process_time()
        for start in range(0, len(texts), batch):
            mem.facts.add_many([NewFact(t) for t in texts[start:start + batch]])
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        stored = mem.facts.count()
        assert stored == len(texts) and mem.vector_status().missing == 0
    return {"facts_per_s": stored / seconds, "facts_per_s_cpu": stored / cpu, "embed_share": embedder.seconds / seconds}


def bare_once(embedder: TimedEmbedder, texts: list[str], batch: int) -> dict[str, Any]:
    """The embedder alone on the same texts, in the same batches."""
    started, cpu = time.perf_counter(), time.process_time()
    for start in range(0, len(texts), batch):
        embedder.embed(texts[start:start + batch])
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {"bare_texts_per_s": len(texts) / seconds, "bare_texts_per_s_cpu": len(texts) / cpu}


def throughput(n: int, batch: int, embedder_name: str, runs: int = 1, backend: str = "sqlite",
               url: str | None = None) -> dict[str, Any]:
    embedder = load_embedder(embedder_name)
    texts = fact_texts(n)
    samples: dict[str, list[float]] = {}
    for run in range(runs):  # alternated, so both see the same machine load
        figures = write_once(embedder, texts, batch, store_options(backend, url, run))
        figures |= bare_once(embedder, texts, batch)
        for key, value in figures.items():
            samples.setdefault(key, []).append(value)
    med = {key: statistics.median(values) for key, values in samples.items()}
    return {"facts": n, "batch": batch, "embedder": embedder.model_id, "backend": backend, "runs": runs,
            "facts_per_s": round(med["facts_per_s"], 1), "facts_per_s_runs": [round(v) for v in samples["facts_per_s"]],
            "facts_per_s_cpu": round(med["facts_per_s_cpu"], 1), "embed_share": round(med["embed_share"], 3),
            "bare_texts_per_s": round(med["bare_texts_per_s"], 1),
            "bare_texts_per_s_cpu": round(med["bare_texts_per_s_cpu"], 1),
            "ratio_to_bare": round(med["facts_per_s"] / med["bare_texts_per_s"], 3),
            "ratio_to_bare_cpu": round(med["facts_per_s_cpu"] / med["bare_texts_per_s_cpu"], 3),
            "load_avg_1m": round(os.getloadavg()[0], 2)}


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
    parser.add_argument("--runs", type=int, default=1, help="alternated write / bare-embedder runs (medians)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: the private benchmark server)")
    parser.add_argument("--write-only", action="store_true", help="skip the import-time and RSS figures")
    args = parser.parse_args(argv)
    result: dict[str, Any] = {"write": throughput(args.n, args.batch, args.embedder, args.runs, args.backend,
                                                  args.database_url)}
    if not args.write_only and args.embedder != "none":  # the RSS child needs a registered embedder
        result |= {"import_s": import_time(), "rss": rss(args.rss_facts, args.embedder, Path(args.cache))}
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
