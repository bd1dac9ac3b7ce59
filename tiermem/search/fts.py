"""Turn any user text into the terms of a keyword search (R45).

The text is split into terms here, in Python; the keyword index receives each term quoted (a
double-quoted FTS5 string on SQLite, a quoted ``tsquery`` lexeme on PostgreSQL), terms joined
with ``OR``. So no index ever sees user syntax: ``AND``, ``NOT``, ``NEAR``, ``*``, ``^``, ``:``,
``&``, ``|``, quotes and parentheses are plain text (or separators), and control characters are
dropped before anything else happens.

Three kinds of terms:

- **words** (Latin, Cyrillic, ... scripts with spaces) for the ``porter unicode61`` index; English
  stop words are removed unless nothing else is left;
- **grams**: runs of scripts written without spaces (Chinese, Japanese, Korean, Thai, ...) of three
  or more characters become their overlapping 3-character windows, for the gram index;
- **short** runs of such scripts (one or two characters) are too short for trigrams: SQLite finds
  them with a plain substring scan over the scope, PostgreSQL in its gram column (which holds
  each character and 2-character window of those scripts).

Words of three or more characters are also offered as trigram substrings (``press`` finds
``WordPress``) for when the word index finds too little.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from tiermem.storage.search import UNSEGMENTED_RANGES
from tiermem.storage.sqlite.search import match_expression, quote

__all__ = ["KeywordQuery", "clean", "is_unsegmented", "match_expression", "parse", "quote"]

MAX_TERMS = 128  # per kind: bounds the cost of a pasted paragraph (later terms are ignored)

_STOP_WORDS_TEXT = """
    a about above after again against all am an and any are aren as at be because been before being
    below between both but by can cannot could couldn d did didn do does doesn doing don down during each
    few for from further had hadn has hasn have haven having he her here hers herself him himself his how
    i if in into is isn it its itself just ll m me more most mustn my myself no nor not now o of off on
    once only or other ought our ours ourselves out over own re s same shan she should shouldn so some
    such t than that the their theirs them themselves then there these they this those through to too
    under until up ve very was wasn we were weren what when where which while who whom why will with
    won would wouldn y you your yours yourself yourselves
"""
STOP_WORDS = frozenset(_STOP_WORDS_TEXT.split())

def is_unsegmented(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in UNSEGMENTED_RANGES)


def clean(text: str) -> str:
    """``text`` with control, format and surrogate characters replaced by spaces."""
    return "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Cs", "Co", "Cn") else c for c in text)


def _tokens(text: str) -> tuple[list[str], list[str]]:
    """``(words, unsegmented runs)`` of ``text``, in order."""
    words: list[str] = []
    runs: list[str] = []
    current: list[str] = []
    kind = ""  # "w" word, "u" unsegmented, "" none

    def close() -> None:
        if current:
            (words if kind == "w" else runs).append("".join(current))
            current.clear()

    for char in text:
        if is_unsegmented(char):
            new = "u"
        elif unicodedata.category(char)[0] in "LNM":
            new = "w"
        else:
            new = ""
        if new != kind:
            close()
            kind = new
        if new:
            current.append(char)
    close()
    return words, runs


def _dedupe(items: list[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(items))[:MAX_TERMS]


@dataclass(frozen=True)
class KeywordQuery:
    """The terms of one query, split by the index that can find them."""

    words: tuple[str, ...] = ()
    grams: tuple[str, ...] = ()
    short: tuple[str, ...] = ()
    substrings: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.words or self.grams or self.short)

    @property
    def words_match(self) -> str | None:
        """MATCH expression for the word index (``None``: nothing to ask it)."""
        return match_expression(self.words) or None

    @property
    def grams_match(self) -> str | None:
        """MATCH expression for the trigram index from the unsegmented-script runs."""
        return match_expression(self.grams) or None

    @property
    def substrings_match(self) -> str | None:
        """MATCH expression for the trigram index from the words (substring search)."""
        return match_expression(self.substrings) or None


def parse(text: str) -> KeywordQuery:
    """Split ``text`` (any string) into the terms of a :class:`KeywordQuery`."""
    words, runs = _tokens(clean(text))
    folded = [w.casefold() for w in words]
    content = [w for w in folded if w not in STOP_WORDS] or folded
    grams: list[str] = []
    short: list[str] = []
    for run in runs:
        if len(run) < 3:
            short.append(run)
        else:
            grams.extend(run[i:i + 3] for i in range(len(run) - 2))
    substrings = [w for w in content if len(w) >= 3]
    return KeywordQuery(_dedupe(content), _dedupe(grams), _dedupe(short), _dedupe(substrings))
