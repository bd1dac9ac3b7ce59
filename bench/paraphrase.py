"""Issue 24: recall where the words differ - paraphrase queries, off-topic queries, facts and journal.

    python bench/paraphrase.py [--embedder local|hash] [--json] [--data ../shared/data/locomo_dev.json]
                               [--bare] [--store DIR] [--rebuild] [--set KEY=VALUE]

The data (written before any tuning; never tune on single items):

- ``bench/paraphrase_pairs.tsv``: (stored text, query) pairs, half ``personal`` (what a person
  tells an assistant) and half ``project`` (what a coding agent keeps: commands, layout,
  decisions, conventions). No query shares a content word with its text: :func:`problems` checks
  that on every run, and the run stops if any pair fails it.
- ``bench/offtopic_assistant_queries.txt``: questions none of the texts answers, personal and
  project ones (``bench/offtopic_queries.txt`` is about LoCoMo and stays ``bench/offtopic.py``'s).

Both are split by position within their kind: the 1st, 3rd, 5th ... item tunes, the 2nd, 4th,
6th ... is held out. Floors and scores may be fitted on ``tune`` only; targets are met on ``held``.

One store per embedder, built once and kept under the temporary directory (``--store`` elsewhere;
``--rebuild`` builds it again): two scopes, each holding the LoCoMo dev turns of the first
conversations (at least 1,000 turns, appended to the journal; read from ``--data`` at run time,
never copied) and every text of the set - once as facts (``mem.facts.add``, category by kind),
once as journal records (``mem.daily.append``, one record a day); a third scope holds the texts as
facts and nothing else. Every query is searched in each scope (the third only with ``--bare``) with
the floor in force (``mem.search(q, k=5)``) and without (``min_score=0``).

Reported per store and split: recall@1 and recall@5 with and without the floor; how many off-topic
queries return anything with the floor (and how many of those return one of the set's texts rather
than only LoCoMo turns); the score distributions (min, quartiles, max) of each true
pair's item (its score when found in the top 50 without floor) against each off-topic query's best
score, the same for their cosines (the off-topic query's: its best hit's), and the AUC of the two
scores (the chance that a true item outscores an off-topic query's best hit; a true item outside
the top 50 counts as 0), and of the two cosines.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from tiermem.search.fts import STOP_WORDS

HERE = Path(__file__).resolve().parent
PAIRS = HERE / "paraphrase_pairs.tsv"
OFFTOPIC = HERE / "offtopic_assistant_queries.txt"
KINDS = ("personal", "project")
SPLITS = ("tune", "held")
STORES = ("facts", "journal")
BARE = "bare"  # --bare: the texts as facts and nothing else (no LoCoMo turns), as in the first trial
CATEGORY = {"personal": "preference", "project": "knowledge"}
HEADER = ("id", "kind", "split", "text", "query")
MIN_PAIRS, MIN_OFFTOPIC, MIN_DISTRACTORS = 160, 110, 1000
K, K_SCORE = 5, 50  # recall@5; a true item's score is looked for in the top 50
BUILD_VERSION = "2"  # bump when the way the store is built changes


@dataclass(frozen=True)
class Pair:
    id: str
    kind: str
    split: str
    text: str
    query: str


@dataclass(frozen=True)
class OffTopic:
    id: str
    kind: str
    split: str
    query: str


def split_of(position: int) -> str:
    """The split of the ``position``-th (1-based) item of its kind: odd tunes, even is held out."""
    return "tune" if position % 2 else "held"


def load_pairs(path: Path = PAIRS) -> list[Pair]:
    """The pairs in file order; a malformed line stops the run."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if tuple(lines[0].split("\t")) != HEADER:
        raise SystemExit(f"{path}: the first line must be the header {HEADER}")
    pairs = []
    for number, line in enumerate(lines[1:], 2):
        fields = line.split("\t")
        if len(fields) != len(HEADER) or not all(f.strip() for f in fields):
            raise SystemExit(f"{path}:{number}: expected {len(HEADER)} non-empty tab-separated fields")
        pairs.append(Pair(*fields))
    return pairs


