"""``mem.facts``: create, read, update and delete facts with the rules of R14-R19, R26, R27.

Every rule that skips or removes something logs it and writes an audit entry: duplicates
(casefolded, whitespace-folded content), low confidence, the ``max_facts`` cap (lowest
confidence evicted, oldest first), and tombstoned content coming back from extraction.
"""

from __future__ import annotations

import builtins
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Literal

from tiermem import validate
from tiermem.clock import Clock, utc_iso
from tiermem.errors import FactNotFound, InvalidInput
from tiermem.redact import redact
from tiermem.storage.facts import FactRepository
from tiermem.types import SUMMARY_KEYS, AuditEntry, Fact, Scope

log = logging.getLogger(__name__)

Origin = Literal["user", "extraction", "import"]
MAX_SOURCE_CHARS = 256
FactListener = Callable[[str, Fact], None]  # ("added" | "updated" | "deleted", fact)


@dataclass(frozen=True)
class FactPolicy:
    """The admission rules of a store (from Settings)."""

    confidence_threshold: float = 0.5
    max_facts: int = 500
    redact_secrets: bool = True


@dataclass(frozen=True)
class NewFact:
    """A validated candidate for :meth:`FactStore.add_many`."""

    content: str
    category: str = "knowledge"
    confidence: float = 1.0
    source: str | None = None

    @classmethod
    def checked(cls, content: object, category: object, confidence: object, source: object) -> NewFact:
        if source is not None:
            validate.text(source, "source", MAX_SOURCE_CHARS)  # a thread id: bounded, printable
        checked_source = source if isinstance(source, str) else None
        return cls(validate.content(content), validate.category(category), validate.confidence(confidence),
                   checked_source)


@dataclass(frozen=True)
class Admission:
    """The outcome of one candidate: the stored fact, or ``None`` and the reason it was skipped."""

    item: NewFact
    fact: Fact | None
    reason: str | None


