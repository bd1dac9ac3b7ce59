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


#: The floor of a model nobody measured (scored with MiniLM's calibration): low enough never to
#: hide a real hit - a hit goes only when its cosine is under about 0.19 and its shared terms
#: are under a fifth of the query's weight - so it rejects little. Set ``search_min_score`` and
#: ``search_inject_min_score`` after measuring your model with ``bench/paraphrase.py`` (its
#: ``recommended_floors``).
UNKNOWN_MODEL_MIN_SCORE = 0.30
UNKNOWN_MODEL_FLOORS = Floors(explicit=UNKNOWN_MODEL_MIN_SCORE, inject=UNKNOWN_MODEL_MIN_SCORE)

# ================================================================================================
# THE DEFAULT FLOORS, by embedder ``model_id`` prefix (longest prefix wins): the one place to edit.
# Measured with ``bench/paraphrase.py`` (its ``recommended_floors``, from the tuning half of the
# facts and journal stores; figures in bench/README.md, issue 24), as multiples of 0.01:
# - explicit: the highest floor that costs no recall@5 (recall first);
# - inject: the lowest floor at which at most 1 in 20 off-topic queries gets an answer.
# ================================================================================================
MODEL_FLOORS: dict[str, Floors] = {
    # all-MiniLM-L6-v2 (fp32 and int8): explicit - held-out R@5 0.54 (0.56 with no floor), but
    # 57 of 60 off-topic queries answered; inject - 3/60 tuning and 4/60 held-out off-topic
    # queries answered, and no paraphrase: MiniLM does not tell a paraphrase (true items'
    # cosines: median 0.39) from an off-topic question's best hit (median 0.32-0.36)
    "all-MiniLM-L6-v2": Floors(explicit=0.54, inject=0.99),
    # the word-hashing test embedder: its cosine counts shared words, so the paraphrase benchmark
    # tells it nothing (R@5 0.01); explicit - the highest floor costing at most 0.005 of LoCoMo
    # dev R@10 (bench/score_fit.py); inject - 3/60 tuning off-topic queries answered
    "hash-": Floors(explicit=0.58, inject=0.97),
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
