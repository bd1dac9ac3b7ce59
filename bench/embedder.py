"""Benchmark of the local default embedder (all-MiniLM-L6-v2 on onnxruntime). Prints JSON.

    python bench/embedder.py                       # throughput, load times, parity
    python bench/embedder.py --vs-sentence-transformers   # + the torch reference in the same run (dev)
    python bench/embedder.py --compare-int8        # + the int8 graph, alternated with fp32 (issue 16)

- ``sentences_per_s``: median over ``--runs`` of embedding ``--n`` typical ~12-word sentences
  in one ``embed()`` call (sorted and batched inside).
- ``load_cold_s``: a fresh interpreter imports tiermem's embedder and loads it (hash check,
  tokenizer, onnxruntime session) with the graph already cached; median of 3 processes.
- ``first_build_s``: the same with an empty cache directory, so the ONNX graph is built from the
  safetensors weights and written to the cache.
- ``parity_min_cosine``: worst cosine to the sentence-transformers reference vectors in
  ``tests/fixtures/minilm_reference.npz``.
- ``--compare-int8``: the int8 graph (``precision="int8"``) and fp32 embed the same sentences in
  alternated runs: medians of wall and CPU rates (``*_cpu``: sentences per CPU second of this
  process, all threads - what a shared machine's load barely moves), their ratio, and how the
  int8 vectors agree with fp32 (worst/mean cosine over the sentences and the parity fixture; top-10
  neighbour overlap: int8 vectors as queries against fp32 ones, the issue-16 rule is >= 0.9).
Targets (issue 3): >= 250 sentences/s, load < 1 s, parity >= 0.999.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tiermem.embedders.local import LocalEmbedder

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "fixtures" / "minilm_reference.npz"

_SUBJECTS = ["Alice", "My brother", "The user", "Our team", "Caroline", "Bob", "My manager", "She", "The client"]
_VERBS = ["moved to", "prefers", "asked about", "booked a trip to", "is learning", "wants to visit", "works on"]
_OBJECTS = [
    "the new billing service",
    "a small flat in Berlin",
    "green tea instead of coffee",
    "the Spanish course downtown",
    "the quarterly budget review",
    "a pottery class with friends",
    "the dentist near the station",
]
_TAILS = [
    "last week.",
    "every Tuesday morning.",
    "after the team meeting.",
    "with her sister in March.",
    "since last spring.",
    "before the long weekend.",
]


def make_sentences(n: int, seed: int = 7) -> list[str]:
    """Deterministic, varied sentences of about 12 words (9-15)."""
    rng = random.Random(seed)
    parts = (_SUBJECTS, _VERBS, _OBJECTS, _TAILS)
    return [" ".join(rng.choice(pool) for pool in parts) for _ in range(n)]


def throughput(embedder: Any, sentences: list[str], runs: int) -> list[float]:
    embedder.embed(sentences[:64])  # warm-up
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        embedder.embed(sentences)
        rates.append(len(sentences) / (time.perf_counter() - start))
    return rates


_LOAD_CODE = """
import json, time
start = time.perf_counter()
from tiermem.embedders.local import LocalEmbedder
emb = LocalEmbedder()
emb.load()
loaded = time.perf_counter()
emb.embed(["first query after start"])
print(json.dumps({"load_s": loaded - start, "first_embed_s": time.perf_counter() - loaded,
                  "built": emb.built_graph}))
