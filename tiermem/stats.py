"""``Memory.stats()``: what a scope holds and where it is kept."""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from tiermem.errors import ConfigError
from tiermem.storage.embeddings import EmbeddingRepository
from tiermem.storage.outbox import OutboxRepository

if TYPE_CHECKING:
    from tiermem.memory import Memory


def memory_stats(memory: Memory) -> dict[str, Any]:
    """See :meth:`tiermem.Memory.stats`."""
    facts = memory.facts.list()
    active = memory.plans.active()
    data: dict[str, Any] = {
        "root": str(memory.root),
        "backend": memory.db.backend,
        "database": memory.db.label,  # the file, or the URL without its password
        "user_id": memory.scope.user_id,
        "agent_name": memory.scope.agent_name,
        "facts": len(facts),
        "facts_by_category": dict(sorted(Counter(f.category for f in facts).items())),
        "daily_files": len(memory.daily.days()),
        "core_bullets": len(memory.core.items()),
        "active_plan": active.title if active is not None else None,
        **OutboxRepository(memory.db).backlog(),
        "llm": memory.settings.llm if memory._llm_object is None else type(memory._llm_object).__name__,
        "embedder": memory.settings.embedder if memory._embedder_object is None else memory._embedder_object.model_id,
        "read_only": memory.db.read_only,
        **_call_totals(memory),
    }
    try:
        data["search_min_score"] = memory.search_floor()  # explicit questions (search, recall)
        data["search_inject_min_score"] = memory.search_floor("inject")  # automatic injection
        data["embedder_model"] = memory.embedder.model_id  # what `local` resolved to (the store's graph)
    except ConfigError:  # the embedder cannot be built (a missing key): stats still work
        data["search_min_score"] = data["search_inject_min_score"] = data["embedder_model"] = None
    data["index_model"] = EmbeddingRepository(memory.db).index_model()  # the model the vectors were made with
    return data


def _call_totals(memory: Memory) -> dict[str, Any]:
    """The LLM call log of the scope (docs/calls.md): calls by purpose, failures, tokens, cost."""
    totals = memory.calls.totals()
    failed = sum(n for outcome, n in totals.by_outcome.items() if outcome in ("parse_failed", "provider_error"))
    return {"llm_calls": totals.calls, "llm_calls_by_purpose": totals.by_purpose, "llm_calls_failed": failed,
            "llm_prompt_tokens": totals.prompt_tokens, "llm_completion_tokens": totals.completion_tokens,
            "llm_cost_usd": None if totals.cost is None else round(totals.cost, 6)}
