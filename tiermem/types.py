"""The domain objects every layer shares: facts, search hits, categories, scopes."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

from tiermem.clock import parse_utc, utc_iso

CATEGORIES: tuple[str, ...] = (
    "preference",
    "knowledge",
    "context",
    "behavior",
    "goal",
    "correction",
)

Tier = Literal["fact", "core", "daily"]
TIERS: tuple[str, ...] = ("fact", "core", "daily")

USER_SUMMARY_KEYS: tuple[str, ...] = ("workContext", "personalContext", "topOfMind")
HISTORY_SUMMARY_KEYS: tuple[str, ...] = ("recentMonths", "earlierContext", "longTermBackground")
SUMMARY_KEYS: tuple[str, ...] = USER_SUMMARY_KEYS + HISTORY_SUMMARY_KEYS


@dataclass(frozen=True)
class Scope:
    """Whose memory: a (user_id, agent_name) pair. Validate with ``tiermem.validate.scope``."""

    user_id: str = "default"
    agent_name: str = "default"


@dataclass(frozen=True)
class Fact:
    """One stored fact. Timestamps are aware UTC datetimes."""

    id: str
    content: str
    category: str
    confidence: float
    created_at: datetime
    updated_at: datetime
    source: str | None = None
    user_id: str = "default"
    agent_name: str = "default"

    def to_dict(self) -> dict[str, Any]:
        """The seed's camelCase shape (timestamps as ISO-8601 ending in ``Z``)."""
        return {
            "id": self.id,
            "content": self.content,
            "category": self.category,
            "confidence": self.confidence,
            "createdAt": utc_iso(self.created_at),
            "updatedAt": utc_iso(self.updated_at),
            "source": self.source,
            "userId": self.user_id,
            "agentName": self.agent_name,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fact:
        """Inverse of :meth:`to_dict` (used by import)."""
        return cls(
            id=str(data["id"]),
            content=str(data["content"]),
            category=str(data["category"]),
            confidence=float(data["confidence"]),
            created_at=parse_utc(str(data["createdAt"])),
            updated_at=parse_utc(str(data["updatedAt"])),
            source=data.get("source"),
            user_id=str(data.get("userId", "default")),
            agent_name=str(data.get("agentName", "default")),
        )


@dataclass(frozen=True)
class SearchHit:
    """One search result and where it comes from.

    ``ref`` is a fact id for ``tier == "fact"`` and ``path#Lstart-Lend`` for the file tiers, relative
    to the user's directory (the root for the default user, ``users/<user_id>/`` for others), e.g.
    ``memory/2026-03-14.md#L12-L14`` or ``MEMORY.md#L3-L3``. ``provisional`` marks text from
    queued items whose extraction has not landed yet. ``lifted_by_thread`` marks a daily record that
    ranks above a hit with a higher score because the conversation around it matches too (the
    question before it, another speaker's reply after it: :mod:`tiermem.search.thread`).
    """

    text: str
    score: float
    tier: str
    ref: str
    provisional: bool = False
    category: str | None = None
    date: str | None = None
    extra: dict[str, Any] = field(default_factory=dict, compare=False)
    lifted_by_thread: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "score": self.score,
            "tier": self.tier,
            "ref": self.ref,
            "provisional": self.provisional,
            "category": self.category,
            "date": self.date,
            "lifted_by_thread": self.lifted_by_thread,
        }


@dataclass(frozen=True)
class AuditEntry:
    """One line of the audit history: what happened to which fact, and why."""

    id: int
    at: datetime
    action: str  # added | skipped | updated | deleted | evicted | removed | imported ...
    fact_id: str | None
    content: str | None
    reason: str
    source: str | None = None
    run_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "at": utc_iso(self.at),
            "action": self.action,
            "factId": self.fact_id,
            "content": self.content,
            "reason": self.reason,
            "source": self.source,
            "runId": self.run_id,
        }
