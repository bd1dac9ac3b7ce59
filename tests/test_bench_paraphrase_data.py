"""The data of ``bench/paraphrase.py`` (issue 24) is fit to measure on: enough pairs and off-topic
queries, kinds and splits balanced, no query sharing a content word with its stored text, no
duplicates, no off-topic query that is one of the pairs. No embedder: it reads the files only."""

from __future__ import annotations

import importlib.util
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_paraphrase", BENCH / "paraphrase.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


bench = _load()
PAIRS = bench.load_pairs()
OFFTOPIC = bench.load_offtopic()


def _key(text: str) -> str:
    return " ".join(text.casefold().split())


def test_pairs_are_enough_and_balanced_by_kind_and_split() -> None:
    assert len(PAIRS) >= 160
    counts = Counter((p.kind, p.split) for p in PAIRS)
    assert set(counts) == {(k, s) for k in ("personal", "project") for s in ("tune", "held")}
    assert len(set(counts.values())) == 1, counts
    for kind in ("personal", "project"):
        of_kind = [p for p in PAIRS if p.kind == kind]
        assert [p.split for p in of_kind] == [("tune", "held")[n % 2] for n in range(len(of_kind))]


def test_no_duplicate_ids_texts_or_queries() -> None:
    for values in ([p.id for p in PAIRS], [_key(p.text) for p in PAIRS],
                   [_key(q) for q in [*(p.query for p in PAIRS), *(o.query for o in OFFTOPIC)]],
                   [o.id for o in OFFTOPIC]):
        assert [v for v, n in Counter(values).items() if n > 1] == []


def test_no_query_shares_a_content_word_with_its_text() -> None:
    shared = {p.id: why for p in PAIRS if (why := bench.overlap(p.text, p.query))}
    assert shared == {}


@pytest.mark.parametrize(("text", "query", "why"), [
    ("Run the test suite with make check.", "how do I execute the tests?", "stem 'test'~'test'"),
    ("Prefers dark mode in every editor.", "what is my preference for the IDE?", "porter 'prefer'"),
    ("Prefers dark mode in every editor.", "which settings do I edit?", "stem 'edit'~'editor'"),
    ("Inject the clock; never call datetime.now().", "how do I get the time?", "substring 'time'"),
])
def test_the_overlap_check_finds_shared_words(text: str, query: str, why: str) -> None:
    assert why in bench.overlap(text, query)


def test_offtopic_queries_are_enough_balanced_and_none_is_a_pair() -> None:
    assert len(OFFTOPIC) >= 110
    counts = Counter((o.kind, o.split) for o in OFFTOPIC)
    assert len(counts) == 4 and len(set(counts.values())) == 1, counts
    pair_texts = {_key(p.text) for p in PAIRS} | {_key(p.query) for p in PAIRS}
    assert [o.query for o in OFFTOPIC if _key(o.query) in pair_texts] == []


def test_some_offtopic_queries_share_common_words_with_stored_texts() -> None:
    stems = {bench.light_stem(w) for p in PAIRS for w in bench.content_words(p.text)}
    sharing = [o for o in OFFTOPIC if {bench.light_stem(w) for w in bench.content_words(o.query)} & stems]
    assert len(sharing) >= 20


def test_the_run_stops_loudly_on_bad_data() -> None:
    bench.check_data(PAIRS, OFFTOPIC)  # the committed data passes
    bad = [replace(PAIRS[0], query=PAIRS[0].text), *PAIRS[1:-1]]
    with pytest.raises(SystemExit) as stopped:
        bench.check_data(bad, [*OFFTOPIC, replace(OFFTOPIC[0], id="off-extra", query=PAIRS[5].text)])
    message = str(stopped.value)
    assert f"{PAIRS[0].id}: the query shares content words" in message
    assert "not balanced" in message
    assert "an off-topic query is a stored text" in message
