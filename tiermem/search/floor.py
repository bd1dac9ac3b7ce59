"""The score floors: hits scoring below the floor of their use are not returned (R44, R49a).

``SearchHit.score`` is evidence, comparable across queries (see :mod:`tiermem.search.evidence`), so
one threshold per embedder model separates "relevant" from "nothing relevant". There are two, by
use (R49a):

- ``explicit``: a question someone asked - ``Memory.search``, ``tiermem search``, MCP ``recall``,
  the agent frameworks' recall tools, the viewer's search. It favours recall. Setting
  ``search_min_score`` (``TIERMEM_SEARCH_MIN_SCORE``); ``min_score=`` / ``--min-score`` override
  it for one call.
- ``inject``: text put into a prompt nobody asked for - the ``Relevant notes:`` (and the order of
  facts and Core items) of ``Memory.format_for_injection(query=)``, the coding agents' prompt
  hooks. It favours precision. Setting ``search_inject_min_score``
  (``TIERMEM_SEARCH_INJECT_MIN_SCORE``); unset, the higher of the model's default and
  ``search_min_score`` when that is set (a floor raised before the two existed stays raised).

Each known model has defaults in :data:`MODEL_FLOORS`; an unknown model gets
:data:`UNKNOWN_MODEL_FLOORS`. The LangGraph store's search has no floor.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, NamedTuple

from tiermem.errors import InvalidInput

if TYPE_CHECKING:
    from tiermem.config import Settings

#: The uses a floor is chosen by (:func:`floor_in_force`).
USES = ("explicit", "inject")


class Floors(NamedTuple):
    """The default floors of one embedder model, by use."""

    explicit: float  # search, recall tools: recall first
    inject: float  # automatic injection: precision first, never below ``explicit``


#: The floor of a model nobody measured: low enough never to hide a real hit (a hit goes only
#: when its keyword coverage and its cosine average below 0.1, i.e. no shared terms and a cosine
#: under 0.2; on LoCoMo with the local model this floor costs no recall at all), so it rejects
#: little. Set ``search_min_score`` after measuring your model with ``bench/offtopic.py``.
UNKNOWN_MODEL_MIN_SCORE = 0.10
UNKNOWN_MODEL_FLOORS = Floors(explicit=UNKNOWN_MODEL_MIN_SCORE, inject=UNKNOWN_MODEL_MIN_SCORE)

# ================================================================================================
# THE DEFAULT FLOORS, by embedder ``model_id`` prefix (longest prefix wins): the one place to edit.
# Both uses hold the single floor measured before R49a split it (PLACEHOLDERS until the paraphrase
# benchmark of issue 24 measures each use): measured with ``bench/offtopic.py`` (figures in
# bench/README.md) as the lowest multiple of 0.01 that rejects all 25 tuning queries of
# ``bench/offtopic_queries.txt`` over the 5 LoCoMo dev conversations, unless that costs more than
# 0.005 of LoCoMo R@10 - then the highest floor within that cost (recall first).
# ================================================================================================
MODEL_FLOORS: dict[str, Floors] = {
    # the local all-MiniLM-L6-v2: off-topic 25/25 tuning and 24/25 held-out queries rejected;
    # LoCoMo R@10 0.7929 with the floor, 0.7936 without
    "all-MiniLM-L6-v2": Floors(explicit=0.22, inject=0.22),
    # its int8 graph (the default for new stores, issue 16): the same floor measured again - off-topic
    # 25/25 tuning and 24/25 held-out rejected at 0.22; LoCoMo R@10 0.8044 with the floor
    "all-MiniLM-L6-v2-int8": Floors(explicit=0.22, inject=0.22),
    # the word-hashing test embedder (measured at its default dim 256): its cosine counts shared
    # words, stop words included, so it separates worse; rejecting all tuning queries (0.30)
    # would cost 0.02 R@10, so recall decides: 22/25 tuning and 19/25 held-out rejected
    "hash-": Floors(explicit=0.24, inject=0.24),
    # OpenAI text-embedding-3-small/-large: not measured (no network where the defaults were
    # set), so the conservative default
    "openai:text-embedding-3-small": UNKNOWN_MODEL_FLOORS,
    "openai:text-embedding-3-large": UNKNOWN_MODEL_FLOORS,
}


def default_floors(model_id: str) -> Floors:
    """The default floors of ``model_id`` (longest matching prefix), else :data:`UNKNOWN_MODEL_FLOORS`."""
    best = ""
    for prefix in MODEL_FLOORS:
        if model_id.startswith(prefix) and len(prefix) > len(best):
            best = prefix
    return MODEL_FLOORS[best] if best else UNKNOWN_MODEL_FLOORS


def default_min_score(model_id: str) -> float:
    """The default floor of explicit questions of ``model_id`` (:func:`default_floors`)."""
    return default_floors(model_id).explicit


def check_use(use: Any) -> str:
    """``use`` if it is one of :data:`USES`; ``InvalidInput`` otherwise."""
    if not isinstance(use, str) or use not in USES:
        raise InvalidInput(f"use must be one of {', '.join(map(repr, USES))}, got {use!r}")
    return use


def floor_in_force(settings: Settings, model_id: str, use: Any = "explicit") -> float:
    """The floor of ``use`` (see the module docstring): its setting, else the model's default
    (for ``inject``, at least ``search_min_score`` when that is set)."""
    use = check_use(use)
    defaults = default_floors(model_id)
    if use == "explicit":
        return defaults.explicit if settings.search_min_score is None else settings.search_min_score
    if settings.search_inject_min_score is not None:
        return settings.search_inject_min_score
    return max(defaults.inject, settings.search_min_score or 0.0)


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
