"""``mem.facts``: create, read, update and delete facts with the rules of R14-R19, R26, R27.

Every rule that skips or removes something logs it and writes an audit entry: duplicates
(casefolded, whitespace-folded content), low confidence, tombstoned content coming back from
extraction, and the ``max_facts`` cap (R18): over it, a new fact competes with the kept ones on
confidence — weaker than every kept fact, it is skipped; otherwise the weakest kept fact is
evicted (older first on ties: earlier ``created_at``, then earlier insertion). Facts of the
``"import"`` origin do not compete (an import restores; it never re-admits).

A batch counts the scope's facts once and keeps the count as it adds and evicts, and the eviction
candidate is one index seek, so ``add_many`` of n facts costs O(n log N) whatever the scope's size N.
It also asks the database in bulk (duplicates and tombstones of all its contents in one query, new
ids checked together, facts and audit entries written with one statement each): the per-fact round
trips were most of a batch's non-embedding time (issue 16).
"""

from __future__ import annotations

import builtins
import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal

from tiermem import validate
from tiermem.clock import Clock, utc_iso
from tiermem.errors import FactNotFound, InvalidInput
from tiermem.redact import redact, redact_id
from tiermem.storage.facts import FactRepository
from tiermem.storage.sql import scope_key
from tiermem.types import SUMMARY_KEYS, AuditEntry, Fact, Scope

if TYPE_CHECKING:
    from datetime import datetime

log = logging.getLogger(__name__)

Origin = Literal["user", "extraction", "import"]
MAX_SOURCE_CHARS = 256
MAX_PAGE = 10_000  # facts per page() call
_ID_ATTEMPTS = 5  # transactions of one admit() whose new ids another scope took at once (1 in 2**32 each)
FactListener = Callable[[str, Fact], None]  # ("added" | "updated" | "deleted", fact)
BatchListener = Callable[[list[tuple[str, Fact]]], None]  # every (event, fact) of one commit


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


@dataclass
class _Batch:
    """One :meth:`FactStore.admit` call inside its transaction (which holds the write lock, so no
    other writer changes the scope meanwhile): ``count`` is the scope's fact count, counted once
    and then kept up to date as facts are added and evicted; ``stored`` maps the norms of the
    batch to the scope's fact holding it (read once, kept up to date); ``tombstoned``: the norms
    of the batch with a tombstone (read once; a batch adds none). New facts, tombstones to lift
    and audit entries wait in ``pending``/``lifted``/``audits`` until :meth:`FactStore._flush`."""

    origin: Origin
    run_id: str | None
    count: int
    stored: dict[str, Fact]
    tombstoned: set[str]
    ids: list[str]
    events: list[tuple[str, Fact]] = field(default_factory=list)
    pending: list[tuple[Fact, str]] = field(default_factory=list)
    lifted: list[str] = field(default_factory=list)
    audits: list[AuditEntry] = field(default_factory=list)


