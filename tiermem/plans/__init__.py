"""Boulder state: work-in-progress plans that survive the session (R54-R56).

``Plan`` (:mod:`tiermem.plans.plan`) is the domain object; ``PlanStore``
(:mod:`tiermem.plans.store`) is ``mem.plans``; :mod:`tiermem.plans.records` turns the records the
storage layer keeps (:mod:`tiermem.storage.plans`) into plans and back.
"""

from tiermem.plans.plan import PLAN_STATUSES, ChecklistItem, Plan

__all__ = ["PLAN_STATUSES", "ChecklistItem", "Plan"]
