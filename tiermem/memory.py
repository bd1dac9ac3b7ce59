"""``Memory``: the one facade over the tiers, the fact store, search and the pipelines.

Each part stays usable alone; ``Memory`` only wires them to one root, one database, one clock
and one scope (user, agent).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.clock import Clock, SystemClock
from tiermem.concurrency import lazy_property
from tiermem.config import Settings, load_settings
from tiermem.errors import InvalidInput
from tiermem.facts.injection import CoreItem, Note, core_by_relevance, core_items, notes_from_hits, render_injection
from tiermem.facts.store import FactPolicy, FactStore
from tiermem.storage.backend import DB_FILE as DB_FILE  # re-exported: doctor and older imports
from tiermem.storage.facts import FactRepository
from tiermem.storage.sql import Database
from tiermem.types import Fact, Scope, SearchHit

if TYPE_CHECKING:
    from tiermem.calls.log import CallLog
    from tiermem.compress import CompressionResult
    from tiermem.dream.runner import DreamResult, DreamRunner, RollbackResult
    from tiermem.dream.schedule import DreamScheduler
    from tiermem.extract.apply import ExtractionReport
    from tiermem.models.protocols import ChatModel, Embedder
    from tiermem.plans.store import PlanStore
    from tiermem.purge import PurgeReport
    from tiermem.queue.worker import UpdateQueue
    from tiermem.search.engine import QueryVector, SearchEngine
    from tiermem.search.indexer import IndexStatus, ReindexResult
    from tiermem.storage.dreams import CoreVersion
    from tiermem.syscontext.builder import SystemContext, SystemContextResult
    from tiermem.tiers.assembly import Tiers
    from tiermem.tiers.context import Session, SummaryCallback
    from tiermem.tiers.core import CoreFile
    from tiermem.tiers.daily import DailyJournal
    from tiermem.transfer.outcome import ImportCounts

log = logging.getLogger(__name__)



def _provider_objects(llm: object, embedder: object) -> tuple[ChatModel | None, Embedder | None]:
    """The provider objects given (not names), checked against their protocols."""
    from tiermem.models.protocols import ChatModel, Embedder

    if llm is not None and not isinstance(llm, str) and not isinstance(llm, ChatModel):
        raise InvalidInput("llm must be a provider name or an object with complete(messages),"
                           f" got {type(llm).__name__}")
    if embedder is not None and not isinstance(embedder, str) and not isinstance(embedder, Embedder):
        raise InvalidInput("embedder must be a provider name or an object with embed(texts), .dim and .model_id,"
                           f" got {type(embedder).__name__}")
    return (None if isinstance(llm, str) else llm), (None if isinstance(embedder, str) else embedder)


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
        self._llm_object, self._embedder_object = _provider_objects(llm, embedder)
        from tiermem.models.registry import check_names  # a typo fails now; the providers build lazily

        check_names(None if self._llm_object else self.settings.llm,
                    None if self._embedder_object else self.settings.embedder)
        self.clock: Clock = clock if clock is not None else SystemClock()
        from tiermem.paths import made_dirs
        from tiermem.storage.backend import open_database

        with made_dirs(self.root):  # a root tiermem creates is 0700; one an open that failed created is gone again
            self.db: Database = open_database(self.root, self.settings)
        self._repo = FactRepository(self.db)
        self._closed = False
        self._close_lock = threading.Lock()
        self._overrides = dict(settings)
        self._children: dict[Scope, Memory] = {}
        if self.settings.enabled and self.settings.queue_replay and self._has_queued_work():
            self.queue.start()  # R34: items an earlier process accepted are processed now

    def _has_queued_work(self) -> bool:
        row = self.db.conn.execute("SELECT 1 FROM outbox WHERE status IN ('pending', 'processing') LIMIT 1")
        return row.fetchone() is not None

    # --- providers -------------------------------------------------------------------------
    @lazy_property
    def llm(self) -> ChatModel | None:
        """The chat model: the object given, else the configured name (``none`` = no LLM); logged (:attr:`calls`)."""
        if self._llm_object is not None:
            return self.calls.wrap_llm(self._llm_object)
        from tiermem.models.registry import ProviderOptions, make_llm

        options = ProviderOptions(base_url=self.settings.llm_base_url,
                                  timeout=self.settings.provider_timeout_seconds,
                                  max_retries=self.settings.provider_max_retries)
        return self.calls.wrap_llm(make_llm(self.settings.llm, options))

    @lazy_property
    def embedder(self) -> Embedder:
        """The embedder: the object given, else the configured name (default ``local``: the local
        graph the store's vectors were made with, int8 for a new store); remote ones logged."""
        if self._embedder_object is not None:
            return self.calls.wrap_embedder(self._embedder_object)
        from tiermem.models.registry import ProviderOptions, make_embedder
        from tiermem.storage.embeddings import EmbeddingRepository

        options = ProviderOptions(base_url=self.settings.embedder_base_url,
                                  timeout=self.settings.provider_timeout_seconds,
                                  max_retries=self.settings.provider_max_retries,
                                  stored_model=EmbeddingRepository(self.db).index_model())
        return self.calls.wrap_embedder(make_embedder(self.settings.embedder, options))

    @lazy_property
    def calls(self) -> CallLog:
        """The LLM call log of this scope: ``list(...)``, ``totals(...)`` (docs/calls.md)."""
        from tiermem.calls.log import CallLog

        return CallLog(self.db, self.settings, self.clock, self.scope)

    # --- Core tier: facts ------------------------------------------------------------------
    @lazy_property
    def facts(self) -> FactStore:
        policy = FactPolicy(self.settings.fact_confidence_threshold, self.settings.max_facts,
                            self.settings.redact_secrets)
        store = FactStore(self._repo, self.scope, self.clock, policy)
        store.subscribe_batch(lambda events: self._search.on_facts_change(events))  # embeds after the commit
        return store

    def format_for_injection(self, max_tokens: int | None = None, query: str | None = None) -> str:
        """The memory text for a system prompt within ``max_tokens`` (R21, R22; docs/injection.md):
        summaries, ``Core Memory:`` (``MEMORY.md``, when ``inject_core``), facts and, with ``query``,
        ``Relevant notes:`` from the Daily journal; ``query`` puts the most relevant first."""
        budget = self.settings.max_injection_tokens if max_tokens is None else validate.positive_int(
            max_tokens, "max_tokens")
        if query is not None:
            validate.text(query, "query", validate.MAX_QUERY_CHARS)
        facts = self.facts.list()
        core = core_items(self.core.read()) if self.settings.inject_core else []
        notes: list[Note] = []
        if query is not None:
            facts, core, notes = self._facts_by_relevance(query, facts, core)
        return render_injection(self.facts.summaries(), facts, budget, [item.text for item in core],
                                facts_ranked=query is not None, notes=notes,
                                core_max_share=self.settings.inject_core_max_share)

    def _facts_by_relevance(self, query: str, facts: list[Fact], core: list[CoreItem]
                            ) -> tuple[list[Fact], list[CoreItem], list[Note]]:
        """For ``query``: facts and Core items in search order (the rest after them, facts by
        confidence, items in file order) and the best Daily hits over the injection floor."""
        floor = self.search_floor("inject")
        hits = self.search(query, k=min(len(facts), 1000), tier="fact", min_score=floor) if facts else []
        order = {hit.ref: rank for rank, hit in enumerate(hits)}
        facts = sorted(facts, key=lambda f: (order.get(f.id, len(order)), -f.confidence, f.created_at, f.id))
        core_hits = self.search(query, k=min(len(core), 1000), tier="core", min_score=floor) if core else []
        limit = self.settings.inject_notes
        daily_hits = self.search(query, k=limit, tier="daily", min_score=floor) if limit else []
        return facts, core_by_relevance(core, core_hits), notes_from_hits(daily_hits, facts)

    def extract(self, messages: Any, thread_id: str | None = None) -> ExtractionReport:
        """Extract facts and summaries from ``messages`` now (one LLM call, one retry on a bad reply).

        Raises :class:`~tiermem.errors.ConfigError` without an LLM; provider and parse failures
        raise (:class:`ProviderError`, :class:`ExtractionError`) with nothing applied.
        """
        from tiermem.errors import ConfigError
        from tiermem.extract.apply import coding_routing, run_extraction
        from tiermem.redact import redact

        if thread_id is not None:
            validate.thread_id(thread_id)
        turns = validate.messages(messages)
        llm = self.llm
        if llm is None:
            raise ConfigError("no LLM configured: pass llm=... or set TIERMEM_LLM (e.g. openai:gpt-4o-mini)")
        today = self.clock.now().astimezone(self.settings.tz()).date()
        scrub = redact if self.settings.redact_secrets else None
        routing = coding_routing(self.scope, self.settings,
                                 lambda user: self.for_scope(user, self.scope.agent_name).facts)
        return run_extraction(self.facts, llm, turns, today, thread_id, scrub, routing)

    # --- search (R44-R49) -------------------------------------------------------------------
    def compress(self, messages: Any, protect_turns: int = 4, **options: Any) -> CompressionResult:
        """DCP-style compression of an agent's message list (R50-R53); returns a new list.

        With an LLM configured, what was compressed away is summarised into ``.summary``.
        """
        from tiermem.compress import compress

        return compress(messages, protect_turns, llm=self.calls.wrap_llm(options.pop("llm", self.llm)), **options)

    def search(self, query: str, k: int = 10, category: str | None = None, tier: str | None = None,
               since: Any = None, until: Any = None, include_pending: bool = False,
               min_score: float | None = None, query_vector: QueryVector | None = None) -> list[SearchHit]:
        """Hybrid keyword + vector search over this scope's facts, ``MEMORY.md`` and daily records.

        ``tier``: "fact" | "core" | "daily"; ``category`` (facts only); ``since``/``until``: date,
        datetime or ISO string (facts by creation time, daily records by day). Bad arguments
        raise :class:`InvalidInput`; control characters in ``query`` are ignored.
        ``include_pending``: also ask the engine's ``pending_sources`` (queued items not extracted
        yet) for hits, marked ``provisional``. ``min_score``: hits scoring below are dropped
        (``None``: the floor of explicit questions, :meth:`search_floor`;
        ``0`` keeps everything). ``query_vector``: the query's embedding from :meth:`embed_query`
        (of this or another scope's ``Memory``), so a query searched in several scopes is
        embedded once; used when its text and model are this search's.
        """
        return self._search.search(self.scope, query, k, category, tier, since, until, include_pending, min_score,
                                   query_vector)

    def embed_query(self, query: str) -> QueryVector:
        """The embedding of a search query, to pass to :meth:`search` as ``query_vector``."""
        return self._search.embed_query(query)

    @lazy_property
    def _search(self) -> SearchEngine:
        from tiermem.search.engine import SearchEngine

        engine = SearchEngine(self.db, lambda: self.embedder, self.settings, self.clock)
        engine.before_search.append(self.refresh_index)
        return engine

    def _chunks_changed(self, event: str, chunk_ids: list[int]) -> None:
        if self.settings.embed_on_write:  # else the next search embeds them: no search engine is built here
            self._search.on_chunk_change(event, chunk_ids, self.scope)

    def search_floor(self, use: str = "explicit") -> float:
        """The score floor in force for ``use``: ``"explicit"`` (what :meth:`search` drops below:
        ``search_min_score``, else the embedder model's default) or ``"inject"`` (automatic
        injection: ``search_inject_min_score``, else the model's default but not below a set
        ``search_min_score``); another ``use`` raises :class:`InvalidInput`. See docs/search.md."""
        return self._search.min_score(use)

    def embed_pending(self) -> int:
        """Embed the items of this scope that have no vector yet (written by other processes, or
        with ``embed_on_write = false``); returns how many were embedded (0 also when another
        thread of this Memory is embedding). A search of this scope meanwhile does not wait for
        them: it uses the vectors there are (the items are found by their words)."""
        indexer = self._search.indexer
        done = indexer.embed_pending(wait=False, scope=self.scope) or 0
        if done:
            indexer.catch_up(self.scope)  # the next search of the scope does not read them
        return done

    def vector_status(self) -> IndexStatus:
        """The vector index of this scope: model in use, the model it was built with, missing vectors."""
        return self._search.status(self.scope)

    def reindex_vectors(self, progress: Callable[[int, int], None] | None = None,
                        drop_other_models: bool = False) -> ReindexResult:
        """Embed every item that has no vector for the current embedder (after a model change);
        unchanged texts already embedded with it are reused. ``progress(done, total)``."""
        return self._search.reindex(progress, drop_other_models)

    def stats(self) -> dict[str, Any]:
        """What the scope holds: facts by category, daily files, ``MEMORY.md`` bullets, the active
        plan, the update queue's backlog, the providers and the score floors in force (explicit
        questions ``search_min_score``, automatic injection ``search_inject_min_score``); and
        where: the backend and its database (the file, or the URL without its password)."""
        from tiermem.stats import memory_stats

        return memory_stats(self)

    # --- boulder state and system context (R54-R57) ---------------------------------------
    @lazy_property
    def plans(self) -> PlanStore:
        """Work-in-progress plans of this scope (boulder state)."""
        from tiermem.plans.store import PlanStore

        return PlanStore(self.db, self.scope, self.clock)

    @lazy_property
    def _system_context(self) -> SystemContext:
        from tiermem.syscontext.defaults import memory_system_context

        return memory_system_context(self)

    def system_context_builder(self) -> SystemContext:
        """This Memory's :class:`~tiermem.syscontext.SystemContext`; ``add_source`` adds custom ones."""
        return self._system_context

    def system_context(self) -> SystemContextResult:
        """Memory, active plan and recent daily notes (+ custom sources) for a system prompt;
        only sources whose epoch moved re-render; ``.text``, ``.changed`` (R57)."""
        return self._system_context.build()

    # --- export / import -------------------------------------------------------------------
    def export(self, scope: Scope | None = None, *, user_id: str | None = None,
               agent_name: str | None = None) -> dict[str, Any]:
        """A full backup of this root as JSON-ready data (R69): every scope by default; with
        ``scope`` (or ``user_id``/``agent_name``, the other defaulting to "default") only that
        scope's rows and that user's files. See :mod:`tiermem.transfer.document` for the format."""
        from tiermem.transfer import export_data

        if scope is not None and (user_id is not None or agent_name is not None):
            raise InvalidInput("pass scope or user_id/agent_name, not both")
        if scope is None and (user_id is not None or agent_name is not None):
            scope = Scope(user_id or "default", agent_name or "default")
        if scope is not None:
            if not isinstance(scope, Scope):
                raise InvalidInput(f"scope must be a tiermem.Scope, got {type(scope).__name__}")
            scope = Scope(validate.name(scope.user_id, "user_id"), validate.name(scope.agent_name, "agent_name"))
        return export_data(self.db, self.root, scope)

    def import_(self, data: Any, replace: bool = False) -> ImportCounts:
        """Restore an :meth:`export` (version 1 or 2) as it was: no dedup, threshold or cap, this
        store's redaction applied; all or nothing. An id or file that exists with other content is
        an :class:`~tiermem.errors.ImportConflict` unless ``replace``. Returns rows per section (a
        dict), with ``.restored[section]``: how many were added, already there, refused."""
        from tiermem.redact import redact
        from tiermem.transfer import Restore, import_data

        if not isinstance(replace, bool):
            raise InvalidInput("replace must be True or False")
        how = Restore(replace, redact if self.settings.redact_secrets else None)
        report = import_data(self.db, self.root, data, how, mirror=self.settings.mirror_files)
        self._after_import(report.users)
        return report.counts

    def _after_import(self, users: list[str]) -> None:
        """Index the imported files of each user and embed the imported items (vectors whose text
        and model match the imported embeddings are reused, not computed again)."""
        for user in users:
            scope = self.scope if user == self.scope.user_id else Scope(user, "default")
            self._scoped(scope).refresh_index()
        try:
            self._search.indexer.refresh()
        except Exception:  # the rows are restored; the next search embeds what is missing
            log.warning("could not embed the imported items now; the next search retries", exc_info=True)

    def purge(self, fact_id: str | None = None, *, text: str | None = None, user: str | None = None,
              dry_run: bool = False) -> PurgeReport:
        """Erase for good one fact, a text (this user, every agent) or a whole user: rows, files,
        versions, vectors; then VACUUM. ``dry_run`` only counts. See :mod:`tiermem.purge`."""
        from tiermem.purge import purge

        return purge(self, fact_id, text=text, user=user, dry_run=dry_run)

    # --- Context, Daily and Core tiers (R1-R13) and their search index (R43, R44) ----------
    @lazy_property
    def _tiers(self) -> Tiers:
        from tiermem.storage.chunks import ChunkRepository
        from tiermem.tiers.assembly import Tiers

        tiers = Tiers(self.root, self.scope, self.db, self.clock, self.settings, ChunkRepository(self.db),
                      lambda: self.llm)
        tiers.sessions.on_start.append(self._resume_plan)
        tiers.index.repo.listeners.append(self._chunks_changed)  # embeds new chunks after the commit
        return tiers

    def _resume_plan(self, session: Session) -> None:
        """R55: a new session gets the scope's active plan and its continuation prompt."""
        found = self.plans.resume(session_id=session.id)
        session.plan, session.continuation = found if found is not None else (None, None)

    @property
    def daily(self) -> DailyJournal:
        """The Daily tier: ``memory/YYYY-MM-DD.md`` of this user (``append``, ``read``, ``path_for``)."""
        return self._tiers.daily

    @property
    def core(self) -> CoreFile:
        """``MEMORY.md`` of this user (``path``, ``items()``, ``write(text)``)."""
        return self._tiers.core

    def session(self, session_id: str, on_summary: SummaryCallback | None = None,
                max_tokens: int | None = None) -> Session:
        """The live session ``session_id`` (Context tier), created on first use; ``max_tokens``
        defaults to ``session_max_tokens``; ``on_summary(text)`` runs after each flush."""
        return self._tiers.sessions.get(session_id, on_summary=on_summary, max_tokens=max_tokens)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait for background session summaries to be written; False if ``timeout`` ran out."""
        return self._tiers.wait_idle(timeout) if "_tiers" in self.__dict__ else True

    def refresh_index(self) -> list[str]:
        """Re-index ``MEMORY.md`` and daily files changed on disk (hand edits, other processes);
        returns the paths whose index changed. Search calls this first."""
        index = self._tiers.index
        present: dict[str, Hashable] | None = index.scan()  # one read on PostgreSQL, shared with the sync
        if self._tiers.core.sync(present):  # PostgreSQL: a hand edit of the mirrored MEMORY.md was imported
            present = None  # MEMORY.md moved: look again
        return index.refresh(present)

    def reindex(self) -> int:
        """Rebuild the index of this user's Markdown files from scratch; returns the file count."""
        return self._tiers.index.reindex()

    def refresh_mirror(self) -> list[str]:
        """PostgreSQL: rewrite this user's local Daily files and ``MEMORY.md`` where they differ
        from the database (``tiermem mirror``); returns the files rewritten. SQLite: ``[]``."""
        return self._tiers.refresh_mirror(full=True, quiet=False)

    # --- the update queue (R28-R35) --------------------------------------------------------
    @lazy_property
    def queue(self) -> UpdateQueue:
        """Debounced, durable background extraction: ``add``, ``add_nowait``, ``flush``."""
        from tiermem.queue.pending import PendingHits
        from tiermem.queue.process import QueueProcessor, prepare_messages
        from tiermem.queue.worker import QueuePolicy, UpdateQueue
        from tiermem.storage.journal import FlushHashRepository
        from tiermem.storage.outbox import OutboxRepository

        s = self.settings
        outbox = OutboxRepository(self.db)
        processor = QueueProcessor(self, outbox, FlushHashRepository(self.db), self._scoped)
        policy = QueuePolicy.from_settings(s)
        queue = UpdateQueue(outbox, processor, partial(prepare_messages, scrub=s.redact_secrets), self.clock,
                            policy, self.scope)
        self._search.pending_sources.append(PendingHits(queue.pending, lambda: self.embedder))
        return queue

    def for_scope(self, user_id: str, agent_name: str = "default") -> Memory:
        """A Memory for another scope of this root, sharing this one's providers and clock
        (closed with this one)."""
        return self._scoped(Scope(validate.name(user_id, "user_id"), validate.name(agent_name, "agent_name")))

    def _scoped(self, scope: Scope) -> Memory:
        """A Memory for another scope of this root (queued items may name any user/agent)."""
        if scope == self.scope:
            return self
        with self._close_lock:
            child = self._children.get(scope)
            if child is None:
                overrides = {**self._overrides, "queue_replay": False}
                child = Memory(self.root, llm=self.llm or "none", embedder=self.embedder, clock=self.clock,
                               user_id=scope.user_id, agent_name=scope.agent_name, **overrides)
                self._children[scope] = child
            return child

    # --- Deep Dream (R36-R43) --------------------------------------------------------------
    _dream_scheduler: DreamScheduler | None = None

    @lazy_property
    def _dreams(self) -> DreamRunner:
        from tiermem.dream.prompt import DreamBudget
        from tiermem.dream.runner import DreamRunner
        from tiermem.storage.dreams import DreamRepository

        return DreamRunner(self.core, self.daily, DreamRepository(self.db), self.clock, self.settings.tz(),
                           lambda: self.llm, budget=DreamBudget(input_tokens=self.settings.dream_input_tokens),
                           after_write=self.refresh_index, lock=partial(self.db.parts.lock, self.db))

    def deep_dream(self, lookback_days: int = 1, force: bool = False, dry_run: bool = False) -> DreamResult:
        """Consolidate the daily files of the ``lookback_days`` most recent days (up to and including
        today) and ``MEMORY.md`` into a new ``MEMORY.md`` with one LLM call (R36-R43).

        ``.status``: "written", "skipped" (no daily records, unchanged since the last dream, no
        LLM, another dream holds the lock, or ``dry_run``) or "refused" (unusable reply, empty
        result, more than 25% of the prior bullets lost, over budget); ``.reason``, ``.diff``,
        ``.dropped`` (bullets not supported by the sources). ``force`` accepts a rewrite the loss
        and budget guards refuse and dreams again over unchanged days.
        """
        from tiermem.config import MAX_LOOKBACK_DAYS

        days = validate.positive_int(lookback_days, "lookback_days", MAX_LOOKBACK_DAYS)
        if not isinstance(force, bool) or not isinstance(dry_run, bool):
            raise InvalidInput("force and dry_run must be booleans")
        return self._dreams.run(days, force, dry_run)

    def rollback(self, version: int | None = None) -> RollbackResult:
        """Restore a kept ``MEMORY.md`` version (the most recent one by default); the text it
        replaces is kept as a new version, so a rollback can be rolled back."""
        if version is not None:
            version = validate.positive_int(version, "version", 2**62)
        return self._dreams.rollback(version)

    def dream_versions(self) -> list[CoreVersion]:
        """The kept ``MEMORY.md`` versions of this user, newest first."""
        return self._dreams.versions()

    def start_dream_scheduler(self, schedule: str | None = None, poll_seconds: float = 30.0) -> DreamScheduler | None:
        """Run Deep Dream in a background thread at ``schedule`` ("HH:MM" or 5-field cron, local
        time; default the ``dream_schedule`` setting, "03:00") over ``dream_lookback_days`` days.
        Returns None when the schedule is off ("none"); stopped by :meth:`close`."""
        from tiermem.dream.schedule import DreamScheduler, Schedule

        if self._dream_scheduler is not None and self._dream_scheduler.running:
            return self._dream_scheduler
        parsed = Schedule.parse(self.settings.dream_schedule if schedule is None else schedule)
        if parsed is None:
            log.info("Deep Dream scheduler is off")
            return None
        lookback = self.settings.dream_lookback_days
        scheduler = DreamScheduler(parsed, self.clock, self.settings.tz(),
                                   lambda: self.deep_dream(lookback_days=lookback), poll_seconds)
        self._dream_scheduler = scheduler
        scheduler.start()
        return scheduler

    # --- life cycle ------------------------------------------------------------------------
    def close(self) -> None:
        """Flush and release everything; safe to call twice."""
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        if self._dream_scheduler is not None:
            self._dream_scheduler.stop()
        if "queue" in self.__dict__:
            self.queue.close(timeout=self.settings.shutdown_flush_seconds)
        for child in list(self._children.values()):
            child.close()
        if "_tiers" in self.__dict__:
            self._tiers.close()  # flush live sessions, finish background summaries
        self.db.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
