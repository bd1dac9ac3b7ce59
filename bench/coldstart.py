"""Cold start (issues 16, 24): opening a store and the first search in a fresh process.

    python bench/coldstart.py --n 100000 [--runs 5] [--embedder hash] [--sets rare,common] [--cli]
        [--profile] [--json] [--tiermem DIR] [--baseline DIR]

The store holds ``n`` synthetic facts written straight into SQLite (as ``bench/search.py`` and
``bench/write.py`` build theirs; random clustered unit vectors stored under the embedder's model
id, so nothing is embedded while building). It is built once under ``--cache``. Each run is a
fresh ``python`` process that imports tiermem, then times (from after the import):

- ``open_s``: ``Memory(root, embedder=...)``;
- ``first_search_s``: the first ``mem.search(...)`` (vector index load, query embedding, FTS);
- ``total_s``: both; ``rss_mb`` / ``peak_rss_mb`` of the process after the search;
- ``second_search_ms``: the next search (the index is warm), of another query of the same set;
- ``warm_ms``: the median of that and the set's next searches (``WARM`` in all);
- ``total_cpu_s`` / ``warm_cpu_ms``: the process's CPU time for open + first search, and the
  median of the warm searches' (on a shared machine the wall figures grow with its load);
- ``index_source``: where the scope's vectors came from (``file``: the persisted index file,
  ``rows``: rebuilt from SQLite rows).

The first run after building (or after ``--fresh-file``, which deletes the index files) pays
the rebuild and the write of the index file; the median is over the later runs. ``--cli`` times
``tiermem search`` as a whole command (wall, interpreter start included). ``--profile`` prints
the top of a cProfile of one cold open + search. ``--load-only`` times the vector index load
alone (``LoadedIndexer.sync``), the figure the 1M target is about.

Two query sets (issue 24), each timed in processes of its own, each run starting at another query
of its set (:func:`query_sets`): ``rare``, three words that a handful of items hold each, and
``common``, three of the five words held by most items (the top of the Zipf vocabulary, 29-55% of
the items each, and ``user`` / ``likes``, 29%; any of a query's words: 64-77%), which the keyword
budget drops. ``--tiermem DIR`` runs the children on the ``tiermem`` package under ``DIR`` (e.g.
``git archive HEAD tiermem | tar -x -C DIR``); ``--baseline DIR`` also runs them on another
tree, run by run before the first: before/after in one run. Run ``python -m compileall -q`` on
each tree first when ``PYTHONDONTWRITEBYTECODE`` is set (else every child compiles the modules).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

QUERY = "what coffee does the user prefer"  # --cli
WARM = 8  # warm searches per process
RARE_RANKS = (5_000, 20_000)  # Zipf ranks of rare words: 4-16 items of 100k hold each
ENV = dict(os.environ)  # the children's environment (``--no-file`` turns the index files off)

CHILD = """
import json, resource, statistics, sys, time
t0 = time.perf_counter()
import tiermem
from tiermem import Memory
imported = time.perf_counter()
root, embedder, queries, profile = sys.argv[1], sys.argv[2], json.loads(sys.argv[3]), sys.argv[4] == "1"
if profile:
    import cProfile, pstats
    prof = cProfile.Profile()
    prof.enable()
t, cpu = time.perf_counter(), time.process_time()
mem = Memory(root, embedder=embedder, max_facts=10**7)
opened = time.perf_counter()
hits = mem.search(queries[0], k=10)
searched, cpu = time.perf_counter(), time.process_time() - cpu
if profile:
    prof.disable()
    pstats.Stats(prof, stream=sys.stderr).sort_stats("cumulative").print_stats(45)
warm, warm_cpu = [], []
for query in queries[1:]:
    t2, c2 = time.perf_counter(), time.process_time()
    mem.search(query, k=10)
    warm.append(time.perf_counter() - t2)
    warm_cpu.append(time.process_time() - c2)
indexer = mem._search.indexer
source = getattr(indexer, "load_sources", {})
rss = int(open("/proc/self/status").read().split("VmRSS:")[1].split()[0]) * 1024
print(json.dumps({"import_s": round(imported - t0, 3), "open_s": round(opened - t, 3),
                  "first_search_s": round(searched - opened, 3), "total_s": round(searched - t, 3),
                  "second_search_ms": round(warm[0] * 1000, 1),
                  "warm_ms": round(statistics.median(warm) * 1000, 1), "hits": len(hits),
                  "total_cpu_s": round(cpu, 3), "warm_cpu_ms": round(statistics.median(warm_cpu) * 1000, 1),
                  "index_source": ",".join(sorted(set(source.values()))) or "rows",
                  "rss_mb": round(rss / 2**20, 1),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "tiermem": tiermem.__file__}))