"""


def compare_int8(sentences: list[str], runs: int, batch_size: int, threads: int | None) -> dict[str, Any]:
    """fp32 and int8 alternated on the same sentences, and how their vectors agree."""
    pair = {p: LocalEmbedder(batch_size=batch_size, threads=threads, precision=p) for p in ("fp32", "int8")}
    wall: dict[str, list[float]] = {p: [] for p in pair}
    cpu: dict[str, list[float]] = {p: [] for p in pair}
    for embedder in pair.values():
        embedder.embed(sentences[:64])  # warm-up (and the int8 graph's first build)
    for _ in range(runs):
        for name, embedder in pair.items():
            started, cpu_started = time.perf_counter(), time.process_time()
            embedder.embed(sentences)
            wall[name].append(len(sentences) / (time.perf_counter() - started))
            cpu[name].append(len(sentences) / (time.process_time() - cpu_started))
    with np.load(FIXTURE, allow_pickle=False) as data:
        texts = sentences[:500] + [str(t) for t in data["sentences"]]
    full, quantised = pair["fp32"].embed(texts), pair["int8"].embed(texts)
    cosines = np.sum(full * quantised, axis=1)
    top_full = np.argsort(-(full @ full.T), axis=1)[:, 1:11]
    top_int8 = np.argsort(-(quantised @ full.T), axis=1)[:, 1:11]
    overlap = float(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(top_full, top_int8, strict=True)]))
    med = {f"{name}_{kind}": round(statistics.median(values[name]), 1)
           for kind, values in (("per_s", wall), ("per_s_cpu", cpu)) for name in pair}
    return med | {"int8_ratio": round(med["int8_per_s"] / med["fp32_per_s"], 2),
                  "int8_ratio_cpu": round(med["int8_per_s_cpu"] / med["fp32_per_s_cpu"], 2),
                  "int8_min_cosine": round(float(cosines.min()), 4),
                  "int8_mean_cosine": round(float(cosines.mean()), 4),
                  "int8_top10_overlap": round(overlap, 3), "load_avg_1m": round(os.getloadavg()[0], 2)}


def load_in_fresh_process(cache_dir: str) -> dict[str, Any]:
    env = {**os.environ, "TIERMEM_CACHE_DIR": cache_dir}
    out = subprocess.run([sys.executable, "-c", _LOAD_CODE], env=env, capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def parity() -> tuple[float, float]:
    with np.load(FIXTURE, allow_pickle=False) as data:
        sentences = [str(s) for s in data["sentences"]]
        reference = data["vectors"]
    vectors = LocalEmbedder().embed(sentences)
    cosines = np.sum(vectors * reference, axis=1)
    return float(cosines.min()), float(cosines.mean())


def sentence_transformers_rate(sentences: list[str], runs: int, batch_size: int) -> float:
    """The torch reference on the same sentences (dev-only: needs sentence-transformers)."""
    from sentence_transformers import SentenceTransformer

    from tiermem.embedders.local import find_model_dir

    model = SentenceTransformer(str(find_model_dir()), device="cpu")
    model.encode(sentences[:64], batch_size=batch_size)
    rates = []
    for _ in range(runs):
        start = time.perf_counter()
        model.encode(sentences, batch_size=batch_size)
        rates.append(len(sentences) / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description="benchmark the local embedder")
    parser.add_argument("--n", type=int, default=1024, help="sentences per run")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--vs-sentence-transformers", action="store_true")
    parser.add_argument("--compare-int8", action="store_true", help="also the int8 graph, alternated with fp32")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        first = load_in_fresh_process(tmp)  # empty cache: builds the graph
        cold = [load_in_fresh_process(tmp) for _ in range(3)]  # graph cached
        os.environ["TIERMEM_CACHE_DIR"] = tmp
        embedder = LocalEmbedder(batch_size=args.batch_size, threads=args.threads)
        sentences = make_sentences(args.n)
        rates = throughput(embedder, sentences, args.runs)
        min_cos, mean_cos = parity()
        int8 = compare_int8(sentences, args.runs, args.batch_size, args.threads) if args.compare_int8 else None
    tokens = [len(enc.ids) for enc in embedder._tokenizer.encode_batch(sentences)]
    report: dict[str, Any] = {
        "machine": f"{platform.machine()} {os.cpu_count()} cores, Python {platform.python_version()}",
        "model_id": embedder.model_id,
        "sentences": args.n,
        "mean_words": statistics.mean(len(s.split()) for s in sentences),
        "mean_tokens": statistics.mean(tokens),
        "batch_size": args.batch_size,
        "threads": embedder._threads,
        "sentences_per_s": round(statistics.median(rates), 1),
        "sentences_per_s_runs": [round(r, 1) for r in rates],
        "load_cold_s": round(statistics.median(c["load_s"] for c in cold), 3),
        "first_embed_after_load_s": round(statistics.median(c["first_embed_s"] for c in cold), 3),
        "first_build_s": round(first["load_s"], 3),
        "first_build_happened": first["built"] and not any(c["built"] for c in cold),
        "parity_min_cosine": round(min_cos, 7),
        "parity_mean_cosine": round(mean_cos, 7),
    }
    if args.vs_sentence_transformers:
        torch_rate = sentence_transformers_rate(sentences, args.runs, args.batch_size)
        report["sentence_transformers_per_s"] = round(torch_rate, 1)
        report["ratio_vs_sentence_transformers"] = round(report["sentences_per_s"] / torch_rate, 2)
    if int8 is not None:
        report["int8"] = int8
    report["targets_met"] = {
        "sentences_per_s>=250": report["sentences_per_s"] >= 250,
        "load_cold_s<1": report["load_cold_s"] < 1.0,
        "parity>=0.999": min_cos >= 0.999,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
