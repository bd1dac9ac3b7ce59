"""Precision/recall of the Deep Dream no-fabrication check (R40) on the labelled fixture.

    python bench/dream_support.py [--fixture tests/fixtures/dream_support.json] [--embedder local|hash]
                                  [--sweep] [--json]

"Positive" = fabricated (the check should drop it). Prints fabricated recall (fabricated
bullets dropped), fabricated precision (dropped bullets that were fabricated), supported
retention (supported bullets kept), per-kind figures and every mistake with its reason.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

from tiermem.dream.prompt import DailySource
from tiermem.dream.support import SupportChecker, SupportPolicy

DEFAULT_FIXTURE = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "dream_support.json"


@dataclass
class Outcome:
    case: str
    split: str
    text: str
    label: str
    kind: str
    flagged: bool
    reason: str


def evaluate(fixture: dict[str, Any], policy: SupportPolicy, embedder: Any = None) -> list[Outcome]:
    outcomes = []
    for case in fixture["cases"]:
        dailies = [DailySource(date.fromisoformat(d["day"]), d["text"]) for d in case["dailies"]]
        checker = SupportChecker(case["memory"], dailies, policy, embedder)
        for bullet in case["bullets"]:
            verdict = checker.judge(bullet["text"])
            outcomes.append(Outcome(case["id"], case.get("split", "dev"), bullet["text"], bullet["label"],
                                    bullet["kind"], not verdict.supported, verdict.reason))
    return outcomes


def figures(outcomes: list[Outcome]) -> dict[str, Any]:
    fabricated = [o for o in outcomes if o.label == "fabricated"]
    supported = [o for o in outcomes if o.label == "supported"]
    flagged = [o for o in outcomes if o.flagged]
    true_pos = sum(o.flagged for o in fabricated)
    by_kind: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        correct = o.flagged == (o.label == "fabricated")
        by_kind[f"{o.label}/{o.kind}"][0] += int(correct)
        by_kind[f"{o.label}/{o.kind}"][1] += 1
    return {
        "bullets": len(outcomes),
        "fabricated": len(fabricated),
        "supported": len(supported),
        "fabricated_recall": round(true_pos / len(fabricated), 3) if fabricated else None,
        "fabricated_precision": round(true_pos / len(flagged), 3) if flagged else None,
        "supported_retention": round(sum(not o.flagged for o in supported) / len(supported), 3) if supported else None,
        "accuracy": round(sum(o.flagged == (o.label == "fabricated") for o in outcomes) / len(outcomes), 3),
        "by_kind": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_kind.items())},
    }


def _embedder(name: str | None) -> Any:
    if name is None:
        return None
    if name == "hash":
        from tiermem.testing import HashEmbedder

        return HashEmbedder()
    from tiermem.embedders.local import LocalEmbedder

    return LocalEmbedder()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--fixture", type=Path, default=DEFAULT_FIXTURE)
    parser.add_argument("--embedder", choices=("local", "hash"), default=None)
    parser.add_argument("--sweep", action="store_true", help="Also try several coverage thresholds.")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    fixture = json.loads(args.fixture.read_text(encoding="utf-8"))
    embedder = _embedder(args.embedder)
    policy = SupportPolicy()
    outcomes = evaluate(fixture, policy, embedder)
    result = figures(outcomes)
    result["splits"] = {
        split: {k: v for k, v in figures([o for o in outcomes if o.split == split]).items() if k != "by_kind"}
        for split in sorted({o.split for o in outcomes})
    }
    result["policy"] = vars(policy) if hasattr(policy, "__dict__") else str(policy)
    result["embedder"] = args.embedder
    if args.sweep:
        result["sweep"] = {
            str(t): {k: v for k, v in figures(evaluate(fixture, replace(policy, min_coverage=t), embedder)).items()
                     if k in ("fabricated_recall", "fabricated_precision", "supported_retention")}
            for t in (0.4, 0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8)
        }
    result["mistakes"] = [
        {"case": o.case, "split": o.split, "label": o.label, "kind": o.kind, "text": o.text, "reason": o.reason}
        for o in outcomes if o.flagged != (o.label == "fabricated")
    ]
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    for key in ("bullets", "fabricated", "supported", "fabricated_recall", "fabricated_precision",
                "supported_retention", "accuracy", "embedder"):
        print(f"{key:22} {result[key]}")
    for split, values in result["splits"].items():
        print(f"split {split}: {values}")
    print("by kind (correct/total):")
    for kind, value in result["by_kind"].items():
        print(f"  {kind:28} {value}")
    for t, values in result.get("sweep", {}).items():
        print(f"min_coverage={t}: {values}")
    print("mistakes:")
    for m in result["mistakes"]:
        print(f"  [{m['split']} {m['label']}/{m['kind']}] {m['text']}  -- {m['reason'] or 'kept'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