mem.close()
"""

LOAD_CHILD = """
import json, sys, time
from tiermem import Memory
from tiermem.types import Scope
root, embedder = sys.argv[1], sys.argv[2]
mem = Memory(root, embedder=embedder, max_facts=10**7)
indexer = mem._search.indexer
indexer.embedder  # the model is not part of the load
t = time.perf_counter()
index = indexer.sync(Scope("default", "default"))
took = time.perf_counter() - t
print(json.dumps({"load_s": round(took, 3), "items": len(index), "mode": index.mode,
                  "index_source": ",".join(sorted(set(getattr(indexer, "load_sources", {}).values()))) or "rows"}))
mem.close()
"""


PG_CHILD = """
import json, statistics, sys, time
import tiermem
t, cpu = time.perf_counter(), time.process_time()
from pathlib import Path
import numpy as np
from tiermem.clock import SystemClock
from tiermem.config import load_settings
from tiermem.search.engine import SearchEngine
from tiermem.search.filters import SearchFilters
from tiermem.storage.postgres.db import PgDatabase
from tiermem.types import Scope
url, folder, queries = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
class Model:  # the query vector is handed in, as bench/search.py does
    dim, model_id = 384, "bench-random-384"
    def embed(self, texts):
        raise AssertionError("nothing is embedded")
db = PgDatabase(url)
engine = SearchEngine(db, Model, load_settings(Path(folder), {"timezone": "UTC"}, environ={}), SystemClock())
opened = time.perf_counter()
rng = np.random.default_rng(5)
def query():
    v = rng.standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)
engine.search_vector(Scope("default", "default"), queries[0], query(), 10, SearchFilters())
first, cpu = time.perf_counter(), time.process_time() - cpu
warm = []
for text in queries[1:]:
    t2 = time.perf_counter()
    engine.search_vector(Scope("default", "default"), text, query(), 10, SearchFilters())
    warm.append(time.perf_counter() - t2)
print(json.dumps({"open_s": round(opened - t, 3), "first_search_s": round(first - opened, 3),
                  "total_s": round(first - t, 3), "total_cpu_s": round(cpu, 3),
                  "second_search_ms": round(warm[0] * 1000, 1), "warm_ms": round(statistics.median(warm) * 1000, 1),
                  "tiermem": tiermem.__file__}))
db.close()
"""


def postgres_runs(runs: int, cache: Path, n: int, sets: dict[str, list[str]],
                  trees: dict[str, str | None]) -> dict[str, Any]:
    """Cold open + first search on the PostgreSQL schema ``bench/search.py --backend postgres --n
    n`` built (pgvector: nothing is loaded into the process), per query set (and tree, taking
    turns run by run as on SQLite; the client's CPU time only: the server's is not counted)."""
    from pgserver import server_url, with_schema
    from search_postgres import FORMAT

    url = with_schema(server_url(), f"bench_search_n{n}_v{FORMAT}")
    cache.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {tree or "this": {name: {"runs": []} for name in sets} for tree in trees}
    for i in range(runs):
        for tree in sorted(trees, reverse=True):
            use_tree(trees[tree])
            for name, queries in sets.items():
                out[tree or "this"][name]["runs"].append(
                    child(PG_CHILD, url, str(cache), json.dumps(rotated(queries, i))))
    for by_set in out.values():
        for summary in by_set.values():
            later = summary["runs"][1:] or summary["runs"]
            for key in ("open_s", "first_search_s", "total_s", "total_cpu_s", "second_search_ms", "warm_ms"):
                summary[f"{key}_median"] = statistics.median(r[key] for r in later)
    return out


def build_store(folder: Path, n: int, model: str, dim: int) -> float | None:
    """Build the store once (``bench/search.py``'s generator with this model's id and size)."""
    import search as search_bench

    if (folder / "complete").exists():
        return None
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiermem.db").unlink(missing_ok=True)
    search_bench.MODEL, search_bench.DIM = model, dim
    vocab = search_bench.vocabulary(20_000, np.random.default_rng(0))
    seconds = search_bench.build(folder / "tiermem.db", n, vocab)
    (folder / "complete").touch()
    return round(seconds, 1)


def query_sets(n: int, count: int = 12) -> dict[str, list[str]]:
    """``rare``: three words of Zipf ranks :data:`RARE_RANKS` each (at 100k items, 4-16 items hold
    each word); ``common``: three of the vocabulary's three commonest words and ``user``,
    ``likes`` (each in 23-55% of the items). Fixed by a seed: the same queries on every run."""
    import itertools

    import search as search_bench

    vocab = search_bench.vocabulary(20_000, np.random.default_rng(0))  # the store's (build_store)
    rng = np.random.default_rng(24)
    low, high = RARE_RANKS
    rare = [" ".join(vocab[int(i)] for i in rng.integers(low, high, 3)) for _ in range(count)]
    top = [vocab[0], vocab[1], "user", "likes", vocab[2]]
    common = [" ".join(words) for words in itertools.combinations(top, 3)]
    common = [common[int(i)] for i in rng.permutation(len(common))]
    return {"rare": rare, "common": (common * 2)[:count]}


def rotated(queries: list[str], start: int) -> list[str]:
    """The first search's query and :data:`WARM` more, starting at ``start``."""
    return [queries[(start + i) % len(queries)] for i in range(WARM + 1)]


