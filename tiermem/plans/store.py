"""``mem.plans``: work-in-progress plans of one scope (boulder state, R54-R56).

Rules:

- At most one plan per (user, agent) is ``active``. :meth:`PlanStore.start` and
  :meth:`PlanStore.resume` of another plan *pause* the active one (it is not lost and can be
  resumed later); completing or abandoning the active plan leaves no plan active.
- Status moves: active <-> paused; active/paused -> completed or abandoned, which are final.
  Asking for the status a plan already has changes nothing; any other move is ``InvalidInput``.
- Items of a completed or abandoned plan cannot be checked; checking a checked item changes nothing.
- Every change is one write transaction (one writer per store, on SQLite and Postgres alike), so two
  processes checking items of the same plan never lose an update. A failed call changes nothing.
- Secrets in titles, checklists and session ids are redacted (R68, the store's ``redact_secrets``)
  before the plan is stored, and the plan returned is the one stored.
"""

from __future__ import annotations

import builtins
import logging
import uuid
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, overload

from tiermem import validate
from tiermem.clock import Clock
from tiermem.errors import InvalidInput, NotFound
from tiermem.plans import plan as checks
from tiermem.plans.plan import MAX_SESSION_IDS, OPEN_STATUSES, Plan, set_item
from tiermem.plans.records import load, written
from tiermem.storage.plans import PlanRepository
from tiermem.storage.sql import scope_key
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

log = logging.getLogger(__name__)

_MOVES: dict[str, tuple[str, ...]] = {  # target status -> the statuses it may come from
    "paused": ("active",),
    "active": ("paused",),
    "completed": OPEN_STATUSES,
    "abandoned": OPEN_STATUSES,
}


