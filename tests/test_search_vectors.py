"""The in-memory vector index (R46): exact, binary-shortlist and int8 paths; in-place updates; masks."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from tiermem.search.vectors import CATEGORY_CODE, NO_CATEGORY, TIER_CODE, VectorFilter, VectorIndex

DIM = 64


def clustered(n: int, seed: int = 0, dim: int = DIM) -> npt.NDArray[np.float32]:
    """Unit vectors around 40 random centres (real embeddings are clustered, not uniform)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((40, dim)).astype(np.float32)
    data = centres[rng.integers(0, 40, n)] + 0.6 * rng.standard_normal((n, dim)).astype(np.float32)
    return (data / np.linalg.norm(data, axis=1, keepdims=True)).astype(np.float32)


def fill(index: VectorIndex, vectors: npt.NDArray[np.float32], first_id: int = 1, tier: str = "fact") -> None:
    n = len(vectors)
    index.add(np.arange(first_id, first_id + n, dtype=np.int64), vectors, np.full(n, TIER_CODE[tier], np.int8),
              np.full(n, NO_CATEGORY, np.int8), np.zeros(n, np.int64))


def exact_top(vectors: npt.NDArray[np.float32], q: npt.NDArray[np.float32], k: int) -> list[int]:
    return [int(i) + 1 for i in np.argsort(-(vectors @ q), kind="stable")[:k]]


def test_exact_search_finds_the_nearest() -> None:
    vectors = clustered(500)
    index = VectorIndex(DIM)
    fill(index, vectors)
    assert index.mode == "exact"
    hits = index.search(vectors[42], 5)
    assert hits[0] == (43, pytest.approx(1.0, abs=1e-5))
    assert [doc for doc, _ in hits] == exact_top(vectors, vectors[42], 5)


@pytest.mark.parametrize("float_max", [100_000, 1_000])
def test_large_indexes_use_a_shortlist_with_high_recall(float_max: int) -> None:
    dim = 256
    vectors = clustered(6000, seed=1, dim=dim)
    exact = {int(i) + 1: vectors[i] for i in range(len(vectors))}
    fetched: list[int] = []

    def fetch(ids: npt.NDArray[np.int64]) -> dict[int, npt.NDArray[np.float32]]:
        fetched.extend(int(i) for i in ids)
        return {int(i): exact[int(i)] for i in ids}

    index = VectorIndex(dim, exact_max=1000, float_max=float_max, shortlist=600, fetch_exact=fetch)
    fill(index, vectors)
    assert index.mode == ("shortlist" if float_max > 6000 else "int8")
    rng = np.random.default_rng(7)
    recall = []
    for row in rng.integers(0, len(vectors), 40):
        q = vectors[row] + 0.05 * rng.standard_normal(dim).astype(np.float32)
        q /= np.linalg.norm(q)
        truth = exact_top(vectors, q, 10)
        got = index.search(q, 10)
        recall.append(len({doc for doc, _ in got} & set(truth)) / 10)
        for doc, score in got:  # scores are exact cosines in both modes
            assert score == pytest.approx(float(exact[doc] @ q), abs=1e-5)
    assert np.mean(recall) >= 0.95
    assert bool(fetched) == (index.mode == "int8")


def test_add_replace_remove_in_place() -> None:
    vectors = clustered(300, seed=2)
    index = VectorIndex(DIM, exact_max=100)  # shortlist mode: codes must follow the moves too
    fill(index, vectors)
    assert len(index) == 300 and index.mode == "shortlist"
    index.remove([1, 150, 300, 999])  # 999 unknown: ignored
    assert len(index) == 297 and 1 not in index and 2 in index
    assert all(doc not in (1, 150, 300) for doc, _ in index.search(vectors[0], 297))
    assert index.search(vectors[1], 1)[0][0] == 2  # a moved row still answers for its id
    replacement = vectors[10:11]
    index.add(np.array([2], np.int64), replacement, np.zeros(1, np.int8), np.zeros(1, np.int8),
              np.zeros(1, np.int64))  # id 2 now holds vector 10's direction
    assert len(index) == 297
    assert {doc for doc, _ in index.search(vectors[10], 2)} == {2, 11}
    remaining = [doc for doc, _ in index.search(vectors[5], 1000)]
    assert sorted(remaining) == sorted(set(range(1, 301)) - {1, 150, 300})


def test_growth_keeps_every_item() -> None:
    index = VectorIndex(DIM, exact_max=2000, float_max=3000)
    vectors = clustered(5000, seed=3)
    for start in range(0, 5000, 700):
        fill(index, vectors[start:start + 700], first_id=start + 1)
    assert len(index) == 5000 and index.mode == "int8"
    assert index.search(vectors[4321], 1)[0][0] == 4322