def use_tree(folder: str | None) -> None:
    """The children import ``tiermem`` from ``folder`` (``None``: as this process does)."""
    if folder:
        ENV["PYTHONPATH"] = str(Path(folder).resolve())
    else:
        ENV.pop("PYTHONPATH", None)


def drop_index_files(folder: Path) -> None:
    for path in folder.glob("vectors*"):
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def child(code: str, *args: str) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=False,
                         env=ENV, cwd=tempfile.gettempdir())  # not a folder holding another tiermem
    if out.returncode:
        raise SystemExit(f"child failed:\n{out.stderr[-3000:]}")
    if code == CHILD and args[-1] == "1":
        print(out.stderr, file=sys.stderr)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def cli_run(folder: Path, embedder: str) -> float:
    started = time.perf_counter()
    subprocess.run([str(Path(sys.executable).with_name("tiermem")), "--root", str(folder), "search", QUERY],
                   capture_output=True, text=True, check=True, env=_env(embedder))
    return time.perf_counter() - started


def _env(embedder: str) -> dict[str, str]:
    return {**ENV, "TIERMEM_EMBEDDER": embedder, "TIERMEM_MAX_FACTS": str(10**7)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--embedder", default="hash")
    parser.add_argument("--cache", default="/tmp/tiermem-coldstart")
    parser.add_argument("--fresh-file", action="store_true", help="delete the index files first")
    parser.add_argument("--no-file", action="store_true", help="search_index_file = false: rebuild from rows")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--load-only", action="store_true")
    parser.add_argument("--cli", action="store_true", help="time `tiermem search` too")
    parser.add_argument("--postgres", action="store_true",
                        help="instead: PostgreSQL's cold first search (needs `bench/search.py --backend postgres`)")
    parser.add_argument("--build-only", action="store_true", help="build the store and stop")
    parser.add_argument("--sets", default="rare,common", help="query sets to time (rare, common)")
    parser.add_argument("--tiermem", help="run the children on the tiermem package under this folder")
    parser.add_argument("--baseline", help="also run them on the tiermem package under this folder, run by run"
                                           " before the others (figures under 'baseline')")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    trees = {"": args.tiermem, **({"baseline": args.baseline} if args.baseline else {})}
    use_tree(args.tiermem)
    names = [name.strip() for name in args.sets.split(",") if name.strip()]
    if args.postgres:
        sets = {name: query_sets(args.n)[name] for name in names}
        print(json.dumps(postgres_runs(args.runs, Path(args.cache) / "pg", args.n, sets, trees)))
        return 0
    from tiermem.models.registry import ProviderOptions, make_embedder

    embedder = make_embedder(args.embedder, ProviderOptions())
    model, dim = str(embedder.model_id), int(embedder.dim)
    folder = Path(args.cache) / f"cold-n{args.n}-{model.replace('/', '_')}"
    result: dict[str, Any] = {"n": args.n, "embedder": model, "build_s": build_store(folder, args.n, model, dim)}
    if args.no_file:
        ENV["TIERMEM_SEARCH_INDEX_FILE"] = "0"
    if args.build_only:
        print(json.dumps(result))
        return 0
    if args.fresh_file:
        drop_index_files(folder)
    sets = query_sets(args.n)
    if args.profile:
        child(CHILD, str(folder), args.embedder, json.dumps(rotated(sets[names[0]], 0)), "1")
        return 0
    if args.load_only:
        runs = [child(LOAD_CHILD, str(folder), args.embedder) for _ in range(args.runs)]
        result["runs"] = runs
        result["load_s_median"] = statistics.median(r["load_s"] for r in runs[1:] or runs)
    else:
        for tree in sorted(trees, reverse=True):  # the baseline's first
            (result.setdefault(tree, {}) if tree else result)["sets"] = {
                name: {"queries": sets[name], "runs": []} for name in names}
        for i in range(args.runs):  # the trees and sets take turns: all see the same load
            for tree in sorted(trees, reverse=True):
                use_tree(trees[tree])
                for name in names:
                    queries = json.dumps(rotated(sets[name], i))
                    out = (result[tree] if tree else result)["sets"][name]
                    out["runs"].append(child(CHILD, str(folder), args.embedder, queries, "0"))
        for tree in trees:
            for summary in (result[tree] if tree else result)["sets"].values():
                later = summary["runs"][1:] or summary["runs"]
                for key in ("open_s", "first_search_s", "total_s", "rss_mb", "peak_rss_mb", "second_search_ms",
                            "warm_ms", "total_cpu_s", "warm_cpu_ms"):
                    summary[f"{key}_median"] = statistics.median(r[key] for r in later)
        use_tree(args.tiermem)
    if args.cli:
        walls = [cli_run(folder, args.embedder) for _ in range(max(3, args.runs))]
        result["cli_wall_s"] = [round(w, 2) for w in walls]
        result["cli_wall_median_s"] = round(statistics.median(walls[1:]), 2)
    print(json.dumps(result) if args.json else json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
