"""The score floor: hits scoring below it are not returned (R44, "nothing relevant").

``SearchHit.score`` is evidence, comparable across queries (see :mod:`tiermem.search.evidence`), so
one threshold per embedder model separates "relevant" from "nothing relevant". Each known model
has a default measured with ``bench/offtopic.py``; an unknown model gets
:data:`UNKNOWN_MODEL_MIN_SCORE`. ``search_min_score`` (``TIERMEM_SEARCH_MIN_SCORE``) and the
``min_score=`` argument override it.
"""

from __future__ import annotations

import math
from typing import Any

from tiermem.errors import InvalidInput

#: The floor of a model nobody measured: low enough never to hide a real hit (a hit goes only
#: when its keyword coverage and its cosine average below 0.1, i.e. no shared terms and a cosine
#: under 0.2; on LoCoMo with the local model this floor costs no recall at all), so it rejects
#: little. Set ``search_min_score`` after measuring your model with ``bench/offtopic.py``.
UNKNOWN_MODEL_MIN_SCORE = 0.10

#: Defaults by embedder ``model_id`` prefix, measured with ``bench/offtopic.py`` (figures in
#: bench/README.md): the lowest multiple of 0.01 that rejects all 25 tuning queries of
#: ``bench/offtopic_queries.txt`` over the 5 LoCoMo dev conversations, unless that costs more
#: than 0.005 of LoCoMo R@10 - then the highest floor within that cost (recall first).
MODEL_MIN_SCORES: dict[str, float] = {
    # the local all-MiniLM-L6-v2: off-topic 25/25 tuning and 24/25 held-out queries rejected;
    # LoCoMo R@10 0.7929 with the floor, 0.7936 without
    "all-MiniLM-L6-v2": 0.22,
    # its int8 graph (the default for new stores, issue 16): the same floor measured again - off-topic
    # 25/25 tuning and 24/25 held-out rejected at 0.22; LoCoMo R@10 0.8044 with the floor
    "all-MiniLM-L6-v2-int8": 0.22,
    # the word-hashing test embedder (measured at its default dim 256): its cosine counts shared
    # words, stop words included, so it separates worse; rejecting all tuning queries (0.30)
    # would cost 0.02 R@10, so recall decides: 22/25 tuning and 19/25 held-out rejected
    "hash-": 0.24,
    # OpenAI text-embedding-3-small/-large: not measured (no network where the defaults were
    # set), so the conservative default
    "openai:text-embedding-3-small": UNKNOWN_MODEL_MIN_SCORE,
    "openai:text-embedding-3-large": UNKNOWN_MODEL_MIN_SCORE,
}


def default_min_score(model_id: str) -> float:
    """The measured floor of ``model_id`` (longest matching prefix), else the conservative default."""
    best = ""
    for prefix in MODEL_MIN_SCORES:
        if model_id.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return MODEL_MIN_SCORES[best] if best else UNKNOWN_MODEL_MIN_SCORE


def check_min_score(value: Any) -> float | None:
    """``None`` (use the default) or a number in [0, 1]; ``InvalidInput`` otherwise."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InvalidInput(f"min_score must be a number in [0, 1], got {type(value).__name__}")
    score = float(value)
    if math.isnan(score) or not 0.0 <= score <= 1.0:
        raise InvalidInput(f"min_score must be within [0, 1], got {value!r}")
    return score