class PlanStore:
    """The plans of one scope (user, agent) in a shared database."""

    def __init__(self, db: Database, scope: Scope, clock: Clock) -> None:
        self.db = db
        self.repo = PlanRepository(db)
        self.scope = scope
        self.clock = clock

    # --- create ----------------------------------------------------------------------------
    def start(self, title: str, checklist: str | builtins.list[str], session_id: str | None = None) -> Plan:
        """Start a new active plan; the scope's previous active plan (if any) is paused."""
        name = checks.title(title)
        markdown = checks.normalise_checklist(checklist)
        sessions = (validate.thread_id(session_id),) if session_id is not None else ()
        with self.db.transaction(scope_key(self.scope)):
            now = self.clock.now()
            plan = Plan(self._new_id(), name, markdown, "active", now, now, sessions, self.scope.user_id,
                        self.scope.agent_name)
            self._pause_active(except_id=None)
            while (stored := self.repo.insert(plan.to_record())) is None:
                plan = replace(plan, id=self._new_id())
            plan = written(stored)
        log.info("plan %s started: %s", plan.id, plan.title)
        return plan

    @staticmethod
    def _new_id() -> str:
        return "plan_" + uuid.uuid4().hex[:8]

    # --- read ------------------------------------------------------------------------------
    def get(self, plan_id: str) -> Plan:
        checks.plan_id(plan_id)
        record = self.repo.get(self.scope, plan_id)
        if record is None:
            raise NotFound(f"no plan {plan_id!r} in scope {self.scope.user_id}/{self.scope.agent_name}")
        return load(record)

    def active(self) -> Plan | None:
        """The scope's active plan, if any."""
        record = self.repo.active(self.scope)
        return load(record) if record is not None else None

    def active_version(self) -> tuple[str, int] | None:
        """``(id, revision)`` of the active plan; moves whenever it changes (system context epoch)."""
        return self.repo.active_version(self.scope)

    def list(self, status: str | None = None) -> builtins.list[Plan]:
        """The scope's plans, newest first; only those with ``status`` when given."""
        if status is not None:
            checks.status(status)
        return [load(record) for record in self.repo.list(self.scope, status)]

    # --- items -----------------------------------------------------------------------------
    def check(self, plan_id: str, index: int) -> Plan:
        """Mark item ``index`` (0-based) done."""
        return self._set_item(plan_id, index, True)

    def uncheck(self, plan_id: str, index: int) -> Plan:
        """Mark item ``index`` (0-based) not done."""
        return self._set_item(plan_id, index, False)

    def _set_item(self, plan_id: str, index: int, done: bool) -> Plan:
        position = checks.index(index)

        def change(plan: Plan) -> Plan:
            self._require_open(plan, "check items of")
            return replace(plan, checklist=set_item(plan.checklist, position, done))

        return self._mutate(plan_id, change)

    def attach_session(self, plan_id: str, session_id: str) -> Plan:
        """Record that ``session_id`` worked on the plan (kept once, most recent last)."""
        session = self.db.redactor.ident(validate.thread_id(session_id))  # as stored

        def change(plan: Plan) -> Plan:
            self._require_open(plan, "attach a session to")
            if session in plan.session_ids:
                return plan
            return replace(plan, session_ids=(*plan.session_ids, session)[-MAX_SESSION_IDS:])

        return self._mutate(plan_id, change)

    # --- status ----------------------------------------------------------------------------
    def pause(self, plan_id: str) -> Plan:
        return self._move(plan_id, "paused")

    def complete(self, plan_id: str) -> Plan:
        """Finish the plan (also with unchecked items: the agent decides when it is done)."""
        return self._move(plan_id, "completed")

    def abandon(self, plan_id: str) -> Plan:
        return self._move(plan_id, "abandoned")

    @overload
    def resume(self, plan_id: None = None, *, session_id: str | None = None) -> tuple[Plan, str] | None: ...

    @overload
    def resume(self, plan_id: str, *, session_id: str | None = None) -> Plan: ...

    def resume(self, plan_id: str | None = None, *, session_id: str | None = None) -> Plan | tuple[Plan, str] | None:
        """With ``plan_id``: make that paused plan active again (pausing the current one) and
        return it. Without: the session-start call of R55 - the active plan and its continuation
        prompt, or ``None``; ``session_id`` (if given) is attached to the plan first."""
        if plan_id is None:
            return self.continuation(session_id)
        if session_id is not None:
            validate.thread_id(session_id)
        with self.db.transaction(scope_key(self.scope)):
            plan = self._move(plan_id, "active")
            return self.attach_session(plan.id, session_id) if session_id is not None else plan

    def continuation(self, session_id: str | None = None) -> tuple[Plan, str] | None:
        """``(active plan, continuation prompt)`` or ``None`` when no plan is active."""
        if session_id is not None:
            validate.thread_id(session_id)
            with self.db.transaction(scope_key(self.scope)):
                plan = self.active()
                if plan is not None:
                    plan = self.attach_session(plan.id, session_id)
        else:
            plan = self.active()
        return (plan, plan.continuation_prompt()) if plan is not None else None

    def _move(self, plan_id: str, target: str) -> Plan:
        def change(plan: Plan) -> Plan:
            if plan.status == target:
                return plan
            if plan.status not in _MOVES[target]:
                raise InvalidInput(f"plan {plan.id} is {plan.status}; it cannot become {target}")
            if target == "active":
                self._pause_active(except_id=plan.id)
            return replace(plan, status=target)

        return self._mutate(plan_id, change)

    # --- plumbing --------------------------------------------------------------------------
    def _mutate(self, plan_id: str, change: Callable[[Plan], Plan]) -> Plan:
        """Read, change and write one plan inside one write transaction."""
        with self.db.transaction(scope_key(self.scope)):
            old = self.get(plan_id)
            new = change(old)
            if new == old:
                return old
            new = written(self.repo.update(replace(new, updated_at=self.clock.now(),
                                                   revision=old.revision + 1).to_record()))
        log.info("plan %s: revision %d, %s, %d/%d done", new.id, new.revision, new.status, *new.progress)
        return new

    def _pause_active(self, except_id: str | None) -> None:
        current = self.active()
        if current is not None and current.id != except_id:
            self.repo.update(replace(current, status="paused", updated_at=self.clock.now(),
                                     revision=current.revision + 1).to_record())
            log.info("plan %s paused: another plan became active", current.id)

    @staticmethod
    def _require_open(plan: Plan, action: str) -> None:
        if plan.status not in OPEN_STATUSES:
            raise InvalidInput(f"plan {plan.id} is {plan.status}; cannot {action} it")
