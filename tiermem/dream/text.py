"""Word-level normalisation for the dream checks: tokens, a light English stemmer, stop words,
numbers (digits and number words), negation and name-like words.

Deliberately small and dependency-free; it only has to decide whether two short sentences talk
about the same things, not to understand them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STOP_TEXT = """a about above after again against all also am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself just me more
    most my myself now of off on once only or other our ours ourselves out over own same she should so
    some such than that the their theirs them themselves then there these they this those through to too
    under until up very was we were what when where which while who whom why will with would you your
    yours yourself yourselves ca wo per via etc
    user users assistant currently mentioned said says told noted usually really
    dr mr mrs ms prof
    """
STOP_WORDS = frozenset(_STOP_TEXT.split())
"""English function words, memory-domain fillers ("user", "currently") and titles ("Dr")."""
_ROLE_TEXT = (
    "son daughter child children kid kids sister brother mother father mom mum dad parent parents wife husband"
    " partner spouse girlfriend boyfriend friend colleague coworker manager boss team teammate physio doctor"
    " therapist teacher neighbour neighbor cousin aunt uncle grandmother grandfather baby family"
)
ROLE_WORDS = frozenset(_ROLE_TEXT.split())
"""Relationship nouns that open many memory bullets ("Son Jonas ...") and are never names."""

NEGATIONS = frozenset({"not", "no", "never", "none", "nor", "without", "cannot"})
NUMBER_WORDS = {
    "zero": "0", "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6",
    "seven": "7", "eight": "8", "nine": "9", "ten": "10", "eleven": "11", "twelve": "12",
    "fifteen": "15", "twenty": "20", "thirty": "30", "forty": "40", "fifty": "50", "hundred": "100",
    "once": "1", "twice": "2", "thrice": "3", "first": "1", "third": "3", "fourth": "4", "fifth": "5",
    "half": "0.5", "dozen": "12", "single": "1", "double": "2", "triple": "3",
}
_ABBREVIATIONS = frozenset({"dr", "mr", "mrs", "ms", "st", "prof", "vs", "approx", "jr", "sr", "eg", "ie"})
_VERBISH = ("s", "ed", "ing", "ly")

_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W\d_]+(?:[-'][^\W\d_]+)*", re.UNICODE)


def _undouble(word: str) -> str:
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "lsz":
        return word[:-1]
    return word


def stem(word: str) -> str:
    """A light suffix stripper: plurals, ``-ed``, ``-ing``, ``-ly``, a final ``e``."""
    w = word.casefold()
    if len(w) <= 3 or not w.isalpha():
        return w
    if w.endswith("ies") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith(("sses", "ches", "shes", "xes", "zes")):
        w = w[:-2]
    elif w.endswith("s") and not w.endswith(("ss", "us", "is")):
        w = w[:-1]
    if w.endswith("ied") and len(w) > 4:
        w = w[:-3] + "y"
    elif w.endswith("ed") and len(w) > 4 and re.search(r"[aeiouy]", w[:-2]):
        w = _undouble(w[:-2])
    elif w.endswith("ing") and len(w) > 5 and re.search(r"[aeiouy]", w[:-3]):
        w = _undouble(w[:-3])
    elif w.endswith("ly") and len(w) > 5:
        w = w[:-2]
    if w.endswith("e") and len(w) > 3:
        w = w[:-1]
    return w


def normalise_number(token: str) -> str:
    """``48,000`` -> ``48000``, ``03`` -> ``3``, ``2.70`` -> ``2.7``; number words to digits."""
    lowered = token.casefold()
    if lowered in NUMBER_WORDS:
        return NUMBER_WORDS[lowered]
    text = re.sub(r",(?=\d{3}(?:\D|$))", "", token).replace(",", ".")
    if "." in text:
        whole, _, frac = text.partition(".")
        frac = frac.rstrip("0")
        whole = whole.lstrip("0") or "0"
        return f"{whole}.{frac}" if frac else whole
    return text.lstrip("0") or "0"


def _expand_contractions(text: str) -> str:
    text = text.replace("\u2019", "'")
    text = re.sub(r"\b(can)'t\b", r"\1 not", text, flags=re.IGNORECASE)
    text = re.sub(r"\bwon't\b", "will not", text, flags=re.IGNORECASE)
    text = re.sub(r"n't\b", " not", text, flags=re.IGNORECASE)
    return re.sub(r"'s\b", "", text)


@dataclass(frozen=True)
class Token:
    """One word or number of a text, with what the checks need to know about it."""

    surface: str
    sentence_start: bool

    @property
    def is_number(self) -> bool:
        return self.surface[0].isdigit() or self.surface.casefold() in NUMBER_WORDS

    @property
    def folded(self) -> str:
        return self.surface.casefold()

    @property
    def key(self) -> str:
        """The comparison key: a normalised number or a stemmed word."""
        return normalise_number(self.surface) if self.is_number else stem(self.surface)

    @property
    def capitalised(self) -> bool:
        return self.surface[0].isupper() or any(c.isupper() for c in self.surface[1:])

    @property
    def compound(self) -> bool:
        """A hyphenated word (``us-east``, ``Goethe-Institut``): an identifier to find as written."""
        return "-" in self.surface

    @property
    def inner_capitals(self) -> bool:
        """``PostgreSQL``, ``AWS``, ``iOS``: a capital after the first letter."""
        return any(c.isupper() for c in self.surface[1:])


def tokenize(text: str) -> list[Token]:
    """Words and numbers of ``text``; ``sentence_start`` marks the first word of a sentence."""
    text = _expand_contractions(text)
    tokens: list[Token] = []
    previous_end = 0
    previous_word = ""
    for match in _TOKEN.finditer(text):
        gap = text[previous_end:match.start()]
        tokens.append(Token(match.group(0), not tokens or _ends_sentence(gap, previous_word)))
        previous_end, previous_word = match.end(), match.group(0)
    return tokens


def _ends_sentence(gap: str, previous_word: str) -> bool:
    """Whether the text between two tokens ends a sentence (``Dr. Huber`` does not)."""
    stripped = gap.strip()
    if not stripped or stripped[0] not in ".!?" or gap == stripped:
        return False
    return not (stripped[0] == "." and previous_word.casefold() in _ABBREVIATIONS)


def content_keys(tokens: list[Token]) -> set[str]:
    """Stemmed content words and normalised numbers (stop words and 1-letter words left out)."""
    return {t.key for t in tokens if t.is_number or (len(t.surface) > 1 and t.folded not in STOP_WORDS)}


def negated(tokens: list[Token]) -> bool:
    return any(t.folded in NEGATIONS for t in tokens)


def name_parts(token: Token) -> list[str]:
    """The folded parts of a (possibly hyphenated) name: ``Goethe-Institut`` -> two parts."""
    return [p for p in re.split(r"[-']", token.folded) if len(p) > 1]


def verbish(token: Token) -> bool:
    """A capitalised first word that looks like a verb or adverb (``Prefers``, ``Moved``)."""
    return token.folded.endswith(_VERBISH)
