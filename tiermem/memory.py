"""``Memory``: the one facade over the tiers, the fact store, search and the pipelines.

Each part stays usable alone; ``Memory`` only wires them to one root, one database, one clock
and one scope (user, agent).
"""

from __future__ import annotations

import logging
import threading
from functools import cached_property
from pathlib import Path
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.clock import Clock, SystemClock
from tiermem.config import Settings, load_settings
from tiermem.errors import InvalidInput
from tiermem.facts.injection import render_injection
from tiermem.facts.store import FactPolicy, FactStore
from tiermem.storage.db import Database
from tiermem.storage.facts import FactRepository
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel, Embedder

log = logging.getLogger(__name__)

DB_FILE = "tiermem.db"


class Memory:
    """Memory of one (user, agent) scope under ``root``. Use as a context manager or ``close()``."""

    def __init__(
        self,
        root: str | Path = ".tiermem",
        llm: ChatModel | str | None = None,
        embedder: Embedder | str | None = None,
        clock: Clock | None = None,
        user_id: str = "default",
        agent_name: str = "default",
        **settings: Any,
    ) -> None:
        if not isinstance(root, (str, Path)) or not str(root).strip():
            raise InvalidInput("root must be a directory path")
        self.root = Path(root).expanduser().resolve()
        self.scope = Scope(validate.name(user_id, "user_id"), validate.name(agent_name, "agent_name"))
        overrides = dict(settings)
        overrides["llm"] = llm if isinstance(llm, str) else None
        overrides["embedder"] = embedder if isinstance(embedder, str) else None
        self.settings: Settings = load_settings(self.root, overrides)
        self._llm_object = llm if llm is not None and not isinstance(llm, str) else None
        self._embedder_object = embedder if embedder is not None and not isinstance(embedder, str) else None
        self.clock: Clock = clock if clock is not None else SystemClock()
        self.root.mkdir(parents=True, exist_ok=True)
        self.db = Database(self.root / DB_FILE)
        self._repo = FactRepository(self.db)
        self._closed = False
        self._close_lock = threading.Lock()

    # --- providers -------------------------------------------------------------------------
    @cached_property
    def llm(self) -> ChatModel | None:
        """The chat model: the object given, else the configured name (``none`` = no LLM)."""
        if self._llm_object is not None:
            return self._llm_object
        from tiermem.models.registry import ProviderOptions, make_llm

        options = ProviderOptions(base_url=self.settings.llm_base_url,
                                  timeout=self.settings.provider_timeout_seconds,
                                  max_retries=self.settings.provider_max_retries)
        return make_llm(self.settings.llm, options)

    @cached_property
    def embedder(self) -> Embedder:
        """The embedder: the object given, else the configured name (default ``local``)."""
        if self._embedder_object is not None:
            return self._embedder_object
        from tiermem.models.registry import ProviderOptions, make_embedder

        options = ProviderOptions(base_url=self.settings.embedder_base_url,
                                  timeout=self.settings.provider_timeout_seconds,
                                  max_retries=self.settings.provider_max_retries)
        return make_embedder(self.settings.embedder, options)

    # --- Core tier: facts ------------------------------------------------------------------
    @cached_property
    def facts(self) -> FactStore:
        policy = FactPolicy(self.settings.fact_confidence_threshold, self.settings.max_facts)
        return FactStore(self._repo, self.scope, self.clock, policy)

    def format_for_injection(self, max_tokens: int | None = None, query: str | None = None) -> str:
        """Summaries and facts for a system prompt within ``max_tokens`` (R21, R22)."""
        budget = self.settings.max_injection_tokens if max_tokens is None else validate.positive_int(
            max_tokens, "max_tokens")
        facts = self.facts.list()
        ranked = False
        if query is not None:
            validate.text(query, "query", validate.MAX_QUERY_CHARS)
            facts, ranked = self._facts_by_relevance(query, facts), True
        return render_injection(self.facts.summaries(), facts, budget, facts_ranked=ranked)

    def _facts_by_relevance(self, query: str, facts: list[Any]) -> list[Any]:
        """Facts relevant to ``query`` first (search order), then the rest by confidence."""
        hits = self.search(query, k=len(facts) or 1, tier="fact") if facts else []
        order = {hit.ref: rank for rank, hit in enumerate(hits)}
        return sorted(facts, key=lambda f: (order.get(f.id, len(order)), -f.confidence, f.created_at, f.id))

    def search(self, query: str, k: int = 10, category: str | None = None, tier: str | None = None,
               since: Any = None, until: Any = None, include_pending: bool = False) -> list[Any]:
        raise NotImplementedError("search arrives with the retrieval issue")

    def stats(self) -> dict[str, Any]:
        """What the scope holds; parts add their own figures through :attr:`stat_sources`."""
        from collections import Counter

        facts = self.facts.list()
        data: dict[str, Any] = {
            "root": str(self.root),
            "user_id": self.scope.user_id,
            "agent_name": self.scope.agent_name,
            "facts": len(facts),
            "facts_by_category": dict(sorted(Counter(f.category for f in facts).items())),
        }
        for source in self.stat_sources:
            data.update(source())
        return data

    @cached_property
    def stat_sources(self) -> list[Callable[[], dict[str, Any]]]:
        """Callables adding entries to :meth:`stats` (queue, search index, ...)."""
        return []

    # --- export / import -------------------------------------------------------------------
    def export(self) -> dict[str, Any]:
        """Everything in the database (all scopes) as JSON-ready data (R69)."""
        from tiermem.transfer import export_data

        return export_data(self.db)

    def import_(self, data: Any, replace: bool = False) -> dict[str, int]:
        """Restore an :meth:`export` exactly (no dedup/threshold/cap); all or nothing."""
        from tiermem.transfer import import_data

        counts = import_data(self.db, data, replace)
        self._after_import()
        return counts

    def _after_import(self) -> None:
        """Hook for indexes that must catch up with rows written behind the fact store."""

    # --- life cycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and release everything; safe to call twice."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        self.db.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