def load_offtopic(path: Path = OFFTOPIC) -> list[OffTopic]:
    """The queries under ``[personal]`` and ``[project]`` (``#`` lines and blank lines skipped),
    with ids ``off-<kind>-NNN`` and splits by position within their section."""
    out: list[OffTopic] = []
    kind, count = "", 0
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        section = re.fullmatch(r"\[(\w+)\]", line)
        if section:
            kind, count = section[1], 0
            if kind not in KINDS:
                raise SystemExit(f"{path}: unknown section [{kind}]")
            continue
        if not kind:
            raise SystemExit(f"{path}: a query before any [personal]/[project] section: {line!r}")
        count += 1
        out.append(OffTopic(f"off-{kind}-{count:03d}", kind, split_of(count), line))
    return out


# --- data validation: no content word shared, counts, balance ----------------------------------
_WORD = re.compile(r"[^\W_]+")


def content_words(text: str) -> list[str]:
    """Casefolded words (letter/digit runs) of ``text`` without the search's stop words."""
    return [w for w in _WORD.findall(text.casefold()) if w not in STOP_WORDS]


def light_stem(word: str) -> str:
    """``word`` without one of -ing/-ed/-es/-s, an undoubled final consonant after -ing/-ed, and
    a final e: ``running``, ``runs`` -> ``run``; ``notes``, ``note`` -> ``not``; ``used`` -> ``us``."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 2:
            word = word[: -len(suffix)]
            if suffix in ("ing", "ed") and len(word) > 2 and word[-1] == word[-2] and word[-1] not in "aeiou":
                word = word[:-1]
            break
    return word[:-1] if word.endswith("e") and len(word) > 2 else word


def porter_stems(texts: Sequence[str]) -> list[set[str]]:
    """The terms the search's word index holds for each text (SQLite FTS5 ``porter unicode61``)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE t USING fts5(text, tokenize='porter unicode61 remove_diacritics 2')")
        conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
        conn.executemany("INSERT INTO t (rowid, text) VALUES (?, ?)", [(i + 1, s) for i, s in enumerate(texts)])
        found: list[set[str]] = [set() for _ in texts]
        for doc, term in conn.execute("SELECT doc, term FROM v"):
            found[int(doc) - 1].add(str(term))
        return found
    finally:
        conn.close()


def overlap(text: str, query: str) -> list[str]:
    """Why ``query`` shares a content word with ``text`` (empty: it does not). Checked: light stems
    equal, or one a prefix of the other (4+ letters: ``edit``/``editor``); the porter stems the
    search's word index would match; a query word of 3+ letters inside the text (the search's
    substring credit)."""
    q_words, t_words = content_words(query), content_words(text)
    found: list[str] = []
    q_stems, t_stems = {light_stem(w) for w in q_words}, {light_stem(w) for w in t_words}
    for a in sorted(q_stems):
        for b in sorted(t_stems):
            short, long = sorted((a, b), key=len)
            if a == b or (len(short) >= 4 and long.startswith(short)):
                found.append(f"stem {a!r}~{b!r}")
    q_porter, t_porter = porter_stems([" ".join(q_words), text])
    found += [f"porter {term!r}" for term in sorted(q_porter & t_porter)]
    folded = text.casefold()
    found += [f"substring {w!r}" for w in dict.fromkeys(q_words) if len(w) >= 3 and w in folded]
    return found