def test_filters_mask_tiers_categories_and_time() -> None:
    vectors = clustered(8, seed=4)
    index = VectorIndex(DIM)
    tiers = np.array([TIER_CODE[t] for t in ("fact", "fact", "fact", "daily", "daily", "core", "fact", "daily")],
                     np.int8)
    cats = np.array([CATEGORY_CODE["goal"], CATEGORY_CODE["preference"], CATEGORY_CODE["goal"]] + [NO_CATEGORY] * 3
                    + [CATEGORY_CODE["goal"], NO_CATEGORY], np.int8)
    when = np.array([100, 200, 300, 10, 20, 0, 400, 30], np.int64)  # facts: micros, daily: days
    index.add(np.arange(1, 9, dtype=np.int64), vectors, tiers, cats, when)

    def ids(flt: VectorFilter) -> set[int]:
        return {doc for doc, _ in index.search(vectors[0], 8, flt)}

    assert ids(VectorFilter(tiers=(TIER_CODE["daily"],))) == {4, 5, 8}
    assert ids(VectorFilter(category=CATEGORY_CODE["goal"])) == {1, 3, 7}
    assert ids(VectorFilter(fact_from=200, fact_to=400, day_from=20)) == {2, 3, 5, 8}
    assert ids(VectorFilter(fact_to=150, day_to=15)) == {1, 4}
    assert ids(VectorFilter(tiers=(TIER_CODE["core"],), category=CATEGORY_CODE["goal"])) == set()


def test_wrong_shape_is_rejected() -> None:
    index = VectorIndex(DIM)
    with pytest.raises(ValueError):
        index.add(np.array([1], np.int64), np.zeros((1, DIM + 1), np.float32), np.zeros(1, np.int8),
                  np.zeros(1, np.int8), np.zeros(1, np.int64))


@pytest.mark.parametrize("mapped", [True, False])
@pytest.mark.parametrize("mode", ["exact", "shortlist", "int8"])
def test_a_saved_index_maps_back_to_the_same_answers(mode: str, mapped: bool, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """:mod:`tiermem.search.vector_file`: every mode, part vectors, then changes in place after the
    load (copy-on-write: the file stays as written); mapped, or read as on Windows."""
    from tiermem.search import vector_file
    from tiermem.search.vector_file import FileKey, load, save

    monkeypatch.setattr(vector_file, "MAP_FILES", mapped)

    vectors = clustered(3000, seed=5)
    options = {"exact": {}, "shortlist": {"exact_max": 1000}, "int8": {"exact_max": 1000, "float_max": 2000}}[mode]
    exact = {i + 1: vectors[i] for i in range(len(vectors))}
    fetch = lambda ids: {int(i): exact[int(i)] for i in ids if int(i) in exact}  # noqa: E731
    index = VectorIndex(DIM, fetch_exact=fetch, **options)
    fill(index, vectors)
    index.add_parts(np.array([5, 5, 17], np.int64), clustered(3, seed=6))
    index.remove([40, 41])
    assert index.mode == mode
    key = FileKey("store", "u", "a", "model", DIM, "shape")
    path = tmp_path / "u" / "a.vec"
    def commit(rename: Callable[[], None]) -> bool:
        rename()
        return True

    assert save(path, key, index, 3000, 7, commit)
    written = path.read_bytes()
    loaded = load(path, key, fetch_exact=fetch, **options)
    assert loaded is not None and (loaded.doc_seq, loaded.removed_seq) == (3000, 7)
    again = loaded.index
    assert again.mode == mode and len(again) == len(index) and again.parts == 3
    for q in (vectors[4], vectors[1234], clustered(1, seed=8)[0]):
        assert again.search(q, 10) == index.search(q, 10)
        assert again.similarities(q, [5, 17, 40, 99]) == index.similarities(q, [5, 17, 40, 99])
    again.remove([5, 6])
    fill(again, vectors[:2], first_id=5000)
    exact.update({5000: vectors[0], 5001: vectors[1]})
    assert 5 not in again and {doc for doc, _ in again.search(vectors[0], 2)} == {1, 5000}
    assert path.read_bytes() == written
    assert load(path, FileKey("store", "u", "a", "other model", DIM, "shape")) is None


def test_arrays_that_do_not_fit_are_refused() -> None:
    index = VectorIndex(DIM)
    fill(index, clustered(10))
    arrays = dict(index.arrays())
    with pytest.raises(ValueError):
        VectorIndex.from_arrays(DIM, {**arrays, "tiers": arrays["tiers"][:5]})
    with pytest.raises(ValueError):
        VectorIndex.from_arrays(DIM, {**arrays, "ids": np.ones(10, np.int64)})  # an id twice
    with pytest.raises(ValueError):
        VectorIndex.from_arrays(DIM, {k: v for k, v in arrays.items() if k != "f32"})
