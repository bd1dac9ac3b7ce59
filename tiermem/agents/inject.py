"""What a coding agent is told (R72): the memory text at session start, the relevant memory per prompt.

Both read the two scopes of the session (:mod:`tiermem.agents.project`): the person's facts and
the project's ``MEMORY.md``, facts, active plan and journal.

- :func:`start_context` (no query, no embedder): a heading saying whose memory this is, then
  ``Core Memory:`` (the project's ``MEMORY.md``) and ``Facts:`` (person and project, by
  confidence) as :func:`~tiermem.facts.injection.render_injection` lays them out, the project's
  active plan with its continuation prompt (R55) and its recent Daily notes, through the sources of
  :mod:`tiermem.syscontext` — within ``coding_start_tokens``. ``source`` ``compact`` or ``clear``
  (the client forgot the conversation) forgets what the session was given first.
- :func:`prompt_context` (searches, so it needs the embedder: the resident server calls it):
  the facts of both scopes and the project's Daily notes (the journal is the project's) that
  score at least :func:`injection_floor` for the prompt, minus what this session was given
  already, within ``coding_prompt_tokens``; ``""`` when nothing is relevant (the hook then prints
  nothing at all). The prompt is embedded once for the three searches.

What each one shows is added to ``state.given`` (fact ids, and ``<user>:<ref>`` of Daily records,
those the start text shows among them), which
the caller keeps per session (:mod:`tiermem.agents.session_state`).
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING, Protocol

from tiermem.facts.injection import citation, core_items, fact_line, notes_from_hits, render_injection
from tiermem.tokens import count_tokens, truncate_to_tokens
from tiermem.types import Fact, SearchHit

if TYPE_CHECKING:
    from tiermem.memory import Memory
    from tiermem.search.engine import QueryVector

START_HEADING = ("Memory from tiermem: what earlier sessions taught about this person and this project "
                 "(use it where it helps; do not repeat it back).")
PROMPT_HEADING = "Memory from tiermem relevant to this prompt (from earlier sessions):"
FORGET_SOURCES = ("compact", "clear")  # session-start sources after which the conversation is gone
SEPARATOR = "\n\n"
PLAN_SHARE = 3  # the plan gets at most 1/3 of the start budget
DAILY_SHARE = 4  # the recent notes at most 1/4
DAILY_DAYS = 2
PROMPT_FACTS = 10  # fact hits asked of each scope per prompt
MAX_PROMPT_CHARS = 4000  # the head of a longer prompt is the query
_HOOK_CONTEXT_RE = re.compile(r"<hook_context>.*?</hook_context>", re.DOTALL)  # Gemini CLI puts ours in the prompt


class GivenState(Protocol):
    """What inject needs of a session's state: the refs it was given (kept by the caller)."""

    @property
    def given(self) -> set[str]: ...


def injection_floor(mem: Memory) -> float:
    """The score a hit needs to be injected unasked (R49a): the floor of automatic injection
    (``search_inject_min_score``, else the embedder model's default; :mod:`tiermem.search.floor`)."""
    return mem.search_floor("inject")


def _tokens(text: str) -> int:
    return count_tokens(text) if text else 0


def _cut(text: str, max_tokens: int) -> str:
    if _tokens(text) <= max_tokens:
        return text
    return truncate_to_tokens(text, max(max_tokens - 1, 0)).rstrip() + "\n..." if max_tokens > 1 else ""


