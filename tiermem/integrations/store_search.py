"""Scores of store items for a ``query=``: tiermem's evidence score, over the items of one search.

Store items are not in the search index (``search_docs``): they would change every normal search
of the user, and their values must stay outside fact dedup and the cap. So a query search scores
the items of the namespace prefix itself, on the scale of :mod:`tiermem.search.evidence`:

- **keyword coverage**: the IDF-weighted share of the query's terms an item's text holds
  (the word index's stems, Chinese/Japanese/Korean/Thai trigrams and short runs), with the IDF
  counted over the items of this search (plus the evidence module's prior of 1,000 items);
- **vector similarity**: the cosine of the query's embedding with the text's, the text embedded
  once by the Memory's embedder and cached by its hash and the model (the ``embeddings`` table,
  shared with the search index, so equal texts share a vector);
- ``score = (wk * coverage + wv * cosine) / (wk + wv)``, the blend of
  :meth:`~tiermem.search.engine.SearchEngine.score_texts` (:class:`~tiermem.search.evidence.Blend`
  with the ``search_*_weight`` settings); an item with several texts (``index`` paths) counts by
  its best one.

The cost is linear in the items of the prefix: every search reads their texts and cached
vectors. A text is tokenised once per process (cached by hash) and embedded once per model (on
the first search that reads it).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiermem.search import fts
from tiermem.search.engine import SearchEngine, clean_query
from tiermem.search.evidence import QueryTerms, Term, idf
from tiermem.search.indexer import text_hash

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

_CACHE_MAX = 200_000  # texts whose index terms are kept (a few hundred bytes each)
_VECTORS_MAX = 50_000  # vectors kept in memory (75 MB at 384 dimensions)


class ItemScorer:
    """Scores store items for a query (see the module docstring). Keeps the word-index terms of
    the texts it has seen and their vectors, by text hash: tokenising and reading vectors are the
    cost of a search, and texts rarely change."""

    def __init__(self, engine: SearchEngine) -> None:
        self.engine = engine
        self._terms: dict[str, list[str]] = {}
        self._vectors: dict[tuple[str, str], npt.NDArray[np.float32]] = {}
        self._lock = threading.Lock()

    def scores(self, query: str, items: Sequence[Sequence[str]]) -> list[float | None]:
        """The score of each item (given as its search texts) for ``query``; ``None`` for an item
        without texts."""
        text = clean_query(query)
        flat = [(i, t) for i, texts in enumerate(items) for t in texts]
        if not flat:
            return [None for _ in items]
        texts = [t for _, t in flat]
        held = self.index_terms(texts)
        terms = _terms(self.engine, text, texts, held, [i for i, _ in flat], len(items))
        blend = self.engine.blend()  # as engine.score_texts
        cosines = (self.cosines(self.engine.indexer.embed_query(text), texts) if blend.vector_weight > 0
                   else [0.0] * len(texts))
        wanted = set(terms.keys)
        needles = [term.text for term in terms.terms if not term.keys or len(term.text) >= 3]
        best: list[float | None] = [None for _ in items]
        for (index, t), keys, cosine in zip(flat, held, cosines, strict=True):
            coverage = 0.0
            if blend.keyword_weight > 0 and (not wanted.isdisjoint(keys) or any(n in t.casefold() for n in needles)):
                coverage = terms.coverage(t, dict.fromkeys(keys, {"text"}))  # else it holds no term: 0
            score = blend.score(coverage, cosine)
            current = best[index]
            best[index] = score if current is None else max(current, score)
        return best

    def cosines(self, query: npt.NDArray[np.float32], texts: Sequence[str]) -> list[float]:
        """Cosine of each text's vector with the (normalised) query vector; vectors are kept in
        this process too (by model and text hash), so a search reads only new ones."""
        import numpy as np

        model = self.engine.indexer.model
        hashes = [text_hash(t) for t in texts]
        with self._lock:
            held = {h: v for h in hashes if (v := self._vectors.get((model, h))) is not None}
        missing = [(h, t) for h, t in zip(hashes, texts, strict=True) if h not in held]
        if missing:
            blobs = _embedded(self.engine, [h for h, _ in missing], [t for _, t in missing])
            fresh = {h: np.frombuffer(blobs[h], dtype="<f4") for h, _ in missing}
            with self._lock:
                if len(self._vectors) + len(fresh) > _VECTORS_MAX:
                    self._vectors.clear()
                self._vectors.update(((model, h), v) for h, v in fresh.items())
            held.update(fresh)
        matrix = np.stack([held[h] for h in hashes])
        return [float(x) for x in matrix @ np.asarray(query, dtype=np.float32)]

    def index_terms(self, texts: Sequence[str]) -> list[list[str]]:
        """The word index's terms of each text (``SearchIndex.index_terms``), cached."""
        hashes = [text_hash(t) for t in texts]
        with self._lock:
            found = {h: self._terms[h] for h in hashes if h in self._terms}
        missing = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
        if missing:
            fresh = dict(zip(missing, self.engine.docs.index_terms(list(missing.values())), strict=True))
            with self._lock:
                if len(self._terms) + len(fresh) > _CACHE_MAX:
                    self._terms.clear()
                self._terms.update(fresh)
            found.update(fresh)
        return [found[h] for h in hashes]


def _terms(engine: SearchEngine, query: str, texts: Sequence[str], held: Sequence[Sequence[str]],
           owners: Sequence[int], items: int) -> QueryTerms:
    """The query's terms weighted by how many of the searched items hold them (``owners``: the
    item of each text)."""
    parsed = fts.parse(query)
    folded = [t.casefold() for t in texts]
    owners_of: dict[str, set[int]] = {}
    for owner, keys in zip(owners, held, strict=True):
        for key in keys:
            owners_of.setdefault(key, set()).add(owner)

    def holding_text(needle: str) -> int:
        return len({owner for owner, t in zip(owners, folded, strict=True) if needle in t})

    terms: list[Term] = []
    if parsed.words:
        for word, keys in zip(parsed.words, engine.docs.index_terms(list(parsed.words)), strict=True):
            if keys:
                df = max(len(owners_of.get(k, ())) for k in keys)
                terms.append(Term(word, idf(items, df), tuple(keys)))
    terms.extend(Term(g.casefold(), idf(items, holding_text(g.casefold()))) for g in parsed.grams)
    terms.extend(Term(s, idf(items, holding_text(s))) for s in parsed.short)
    return QueryTerms(tuple(terms), engine.settings.search_context_weight)


def _embedded(engine: SearchEngine, hashes: Sequence[str], texts: Sequence[str]) -> dict[str, bytes]:
    """``hash -> float32 blob`` of each text's vector for the engine's model: from the vector
    cache, and the texts not embedded yet embedded now (L2-normalised) and stored there."""
    import numpy as np

    indexer = engine.indexer
    model = indexer.model
    found = indexer.vectors.vectors_by_hash(hashes, model)
    todo = {h: t for h, t in zip(hashes, texts, strict=True) if h not in found}
    if todo:
        embedder = indexer.embedder
        matrix = np.asarray(embedder.embed(list(todo.values())), dtype=np.float32)
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        matrix = (matrix / np.where(norms > 0, norms, 1.0)).astype("<f4")
        blobs = [(h, matrix[i].tobytes()) for i, h in enumerate(todo)]
        indexer.vectors.store(model, embedder.dim, blobs, [])
        found.update(blobs)
    return found
