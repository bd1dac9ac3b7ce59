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

from tiermem.extract.guard import clean_turns
from tiermem.extract.prompt import EXTRACTION_SCHEMA, build_extraction_messages
from tiermem.extract.run import extract_once
from tiermem.facts.store import FactStore, NewFact
from tiermem.models.protocols import ChatModel
from tiermem.types import Fact

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
) -> ExtractionReport:
    """Extract from ``turns`` into ``store``. Provider and parse errors propagate (nothing applied)."""
    run_id = "run_" + uuid.uuid4().hex[:12]
    cleaned = clean_turns(turns, scrub=scrub)
    if not cleaned:
        return ExtractionReport(run_id, thread_id)
    existing = store.list()
    short_ids = {index: fact for index, fact in enumerate(existing, start=1)}
    shown = [(i, f.content, f.category, f.confidence) for i, f in short_ids.items()]
    request = build_extraction_messages(shown, store.summaries(), cleaned, today)
    model = _CountingModel(llm)
    result = extract_once(model, request, EXTRACTION_SCHEMA, valid_short_ids=set(short_ids))

    report = ExtractionReport(run_id, thread_id, llm_calls=model.calls,
                              dropped=[(d.item, d.reason) for d in result.dropped])
    for item, reason in report.dropped:
        store.record("dropped", item, f"invalid in LLM reply: {reason}", run_id, thread_id)
    for short_id in result.facts_to_remove:
        fact = short_ids[short_id]
        store.delete(fact.id, reason="removed by extraction (outdated or corrected)", run_id=run_id)
        report.removed.append(fact)
    candidates = [NewFact(f.content, f.category, f.confidence, thread_id) for f in result.new_facts]
    for admission in store.admit(candidates, origin="extraction", run_id=run_id):
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