class FactStore:
    """The facts of one scope (user, agent) in a shared database."""

    def __init__(self, repo: FactRepository, scope: Scope, clock: Clock, policy: FactPolicy) -> None:
        self.repo = repo
        self.scope = scope
        self.clock = clock
        self.policy = policy
        self._listeners: list[FactListener] = []
        self._batch_listeners: list[BatchListener] = []
        self._lock = threading.Lock()

    def subscribe(self, listener: FactListener) -> None:
        """Call ``listener(event, fact)`` after each committed change (search index, ...)."""
        with self._lock:
            self._listeners.append(listener)

    def subscribe_batch(self, listener: BatchListener) -> None:
        """Call ``listener(events)`` once after each committed change with all its events (a
        search index refreshes once for a batch of 500 facts instead of 500 times)."""
        with self._lock:
            self._batch_listeners.append(listener)

    def _notify(self, events: list[tuple[str, Fact]]) -> None:
        for event, fact in events:
            for listener in list(self._listeners):
                listener(event, fact)
        if events:
            for batch_listener in list(self._batch_listeners):
                batch_listener(events)

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
        scrubbed = [self._scrubbed(item) for item in items]
        norms = [validate.normalise(item.content) for item in scrubbed]
        outermost = not self.repo.db.conn.in_transaction  # a joined transaction fails as a whole: its owner's call
        for attempt in range(1, _ID_ATTEMPTS + 1):
            tried: list[_Batch] = []
            try:
                results = self._admit_all(scrubbed, norms, origin, run_id, tried)
            except self.repo.db.IntegrityError:
                added = [fact.id for batch in tried for event, fact in batch.events if event == "added"]
                if not (outermost and attempt < _ID_ATTEMPTS and added and self.repo.taken_ids(added)):
                    raise
                log.info("a new fact id was taken by another scope's write meanwhile; drawing again")
                continue
            self._notify(tried[0].events)
            return results
        raise AssertionError("unreachable")  # pragma: no cover - the last attempt returns or raises

    def _admit_all(self, scrubbed: builtins.list[NewFact], norms: builtins.list[str], origin: Origin,
                   run_id: str | None, tried: builtins.list[_Batch]) -> builtins.list[Admission]:
        """One transaction of :meth:`admit` (its batch appended to ``tried``). The ids it draws are
        checked free under the scope's lock, but a writer of another scope may draw one too and commit
        it first (PostgreSQL runs the two at once): the insert then fails, the transaction rolls back
        and :meth:`admit` draws again."""
        unique = list(dict.fromkeys(norms))
        with self.repo.atomic(scope_key(self.scope)):
            tombstoned = self.repo.tombstoned_norms(self.scope, unique) if origin == "extraction" else set()
            batch = self._batch(origin, run_id, unique, tombstoned, len(scrubbed))
            tried.append(batch)
            results = [self._admit(item, norm, batch) for item, norm in zip(scrubbed, norms, strict=True)]
            self._flush(batch)
        return results

    def _batch(self, origin: Origin, run_id: str | None, norms: list[str], tombstoned: set[str], n: int) -> _Batch:
        """The batch of ``n`` candidates: the scope's count, its facts holding ``norms`` and ``n`` free
        ids, read with one query (the reads of a fact add are one round trip) unless it is too large."""
        drawn = list(dict.fromkeys(self._new_id() for _ in range(n)))
        found = self.repo.admission(self.scope, norms, drawn)
        if found is not None and len(drawn) == n:
            count, stored, taken = found
            return _Batch(origin, run_id, count, stored, tombstoned, self._free_ids(n) if taken else drawn)
        return _Batch(origin, run_id, self.repo.count(self.scope), self.repo.find_by_norms(self.scope, norms),
                      tombstoned, self._free_ids(n))

    def _free_ids(self, n: int) -> list[str]:
        """``n`` new fact ids, distinct and unused in the database (checked together; the caller
        holds its scope's lock, so only a writer of another scope can take one before the batch
        inserts them: :meth:`admit` then draws again)."""
        ids: dict[str, None] = {}
        while len(ids) < n:
            drawn = [i for i in dict.fromkeys(self._new_id() for _ in range(n - len(ids))) if i not in ids]
            taken = self.repo.taken_ids(drawn)
            ids.update((i, None) for i in drawn if i not in taken)
        return list(ids)

    def _flush(self, batch: _Batch) -> None:
        """Write what the batch holds back: new facts, lifted tombstones, audit entries (in order)."""
        if batch.pending:
            self.repo.insert_many(batch.pending, redacted=self.policy.redact_secrets)
        if batch.lifted:
            self.repo.remove_tombstones(self.scope, batch.lifted)
        if batch.audits:  # their texts are the batch's scrubbed ones and stored facts'
            self.repo.audit_many(self.scope, batch.audits, redacted=self.policy.redact_secrets)
        batch.pending, batch.lifted, batch.audits = [], [], []

    def _scrubbed(self, item: NewFact) -> NewFact:
        """R68: secrets never reach the database."""
        if not self.policy.redact_secrets:
            return item
        source = None if item.source is None else redact_id(item.source)  # a thread id may hold a secret
        return replace(item, content=redact(item.content), source=source)

    def _admit(self, item: NewFact, norm: str, batch: _Batch) -> Admission:
        skip = self._skip_reason(item, norm, batch) or self._make_room(item, batch)
        now = self.clock.now()
        if skip:
            log.info("fact skipped (%s): %r", skip, item.content[:120])
            batch.audits.append(self._entry(now, "skipped", None, item.content, skip, item.source, batch.run_id))
            return Admission(item, None, skip)
        if batch.origin == "user":
            batch.lifted.append(norm)  # a person may bring deleted content back
        fact = Fact(batch.ids.pop(), item.content, item.category, item.confidence, now, now, item.source,
                    self.scope.user_id, self.scope.agent_name)
        batch.pending.append((fact, norm))
        batch.stored[norm] = fact
        batch.count += 1
        batch.audits.append(self._entry(now, "added", fact.id, fact.content,
                                        f"{batch.origin}, confidence {fact.confidence:.2f}", item.source, batch.run_id))
        batch.events.append(("added", fact))
        return Admission(item, fact, None)

    def _skip_reason(self, item: NewFact, norm: str, batch: _Batch) -> str | None:
        if item.confidence < self.policy.confidence_threshold:
            return f"confidence {item.confidence:.2f} below threshold {self.policy.confidence_threshold:.2f}"
        existing = batch.stored.get(norm)
        if existing is not None:
            return f"duplicate of {existing.id}"
        if batch.origin == "extraction" and norm in batch.tombstoned:
            return "tombstoned: deleted or corrected before"
        return None

    def _make_room(self, item: NewFact, batch: _Batch) -> str | None:
        """R18: while the scope is full, the new fact competes with the weakest kept one. Weaker
        than it (so weaker than every kept fact): the reason to skip the new fact. Otherwise (a
        tie included) the weakest kept fact is evicted. Import does not compete."""
        limit = self.policy.max_facts
        if batch.origin != "import" and batch.count >= limit:
            self._flush(batch)  # the weakest kept fact may be one of this batch
        while batch.origin != "import" and batch.count >= limit:
            weakest = self.repo.lowest(self.scope)
            if weakest is None:  # pragma: no cover - the count is kept under the write lock
                batch.count = 0
                break
            if item.confidence < weakest.confidence:
                return (f"max_facts {limit} reached; confidence {item.confidence:.2f} is below every kept fact"
                        f" (weakest: {weakest.id}, confidence {weakest.confidence:.2f})")
            self._evict(weakest, item, batch)
        return None

    def _evict(self, victim: Fact, item: NewFact, batch: _Batch) -> None:
        self.repo.delete(self.scope, victim.id)
        batch.count -= 1
        norm = validate.normalise(victim.content)
        if norm in batch.stored and batch.stored[norm].id == victim.id:
            del batch.stored[norm]
        reason = (f"max_facts {self.policy.max_facts} reached; lowest confidence {victim.confidence:.2f},"
                  f" made room for a fact of confidence {item.confidence:.2f}")
        log.info("fact %s evicted (%s)", victim.id, reason)
        batch.audits.append(self._entry(self.clock.now(), "evicted", victim.id, victim.content, reason, victim.source,
                                        batch.run_id))
        batch.events.append(("deleted", victim))

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

    def page(self, category: str | None = None, *, limit: int = 100, offset: int = 0) -> builtins.list[Fact]:
        """``limit`` facts of the scope (of ``category``) from ``offset``: highest confidence
        first, the newest first among equal ones. Any page costs about the same however many
        facts the scope holds (the order is an index's; :meth:`list`'s older-first ties are not)."""
        if category is not None:
            validate.category(category)
        validate.positive_int(limit, "limit", MAX_PAGE)
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise InvalidInput(f"offset must be an integer >= 0, got {offset!r}")
        return self.repo.page(self.scope, category, limit, offset)

    def count(self, category: str | None = None) -> int:
        """How many facts the scope holds (of ``category``)."""
        if category is not None:
            validate.category(category)
        return self.repo.count(self.scope, category)

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
        with self.repo.atomic(scope_key(self.scope)):
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
        with self.repo.atomic(scope_key(self.scope)):
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
        self.repo.audit(self.scope, self._entry(self.clock.now(), action, fact_id, content, reason, source, run_id))

    @staticmethod
    def _entry(at: datetime, action: str, fact_id: str | None, content: str | None, reason: str,
               source: str | None, run_id: str | None) -> AuditEntry:
        return AuditEntry(0, at, action, fact_id, content, reason, source, run_id)

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
        if not isinstance(updates, dict):
            raise InvalidInput(f"summaries must be a dict of name -> text, got {type(updates).__name__}")
        for key, value in updates.items():
            if key not in SUMMARY_KEYS:
                raise InvalidInput(f"unknown summary {key!r}; expected one of {', '.join(SUMMARY_KEYS)}")
            if not isinstance(value, str) or value.strip():  # "" clears a summary
                validate.text(value, f"summary {key}", validate.MAX_CONTENT_CHARS)
        at = utc_iso(self.clock.now())
        with self.repo.atomic(scope_key(self.scope)):
            for key, text in updates.items():
                text = redact(text.strip()) if self.policy.redact_secrets else text.strip()  # before the cut
                self.repo.set_summary(self.scope, key, text, at)
                self._audit("summary", None, text[:500], f"{key} updated", None, run_id)
