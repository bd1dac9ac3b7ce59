"""The no-fabrication check (R40): is each new ``MEMORY.md`` bullet supported by the sources?

The sources (current ``MEMORY.md`` and the daily files of the window) are cut into *units*: one
Markdown record each (a bullet with its continuation lines; long paragraphs in windows of two
sentences), together with its ``## `` heading and, for daily records, the file's date (year,
month, day, month and weekday names).

A bullet is supported when one unit supports all of it, or, failing that, when the bullet splits
into clauses (at ``;``, ``and``, ``but``, ``while``) and every clause has a supporting unit.
A unit supports a statement when

1. **coverage**: at least ``min_coverage`` of the statement's content words (stemmed, stop words
   removed; numbers normalised, ``three`` = ``3``, ``48,000`` = ``48000``) occur in the unit —
   or, with an embedder, at least ``embed_min_coverage`` of them and a cosine similarity of at
   least ``embed_min_similarity``;
2. **numbers**: every number of the statement occurs in the unit;
3. **names**: every capitalised name of the statement occurs in the unit (a name is a word with
   an inner capital, a capitalised word inside a sentence, or a capitalised first word that the
   sources use as a name or never use at all, unless it looks like a verb: ``Prefers``);
4. **negation**: a negated statement (``not``, ``never``, ``no``, ``n't``) needs a negated unit.

Rules 2-4 bind names and numbers to the same source record, so a fact moved to another person
("Claire accepted the offer" when the user did) or a changed number is caught even though every
word occurs somewhere in the sources. Measured on ``tests/fixtures/dream_support.json`` by
``bench/dream_support.py``; the limits (a contradiction built from the source's own words, an
assistant's suggestion restated as a fact) are listed there.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from tiermem.dream.prompt import DailySource
from tiermem.dream.text import (
    NEGATIONS,
    ROLE_WORDS,
    STOP_WORDS,
    Token,
    content_keys,
    name_parts,
    negated,
    stem,
    tokenize,
    verbish,
)
from tiermem.tiers.markdown import parse_records

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from tiermem.models.protocols import Embedder

_CLAUSE_SPLIT = re.compile(r"\s*;\s*|,?\s+(?:and|but|while|whereas)\s+", re.IGNORECASE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")
LONG_RECORD_WORDS = 60
MEMORY_FILE = "MEMORY.md"


@dataclass(frozen=True)
class SupportPolicy:
    """Thresholds of the check (defaults measured on the labelled fixture)."""

    min_coverage: float = 0.6
    embed_min_coverage: float = 0.34
    embed_min_similarity: float = 0.75


@dataclass(frozen=True)
class SupportVerdict:
    """Whether ``text`` is supported; ``reason`` says why not; ``source`` is the best unit's ref."""

    text: str
    supported: bool
    score: float
    reason: str = ""
    source: str | None = None


@dataclass(frozen=True)
class SourceUnit:
    """One record of the sources with its comparison sets."""

    text: str
    ref: str
    keys: frozenset[str]
    words: frozenset[str]
    numbers: frozenset[str]
    negated: bool


def _date_context(source: DailySource) -> tuple[set[str], set[str]]:
    day = source.day
    words = {calendar.month_name[day.month].casefold(), calendar.day_name[day.weekday()].casefold()}
    return words, {str(day.year), str(day.month), str(day.day)}


def _unit(text: str, ref: str, heading: str | None, extra_words: set[str], extra_numbers: set[str]) -> SourceUnit:
    tokens = tokenize(text if heading is None else f"{heading}. {text}")
    words = {t.folded for t in tokens} | {p for t in tokens for p in name_parts(t)}
    words |= {stem(w) for w in words} | extra_words | {stem(w) for w in extra_words}
    numbers = {t.key for t in tokens if t.is_number} | extra_numbers
    keys = content_keys(tokens) | extra_numbers | extra_words
    return SourceUnit(text, ref, frozenset(keys), frozenset(words), frozenset(numbers), negated(tokens))


def _pieces(text: str) -> list[str]:
    """A record, or windows of two sentences when the record is long."""
    if len(text.split()) <= LONG_RECORD_WORDS:
        return [text]
    sentences = _SENTENCE_SPLIT.split(text)
    if len(sentences) < 3:
        return [text]
    return [" ".join(sentences[i:i + 2]) for i in range(len(sentences) - 1)]


class SourceIndex:
    """The units of the sources and the word forms the name rule needs."""

    def __init__(self, memory_text: str, dailies: Sequence[DailySource]) -> None:
        self.units: list[SourceUnit] = []
        self.name_forms: set[str] = set()
        self.lower_forms: set[str] = set()
        self.all_words: set[str] = set()
        self.all_numbers: set[str] = set()
        self._add(memory_text, MEMORY_FILE, set(), set())
        for source in dailies:
            words, numbers = _date_context(source)
            self._add(source.text, f"memory/{source.day.isoformat()}.md", words, numbers)

    def _add(self, text: str, path: str, extra_words: set[str], extra_numbers: set[str]) -> None:
        for record in parse_records(text):
            if not record.bullet and record.text.startswith("#"):
                continue
            ref = f"{path}#L{record.line_start}-L{record.line_end}"
            for piece in _pieces(record.text):
                unit = _unit(piece, ref, record.heading, extra_words, extra_numbers)
                self.units.append(unit)
                self.all_words |= unit.words
                self.all_numbers |= unit.numbers
                self._learn_forms(tokenize(piece))

    def _learn_forms(self, tokens: list[Token]) -> None:
        for t in tokens:
            if t.is_number:
                continue
            if t.surface[0].islower():
                self.lower_forms.add(t.folded)
            elif t.inner_capitals or not t.sentence_start:
                self.name_forms.add(t.folded)

    def names(self, tokens: list[Token]) -> list[Token]:
        """The tokens of a statement that must be found as names (see the module docstring)."""
        found = []
        for t in tokens:
            if t.is_number or t.folded in STOP_WORDS or t.folded in ROLE_WORDS or t.folded in NEGATIONS:
                continue
            if t.compound and not t.capitalised:
                found.append(t)
                continue
            if not t.capitalised:
                continue
            used_as_name = t.inner_capitals or not t.sentence_start or t.folded in self.name_forms
            if used_as_name or (t.folded not in self.lower_forms and not verbish(t)):
                found.append(t)
        return found


