"""The score floor: hits scoring below it are not returned (R44, "nothing relevant").

``SearchHit.score`` is evidence, comparable across queries (see :mod:`tiermem.search.engine`), so
one threshold per embedder model separates "relevant" from "nothing relevant". Each known model
has a default measured with ``bench/offtopic.py``; an unknown model gets
:data:`UNKNOWN_MODEL_MIN_SCORE`. ``search_min_score`` (``TIERMEM_SEARCH_MIN_SCORE``) and the
``min_score=`` argument override it.
"""

from __future__ import annotations

import math
from typing import Any

from tiermem.errors import InvalidInput

#: Defaults by embedder ``model_id`` prefix (measured, see bench/README.md).
MODEL_MIN_SCORES: dict[str, float] = {}
UNKNOWN_MODEL_MIN_SCORE = 0.0


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
