"""Issue 24: fit the score's calibration and the two floors on the tuning halves, offline.

    python bench/score_fit.py FEATURES.json [FEATURES.json ...] [--only KC,KS,VC,VS] [--top N]

Reads the candidates ``bench/score_features.py`` wrote, ranks them under candidate calibrations of
:class:`tiermem.search.evidence.Calibration` (a grid), and reports for each the paraphrase
recall@5 and off-topic queries answered per split and floor, and LoCoMo dev R@5/R@10 (its order
without the thread support: compare rows with each other, then confirm the chosen one with
``bench/locomo.py`` and ``bench/paraphrase.py``).

The choice (what ``MODEL_CALIBRATIONS`` / ``MODEL_FLOORS`` hold for a model):

1. calibrations whose LoCoMo R@10 (no floor) is within 0.005 of today's mean-of-two score in this
   same offline ranking;
2. for each, the explicit floor: the lowest multiple of 0.01 at which at most 1 in 10 tuning
   off-topic queries is answered (half the target's 2 in 10: room for the held-out half), and the
   injection floor: the lowest at which at most 1 in 40 is (half the target's 1 in 20);
3. the calibration with the highest sum of the tuning half's recall@5 at those two floors.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from tiermem.search.evidence import Calibration  # noqa: E402

Array = npt.NDArray[np.float64]
EXPLICIT_ANSWERED = 0.1  # tuning off-topic queries the explicit floor may answer (target 0.2 held out)
INJECT_ANSWERED = 0.025  # ... the injection floor (target 0.05)
FLOORS = np.round(np.arange(1, 100) * 0.01, 2)


@dataclass
class Queries:
    """Candidates of many queries as padded matrices (a missing candidate has score -1)."""

    cov: Array
    cos: Array
    present: npt.NDArray[np.bool_]
    label: Array  # paraphrase: 1 for the true item; LoCoMo: unused
    rows: list[dict[str, Any]]

    @classmethod
    def of(cls, rows: list[dict[str, Any]]) -> Queries:
        width = max((len(r["hits"]) for r in rows), default=1) or 1
        shape = (len(rows), width)
        cov, cos, label = np.zeros(shape), np.zeros(shape), np.zeros(shape)
        present = np.zeros(shape, dtype=bool)
        for i, r in enumerate(rows):
            for j, h in enumerate(r["hits"]):
                cov[i, j], cos[i, j], present[i, j] = h[0], h[1], True
                label[i, j] = h[2] if isinstance(h[2], int) else 0
        return cls(cov, cos, present, label, rows)

    def scores(self, score: Any) -> Array:
        return np.where(self.present, score(self.cov, self.cos), -1.0)


def curve(x: Array, centre: float, slope: float) -> Array:
    """:func:`tiermem.search.evidence._curve`, vectorised."""
    x = np.clip(x, 0.0, 1.0)
    low, high = 1 / (1 + np.exp(slope * centre)), 1 / (1 + np.exp(-slope * (1 - centre)))
    return np.clip((1 / (1 + np.exp(-slope * (x - centre))) - low) / (high - low), 0.0, 1.0)


def calibrated(cal: Calibration) -> Any:
    def score(cov: Array, cos: Array) -> Array:
        k = curve(cov, cal.keyword_centre, cal.keyword_slope)
        v = curve(np.maximum(cos, 0.0), cal.vector_centre, cal.vector_slope)
        return 1 - (1 - k) * (1 - v)
    return score


def mean_score(cov: Array, cos: Array) -> Array:
    """Today's score (before issue 24): the plain mean."""
    return (cov + np.maximum(cos, 0.0)) / 2


def paraphrase(pairs: Queries, off: Queries, score: Any) -> dict[str, Array]:
    """Per floor: recall@1/@5 of the pairs and the share of off-topic queries answered."""
    s = pairs.scores(score)
    true = np.where(pairs.label > 0, s, -2.0).max(axis=1)  # -2: not among the candidates
    rank = 1 + (s > true[:, None]).sum(axis=1)
    found = true > -2
    top = off.scores(score).max(axis=1)
    at = FLOORS[:, None]
    return {"R@1": ((rank == 1) & found & (true >= at)).mean(axis=1),
            "R@5": ((rank <= 5) & found & (true >= at)).mean(axis=1),
            "answered": (top >= at).mean(axis=1)}