def start_context(person: Memory, project: Memory, state: GivenState, source: str | None, budget: int) -> str:
    """The session-start text of both scopes within ``budget`` tokens ("" when memory is empty)."""
    from tiermem.syscontext.defaults import memory_sources

    if source in FORGET_SOURCES:
        state.given.clear()
    room = budget - _tokens(START_HEADING) - 3 * _tokens(SEPARATOR)
    _, plan_source, daily_source = memory_sources(project, DAILY_DAYS, max(room // DAILY_SHARE, 1))
    plan = _cut(plan_source.render(), room // PLAN_SHARE)
    daily = daily_source.render()
    memory, facts = _memory_section(person, project, room - _tokens(plan) - _tokens(daily))
    sections = [section for section in (memory, plan, daily) if section.strip()]
    if not sections:
        return ""
    text = _cut(SEPARATOR.join([START_HEADING, *sections]), budget)
    state.given.update(fact.id for fact in facts if fact_line(fact) in text)
    state.given.update(_notes_shown(project, text))
    return text


def _notes_shown(project: Memory, text: str) -> set[str]:
    """The Daily records of the start window that ``text`` shows, keyed as :func:`prompt_context`
    keys the notes it gives (so a prompt does not bring them again)."""
    from tiermem.paths import DAILY_DIR
    from tiermem.tiers.markdown import parse_records

    today = project.daily.today()
    shown: set[str] = set()
    for day in (today - timedelta(days=back) for back in range(DAILY_DAYS)):
        for record in parse_records(project.daily.read(day)):
            if record.bullet and record.text.strip() and record.text.strip() in text:
                ref = f"{DAILY_DIR}/{day.isoformat()}.md#L{record.line_start}-L{record.line_end}"
                shown.add(_note_key(project, ref))
    return shown


def _memory_section(person: Memory, project: Memory, max_tokens: int) -> tuple[str, list[Fact]]:
    """Summaries, ``Core Memory:`` and ``Facts:`` of both scopes (the project's summaries and
    ``MEMORY.md``), and the facts it was made from."""
    facts = [*person.facts.list(), *project.facts.list()]
    if max_tokens <= 0:
        return "", facts
    settings = project.settings
    core = [item.text for item in core_items(project.core.read())] if settings.inject_core else []
    return render_injection(project.facts.summaries(), facts, max_tokens, core,
                            core_max_share=settings.inject_core_max_share), facts


def memory_text(person: Memory, project: Memory, max_tokens: int) -> str:
    """The injection text (R21) of both scopes: the project's summaries and ``MEMORY.md``, the
    facts of both by confidence (the MCP server's ``memory://injection`` for a coding agent)."""
    return _memory_section(person, project, max_tokens)[0]


def prompt_query(prompt: str) -> str:
    """The search query of a prompt: without context a client put into it, at most
    :data:`MAX_PROMPT_CHARS`, on no account control characters; "" when nothing is left."""
    text = _HOOK_CONTEXT_RE.sub(" ", prompt)[:MAX_PROMPT_CHARS]
    text = "".join(ch if ch.isprintable() or ch in "\n\t" else " " for ch in text)
    return text.strip()


def _note_key(mem: Memory, ref: str) -> str:
    return f"{mem.scope.user_id}:{ref}"


def _relevant(mem: Memory, query: str, floor: float, given: set[str], vector: QueryVector,
              notes: bool = True) -> tuple[list[tuple[float, Fact]], list[SearchHit]]:
    """The facts (with their scores) and, with ``notes``, the Daily hits of ``mem`` over ``floor``
    for ``query`` (embedded as ``vector``) that were not given yet."""
    from tiermem.errors import NotFound

    facts: list[tuple[float, Fact]] = []
    for hit in mem.search(query, k=PROMPT_FACTS, tier="fact", min_score=floor, query_vector=vector):
        if hit.ref not in given:
            try:
                facts.append((hit.score, mem.facts.get(hit.ref)))
            except NotFound:  # removed since the index saw it
                continue
    limit = mem.settings.inject_notes if notes else 0
    hits = mem.search(query, k=limit, tier="daily", min_score=floor, query_vector=vector) if limit else []
    return facts, [hit for hit in hits if _note_key(mem, hit.ref) not in given]


def prompt_context(person: Memory, project: Memory, state: GivenState, prompt: str, budget: int) -> str:
    """The memory relevant to ``prompt`` that this session was not given yet, within ``budget``
    tokens; "" when nothing scores over the injection floor."""
    query = prompt_query(prompt)
    if not query:
        return ""
    floor = injection_floor(project)
    vector = project.embed_query(query)  # one embedding for every search (the server's scopes share the model)
    scored: list[tuple[float, Fact]] = []
    noted: list[tuple[Memory, SearchHit]] = []
    for mem in (person, project):  # the journal is the project's: the person scope gives facts
        found, hits = _relevant(mem, query, floor, state.given, vector, notes=mem is project)
        scored += found
        noted += [(mem, hit) for hit in hits]
    facts = [fact for _, fact in sorted(scored, key=lambda pair: -pair[0])]
    noted.sort(key=lambda pair: -pair[1].score)
    notes = notes_from_hits([hit for _, hit in noted], facts)
    room = budget - _tokens(PROMPT_HEADING) - _tokens(SEPARATOR)
    if (not facts and not notes) or room <= 0:
        return ""
    body = render_injection({}, facts, room, facts_ranked=True, notes=notes)
    if not body.strip():
        return ""
    text = PROMPT_HEADING + SEPARATOR + body
    state.given.update(fact.id for fact in facts if fact_line(fact) in text)
    shown = {note.ref for note in notes if note.line() in text}
    state.given.update(_note_key(mem, hit.ref) for mem, hit in noted if citation(hit.ref) in shown)
    return text
