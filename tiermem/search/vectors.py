"""In-process vector search over one scope: an L2-normalised matrix in numpy (R46).

Small scopes are searched exactly (one matrix-vector product). Large ones use a two-step path:
a binary code per item (the signs of the vector minus the scope's mean, 1 bit a dimension) gives
a Hamming-distance shortlist, which is then re-scored with the held vectors. Above
``float_max`` items the held vectors are int8 (one scale a row, a quarter of the memory), and
the best of those are re-scored once more with the exact float32 vectors that ``fetch_exact``
reads from SQLite. Items are added, replaced and removed in place (swap with the last row), so a
write is visible to the next search without a reload.

An item may also hold *part* vectors (one per sentence of a longer record, see
:mod:`tiermem.search.parts`), kept in float32 and searched exactly; an item's score is then the
best of its own and its parts' similarities (max-sim).

Not thread-safe: the search engine holds a lock around every call.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tiermem.types import CATEGORIES, TIERS

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Floats = npt.NDArray[np.float32]
    Ints = npt.NDArray[np.int64]

TIER_CODE = {tier: code for code, tier in enumerate(TIERS)}
CATEGORY_CODE = {category: code for code, category in enumerate(CATEGORIES)}
NO_CATEGORY = -1
NO_TIME = -(2**62)

ExactFetch = Callable[["Ints"], "dict[int, Floats]"]


@dataclass(frozen=True)
class VectorFilter:
    """Filters in the index's terms: tier codes, a category code, time windows.

    ``fact_from``/``fact_to``: microseconds since the epoch, half-open; ``day_from``/``day_to``:
    days since the epoch, inclusive. With any window set, items of other tiers are excluded.
    """

    tiers: tuple[int, ...] | None = None
    category: int | None = None
    fact_from: int | None = None
    fact_to: int | None = None
    day_from: int | None = None
    day_to: int | None = None

    @property
    def has_window(self) -> bool:
        return any(v is not None for v in (self.fact_from, self.fact_to, self.day_from, self.day_to))


class VectorIndex:
    """The vectors of one scope with their ids and the metadata the filters need."""

    def __init__(self, dim: int, *, exact_max: int = 50_000, float_max: int = 250_000,
                 shortlist: int = 2000, fetch_exact: ExactFetch | None = None, max_parts: int = 100_000) -> None:
        import numpy as np

        self.dim = dim
        self.exact_max = exact_max
        self.float_max = float_max
        self.shortlist = shortlist
        self.fetch_exact = fetch_exact
        self.n = 0
        self._row: dict[int, int] = {}
        self._ids = np.zeros(0, np.int64)
        self._tiers = np.zeros(0, np.int8)
        self._cats = np.zeros(0, np.int8)
        self._when = np.zeros(0, np.int64)
        self._f32: Floats | None = np.zeros((0, dim), np.float32)
        self._q8: npt.NDArray[np.int8] | None = None
        self._scale: Floats | None = None
        self._bits: npt.NDArray[np.uint64] | None = None
        self._center: Floats | None = None
        self._words = (dim + 63) // 64
        self.parts = 0  # part vectors held
        self.max_parts = max_parts  # past this many the index drops them all (``parts_dropped``)
        self.parts_dropped = False
        self._part_row = np.zeros(0, np.int64)  # the row of each part's item
        self._part_f32: Floats = np.zeros((0, dim), np.float32)

    def __len__(self) -> int:
        return self.n

    def __contains__(self, doc_id: int) -> bool:
        return doc_id in self._row

    @property
    def mode(self) -> str:
        """``exact`` (float32, full scan), ``shortlist`` (binary codes, float32) or ``int8``."""
        if self._bits is None:
            return "exact"
        return "shortlist" if self._f32 is not None else "int8"

    def memory_bytes(self) -> int:
        arrays = (self._ids, self._tiers, self._cats, self._when, self._f32, self._q8, self._scale, self._bits,
                  self._part_row, self._part_f32)
        return sum(a.nbytes for a in arrays if a is not None)

    # --- persistence (:mod:`tiermem.search.vector_file`) ---------------------------------
    def arrays(self) -> dict[str, npt.NDArray[Any]]:
        """The held state trimmed to what is in use: what an index file stores. Views, not copies:
        read them before the index changes again."""
        n, p = self.n, self.parts
        out: dict[str, npt.NDArray[Any]] = {"ids": self._ids[:n], "tiers": self._tiers[:n], "cats": self._cats[:n],
                                            "when": self._when[:n]}
        if self._f32 is not None:
            out["f32"] = self._f32[:n]
        else:
            assert self._q8 is not None and self._scale is not None
            out["q8"], out["scale"] = self._q8[:n], self._scale[:n]
        if self._bits is not None:
            assert self._center is not None
            out["bits"], out["center"] = self._bits[:, :n], self._center
        if p:
            out["part_row"], out["part_f32"] = self._part_row[:p], self._part_f32[:p]
        return out

    @classmethod
    def from_arrays(cls, dim: int, arrays: dict[str, npt.NDArray[Any]], parts_dropped: bool = False,
                    **options: Any) -> VectorIndex:
        """An index over ``arrays`` (as :meth:`arrays` gave them; typically read-only or
        copy-on-write views of a mapped file: the index copies them when it grows).
        ``ValueError`` when they do not fit together."""
        import numpy as np

        index = cls(dim, **options)
        ids = arrays["ids"]
        n = len(ids)
        held = arrays.get("f32"), arrays.get("q8"), arrays.get("scale")
        shapes = {"tiers": (n,), "cats": (n,), "when": (n,), "f32": (n, dim), "q8": (n, dim), "scale": (n,),
                  "bits": (index._words, n), "center": (dim,)}
        if any(name in arrays and arrays[name].shape != shape for name, shape in shapes.items()):
            raise ValueError("the arrays do not fit together")
        if (held[0] is None) == (held[1] is None) or (held[1] is None) != (held[2] is None):
            raise ValueError("an index holds either float32 or int8 vectors")
        if ("bits" in arrays) != ("center" in arrays) or (held[0] is None and "bits" not in arrays):
            raise ValueError("binary codes come with their center")
        part_row = arrays.get("part_row", np.zeros(0, np.int64))
        part_f32 = arrays.get("part_f32", np.zeros((0, dim), np.float32))
        if part_f32.shape != (len(part_row), dim) or (len(part_row) and not 0 <= int(part_row.min()) <= int(
                part_row.max()) < n):
            raise ValueError("part vectors do not fit the items")
        index._row = dict(zip(ids.tolist(), range(n), strict=True))
        if len(index._row) != n:
            raise ValueError("an item is held twice")
        index._ids, index._tiers, index._cats, index._when = ids, arrays["tiers"], arrays["cats"], arrays["when"]
        index._f32, index._q8, index._scale = held
        index._bits, index._center = arrays.get("bits"), arrays.get("center")
        index._part_row, index._part_f32 = part_row, part_f32
        index.n, index.parts, index.parts_dropped = n, len(part_row), parts_dropped
        return index

    # --- writes ----------------------------------------------------------------------------
    def add(self, ids: Ints, vectors: Floats, tiers: npt.NDArray[np.int8], categories: npt.NDArray[np.int8],
            when: Ints) -> None:
        """Add (or replace) items; ``vectors`` must be L2-normalised float32 ``(m, dim)``."""
        import numpy as np

        if len(ids) == 0:
            return
        if vectors.shape != (len(ids), self.dim):
            raise ValueError(f"vectors of shape {vectors.shape} do not fit an index of dim {self.dim}")
        self.remove(int(i) for i in ids if int(i) in self._row)
        m = len(ids)
        self._reserve(self.n + m)
        rows = slice(self.n, self.n + m)
        self._ids[rows], self._tiers[rows], self._cats[rows], self._when[rows] = ids, tiers, categories, when
        self._write_vectors(rows, np.ascontiguousarray(vectors, dtype=np.float32))
        for offset, doc_id in enumerate(ids.tolist()):
            self._row[doc_id] = self.n + offset
        self.n += m
        self._adapt()

    def add_parts(self, ids: Ints, vectors: Floats) -> None:
        """Add part vectors (L2-normalised float32 ``(m, dim)``) of items already held; parts of
        unknown items are ignored. An item's parts go when the item is removed or replaced."""
        import numpy as np

        if vectors.shape != (len(ids), self.dim):
            raise ValueError(f"vectors of shape {vectors.shape} do not fit an index of dim {self.dim}")
        known = [k for k, doc_id in enumerate(ids.tolist()) if doc_id in self._row]
        if not known or self.parts_dropped:
            return
        if self.parts + len(known) > self.max_parts:
            self.parts_dropped = True
            self.parts = 0
            self._part_row, self._part_f32 = np.zeros(0, np.int64), np.zeros((0, self.dim), np.float32)
            return
        rows = np.fromiter((self._row[int(ids[k])] for k in known), np.int64, len(known))
        end = self.parts + len(known)
        if end > len(self._part_row):
            size = max(end, int(len(self._part_row) * 1.5), 1024)
            self._part_row = np.concatenate([self._part_row[:self.parts], np.zeros(size - self.parts, np.int64)])
            grown = np.zeros((size, self.dim), np.float32)
            grown[:self.parts] = self._part_f32[:self.parts]
            self._part_f32 = grown
        self._part_row[self.parts:end] = rows
        self._part_f32[self.parts:end] = vectors[known]
        self.parts = end

    def clear_parts(self) -> None:
        self.parts = 0

    def remove(self, ids: Iterable[int]) -> None:
        """Remove items (unknown ids are ignored): the last row moves into each hole."""
        for doc_id in ids:
            row = self._row.pop(doc_id, None)
            if row is None:
                continue
            self._drop_parts(row)
            last = self.n - 1
            if row != last:
                self._move(last, row)
                self._row[int(self._ids[row])] = row
            self.n = last

    def _drop_parts(self, row: int) -> None:
        if not self.parts:
            return
        keep = self._part_row[:self.parts] != row
        kept = int(keep.sum())
        if kept < self.parts:
            self._part_row[:kept] = self._part_row[:self.parts][keep]
            self._part_f32[:kept] = self._part_f32[:self.parts][keep]
            self.parts = kept

    def _move(self, src: int, dst: int) -> None:
        for array in (self._ids, self._tiers, self._cats, self._when, self._f32, self._q8, self._scale):
            if array is not None:
                array[dst] = array[src]
        if self._bits is not None:
            self._bits[:, dst] = self._bits[:, src]
        if self.parts:
            moved = self._part_row[:self.parts]
            moved[moved == src] = dst

    def reserve(self, size: int) -> None:
        """Make room for ``size`` items at once (a load that knows its size grows only once)."""
        self._reserve(size)

    def _reserve(self, size: int) -> None:
        import numpy as np

        capacity = len(self._ids)
        if size <= capacity:
            return
        new = max(size, int(capacity * 1.5), 1024)

        def grow(array: npt.NDArray[np.generic] | None, axis: int = 0) -> npt.NDArray[np.generic] | None:
            if array is None:
                return None
            shape = list(array.shape)
            shape[axis] = new
            out = np.zeros(shape, array.dtype)
            index = [slice(None)] * array.ndim
            index[axis] = slice(0, self.n)
            out[tuple(index)] = array[tuple(index)]
            return out

        self._ids, self._tiers, self._cats, self._when = (grow(a) for a in (  # type: ignore[assignment]
            self._ids, self._tiers, self._cats, self._when))
        self._f32, self._q8, self._scale = grow(self._f32), grow(self._q8), grow(self._scale)  # type: ignore[assignment]
        self._bits = grow(self._bits, axis=1)  # type: ignore[assignment]

    def _write_vectors(self, rows: slice, vectors: Floats) -> None:
        if self._f32 is not None:
            self._f32[rows] = vectors
        else:
            assert self._q8 is not None and self._scale is not None
            self._q8[rows], self._scale[rows] = _quantise(vectors)
        if self._bits is not None:
            self._bits[:, rows] = self._codes(vectors)

    def _adapt(self) -> None:
        """Switch to int8 above ``float_max`` and build binary codes above ``exact_max``."""
        import numpy as np

        if self._f32 is not None and self.n > self.float_max:
            self._q8, self._scale = (np.zeros((len(self._ids), self.dim), np.int8),
                                     np.zeros(len(self._ids), np.float32))
            for start in range(0, self.n, 65536):
                part = slice(start, min(self.n, start + 65536))
                self._q8[part], self._scale[part] = _quantise(self._f32[part])
            self._f32 = None
        if self._bits is None and self.n > self.exact_max:
            self._center = self._mean()
            self._bits = np.zeros((self._words, len(self._ids)), np.uint64)
            for start in range(0, self.n, 65536):
                part = slice(start, min(self.n, start + 65536))
                self._bits[:, part] = self._codes(self._held(part))

    def _mean(self) -> Floats:
        import numpy as np

        total = np.zeros(self.dim, np.float64)
        for start in range(0, self.n, 65536):
            total += self._held(slice(start, min(self.n, start + 65536))).sum(axis=0, dtype=np.float64)
        return (total / max(self.n, 1)).astype(np.float32)

    def _held(self, rows: slice | Ints) -> Floats:
        """The held vectors of ``rows`` as float32 (dequantised in int8 mode)."""
        if self._f32 is not None:
            return self._f32[rows]
        assert self._q8 is not None and self._scale is not None
        return self._q8[rows].astype("float32") * self._scale[rows, None]

    def _codes(self, vectors: Floats) -> npt.NDArray[np.uint64]:
        """Binary codes ``(words, m)``: bit i set where vector[i] > center[i]."""
        import numpy as np

        assert self._center is not None
        bits = vectors > self._center
        if bits.shape[1] % 64:
            bits = np.concatenate([bits, np.zeros((len(bits), 64 - bits.shape[1] % 64), bool)], axis=1)
        packed = np.packbits(bits, axis=1).view(np.uint64)
        return np.ascontiguousarray(packed.T)

    # --- search ----------------------------------------------------------------------------
    def search(self, query: Floats, top: int, flt: VectorFilter | None = None) -> list[tuple[int, float]]:
        """The ``top`` most similar items ``(id, cosine)``, best first."""
        import numpy as np

        if self.n == 0 or top <= 0:
            return []
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dim)
        mask = self._mask(flt) if flt is not None else None
        found = self._search_items(q, top, mask)
        return self._with_parts(q, top, mask, found) if self.parts else found

    def similarities(self, query: Floats, ids: Iterable[int], blended: Iterable[int] = ()) -> dict[int, float]:
        """The cosine of each held item of ``ids`` (its best part's, if higher); unknown ids are left
        out. For the tiers in ``blended`` (whose own vector blends in a neighbour's text) an item
        with parts is measured by its parts alone. In int8 mode the held vectors are dequantised,
        so the figures are approximate."""
        import numpy as np

        known = [(doc_id, self._row[doc_id]) for doc_id in dict.fromkeys(ids) if doc_id in self._row]
        if not known:
            return {}
        q = np.ascontiguousarray(query, dtype=np.float32).reshape(self.dim)
        rows = np.fromiter((row for _, row in known), np.int64, len(known))
        own = self._held(rows) @ q
        best = np.where(np.isin(self._tiers[rows], np.array(list(blended), np.int8)), -np.inf, own)
        parted = np.zeros(len(rows), bool)
        if self.parts:
            part_rows = self._part_row[:self.parts]
            mine = np.flatnonzero(np.isin(part_rows, rows))
            if len(mine):
                order = np.argsort(rows)
                at = order[np.searchsorted(rows[order], part_rows[mine])]
                np.maximum.at(best, at, self._part_f32[mine] @ q)
                parted[at] = True
        best = np.where(parted, best, own)
        return {doc_id: float(best[k]) for k, (doc_id, _) in enumerate(known)}

    def _with_parts(self, q: Floats, top: int, mask: npt.NDArray[np.bool_] | None,
                    found: list[tuple[int, float]]) -> list[tuple[int, float]]:
        """Max-sim: ``found`` merged with the items whose best part vectors score highest."""
        import numpy as np

        part_rows = self._part_row[:self.parts]
        scores = self._part_f32[:self.parts] @ q
        best = _top(scores, top * 4, mask[part_rows] if mask is not None else None)
        merged = dict(found)
        rows = np.unique(part_rows[best])
        own: dict[int, float] = dict(zip(self._ids[rows].tolist(), (self._held(rows) @ q).tolist(), strict=True))
        for i in best.tolist():
            doc_id = int(self._ids[part_rows[i]])
            merged[doc_id] = max(merged.get(doc_id, own[doc_id]), float(scores[i]))
        return sorted(merged.items(), key=lambda p: (-p[1], p[0]))[:top]

    def _search_items(self, q: Floats, top: int, mask: npt.NDArray[np.bool_] | None) -> list[tuple[int, float]]:
        if self._bits is None:
            scores = self._held(slice(0, self.n)) @ q
            rows = _top(scores, top, mask)
            return [(int(self._ids[r]), float(scores[r])) for r in rows]
        rows = self._shortlist(q, max(self.shortlist, top * 20), mask)
        scores = self._held(rows) @ q
        if self._f32 is None and self.fetch_exact is not None:
            best = rows[_top(scores, max(4 * top, 50), None)]
            exact = self.fetch_exact(self._ids[best])
            pairs = [(int(self._ids[r]), float(exact[int(self._ids[r])] @ q)) for r in best
                     if int(self._ids[r]) in exact]
            return sorted(pairs, key=lambda p: -p[1])[:top]
        order = _top(scores, top, None)
        return [(int(self._ids[rows[i]]), float(scores[i])) for i in order]

    def _shortlist(self, q: Floats, size: int, mask: npt.NDArray[np.bool_] | None) -> Ints:
        """Rows of the ``size`` smallest Hamming distances to ``q``'s code (fewer if masked)."""
        import numpy as np

        assert self._bits is not None
        code = self._codes(q.reshape(1, -1))[:, 0]
        dist = np.zeros(self.n, np.uint16)
        for word in range(self._words):
            np.add(dist, _popcount(self._bits[word, :self.n] ^ code[word]), out=dist)
        if mask is not None:
            dist[~mask] = np.iinfo(np.uint16).max
        counts = np.bincount(dist, minlength=self._words * 64 + 1)[: self._words * 64 + 1]
        cumulative = np.cumsum(counts)
        size = min(size, int(cumulative[-1]))
        if size <= 0:
            return np.zeros(0, np.int64)
        cut = int(np.searchsorted(cumulative, size))
        below = np.flatnonzero(dist < cut)
        at = np.flatnonzero(dist == cut)[: size - len(below)]
        return np.concatenate([below, at]).astype(np.int64)

    def _mask(self, flt: VectorFilter) -> npt.NDArray[np.bool_]:
        import numpy as np

        n = self.n
        tiers, cats, when = self._tiers[:n], self._cats[:n], self._when[:n]
        mask = np.ones(n, bool)
        if flt.tiers is not None:
            mask &= np.isin(tiers, np.array(flt.tiers, np.int8))
        if flt.category is not None:
            mask &= (tiers == TIER_CODE["fact"]) & (cats == flt.category)
        if flt.has_window:
            fact = tiers == TIER_CODE["fact"]
            day = tiers == TIER_CODE["daily"]
            if flt.fact_from is not None:
                fact &= when >= flt.fact_from
            if flt.fact_to is not None:
                fact &= when < flt.fact_to
            if flt.day_from is not None:
                day &= when >= flt.day_from
            if flt.day_to is not None:
                day &= when <= flt.day_to
            mask &= fact | day
        return mask

    def vectors(self, ids: Iterable[int]) -> dict[int, Floats]:
        """The held vectors of ``ids`` (dequantised in int8 mode) for MMR."""
        import numpy as np

        known = [(i, self._row[i]) for i in ids if i in self._row]
        if not known:
            return {}
        held = self._held(np.array([r for _, r in known], np.int64))
        return {doc_id: held[k] for k, (doc_id, _) in enumerate(known)}


