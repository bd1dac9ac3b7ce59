"""The three tiers of one user (Context sessions, the Daily journal, ``MEMORY.md``) wired to
one database, one clock and one search index. ``Memory`` holds one :class:`Tiers`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.clock import Clock
from tiermem.config import Settings
from tiermem.errors import TiermemError
from tiermem.paths import UserPaths
from tiermem.redact import redact
from tiermem.storage.chunks import ChunkRepository
from tiermem.storage.dreams import DreamRepository
from tiermem.storage.journal import ConsolidatedDayRepository, FlushHashRepository
from tiermem.storage.sql import Database
from tiermem.tiers.context import SessionStore
from tiermem.tiers.conversation import ConversationJournal
from tiermem.tiers.core import CoreFile
from tiermem.tiers.daily import DailyJournal
from tiermem.tiers.flusher import SessionFlusher
from tiermem.tiers.indexer import FileIndexer
from tiermem.tiers.worker import BackgroundWorker
from tiermem.types import Scope

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel


class Tiers:
    """Context, Daily and Core tiers of ``scope`` under ``root``."""

    def __init__(self, root: Path, scope: Scope, db: Database, clock: Clock, settings: Settings,
                 chunks: ChunkRepository, llm: Callable[[], ChatModel | None]) -> None:
        self.paths = UserPaths.for_user(root, scope.user_id, allow_symlinks=settings.allow_symlinks)
        self.files = db.parts.files(db, self.paths, mirror=settings.mirror_files)  # files or rows + mirror
        self.index = FileIndexer(chunks, self.files)
        hashes = FlushHashRepository(db)
        self.daily = DailyJournal(self.files, clock, settings.tz(), retention_days=settings.daily_retention_days,
                                  consolidated=ConsolidatedDayRepository(db), flush_hashes=hashes,
                                  listener=self.index, scrub=redact if settings.redact_secrets else None,
                                  lock=partial(db.parts.lock, db))
        self.core = CoreFile(self.files, listener=self.index, scrub=redact if settings.redact_secrets else None,
                             versions=DreamRepository(db), lock=partial(db.parts.lock, db), clock=clock,
                             mirror=settings.mirror_files)
        self.worker = BackgroundWorker(f"tiermem-sessions-{scope.user_id}-{scope.agent_name}")
        self.conversations = ConversationJournal(self.daily, hashes, scope, settings.tool_result_max_chars)
        flusher = SessionFlusher(self.conversations, llm, self.worker)
        self.sessions = SessionStore(flusher, scope, settings.max_live_sessions, settings.session_max_tokens)
        self.refresh_mirror()  # PostgreSQL: others' writes reach this root's files (SQLite: nothing to do)

    def refresh_mirror(self, *, full: bool = False, quiet: bool = True) -> list[str]:
        """Bring the local files up to date with the store; returns the files rewritten. With
        ``quiet`` a failure is logged, not raised (the store is the truth; ``tiermem mirror`` retries)."""
        try:
            return self.files.refresh(full=full)
        except TiermemError as exc:
            if not quiet:
                raise
            log.warning("could not refresh the mirror of %s (tiermem mirror retries): %s", self.paths.root, exc)
            return []

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until background summaries are written; False if ``timeout`` ran out first."""
        return self.worker.wait_idle(timeout)

    def close(self) -> None:
        """Flush every live session and finish the background work."""
        self.sessions.close()
        self.worker.close()
