"""One extraction run end to end: clean the turns, ask the model, apply the reply through the
fact store (dedup, threshold, cap, tombstones, audit), and report what happened (R23, R26, R27).

No SQL here: every change goes through :class:`~tiermem.facts.store.FactStore`.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from tiermem.config import Settings
from tiermem.extract.guard import clean_turns
from tiermem.extract.prompt import EXTRACTION_SCHEMA, build_extraction_messages
from tiermem.extract.run import extract_once
from tiermem.facts.store import Admission, FactStore, NewFact
from tiermem.models.protocols import ChatModel
from tiermem.types import Fact, Scope

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ExtractionReport:
    """What one run did. ``skipped`` and ``dropped`` are (content or item, reason) pairs."""

    run_id: str
    thread_id: str | None
    added: list[Fact] = field(default_factory=list)
    removed: list[Fact] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[tuple[str, str]] = field(default_factory=list)
    summaries_updated: list[str] = field(default_factory=list)
    llm_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "runId": self.run_id,
            "threadId": self.thread_id,
            "added": [f.to_dict() for f in self.added],
            "removed": [f.to_dict() for f in self.removed],
            "skipped": [{"content": c, "reason": r} for c, r in self.skipped],
            "dropped": [{"item": c, "reason": r} for c, r in self.dropped],
            "summariesUpdated": self.summaries_updated,
            "llmCalls": self.llm_calls,
        }


class _CountingModel:
    """Counts the calls ``extract_once`` makes (one, or two with the retry)."""

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner
        self.calls = 0

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        self.calls += 1
        return self.inner.complete(messages, json_schema=json_schema)


def run_extraction(
    store: FactStore,
    llm: ChatModel,
    turns: Sequence[Mapping[str, Any]],
    today: date,
    thread_id: str | None = None,
    scrub: Callable[[str], str] | None = None,
    routing: Mapping[str, FactStore] | None = None,
) -> ExtractionReport:
    """Extract from ``turns`` into ``store``. Provider and parse errors propagate (nothing applied).

    ``routing``: category -> the store new facts of that category go to instead (a coding agent's
    person scope, R74); the model sees the facts of every store involved, and a fact it removes
    by short id is removed from the store that holds it. Summaries stay with ``store``."""
    run_id = "run_" + uuid.uuid4().hex[:12]
    cleaned = clean_turns(turns, scrub=scrub)
    if not cleaned:
        return ExtractionReport(run_id, thread_id)
    routes = dict(routing or {})
    stores = list({id(s): s for s in (store, *routes.values())}.values())
    owned = [(owner, fact) for owner in stores for fact in owner.list()]
    short_ids = {index: pair for index, pair in enumerate(owned, start=1)}
    shown = [(i, f.content, f.category, f.confidence) for i, (_, f) in short_ids.items()]
    request = build_extraction_messages(shown, store.summaries(), cleaned, today)
    model = _CountingModel(llm)
    result = extract_once(model, request, EXTRACTION_SCHEMA, valid_short_ids=set(short_ids))

    report = ExtractionReport(run_id, thread_id, llm_calls=model.calls,
                              dropped=[(d.item, d.reason) for d in result.dropped])
    for item, reason in report.dropped:
        store.record("dropped", item, f"invalid in LLM reply: {reason}", run_id, thread_id)
    for short_id in result.facts_to_remove:
        owner, fact = short_ids[short_id]
        owner.delete(fact.id, reason="removed by extraction (outdated or corrected)", run_id=run_id)
        report.removed.append(fact)
    candidates = [NewFact(f.content, f.category, f.confidence, thread_id) for f in result.new_facts]
    for admission in _admit_routed(store, routes, candidates, run_id):
        if admission.fact is not None:
            report.added.append(admission.fact)
        else:
            report.skipped.append((admission.item.content, admission.reason or "skipped"))
    if result.summaries:
        store.set_summaries(result.summaries, run_id)
        report.summaries_updated.extend(sorted(result.summaries))
    log.info("extraction %s: %d added, %d removed, %d skipped, %d dropped", run_id, len(report.added),
             len(report.removed), len(report.skipped), len(report.dropped))
    return report


def _admit_routed(store: FactStore, routes: Mapping[str, FactStore], candidates: list[NewFact],
                  run_id: str) -> list[Admission]:
    """Each candidate admitted by the store its category routes to; results in candidate order."""
    groups: dict[int, tuple[FactStore, list[int]]] = {}
    for index, item in enumerate(candidates):
        target = routes.get(item.category, store)
        groups.setdefault(id(target), (target, []))[1].append(index)
    results: dict[int, Admission] = {}
    for target, indexes in groups.values():
        admitted = target.admit([candidates[i] for i in indexes], origin="extraction", run_id=run_id)
        results.update(zip(indexes, admitted, strict=True))
    return [results[index] for index in range(len(candidates))]


def coding_routing(scope: Scope, settings: Settings, person_facts: Callable[[str], FactStore]
                   ) -> dict[str, FactStore] | None:
    """The routing of a coding agent's project scope (R74): the person categories
    (``coding_person_categories``) go to the person's facts (``person_facts(person user id)``);
    ``None`` for every other scope, the person's own included."""
    person = settings.coding_person_scope(scope)
    categories = settings.person_categories()
    if person is None or not categories:
        return None
    target = person_facts(person.user_id)
    return {category: target for category in categories}
