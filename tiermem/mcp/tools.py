"""The MCP tools and resources as plain methods over one ``Memory`` (no SDK import here).

Each method validates its input through the library and returns JSON-ready data; bad input
raises the library's typed errors (:class:`~tiermem.errors.InvalidInput`,
:class:`~tiermem.errors.FactNotFound`, ...), which :mod:`tiermem.mcp.server` turns into MCP tool
errors. The docstrings are the tool descriptions an agent reads; the ``Annotated`` fields are
the argument descriptions of the published input schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field

from tiermem.errors import FactNotFound, InvalidInput
from tiermem.facts.injection import rank_facts
from tiermem.facts.store import NewFact
from tiermem.plans.plan import PLAN_STATUSES
from tiermem.types import CATEGORIES, TIERS

if TYPE_CHECKING:
    from tiermem.memory import Memory

Content = Annotated[str, Field(description="The fact: one self-contained sentence.")]
Category = Annotated[str, Field(description="Kind of fact.", json_schema_extra={"enum": list(CATEGORIES)})]
OptionalCategory = Annotated[str | None, Field(description="Only facts of this category.",
                                               json_schema_extra={"enum": [*CATEGORIES, None]})]
Confidence = Annotated[float, Field(description="How sure you are, 0.0 to 1.0; below the threshold "
                                    "(default 0.5) the fact is not stored.",
                                    json_schema_extra={"minimum": 0, "maximum": 1})]
Query = Annotated[str, Field(description="What to look for, in plain words.")]
TopK = Annotated[int, Field(description="How many hits to return (1-100).",
                            json_schema_extra={"minimum": 1, "maximum": 100})]
Tier = Annotated[str | None, Field(description="Only hits from this tier.",
                                   json_schema_extra={"enum": [*TIERS, None]})]
MinScore = Annotated[float | None, Field(description="Leave out hits scoring below this (0-1); default: the "
                                         "relevance floor of the memory's embedder; 0 returns every hit.",
                                         json_schema_extra={"minimum": 0, "maximum": 1})]
FactId = Annotated[str, Field(description="A fact id such as fact_1a2b3c4d (from recall or list_facts).")]
PlanId = Annotated[str, Field(description="A plan id such as plan_1a2b3c4d (from plan_list or plan_active).")]
Status = Annotated[str | None, Field(description="Only plans with this status.",
                                     json_schema_extra={"enum": [*PLAN_STATUSES, None]})]
SessionId = Annotated[str | None, Field(description="Optional id of the current session, recorded on the plan.")]

MAX_K = 100


class MemoryTools:
    """What the MCP server offers, bound to one ``Memory`` (one scope).

    A coding agent's project scope (R74, :meth:`~tiermem.config.Settings.coding_person_scope`)
    comes with its person scope: ``remember`` puts the person categories there, ``recall``,
    ``list_facts``, ``forget`` and ``memory://injection`` cover both; the journal, ``MEMORY.md``,
    plans and Deep Dream stay with the project."""

    def __init__(self, mem: Memory) -> None:
        self.mem = mem
        person = mem.settings.coding_person_scope(mem.scope)
        self.person = mem.for_scope(person.user_id, person.agent_name) if person is not None else None

    def _scopes(self) -> list[Memory]:
        return [self.mem] if self.person is None else [self.mem, self.person]

    def _facts_for(self, category: str) -> Any:
        if self.person is not None and category in self.mem.settings.person_categories():
            return self.person.facts
        return self.mem.facts

    def _relative(self, path: Path) -> str:
        try:
            return path.resolve().relative_to(self.mem.root).as_posix()
        except ValueError:
            return str(path)

    # --- facts -----------------------------------------------------------------------------
    def remember(self, content: Content, category: Category = "knowledge",
                 confidence: Confidence = 1.0) -> dict[str, Any]:
        """Store a fact in long-term memory (Core tier). Returns the stored fact, or status
        "skipped" with the reason (a duplicate, confidence below the threshold, ...)."""
        item = NewFact.checked(content, category, confidence, None)
        [admission] = self._facts_for(item.category).admit([item])
        if admission.fact is not None:
            return {"status": "remembered", "fact": admission.fact.to_dict()}
        return {"status": "skipped", "reason": admission.reason, "content": item.content}

    def recall(self, query: Query, k: TopK = 10, category: OptionalCategory = None,
               tier: Tier = None, min_score: MinScore = None) -> dict[str, Any]:
        """Search memory (facts, MEMORY.md, daily notes) by meaning and keywords. Each hit has
        its text, tier ("fact" | "core" | "daily"), ref (a fact id or "memory/DATE.md#Lx-Ly")
        and score in [0, 1], best first. Hits below the relevance floor are left out; when none
        is left, "message" says so: nothing stored is relevant to the query."""
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise InvalidInput(f"k must be an integer in [1, {MAX_K}], got {k!r}")
        hits = self.mem.search(query, k=k, category=category, tier=tier, min_score=min_score)
        if self.person is not None:  # both scopes' hits by score (scores are comparable, R49a)
            hits += self.person.search(query, k=k, category=category, tier=tier, min_score=min_score)
            hits = sorted(hits, key=lambda hit: -hit.score)[:k]
        floor = min_score if min_score is not None else self.mem.search_floor()
        if not hits:
            message = f"No memories scored above the relevance floor ({floor:.2f}) for this query."
        else:
            message = f"{len(hits)} hit(s) scored above the relevance floor ({floor:.2f}), best first."
        return {"query": query, "min_score": floor, "message": message, "hits": [hit.to_dict() for hit in hits]}

    def forget(self, id: FactId) -> dict[str, Any]:
        """Delete a fact by id. Its content is tombstoned, so automatic extraction will not add it
        back (remember can)."""
        *others, last = self._scopes()
        for mem in others:
            try:
                fact = mem.facts.get(id)
            except FactNotFound:
                continue
            mem.facts.delete(id)
            return {"status": "forgotten", "fact": fact.to_dict()}
        fact = last.facts.get(id)  # FactNotFound when no scope holds it
        last.facts.delete(id)
        return {"status": "forgotten", "fact": fact.to_dict()}

    def list_facts(self, category: OptionalCategory = None) -> dict[str, Any]:
        """List the stored facts, highest confidence first (optionally one category)."""
        facts = rank_facts([fact for mem in self._scopes() for fact in mem.facts.list(category)])
        return {"count": len(facts), "facts": [fact.to_dict() for fact in facts]}

    # --- daily journal and Deep Dream ------------------------------------------------------
    def daily_note(self, text: Annotated[str | None, Field(description="One note (may span several lines).")] = None,
                   lines: Annotated[list[str] | None, Field(description="Several notes, one record each.")] = None,
                   kind: Annotated[str, Field(description="Heading of the block, e.g. Note, Decision.")] = "Note",
                   ) -> dict[str, Any]:
        """Append notes to today's daily journal (memory/YYYY-MM-DD.md) under "## <kind> (HH:MM)".
        Give either text or lines."""
        records: str | list[str]
        if text is not None and lines is None:
            records = text
        elif lines is not None and text is None:
            records = lines
        else:
            raise InvalidInput("give either text or lines (not both, not neither)")
        path = self.mem.daily.append(kind, records)
        return {"status": "appended", "path": self._relative(path),
                "lines": 1 if isinstance(records, str) else len(records)}

    def dream(self, days: Annotated[int, Field(description="Read the daily files of this many most "
                                               "recent days (including today).")] = 1,
              force: Annotated[bool, Field(description="Run even if nothing changed, and accept a "
                                           "rewrite that drops many bullets.")] = False,
              dry_run: Annotated[bool, Field(description="Show what would be written; change "
                                             "nothing.")] = False) -> dict[str, Any]:
        """Deep Dream: consolidate recent daily notes into MEMORY.md with the configured LLM.
        Returns status "written" | "skipped" | "refused", the reason, the diff and the bullets
        dropped as unsupported by the sources."""
        result = self.mem.deep_dream(lookback_days=days, force=force, dry_run=dry_run)
        return result.to_dict()

    # --- plans (boulder state) -------------------------------------------------------------
    def plan_start(self, title: Annotated[str, Field(description="One-line title of the plan.")],
                   checklist: Annotated[str | list[str], Field(description="The steps: a list of "
                                        "strings, or Markdown '- [ ] step' lines.")],
                   session_id: SessionId = None) -> dict[str, Any]:
        """Start a work-in-progress plan that survives the session; the previous active plan is
        paused. Items are checked off with plan_check (0-based index)."""
        return self.mem.plans.start(title, checklist, session_id=session_id).to_dict()

    def plan_active(self, session_id: SessionId = None) -> dict[str, Any]:
        """The active plan and a prompt telling where work left off (plan null when none)."""
        found = self.mem.plans.continuation(session_id)
        if found is None:
            return {"plan": None, "prompt": None}
        plan, prompt = found
        return {"plan": plan.to_dict(), "prompt": prompt}

    def plan_check(self, plan_id: PlanId,
                   index: Annotated[int, Field(description="0-based index of the checklist item.")],
                   done: Annotated[bool, Field(description="false un-checks the item.")] = True,
                   ) -> dict[str, Any]:
        """Mark a checklist item of a plan done (or not done)."""
        plans = self.mem.plans
        plan = plans.check(plan_id, index) if done else plans.uncheck(plan_id, index)
        return plan.to_dict()

    def plan_list(self, status: Status = None) -> dict[str, Any]:
        """List the plans, newest first (optionally only one status)."""
        plans = self.mem.plans.list(status)
        return {"count": len(plans), "plans": [plan.to_dict() for plan in plans]}

    def plan_pause(self, plan_id: PlanId) -> dict[str, Any]:
        """Pause a plan (it can be resumed later)."""
        return self.mem.plans.pause(plan_id).to_dict()

    def plan_resume(self, plan_id: PlanId) -> dict[str, Any]:
        """Make a paused plan active again (the current active plan is paused)."""
        return self.mem.plans.resume(plan_id).to_dict()

    def plan_complete(self, plan_id: PlanId) -> dict[str, Any]:
        """Mark a plan completed (final)."""
        return self.mem.plans.complete(plan_id).to_dict()

    # --- resources -------------------------------------------------------------------------
    def core_text(self) -> str:
        """MEMORY.md of this user ("" while it does not exist)."""
        text: str = self.mem.core.read()
        return text

    def daily_text(self, day: str | None = None) -> str:
        """The daily file of ``day`` (YYYY-MM-DD; today by default), "" when nothing was written."""
        text: str = self.mem.daily.read(day)
        return text

    def injection_text(self) -> str:
        """The injection text for a system prompt: summaries, Core memory (MEMORY.md) and facts,
        within the token budget of the config."""
        if self.person is not None:
            from tiermem.agents.inject import memory_text

            return memory_text(self.person, self.mem, self.mem.settings.max_injection_tokens)
        return self.mem.format_for_injection()


TOOL_NAMES: tuple[str, ...] = (
    "remember", "recall", "forget", "list_facts", "daily_note", "dream",
    "plan_start", "plan_active", "plan_check", "plan_list", "plan_pause", "plan_resume", "plan_complete",
)