@dataclass(frozen=True)
class _Statement:
    text: str
    keys: frozenset[str]
    names: tuple[Token, ...]
    numbers: frozenset[str]
    negated: bool


def _statement(text: str, index: SourceIndex) -> _Statement:
    tokens = tokenize(text)
    numbers = frozenset(t.key for t in tokens if t.is_number)
    return _Statement(text, frozenset(content_keys(tokens)), tuple(index.names(tokens)), numbers, negated(tokens))


def _has_name(unit_words: frozenset[str] | set[str], name: Token) -> bool:
    return all(p in unit_words or stem(p) in unit_words for p in name_parts(name) or [name.folded])


def _hard_failure(statement: _Statement, unit: SourceUnit, index: SourceIndex) -> str:
    """Why ``unit`` cannot back ``statement`` by rules 2-4 ("" when it can)."""
    for number in sorted(statement.numbers - unit.numbers):
        where = "with the rest of the statement" if number in index.all_numbers else "anywhere in the sources"
        return f"number {number} is not {where}"
    for name in statement.names:
        if not _has_name(unit.words, name):
            where = "with the rest of the statement" if _has_name(index.all_words, name) else "anywhere in the sources"
            return f"name {name.surface!r} is not {where}"
    if statement.negated and not unit.negated:
        return "the negation is not in the source"
    return ""


def _judge(statement: _Statement, index: SourceIndex, policy: SupportPolicy,
           similarity: list[float] | None) -> SupportVerdict:
    """The verdict on one statement: the first unit that passes all four rules supports it."""
    if not statement.keys:
        return SupportVerdict(statement.text, False, 0.0, "no content words")
    best_cover, best_ref = 0.0, None
    failure, failure_cover = "", -1.0
    for i, unit in enumerate(index.units):
        cover = len(statement.keys & unit.keys) / len(statement.keys)
        if cover > best_cover:
            best_cover, best_ref = cover, unit.ref
        enough = cover >= policy.min_coverage or (
            similarity is not None and cover >= policy.embed_min_coverage
            and similarity[i] >= policy.embed_min_similarity)
        if not enough:
            continue
        why = _hard_failure(statement, unit, index)
        if not why:
            return SupportVerdict(statement.text, True, cover, "", unit.ref)
        if cover > failure_cover:
            failure, failure_cover = why, cover
    reason = failure or f"no source record covers it (best word overlap {best_cover:.2f})"
    return SupportVerdict(statement.text, False, best_cover, reason, best_ref)


def clauses(text: str, index: SourceIndex) -> list[str]:
    """``text`` cut at ``;``/``and``/``but``/``while``; pieces with < 2 content words stay joined."""
    merged: list[str] = []
    for piece in (p.strip(" ,.") for p in _CLAUSE_SPLIT.split(text)):
        if not piece:
            continue
        if merged and (len(content_keys(tokenize(piece))) < 2 or len(content_keys(tokenize(merged[-1]))) < 2):
            merged[-1] = f"{merged[-1]} and {piece}"
        else:
            merged.append(piece)
    return merged


class SupportChecker:
    """Checks bullets against one set of sources; optional embedder for paraphrases."""

    def __init__(self, memory_text: str, dailies: Sequence[DailySource], policy: SupportPolicy | None = None,
                 embedder: Embedder | None = None) -> None:
        self.index = SourceIndex(memory_text, dailies)
        self.policy = policy or SupportPolicy()
        self.embedder = embedder
        self._unit_vectors: npt.NDArray[np.float32] | None = None

    def _similarity(self, text: str) -> list[float] | None:
        if self.embedder is None or not self.index.units:
            return None
        if self._unit_vectors is None:
            self._unit_vectors = self.embedder.embed([u.text for u in self.index.units])
        vector = self.embedder.embed([text])[0]
        return [float(x) for x in self._unit_vectors @ vector]

    def judge(self, text: str) -> SupportVerdict:
        """Supported as a whole, or clause by clause; else the first failing clause's reason."""
        whole = _judge(_statement(text, self.index), self.index, self.policy, self._similarity(text))
        if whole.supported:
            return whole
        parts = clauses(text, self.index)
        if len(parts) < 2:
            return whole
        verdicts = [_judge(_statement(p, self.index), self.index, self.policy, self._similarity(p)) for p in parts]
        failed = next((v for v in verdicts if not v.supported), None)
        if failed is None:
            refs = ", ".join(dict.fromkeys(v.source or "" for v in verdicts))
            return SupportVerdict(text, True, min(v.score for v in verdicts), "", refs)
        return SupportVerdict(text, False, whole.score, f"{failed.text!r}: {failed.reason}", failed.source)

    def check(self, bullets: Sequence[str]) -> list[SupportVerdict]:
        return [self.judge(text) for text in bullets]