def locomo(q: Queries, score: Any, floor: float = 0.0) -> dict[str, float]:
    """LoCoMo R@5/R@10 (mean over questions) of the candidates ordered by ``score``, above ``floor``."""
    s = q.scores(score)
    order = np.argsort(-s, axis=1, kind="stable")[:, :10]
    out = {"R@5": 0.0, "R@10": 0.0}
    for i, r in enumerate(q.rows):
        evidence = set(r["evidence"])
        for k in (5, 10):
            found = {t for j in order[i, :k] if s[i, j] >= floor for t in r["hits"][j][2]}
            out[f"R@{k}"] += len(found & evidence) / len(evidence)
    return {key: value / max(len(q.rows), 1) for key, value in out.items()}


def grid() -> list[Calibration]:
    return [Calibration(keyword_centre=kc, keyword_slope=ks, vector_centre=vc, vector_slope=vs)
            for kc, ks, vc, vs in itertools.product((0.2, 0.35, 0.5, 0.65, 0.8), (4.0, 8.0, 14.0),
                                                    (0.2, 0.3, 0.4, 0.5, 0.6), (4.0, 8.0, 14.0))]


def lowest_floor(figures: dict[str, Array], answered: float) -> int:
    """The index in FLOORS of the lowest floor at which at most ``answered`` of the off-topic
    queries get an answer."""
    ok = np.nonzero(figures["answered"] <= answered + 1e-9)[0]
    return int(ok[0]) if len(ok) else len(FLOORS) - 1


def evaluate(cal: Any, sets: dict[str, Queries]) -> dict[str, Any]:
    score = calibrated(cal) if isinstance(cal, Calibration) else cal
    tune = paraphrase(sets["tune_pairs"], sets["tune_off"], score)
    held = paraphrase(sets["held_pairs"], sets["held_off"], score)
    e, i = lowest_floor(tune, EXPLICIT_ANSWERED), lowest_floor(tune, INJECT_ANSWERED)
    at = (("explicit", e), ("inject", i))
    return {"cal": cal, "score": score, "explicit": float(FLOORS[e]), "inject": float(FLOORS[i]),
            "tune": {name: {key: float(v[n]) for key, v in tune.items()} for name, n in at},
            "held": {name: {key: float(v[n]) for key, v in held.items()} for name, n in at},
            "locomo": locomo(sets["locomo"], score)}


def show(r: dict[str, Any]) -> str:
    t, h = r["tune"], r["held"]
    return (f"{r['cal']}\n    LoCoMo R@5 {r['locomo']['R@5']:.4f} R@10 {r['locomo']['R@10']:.4f} | explicit "
            f"{r['explicit']:.2f}: tune R@5 {t['explicit']['R@5']:.3f} off {t['explicit']['answered']:.3f}, held "
            f"R@5 {h['explicit']['R@5']:.3f} off {h['explicit']['answered']:.3f} | inject {r['inject']:.2f}: tune R@5 "
            f"{t['inject']['R@5']:.3f} off {t['inject']['answered']:.3f}, held R@5 {h['inject']['R@5']:.3f} off "
            f"{h['inject']['answered']:.3f}")


def load(paths: Sequence[str]) -> dict[str, Queries]:
    rows = [row for path in paths for row in json.loads(Path(path).read_text(encoding="utf-8"))]
    para = [r for r in rows if r["set"] == "paraphrase"]
    sets = {f"{split}_{what}": Queries.of([r for r in para if r["split"] == split and r["offtopic"] == off])
            for split in ("tune", "held") for what, off in (("pairs", False), ("off", True))}
    sets["locomo"] = Queries.of([r for r in rows if r["set"] == "locomo"])
    return sets


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("features", nargs="+")
    parser.add_argument("--top", type=int, default=10)
    parser.add_argument("--only", help="evaluate this one calibration: KC,KS,VC,VS")
    args = parser.parse_args(argv)
    sets = load(args.features)
    base = evaluate(mean_score, sets)
    print("today's mean score, offline:", show(base))
    cals = [Calibration(*map(float, args.only.split(",")))] if args.only else grid()
    results = [evaluate(cal, sets) for cal in cals]
    fit = [r for r in results if r["locomo"]["R@10"] >= base["locomo"]["R@10"] - 0.005]
    print(f"{len(fit)} of {len(results)} keep LoCoMo R@10 within 0.005 of today's")
    fit.sort(key=lambda r: -(r["tune"]["explicit"]["R@5"] + r["tune"]["inject"]["R@5"]))
    for r in fit[: args.top]:
        print(show(r))
    if fit and len(sets["locomo"].rows):
        best = fit[0]
        print("\nchosen:", show(best))
        print("LoCoMo at its explicit floor:", locomo(sets["locomo"], best["score"], best["explicit"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