class FactStore:
    """The facts of one scope (user, agent) in a shared database."""

    def __init__(self, repo: FactRepository, scope: Scope, clock: Clock, policy: FactPolicy) -> None:
        self.repo = repo
        self.scope = scope
        self.clock = clock
        self.policy = policy
        self._listeners: list[FactListener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: FactListener) -> None:
        """Call ``listener(event, fact)`` after each committed change (search index, ...)."""
        with self._lock:
            self._listeners.append(listener)

    def _notify(self, events: list[tuple[str, Fact]]) -> None:
        for event, fact in events:
            for listener in list(self._listeners):
                listener(event, fact)

    # --- create ----------------------------------------------------------------------------
    def add(
        self,
        content: str,
        category: str = "knowledge",
        confidence: float = 1.0,
        source: str | None = None,
        *,
        origin: Origin = "user",
        run_id: str | None = None,
    ) -> Fact | None:
        """Store a fact; ``None`` when a rule skipped it (duplicate, low confidence, tombstone)."""
        return self.add_many([NewFact.checked(content, category, confidence, source)], origin=origin,
                             run_id=run_id)[0]

    def add_many(
        self, items: Iterable[NewFact], *, origin: Origin = "user", run_id: str | None = None
    ) -> list[Fact | None]:
        """Store several facts in one transaction; one result per item, in order."""
        return [a.fact for a in self.admit(items, origin=origin, run_id=run_id)]

    def admit(
        self, items: Iterable[NewFact], *, origin: Origin = "user", run_id: str | None = None
    ) -> list[Admission]:
        """Like :meth:`add_many`, but each result also says why an item was skipped."""
        results: list[Admission] = []
        events: list[tuple[str, Fact]] = []
        with self.repo.atomic():
            for item in items:
                results.append(self._admit(self._scrubbed(item), origin, run_id, events))
        self._notify(events)
        return results

    def _scrubbed(self, item: NewFact) -> NewFact:
        """R68: secrets never reach the database."""
        return replace(item, content=redact(item.content)) if self.policy.redact_secrets else item

    def _admit(self, item: NewFact, origin: Origin, run_id: str | None, events: list[tuple[str, Fact]]) -> Admission:
        norm = validate.normalise(item.content)
        skip = self._skip_reason(item, norm, origin)
        if skip:
            log.info("fact skipped (%s): %r", skip, item.content[:120])
            self._audit("skipped", None, item.content, skip, item.source, run_id)
            return Admission(item, None, skip)
        if origin == "user":
            self.repo.remove_tombstone(self.scope, norm)  # a person may bring deleted content back
        while self.repo.count(self.scope) >= self.policy.max_facts:
            self._evict(run_id, events)
        now = self.clock.now()
        fact = Fact(self._new_id(), item.content, item.category, item.confidence, now, now, item.source,
                    self.scope.user_id, self.scope.agent_name)
        while not self.repo.insert(fact, norm):
            fact = replace(fact, id=self._new_id())
        self._audit("added", fact.id, fact.content, f"{origin}, confidence {fact.confidence:.2f}", item.source, run_id)
        events.append(("added", fact))
        return Admission(item, fact, None)

    def _skip_reason(self, item: NewFact, norm: str, origin: Origin) -> str | None:
        if item.confidence < self.policy.confidence_threshold:
            return f"confidence {item.confidence:.2f} below threshold {self.policy.confidence_threshold:.2f}"
        existing = self.repo.find_by_norm(self.scope, norm)
        if existing is not None:
            return f"duplicate of {existing.id}"
        if origin == "extraction" and self.repo.is_tombstoned(self.scope, norm):
            return "tombstoned: deleted or corrected before"
        return None

    def _evict(self, run_id: str | None, events: list[tuple[str, Fact]]) -> None:
        victim = self.repo.lowest(self.scope)
        if victim is None:  # pragma: no cover - count said there was one
            return
        self.repo.delete(self.scope, victim.id)
        reason = f"max_facts {self.policy.max_facts} reached; lowest confidence {victim.confidence:.2f}"
        log.info("fact %s evicted (%s)", victim.id, reason)
        self._audit("evicted", victim.id, victim.content, reason, victim.source, run_id)
        events.append(("deleted", victim))

    @staticmethod
    def _new_id() -> str:
        return "fact_" + uuid.uuid4().hex[:8]

    # --- read ------------------------------------------------------------------------------
    def get(self, fact_id: str) -> Fact:
        validate.fact_id(fact_id)
        fact = self.repo.get(self.scope, fact_id)
        if fact is None:
            raise FactNotFound(f"no fact {fact_id!r} in scope {self.scope.user_id}/{self.scope.agent_name}")
        return fact

    def list(self, category: str | None = None) -> list[Fact]:
        """All facts of the scope, highest confidence first."""
        if category is not None:
            validate.category(category)
        return self.repo.list(self.scope, category)

    def count(self) -> int:
        return self.repo.count(self.scope)

    # --- update / delete -------------------------------------------------------------------
    def update(
        self,
        fact_id: str,
        content: str | None = None,
        category: str | None = None,
        confidence: float | None = None,
    ) -> Fact:
        """Change only the fields given; ``createdAt`` never changes."""
        new_content = validate.content(content) if content is not None else None
        if new_content is not None and self.policy.redact_secrets:
            new_content = redact(new_content)
        new_category = validate.category(category) if category is not None else None
        new_confidence = validate.confidence(confidence) if confidence is not None else None
        if new_content is None and new_category is None and new_confidence is None:
            return self.get(fact_id)  # nothing given: nothing changes, not even updatedAt
        with self.repo.atomic():
            old = self.get(fact_id)
            fact = replace(
                old,
                content=new_content if new_content is not None else old.content,
                category=new_category or old.category,
                confidence=new_confidence if new_confidence is not None else old.confidence,
                updated_at=self.clock.now(),
            )
            norm = validate.normalise(fact.content)
            other = self.repo.find_by_norm(self.scope, norm)
            if other is not None and other.id != fact.id:
                raise InvalidInput(f"content duplicates fact {other.id}")
            self.repo.update(fact, norm)
            self._audit("updated", fact.id, fact.content, self._changes(old, fact), fact.source, None)
        self._notify([("updated", fact)])
        return fact

    @staticmethod
    def _changes(old: Fact, new: Fact) -> str:
        changed = [f for f in ("content", "category", "confidence") if getattr(old, f) != getattr(new, f)]
        return "changed " + ", ".join(changed) if changed else "no change"

    def delete(self, fact_id: str, reason: str = "deleted by user", *, run_id: str | None = None) -> None:
        """Remove a fact and tombstone its content (R27). Unknown id: :class:`FactNotFound`."""
        self.delete_many([fact_id], reason, run_id=run_id)

    def delete_many(self, fact_ids: Iterable[str], reason: str = "deleted by user", *,
                    run_id: str | None = None) -> builtins.list[Fact]:
        """Remove several facts in one transaction, all or none: if any id is unknown,
        :class:`FactNotFound` names every unknown one and nothing is deleted. Returns the
        deleted facts (an id given twice counts once)."""
        ids = [validate.fact_id(i) for i in dict.fromkeys(fact_ids)]
        with self.repo.atomic():
            found = [(i, self.repo.get(self.scope, i)) for i in ids]
            missing = [i for i, fact in found if fact is None]
            if missing:
                names = ", ".join(repr(i) for i in missing)
                where = f"in scope {self.scope.user_id}/{self.scope.agent_name}"
                raise FactNotFound(f"no fact {names} {where}" + ("; nothing was deleted" if len(ids) > 1 else ""))
            facts = [fact for _, fact in found if fact is not None]
            for fact in facts:
                self.repo.delete(self.scope, fact.id)
                self.repo.add_tombstone(self.scope, validate.normalise(fact.content), fact.content, reason,
                                        utc_iso(self.clock.now()))
                self._audit("deleted", fact.id, fact.content, reason, fact.source, run_id)
        for fact in facts:
            log.info("fact %s deleted (%s)", fact.id, reason)
        self._notify([("deleted", fact) for fact in facts])
        return facts

    # --- audit and summaries ---------------------------------------------------------------
    def _audit(self, action: str, fact_id: str | None, content: str | None, reason: str,
               source: str | None, run_id: str | None) -> None:
        entry = AuditEntry(0, self.clock.now(), action, fact_id, content, reason, source, run_id)
        self.repo.audit(self.scope, entry)

    def record(self, action: str, content: str | None, reason: str, run_id: str | None = None,
               source: str | None = None) -> None:
        """Add an audit entry for something that did not touch a fact (e.g. an item an LLM reply
        had that was dropped while parsing)."""
        self._audit(action, None, content, reason, source, run_id)

    def history(self, limit: int | None = None, fact_id: str | None = None) -> builtins.list[AuditEntry]:
        """The audit trail of this scope, oldest first (the last ``limit`` entries)."""
        return self.repo.history(self.scope, limit, fact_id)

    def summaries(self) -> dict[str, str]:
        """``workContext``, ``topOfMind``, ... -> text (only the ones that exist)."""
        return {key: text for key, (text, _) in self.repo.summaries(self.scope).items() if text}

    def set_summaries(self, updates: dict[str, str], run_id: str | None = None) -> None:
        for key in updates:
            if key not in SUMMARY_KEYS:
                raise InvalidInput(f"unknown summary {key!r}; expected one of {', '.join(SUMMARY_KEYS)}")
        at = utc_iso(self.clock.now())
        with self.repo.atomic():
            for key, text in updates.items():
                self.repo.set_summary(self.scope, key, text.strip(), at)
                self._audit("summary", None, text.strip()[:500], f"{key} updated", None, run_id)
