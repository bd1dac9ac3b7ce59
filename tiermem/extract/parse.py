"""Turning an extraction reply into an :class:`ExtractionResult`, item by item.

The reply is located with :mod:`tiermem.extract.jsontext` (reasoning blocks, fences, prose,
repairs, truncation). Then every part is read on its own; an item that cannot be used is
dropped with a reason (logged, and kept in ``result.dropped`` for the audit) while the rest
stands. What is accepted beyond the schema:

- key names: folded (case, ``_``, ``-``, spaces ignored) and aliased: ``newFacts`` / ``facts``
  / ``memories`` / ``extractedFacts`` ...; ``factsToRemove`` / ``removeFacts`` / ``delete``
  ...; fact ``content`` / ``fact`` / ``text`` / ``memory`` / ``statement``; a reply nested under
  one wrapper key (``{"result": {...}}``); a bare array of facts; summaries without the
  ``user`` / ``history`` level;
- categories in any case, plural, or British spelling (``Preferences``, ``BEHAVIOUR``); any
  other category is dropped (R19);
- confidence as a number in [0, 1]; a number above 1 up to 100 is read as a percentage (``90``
  -> 0.9); strings of either (``"0.9"``, ``"85%"``); the words ``very high`` 0.95, ``high``
  0.9, ``medium``/``moderate`` 0.7, ``low`` 0.3, ``very low`` 0.1. Anything else (missing,
  negative, above 100, NaN, booleans) drops the fact: tiermem does not invent a confidence;
- a fact written as a string in tiermem's own format ``[category | 0.9] content``; other
  bare strings are dropped (no category or confidence);
- ids to remove as ``3``, ``3.0``, ``"3"``, ``"fact 3"``, ``"#3"``, ``"[3]"``, ``{"id": 3}``;
  ids not shown to the model are dropped;
- a summary as ``{summary, shouldUpdate}`` (``shouldUpdate`` may be a string, or missing =
  update when the summary is not empty) or a plain string; ``shouldUpdate: true`` with an
  empty summary is dropped (it would erase the summary).

A reply with no JSON at all, JSON with none of the expected keys, or a reply cut off before
anything usable raises :class:`~tiermem.errors.ExtractionError` carrying the raw text; an
empty but well-formed reply (nothing new) is a valid, empty result.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Set
from dataclasses import dataclass
from typing import Any, NamedTuple

from tiermem import validate
from tiermem.errors import ExtractionError, InvalidInput
from tiermem.extract.jsontext import Candidate, cut_partial_tail, json_candidates, strip_thinking
from tiermem.types import CATEGORIES, SUMMARY_KEYS

log = logging.getLogger(__name__)


class NewFact(NamedTuple):
    content: str
    category: str
    confidence: float


class Dropped(NamedTuple):
    item: str  # the offending item as compact JSON (at most 300 characters)
    reason: str


@dataclass(frozen=True)
class ExtractionResult:
    """What one reply asks for. ``summaries`` holds only the summaries to replace (flat keys:
    ``workContext`` ... ``longTermBackground``); ``facts_to_remove`` are short ids from
    ``valid_short_ids``, distinct, in reply order."""

    summaries: dict[str, str]
    new_facts: tuple[NewFact, ...]
    facts_to_remove: tuple[int, ...]
    dropped: tuple[Dropped, ...]
    repaired: bool = False  # the JSON was not valid as written and was repaired
    truncated: bool = False  # the reply was cut off; its unfinished last item was dropped

    @property
    def is_empty(self) -> bool:
        return not (self.summaries or self.new_facts or self.facts_to_remove)


def _fold(key: Any) -> str:
    return re.sub(r"[\s_\-.]", "", str(key)).casefold()


_FACT_LISTS = frozenset({"newfacts", "facts", "memories", "newmemories", "extractedfacts", "factstoadd",
                         "addfacts", "add", "newfact", "memoriestoadd", "extractedmemories"})
_REMOVE_LISTS = frozenset({"factstoremove", "removefacts", "remove", "factstodelete", "deletefacts",
                           "delete", "removedfacts", "obsoletefacts", "removeids", "factidstoremove",
                           "idstoremove", "outdatedfacts", "memoriestoremove", "factsremove"})
_USER = frozenset({"user", "usercontext"})
_HISTORY = frozenset({"history", "historycontext", "userhistory"})
_SUMMARY_WRAPPERS = frozenset({"summaries", "summary", "summaryupdates", "updates"})
_FULL_SUMMARY_KEYS = {k.casefold(): k for k in SUMMARY_KEYS}
_SHORT_SUMMARY_KEYS = {"work": "workContext", "personal": "personalContext", "currentfocus": "topOfMind",
                       "focus": "topOfMind", "recent": "recentMonths", "earlier": "earlierContext",
                       "background": "longTermBackground"}
_CONTENT_KEYS = ("content", "fact", "text", "memory", "statement", "value", "description")
_CATEGORY_KEYS = ("category", "type", "kind", "categories")
_CONFIDENCE_KEYS = ("confidence", "score", "certainty", "conf", "probability")
_CONFIDENCE_WORDS = {"veryhigh": 0.95, "high": 0.9, "medium": 0.7, "moderate": 0.7, "low": 0.3,
                     "verylow": 0.1}
_OWN_FORMAT = re.compile(r"^\s*(?:-\s*)?\[\s*([A-Za-z]+)\s*\|\s*([0-9.]+%?)\s*\]\s*(.+?)\s*$", re.DOTALL)
_SHORT_ID = re.compile(r"(?:fact|id)?[\s:_#]*(?:no\.?|number)?\s*[\[(]?\s*(\d{1,9})\s*[\])]?", re.IGNORECASE)
_RECOGNISED = _FACT_LISTS | _REMOVE_LISTS | _USER | _HISTORY | _SUMMARY_WRAPPERS | set(_FULL_SUMMARY_KEYS)


def _is_summary_key(key: str) -> bool:
    folded = _fold(key)
    return folded in _FULL_SUMMARY_KEYS or folded in _SHORT_SUMMARY_KEYS


def _payload(value: Any, depth: int = 0) -> dict[str, Any] | None:
    """The object holding the answer: the value itself, a bare fact list, or the content of a
    wrapper key (``{"result": {...}}``), up to two levels deep."""
    if isinstance(value, list):
        if all(isinstance(item, (dict, str)) for item in value):
            return {"newFacts": value}
        return None
    if not isinstance(value, dict):
        return None
    if any(_fold(key) in _RECOGNISED for key in value):
        return value
    if depth >= 2:
        return None
    for inner in value.values():
        if isinstance(inner, (dict, list)) and (found := _payload(inner, depth + 1)) is not None:
            return found
    return None


class _Reader:
    """Accumulates accepted items and dropped ones while reading one payload."""

    def __init__(self, valid_short_ids: Set[int]) -> None:
        self.valid = valid_short_ids
        self.summaries: dict[str, str] = {}
        self.facts: list[NewFact] = []
        self.remove: list[int] = []
        self.dropped: list[Dropped] = []
        self._seen_content: set[str] = set()

    def drop(self, item: Any, reason: str) -> None:
        try:
            text = json.dumps(item, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = repr(item)
        if len(text) > 300:
            text = text[:297] + "..."
        self.dropped.append(Dropped(text, reason))
        log.info("extraction: dropped %s: %s", text, reason)

    # -- facts --------------------------------------------------------------------------
    def read_facts(self, value: Any) -> None:
        if value is None:
            return
        items = value if isinstance(value, list) else [value] if isinstance(value, dict) else None
        if items is None:
            self.drop(value, "newFacts is not a list")
            return
        for item in items:
            fact = self._fact(item)
            if isinstance(fact, str):
                self.drop(item, fact)
                continue
            key = validate.normalise(fact.content)
            if key in self._seen_content:
                self.drop(item, "repeats another new fact of this reply")
                continue
            self._seen_content.add(key)
            self.facts.append(fact)

    def _fact(self, item: Any) -> NewFact | str:
        """The fact, or the reason it is dropped."""
        if isinstance(item, str):
            match = _OWN_FORMAT.match(item)
            if match is None:
                return "a bare string without category and confidence"
            return _checked(match.group(3), match.group(1), match.group(2))
        if not isinstance(item, dict):
            return f"a {type(item).__name__}, not an object"
        fields = {_fold(k): v for k, v in item.items()}
        content = _first(fields, _CONTENT_KEYS)
        category = _first(fields, _CATEGORY_KEYS)
        if isinstance(category, list) and category:
            category = category[0]
        confidence = _first(fields, _CONFIDENCE_KEYS)
        if content is None:
            return "no content"
        if category is None:
            return "no category"
        if confidence is None:
            return "no confidence"
        return _checked(content, category, confidence)

    # -- removals -----------------------------------------------------------------------
    def read_removals(self, value: Any) -> None:
        if value is None:
            return
        if isinstance(value, str):
            value = [part for part in value.split(",") if part.strip()]
        items = value if isinstance(value, list) else [value]
        for item in items:
            short_id = _short_id(item)
            if short_id is None:
                self.drop(item, "not a fact id")
            elif short_id not in self.valid:
                self.drop(item, f"unknown fact id {short_id}")
            elif short_id not in self.remove:
                self.remove.append(short_id)

    # -- summaries ----------------------------------------------------------------------
    def read_summaries(self, payload: dict[str, Any]) -> None:
        for key, value in payload.items():
            folded = _fold(key)
            if folded in _USER or folded in _HISTORY:
                self._summary_section(value, short_names=True)
            elif folded in _SUMMARY_WRAPPERS and isinstance(value, dict):
                self.read_summaries(value)
            elif folded in _FULL_SUMMARY_KEYS:
                self._summary(_FULL_SUMMARY_KEYS[folded], value)

    def _summary_section(self, section: Any, short_names: bool) -> None:
        if not isinstance(section, dict):
            if section is not None:
                self.drop(section, "summary section is not an object")
            return
        for key, value in section.items():
            folded = _fold(key)
            name = _FULL_SUMMARY_KEYS.get(folded) or (_SHORT_SUMMARY_KEYS.get(folded) if short_names else None)
            if name is not None:
                self._summary(name, value)

    def _summary(self, name: str, entry: Any) -> None:
        text: Any = entry
        update: Any = None
        if isinstance(entry, dict):
            fields = {_fold(k): v for k, v in entry.items()}
            text = _first(fields, ("summary", "text", "content", "value"))
            update = _first(fields, ("shouldupdate", "update", "updated", "changed"))
        if update is not None and _truthy(update) is None:
            self.drop({name: entry}, "shouldUpdate is not a boolean")
            return
        if text is not None and not isinstance(text, str):
            self.drop({name: entry}, "summary is not text")
            return
        text = (text or "").strip()
        wanted = _truthy(update) if update is not None else bool(text)
        if not wanted:
            return
        if not text:
            self.drop({name: entry}, "shouldUpdate is true but the summary is empty")
            return
        try:
            self.summaries[name] = validate.text(text, f"summary {name}", validate.MAX_CONTENT_CHARS)
        except InvalidInput as exc:
            self.drop({name: entry}, str(exc))


def _first(fields: dict[str, Any], names: tuple[str, ...]) -> Any:
    for name in names:
        if fields.get(name) is not None:
            return fields[name]
    return None


def _truthy(value: Any) -> bool | None:
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(
            value.strip().casefold()
        )
    return None


def _category(value: Any) -> str | None:
    if not isinstance(value, str):
        return None
    word = _fold(value).replace("behaviour", "behavior")
    if word in CATEGORIES:
        return word
    if word.endswith("s") and word[:-1] in CATEGORIES:
        return word[:-1]
    return None


def _confidence(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    number: float
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        text = value.strip().casefold()
        if _fold(text) in _CONFIDENCE_WORDS:
            return _CONFIDENCE_WORDS[_fold(text)]
        percent = text.endswith("%")
        try:
            number = float(text.rstrip("%").strip())
        except ValueError:
            return None
        if percent:
            number /= 100.0
    else:
        return None
    if not math.isfinite(number) or number < 0 or number > 100:
        return None
    return number if number <= 1 else round(number / 100.0, 6)


def _checked(content: Any, category: Any, confidence: Any) -> NewFact | str:
    if not isinstance(content, str):
        return "content is not text"
    try:
        text = validate.content(content)
    except InvalidInput as exc:
        return str(exc)
    name = _category(category)
    if name is None:
        return f"unknown category {category!r}"
    score = _confidence(confidence)
    if score is None:
        return f"unusable confidence {confidence!r}"
    return NewFact(text, name, score)


def _short_id(item: Any) -> int | None:
    if isinstance(item, dict):
        fields = {_fold(k): v for k, v in item.items()}
        item = _first(fields, ("id", "factid", "shortid"))
    if isinstance(item, bool) or item is None:
        return None
    if isinstance(item, int):
        return item
    if isinstance(item, float):
        return int(item) if item.is_integer() else None
    if isinstance(item, str):
        match = _SHORT_ID.fullmatch(item.strip())
        return int(match.group(1)) if match else None
    return None


def _read(candidate: Candidate, payload: dict[str, Any], valid_short_ids: Set[int]) -> ExtractionResult:
    reader = _Reader(valid_short_ids)
    if candidate.truncated:
        partial = cut_partial_tail(candidate, _is_summary_key)
        if partial is not None:
            reader.drop(partial, "unfinished item at the end of a cut-off reply")
    reader.read_summaries(payload)
    for key, value in payload.items():
        folded = _fold(key)
        if folded in _FACT_LISTS:
            reader.read_facts(value)
        elif folded in _REMOVE_LISTS:
            reader.read_removals(value)
    return ExtractionResult(
        summaries=reader.summaries,
        new_facts=tuple(reader.facts),
        facts_to_remove=tuple(reader.remove),
        dropped=tuple(reader.dropped),
        repaired=candidate.repaired,
        truncated=candidate.truncated,
    )


def parse_extraction(raw: str, valid_short_ids: Set[int]) -> ExtractionResult:
    """Parse one extraction reply; raises :class:`ExtractionError` (with ``raw``) when nothing
    in it is usable. ``valid_short_ids``: the ids shown to the model as existing facts."""
    if not isinstance(raw, str) or not raw.strip():
        raise ExtractionError("the reply is empty", raw=raw if isinstance(raw, str) else repr(raw))
    cut_off = False
    for candidate in json_candidates(raw):
        payload = _payload(candidate.value)
        cut_off = cut_off or candidate.truncated
        if payload is None:
            continue
        result = _read(candidate, payload, valid_short_ids)
        if candidate.truncated and result.is_empty:
            raise ExtractionError("the reply was cut off before any usable content", raw=raw)
        return result
    if cut_off:
        raise ExtractionError("the reply was cut off before any usable content", raw=raw)
    rest, unterminated = strip_thinking(raw)
    if unterminated and "{" not in rest:
        raise ExtractionError("the reply ended inside a <think> block, before any JSON", raw=raw)
    if "{" in rest or "[" in rest:
        raise ExtractionError(
            "the reply has no JSON object with newFacts, factsToRemove, user or history", raw=raw
        )
    raise ExtractionError("the reply contains no JSON object", raw=raw)