def _quantise(vectors: Floats) -> tuple[npt.NDArray[np.int8], Floats]:
    import numpy as np

    scale = np.abs(vectors).max(axis=1) / 127.0
    scale[scale == 0] = 1.0
    q8 = np.clip(np.rint(vectors / scale[:, None]), -127, 127).astype(np.int8)
    return q8, scale.astype(np.float32)


def _top(scores: Floats, top: int, mask: npt.NDArray[np.bool_] | None) -> Ints:
    """Indices of the ``top`` largest scores (masked-out ones never), best first."""
    import numpy as np

    if mask is not None:
        scores = np.where(mask, scores, -np.inf)
        top = min(top, int(mask.sum()))
    top = min(top, len(scores))
    if top <= 0:
        return np.zeros(0, np.int64)
    part = np.argpartition(-scores, top - 1)[:top] if top < len(scores) else np.arange(len(scores))
    return part[np.argsort(-scores[part], kind="stable")].astype(np.int64)


def _popcount(words: npt.NDArray[np.uint64]) -> npt.NDArray[np.uint8]:
    import numpy as np

    if hasattr(np, "bitwise_count"):  # numpy >= 2.0
        counts: npt.NDArray[np.uint8] = np.asarray(np.bitwise_count(words), np.uint8)
        return counts
    table = np.array([bin(i).count("1") for i in range(256)], np.uint8)  # pragma: no cover
    fallback: npt.NDArray[np.uint8] = table[words.view(np.uint8)].reshape(-1, 8).sum(axis=1, dtype=np.uint8)
    return fallback  # pragma: no cover
