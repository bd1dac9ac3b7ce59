"""Issue 24: the evidence of every candidate of every benchmark query, for fitting the score offline.

    python bench/score_features.py --out FEATURES.json [--embedder local] [--data ../shared/data/locomo_dev.json]
                                   [--locomo-store DIR] [--paraphrase-store DIR]

For each query of the paraphrase benchmark (``bench/paraphrase.py``: pairs and off-topic queries,
in its facts and journal scopes) and each LoCoMo dev question (categories 1-4, ``bench/locomo.py``),
every candidate the search found (``mem.search(q, k=1000, min_score=0)``) with its keyword
coverage and cosine (``SearchHit.extra``), and what it is worth: for a pair, whether it is the
pair's text; for a LoCoMo question, which evidence turns it holds. ``bench/score_fit.py`` ranks
these candidates under a candidate score and reports the benchmarks' figures without searching
again (the thread support of the order is left out there; confirm a fit with the benchmarks).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

K_ALL = 1000


def _hit_row(hit: Any) -> list[float]:
    return [round(float(hit.extra.get("keyword", 0.0)), 5), round(float(hit.extra.get("vector", 0.0)), 5)]


def paraphrase_features(args: argparse.Namespace) -> list[dict[str, Any]]:
    import paraphrase as pp

    pairs, offtopic = pp.load_pairs(), pp.load_offtopic()
    conversations = pp.distractor_conversations(json.loads(Path(args.data).read_text(encoding="utf-8")))
    ns = argparse.Namespace(embedder=args.embedder, set=[], store=args.paraphrase_store, rebuild=False)
    root, embedder, _ = pp.prepare(ns, pairs, conversations)
    texts = {p.text for p in pairs}
    out: list[dict[str, Any]] = []
    for store in pp.STORES:
        with pp.open_memory(root, store, embedder, ns) as mem:
            for item in [*pairs, *offtopic]:
                hits = mem.search(item.query, k=K_ALL, min_score=0)
                true = getattr(item, "text", None)
                out.append({"set": "paraphrase", "store": store, "id": item.id, "kind": item.kind,
                            "split": item.split, "offtopic": true is None,
                            "hits": [[*_hit_row(h), int(h.text.strip() == true), int(h.text.strip() in texts)]
                                     for h in hits]})
    if hasattr(embedder, "save"):
        embedder.save()
    return out


def locomo_features(args: argparse.Namespace) -> list[dict[str, Any]]:
    import locomo

    from tiermem import Memory

    data = json.loads(Path(args.data).read_text(encoding="utf-8"))
    root = Path(args.locomo_store or tempfile.mkdtemp(prefix="tiermem-locomo-features-"))
    embedder = locomo.make_embedder(args.embedder, str(root / "embeddings.npz"))
    out: list[dict[str, Any]] = []
    for n, sample in enumerate(data):
        user = re.sub(r"[^A-Za-z0-9_.@-]", "-", str(sample["sample_id"]))
        settings = {"timezone": "UTC", "search_fusion": "weighted", "search_chunk_context": True}
        with Memory(root, embedder=embedder, user_id=user, **settings) as mem:
            files = locomo.daily_files(sample["conversation"])
            marker = root / f".features-ingested-{user}-{args.embedder}"
            made_by_locomo = root / f".locomo-ingested-{user}-{args.embedder}-0-0-sqlite"  # bench/locomo.py --store
            if not marker.is_file() and not made_by_locomo.is_file():
                locomo.ingest(mem, files)
                marker.touch()
            by_path = {f.path: f for f in files}
            for q, qa in enumerate(sample["qa"]):
                evidence = set(locomo.normalise_evidence(qa.get("evidence") or []))
                if str(qa.get("category")) not in locomo.CATEGORIES or not evidence:
                    continue
                hits = mem.search(str(qa["question"]), k=K_ALL, min_score=0)
                rows = []
                for hit in hits:
                    turns = locomo.hit_turns(hit.ref, by_path)
                    rows.append([*_hit_row(hit), sorted(set(turns) & evidence), len(turns)])
                out.append({"set": "locomo", "conversation": n, "id": f"{user}-{q}",
                            "category": str(qa["category"]), "evidence": sorted(evidence), "hits": rows})
    if hasattr(embedder, "save"):
        embedder.save()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--embedder", default="local")
    parser.add_argument("--data", default=str(HERE.parents[1] / "shared/data/locomo_dev.json"))
    parser.add_argument("--locomo-store", help="keep the LoCoMo store here and reuse it")
    parser.add_argument("--paraphrase-store", help="the paraphrase benchmark's store (default: its own)")
    parser.add_argument("--only", choices=("paraphrase", "locomo"))
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    if args.only != "locomo":
        rows += paraphrase_features(args)
    if args.only != "paraphrase":
        rows += locomo_features(args)
    Path(args.out).write_text(json.dumps(rows), encoding="utf-8")
    print(f"{len(rows)} queries written to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
