"""The injection text of R21/R22: what memory holds, shaped for a system prompt, under a budget.

Sections, in this order, each left out when it has nothing to show::

    User Context:     summaries (work, personal, current focus)
    History:          summaries (recent months, earlier, background)
    Core Memory:      the MEMORY.md bullets (at most ``core_max_share`` of the budget)
    Facts:            ``- [category | 0.95] content``, by confidence
    Relevant notes:   Daily records for the query: ``- 2026-03-14 (memory/2026-03-14.md#L12): text``

Over ``max_tokens``, whole lines go first: facts from the end of their ranking (lowest
confidence, or least relevant when the facts were ranked for a query), then relevant notes from
the least relevant, then Core bullets from the end of the file (or of the relevance order). If
the text is still over, it is cut at the character level and ``"\\n..."`` appended.

:func:`render_injection` is pure: the output depends only on the pieces given (and the budget),
never on the time, so it is byte-stable while memory does not change and prompt caches stay warm.
:func:`core_by_relevance` and :func:`notes_from_hits` turn search hits into those pieces.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial

from tiermem.tokens import count_tokens, truncate_to_tokens
from tiermem.types import Fact, SearchHit

TRUNCATION_MARK = "\n..."
NOTE_MAX_CHARS = 400
"""A relevant note longer than this is cut at a word boundary and ends with "…"."""
DEFAULT_CORE_MAX_SHARE = 0.5

_USER_LABELS = (("workContext", "Work"), ("personalContext", "Personal"), ("topOfMind", "Current Focus"))
_HISTORY_LABELS = (("recentMonths", "Recent"), ("earlierContext", "Earlier"), ("longTermBackground", "Background"))
_RANGE_RE = re.compile(r"^(?P<path>.+)#L(?P<start>\d+)-L(?P<end>\d+)$")


@dataclass(frozen=True)
class CoreItem:
    """One ``MEMORY.md`` item (one line) and the lines of the bullet it comes from (1-based)."""

    line_start: int
    line_end: int
    text: str


@dataclass(frozen=True)
class Note:
    """A Daily record relevant to the query: its day, its citation and its text on one line."""

    day: str | None  # "2026-03-14"
    ref: str  # "memory/2026-03-14.md#L12" or "...#L12-L14"
    text: str

    def line(self) -> str:
        where = f"{self.day} ({self.ref})" if self.day else f"({self.ref})"
        return f"- {where}: {self.text}"


def fact_line(fact: Fact) -> str:
    """``- [category | 0.95] content`` (the seed's format)."""
    return f"- [{fact.category} | {fact.confidence:.2f}] {_one_line(fact.content)}"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _section(title: str, lines: Sequence[str]) -> str:
    return title + ":\n" + "\n".join(lines) if lines else ""


def rank_facts(facts: Sequence[Fact]) -> list[Fact]:
    """Confidence descending; ties broken by age then id so the order is stable."""
    return sorted(facts, key=lambda f: (-f.confidence, f.created_at, f.id))


# --- pieces from search hits --------------------------------------------------------------------
def _line_range(ref: str) -> tuple[str, int, int] | None:
    match = _RANGE_RE.match(ref)
    if match is None:
        return None
    return match["path"], int(match["start"]), int(match["end"])


def core_items(text: str) -> list[CoreItem]:
    """The items of a ``MEMORY.md`` text (those of :meth:`CoreFile.items`), each with its bullet's lines."""
    from tiermem.tiers.core import bullet_items
    from tiermem.tiers.markdown import parse_records

    return [CoreItem(record.line_start, record.line_end, item) for record in parse_records(text)
            if record.bullet for item in bullet_items(record.text)]


def core_by_relevance(bullets: Sequence[CoreItem], hits: Sequence[SearchHit]) -> list[CoreItem]:
    """The items a Core search returned, in hit order, then the others in file order.

    A hit names its lines (``MEMORY.md#L3-L4``); it brings forward every item whose bullet it overlaps.
    """
    chosen: dict[int, CoreItem] = {}
    for hit in hits:
        found = _line_range(hit.ref)
        if found is None:
            continue
        _, start, end = found
        for index, bullet in enumerate(bullets):
            if bullet.line_start <= end and start <= bullet.line_end:
                chosen.setdefault(index, bullet)
    rest = [bullet for index, bullet in enumerate(bullets) if index not in chosen]
    return [*chosen.values(), *rest]


def citation(ref: str) -> str:
    """``memory/2026-03-14.md#L12-L12`` -> ``...#L12``; a range of several lines stays a range."""
    found = _line_range(ref)
    if found is None:
        return ref
    path, start, end = found
    return f"{path}#L{start}" if start == end else f"{path}#L{start}-L{end}"


def clip(text: str, max_chars: int = NOTE_MAX_CHARS) -> str:
    """``text`` on one line, cut at a word boundary to about ``max_chars`` with "…" when longer."""
    line = _one_line(text)
    if len(line) <= max_chars:
        return line
    cut = line[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut).rstrip() + " …"


def notes_from_hits(hits: Sequence[SearchHit], facts: Sequence[Fact] = ()) -> list[Note]:
    """Daily hits as notes, best first; a hit cited twice, or whose text is exactly a fact's
    content (case and spacing aside), is left out."""
    known = {_one_line(f.content).casefold() for f in facts}
    notes: list[Note] = []
    seen: set[str] = set()
    for hit in hits:
        text = _one_line(hit.text)
        if hit.tier != "daily" or not text or hit.ref in seen or text.casefold() in known:
            continue
        seen.add(hit.ref)
        notes.append(Note(hit.date, citation(hit.ref), clip(text)))
    return notes


# --- the text -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Layout:
    """The lines of every section; the droppable lists in keep order (first kept longest)."""

    header: list[str]
    core: list[str]
    facts: list[Fact]
    notes: list[str]
    facts_ranked: bool

    def render(self, n_core: int, n_facts: int, n_notes: int) -> str:
        kept = self.facts[:n_facts]
        facts = rank_facts(kept) if self.facts_ranked else kept  # relevance chose; show by confidence
        sections = [*self.header, _section("Core Memory", self.core[:n_core]),
                    _section("Facts", [fact_line(f) for f in facts]),
                    _section("Relevant notes", self.notes[:n_notes])]
        return "\n\n".join(s for s in sections if s)


def _most_that_fit(fits: Callable[[int], bool], high: int) -> int:
    """The largest n in [0, high] with ``fits(n)``, assuming fits is monotone; 0 if none fits."""
    low = 0
    while low < high:
        mid = (low + high + 1) // 2
        if fits(mid):
            low = mid
        else:
            high = mid - 1
    return low


def _within_share(lines: list[str], max_tokens: int) -> list[str]:
    """The leading Core lines whose section fits ``max_tokens``."""
    if count_tokens(_section("Core Memory", lines)) <= max_tokens:
        return lines
    keep = _most_that_fit(lambda n: count_tokens(_section("Core Memory", lines[:n])) <= max_tokens, len(lines))
    return lines[:keep]


def _header(summaries: Mapping[str, str]) -> list[str]:
    user = [f"- {label}: {_one_line(summaries[key])}" for key, label in _USER_LABELS if summaries.get(key)]
    history = [f"- {label}: {_one_line(summaries[key])}" for key, label in _HISTORY_LABELS if summaries.get(key)]
    return [s for s in (_section("User Context", user), _section("History", history)) if s]


def render_injection(
    summaries: Mapping[str, str],
    facts: Sequence[Fact],
    max_tokens: int,
    core_items: Sequence[str] = (),
    facts_ranked: bool = False,
    notes: Sequence[Note] = (),
    core_max_share: float = DEFAULT_CORE_MAX_SHARE,
) -> str:
    """The injection text of these pieces within ``max_tokens`` (see the module docstring).

    ``facts``: ranked by confidence here unless ``facts_ranked`` (then their order is the
    relevance order that decides which stay; the kept ones are still shown by confidence).
    ``core_items``: ``MEMORY.md`` bullets in keep order; those beyond ``core_max_share`` of the
    budget are left out from the end. ``notes``: best first.
    """
    core = [f"- {_one_line(item)}" for item in core_items if _one_line(item)]
    layout = _Layout(_header(summaries), _within_share(core, int(max_tokens * core_max_share)),
                     list(facts) if facts_ranked else rank_facts(facts), [n.line() for n in notes], facts_ranked)
    counts = [len(layout.core), len(layout.facts), len(layout.notes)]

    def fits(stage: int, n: int) -> bool:
        trial = list(counts)
        trial[stage] = n
        return count_tokens(layout.render(*trial)) <= max_tokens

    for stage in (1, 2, 0):  # facts, then notes, then Core bullets
        if fits(stage, counts[stage]):
            break
        counts[stage] = _most_that_fit(partial(fits, stage), counts[stage])
    text = layout.render(*counts)
    if count_tokens(text) <= max_tokens:
        return text
    room = max(max_tokens - count_tokens(TRUNCATION_MARK), 0)
    return truncate_to_tokens(text, room) + TRUNCATION_MARK