def _duplicates(values: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dupes = []
    for value in values:
        key = " ".join(value.casefold().split())
        if key in seen:
            dupes.append(value)
        seen.add(key)
    return dupes


def _balance(items: Sequence[Pair | OffTopic], what: str, minimum: int) -> list[str]:
    out = [] if len(items) >= minimum else [f"{what}: {len(items)} items, at least {minimum} wanted"]
    counts = {(kind, split): sum(1 for i in items if (i.kind, i.split) == (kind, split))
              for kind in KINDS for split in SPLITS}
    if len(set(counts.values())) != 1:
        out.append(f"{what}: kinds and splits are not balanced: {counts}")
    out += [f"{what}: unknown kind {i.kind!r} ({i.id})" for i in items if i.kind not in KINDS]
    for kind in KINDS:
        of_kind = [i for i in items if i.kind == kind]
        out += [f"{what}: {i.id} is in {i.split!r}, its position says {split_of(n)!r}"
                for n, i in enumerate(of_kind, 1) if i.split != split_of(n)]
    return out


def problems(pairs: Sequence[Pair], offtopic: Sequence[OffTopic]) -> list[str]:
    """Everything wrong with the data (empty: it is fit to measure on)."""
    out = _balance(pairs, "pairs", MIN_PAIRS) + _balance(offtopic, "off-topic", MIN_OFFTOPIC)
    for what, values in (("pair id", [p.id for p in pairs]), ("stored text", [p.text for p in pairs]),
                         ("query", [p.query for p in pairs] + [o.query for o in offtopic])):
        out += [f"duplicate {what}: {value!r}" for value in _duplicates(values)]
    out += [f"{p.id}: the query shares content words with its text: {', '.join(why)}"
            for p in pairs if (why := overlap(p.text, p.query))]
    texts = {" ".join(p.text.casefold().split()) for p in pairs}
    out += [f"{o.id}: an off-topic query is a stored text" for o in offtopic
            if " ".join(o.query.casefold().split()) in texts]
    return out


def check_data(pairs: Sequence[Pair], offtopic: Sequence[OffTopic]) -> None:
    """Stop loudly, listing every problem, unless the data is fit to measure on."""
    found = problems(pairs, offtopic)
    if found:
        raise SystemExit("bench/paraphrase.py: the data is not fit to measure on:\n  " + "\n  ".join(found))


# --- the store: LoCoMo turns beside the texts, one scope per store kind -------------------------
def distractor_conversations(data: list[dict[str, Any]], minimum: int = MIN_DISTRACTORS) -> list[dict[str, Any]]:
    """The first LoCoMo conversations holding at least ``minimum`` turns together."""
    from locomo import daily_files

    chosen, turns = [], 0
    for sample in data:
        if turns >= minimum:
            break
        chosen.append(sample)
        turns += sum(len(records) for daily in daily_files(sample["conversation"]) for _, records in daily.sessions)
    if turns < minimum:
        raise SystemExit(f"the data holds {turns} turns, at least {minimum} wanted")
    return chosen


def open_memory(root: Path, store: str, embedder: Any, args: argparse.Namespace) -> Any:
    from tiermem import Memory

    settings: dict[str, Any] = {"timezone": "UTC"}
    for item in args.set:
        key, _, value = item.partition("=")
        settings[key] = value
    return Memory(root, embedder=embedder, user_id=store, **settings)


def build(root: Path, args: argparse.Namespace, pairs: Sequence[Pair], conversations: list[dict[str, Any]],
          embedder: Any) -> dict[str, Any]:
    """Both scopes, from scratch: the LoCoMo sessions through the journal, then the texts."""
    from locomo import daily_files

    started = time.perf_counter()
    turns = 0
    for store in (*STORES, BARE):
        with open_memory(root, store, embedder, args) as mem:
            for sample in conversations if store != BARE else []:
                for daily in daily_files(sample["conversation"]):
                    for when, records in daily.sessions:
                        mem.daily.append("Conversation", records, at=when)
                        turns += len(records) if store == STORES[0] else 0
            first_day = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
            for n, pair in enumerate(pairs):
                if store != "journal":
                    if mem.facts.add(pair.text, CATEGORY[pair.kind]) is None:
                        raise SystemExit(f"{pair.id}: the fact was not stored")
                else:
                    mem.daily.append("Note", [pair.text], at=first_day + timedelta(days=n))
            mem.embed_pending()
    return {"distractor_turns": turns, "conversations": [str(s["sample_id"]) for s in conversations],
            "build_seconds": round(time.perf_counter() - started, 1)}


def store_key(args: argparse.Namespace, pairs: Sequence[Pair], conversations: list[dict[str, Any]]) -> str:
    """What the built store depends on: rebuilt when any of it changes."""
    parts = [BUILD_VERSION, args.embedder, json.dumps(sorted(args.set)), json.dumps([asdict(p) for p in pairs]),
             json.dumps([s["conversation"] for s in conversations], sort_keys=True)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def prepare(args: argparse.Namespace, pairs: Sequence[Pair], conversations: list[dict[str, Any]]
            ) -> tuple[Path, Any, dict[str, Any]]:
    """The store (reused when built before with the same key), its embedder and its manifest."""
    from locomo import make_embedder

    key = store_key(args, pairs, conversations)
    root = Path(args.store) if args.store else Path(tempfile.gettempdir()) / f"tiermem-paraphrase-{key}"
    manifest_path = root / "paraphrase-store.json"
    embedder = make_embedder(args.embedder, str(root / "embeddings.npz"))
    if not args.rebuild and manifest_path.is_file():
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        if manifest.get("key") == key:
            return root, embedder, manifest | {"reused": True}
    if root.exists() and any(root.iterdir()):
        if not manifest_path.is_file():
            raise SystemExit(f"{root} is not empty and holds no paraphrase store: choose another --store")
        import shutil

        shutil.rmtree(root)
        embedder = make_embedder(args.embedder, str(root / "embeddings.npz"))
    root.mkdir(parents=True, exist_ok=True)
    manifest = build(root, args, pairs, conversations, embedder) | {"key": key}
    if hasattr(embedder, "save"):
        embedder.save()
    manifest_path.write_text(json.dumps(manifest), encoding="utf-8")
    return root, embedder, manifest | {"reused": False}


# --- measuring ---------------------------------------------------------------------------------
@dataclass
class Outcome:
    """One query searched in one store. Ranks are 1-based (``None``: not in the top 5)."""

    id: str
    kind: str
    split: str
    store: str
    offtopic: bool
    rank_floor: int | None  # pairs: the true item's rank with the floor in force
    rank_all: int | None  # ... and without
    answered: bool  # something came back with the floor in force
    answered_by_set: bool  # ... and one of the set's texts among it (not only LoCoMo turns)
    top_score: float  # the highest score among the hits without floor (0: no hit)
    top_cosine: float  # that hit's cosine
    true_score: float | None = None  # pairs: the true item's score, if in the top 50 without floor
    true_cosine: float | None = None
    true_keyword: float | None = None


def _rank(hits: Sequence[Any], text: str) -> int | None:
    return next((n for n, hit in enumerate(hits, 1) if hit.text.strip() == text), None)


def search_one(mem: Any, store: str, item: Pair | OffTopic, texts: set[str]) -> Outcome:
    floored = mem.search(item.query, k=K)
    unfloored = mem.search(item.query, k=K, min_score=0)
    top = max(unfloored, key=lambda hit: hit.score) if unfloored else None  # the order may lift a lower score
    outcome = Outcome(item.id, item.kind, item.split, store, isinstance(item, OffTopic), None, None,
                      bool(floored), any(hit.text.strip() in texts for hit in floored),
                      top.score if top else 0.0, float(top.extra.get("vector", 0.0)) if top else 0.0)
    if isinstance(item, Pair):
        outcome.rank_floor, outcome.rank_all = _rank(floored, item.text), _rank(unfloored, item.text)
        deep = unfloored if outcome.rank_all else mem.search(item.query, k=K_SCORE, min_score=0)
        hit = next((h for h in deep if h.text.strip() == item.text), None)
        if hit is not None:
            outcome.true_score = hit.score
            outcome.true_cosine = float(hit.extra.get("vector", 0.0))
            outcome.true_keyword = float(hit.extra.get("keyword", 0.0))
    return outcome


def measure(root: Path, embedder: Any, args: argparse.Namespace, pairs: Sequence[Pair],
            offtopic: Sequence[OffTopic]) -> tuple[list[Outcome], dict[str, Any]]:
    outcomes: list[Outcome] = []
    info: dict[str, Any] = {}
    texts = {p.text for p in pairs}
    items: list[Pair | OffTopic] = [*pairs, *offtopic]
    started = time.perf_counter()
    for store in (*STORES, BARE) if args.bare else STORES:
        with open_memory(root, store, embedder, args) as mem:
            info = {"floor": mem.search_floor(), "model": mem.vector_status().model,
                    "floors": {use: mem.search_floor(use) for use in ("explicit", "inject")}}
            outcomes += [search_one(mem, store, item, texts) for item in items]
    if hasattr(embedder, "save"):
        embedder.save()
    info["search_seconds"] = round(time.perf_counter() - started, 1)
    return outcomes, info


# --- reporting ---------------------------------------------------------------------------------
def spread(values: Sequence[float]) -> dict[str, float] | None:
    """min, quartiles, max (``None`` for no values)."""
    if not values:
        return None
    ordered = sorted(values)
    q1, q2, q3 = statistics.quantiles(ordered, n=4, method="inclusive") if len(ordered) > 1 else ordered * 3
    return {name: round(v, 4) for name, v in zip(("min", "q1", "median", "q3", "max"),
                                                  (ordered[0], q1, q2, q3, ordered[-1]), strict=True)}


def auc(positives: Sequence[float], negatives: Sequence[float]) -> float | None:
    """The chance that a positive outscores a negative (ties count half)."""
    if not positives or not negatives:
        return None
    wins = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in positives for n in negatives)
    return round(wins / (len(positives) * len(negatives)), 4)


def _recall(pairs: Sequence[Outcome], floor: bool, k: int) -> float:
    ranks = [o.rank_floor if floor else o.rank_all for o in pairs]
    return round(sum(1 for r in ranks if r is not None and r <= k) / len(pairs), 4) if pairs else 0.0


def summarise(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The figures of one group of outcomes (one store, one split, one kind or all)."""
    pairs = [o for o in outcomes if not o.offtopic]
    off = [o for o in outcomes if o.offtopic]
    found = [o for o in pairs if o.true_score is not None]
    return {
        "pairs": len(pairs),
        "recall": {f"R@{k}_{name}": _recall(pairs, floor, k) for name, floor in (("floor", True), ("no_floor", False))
                   for k in (1, K)},
        "offtopic": len(off),
        "offtopic_answered_floor": sum(1 for o in off if o.answered),
        "offtopic_answered_by_set_text_floor": sum(1 for o in off if o.answered_by_set),
        "true_item_missing_top50": len(pairs) - len(found),
        "true_items_with_keyword_evidence": sum(1 for o in found if (o.true_keyword or 0.0) > 0),
        "score": {"true_item": spread([o.true_score for o in found if o.true_score is not None]),
                  "pair_top": spread([o.top_score for o in pairs]),
                  "offtopic_top": spread([o.top_score for o in off])},
        "cosine": {"true_item": spread([o.true_cosine for o in found if o.true_cosine is not None]),
                   "offtopic_top": spread([o.top_cosine for o in off])},
        "auc_true_vs_offtopic": auc([o.true_score or 0.0 for o in pairs], [o.top_score for o in off]),
        "auc_cosine": auc([o.true_cosine or 0.0 for o in pairs], [o.top_cosine for o in off]),
    }


# --- the floors by use, from the tuning half (issue 24 item 3) ----------------------------------
EXPLICIT_RECALL_COST = 0.0  # recall@5 the explicit floor may cost on the tuning half (recall first)
INJECT_ANSWERED = 1 / 20  # off-topic queries the injection floor may answer on the tuning half
FLOOR_STEP = 0.01


def at_floor(outcomes: Sequence[Outcome], floor: float) -> dict[str, float]:
    """recall@1/@5 of the pairs and the share of off-topic queries answered, had the floor been
    ``floor`` (from the searches without floor: a true item in the top 5 stays there when the
    floor keeps it, since the hits above it score higher)."""
    pairs = [o for o in outcomes if not o.offtopic]
    off = [o for o in outcomes if o.offtopic]

    def kept(o: Outcome, k: int) -> bool:
        return o.rank_all is not None and o.rank_all <= k and (o.true_score or 0.0) >= floor

    return {"R@1": round(sum(kept(o, 1) for o in pairs) / len(pairs), 4),
            "R@5": round(sum(kept(o, K) for o in pairs) / len(pairs), 4),
            "offtopic_answered": round(sum(o.top_score >= floor for o in off) / len(off), 4)}


def of_split(outcomes: Sequence[Outcome], split: str) -> list[Outcome]:
    """The outcomes of ``split`` in the facts and journal stores (not the texts alone)."""
    return [o for o in outcomes if o.split == split and o.store in STORES]


def recommend(outcomes: Sequence[Outcome]) -> dict[str, Any]:
    """The two floors (multiples of ``FLOOR_STEP``) from the tuning half of the facts and journal
    stores, and the figures both halves give at them: explicit, the highest floor costing at most
    ``EXPLICIT_RECALL_COST`` of recall@5 (recall first: none); inject, the lowest floor answering
    at most ``INJECT_ANSWERED`` of the off-topic queries (precision first)."""
    tune = of_split(outcomes, "tune")
    steps = [round(n * FLOOR_STEP, 3) for n in range(round(1 / FLOOR_STEP) + 1)]
    full = at_floor(tune, 0.0)["R@5"]
    explicit = max(f for f in steps if at_floor(tune, f)["R@5"] >= full - EXPLICIT_RECALL_COST)
    inject = next((f for f in steps if at_floor(tune, f)["offtopic_answered"] <= INJECT_ANSWERED), 1.0)
    figures = {f"{name}/{split}": at_floor(of_split(outcomes, split), floor)
               for name, floor in (("explicit", explicit), ("inject", inject)) for split in SPLITS}
    return {"explicit": explicit, "inject": inject, "figures": figures}


def report(outcomes: Sequence[Outcome], info: dict[str, Any], manifest: dict[str, Any]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for store in (*STORES, BARE):
        for split in SPLITS:
            group = [o for o in outcomes if o.store == store and o.split == split]
            if not group:
                continue
            figures = summarise(group)
            figures["by_kind"] = {kind: {key: value for key, value in summarise(
                [o for o in group if o.kind == kind]).items()
                if key in ("recall", "offtopic_answered_floor", "offtopic_answered_by_set_text_floor")}
                for kind in KINDS}
            results[f"{store}/{split}"] = figures
    return {"embedder": info["model"], "floor": info["floor"], "k": K, "store": manifest,
            "search_seconds": info["search_seconds"], "results": results,
            "floors_in_force": info["floors"],
            "at_floors_in_force": {use: {split: at_floor(of_split(outcomes, split), floor) for split in SPLITS}
                                   for use, floor in info["floors"].items()},
            "recommended_floors": recommend(outcomes), "outcomes": [asdict(o) for o in outcomes]}


def print_report(result: dict[str, Any]) -> None:
    store = result["store"]
    print(f"embedder {result['embedder']}, floor in force {result['floor']}; {store['distractor_turns']} LoCoMo"
          f" turns ({', '.join(store['conversations'])}) beside the texts; searches {result['search_seconds']} s")
    print("store/split      pairs  R@1 floor  R@5 floor  R@1 none  R@5 none  off-topic answered (by a text)  AUC")
    for name, r in result["results"].items():
        rec = r["recall"]
        print(f"{name:<16} {r['pairs']:>5}  {rec['R@1_floor']:>9.3f}  {rec['R@5_floor']:>9.3f}  "
              f"{rec['R@1_no_floor']:>8.3f}  {rec['R@5_no_floor']:>8.3f}  "
              f"{r['offtopic_answered_floor']:>8}/{r['offtopic']} ({r['offtopic_answered_by_set_text_floor']})"
              f"         {r['auc_true_vs_offtopic']}")
    print("scores (min q1 median q3 max): true item | off-topic best hit | cosines: true item | off-topic best hit")
    for name, r in result["results"].items():
        cells = [r["score"]["true_item"], r["score"]["offtopic_top"], r["cosine"]["true_item"],
                 r["cosine"]["offtopic_top"]]
        text = " | ".join(" ".join(f"{v:.3f}" for v in c.values()) if c else "-" for c in cells)
        print(f"{name:<16} {text}  (true item not in top 50: {r['true_item_missing_top50']};"
              f" cosine AUC {r['auc_cosine']})")
    for use, floor in result["floors_in_force"].items():
        cells = "; ".join(f"{split} R@1 {f['R@1']:.3f} R@5 {f['R@5']:.3f} off-topic answered "
                          f"{f['offtopic_answered']:.3f}" for split, f in result["at_floors_in_force"][use].items())
        print(f"{use} floor in force {floor:.3f} (facts and journal): {cells}")
    rec = result["recommended_floors"]
    print(f"recommended from the tuning half: explicit {rec['explicit']:.3f}, inject {rec['inject']:.3f}")
    for name, f in rec["figures"].items():
        print(f"  at {name}: R@1 {f['R@1']:.3f} R@5 {f['R@5']:.3f} off-topic answered {f['offtopic_answered']:.3f}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", default=str(HERE.parents[1] / "shared/data/locomo_dev.json"),
                        help="LoCoMo dev (read at run time, never copied)")
    parser.add_argument("--json", action="store_true", help="print one JSON object (with every query's outcome)")
    parser.add_argument("--embedder", default="local", help="local (default), hash, or any embedder name")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="any other setting")
    parser.add_argument("--store", help="keep the built store here (default: under the temporary directory)")
    parser.add_argument("--rebuild", action="store_true", help="build the store again even if it is there")
    parser.add_argument("--bare", action="store_true",
                        help="also search a scope holding the texts as facts and nothing else (no LoCoMo turns)")
    args = parser.parse_args(argv)
    pairs, offtopic = load_pairs(), load_offtopic()
    check_data(pairs, offtopic)
    conversations = distractor_conversations(json.loads(Path(args.data).read_text(encoding="utf-8")))
    root, embedder, manifest = prepare(args, pairs, conversations)
    outcomes, info = measure(root, embedder, args, pairs, offtopic)
    result = report(outcomes, info, manifest)
    if args.json:
        print(json.dumps(result))
    else:
        print_report(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
