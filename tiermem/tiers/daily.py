"""The Daily tier: an append-only Markdown journal, one file a day (R6-R8, R11, R12).

``memory/YYYY-MM-DD.md`` is created by the first write of its day, starting with
``# Daily Memory: YYYY-MM-DD``; it is never created empty. Each append adds one block of records
in the lossless record form of :mod:`tiermem.tiers.markdown` (``- `` + first line, every further
line indented two spaces)::

    ## Trimmed Context (14:30)
    - user: Here is the script:
      ```python
      print("hi")
      ```
    - assistant: Thanks!

The files are reached through :class:`~tiermem.storage.files.MemoryFiles`: on SQLite the files
under the root themselves, on PostgreSQL rows in the shared database mirrored to the root (the
mirror is never read back). Date and time come from the injected clock, in the configured time
zone. Appends take the store's cross-process journal lock (a lock file on SQLite; on PostgreSQL
the write transaction holds the journal's named lock shared, with its lock of the user's files,
both taken with ``BEGIN``: :attr:`~tiermem.storage.sql.WriteKey.shares`) and write the block in one piece
(rolled back on failure), so threads and processes appending at once never interleave or lose
lines; the search index is updated under the same lock, so it sees blocks in file order.
:meth:`DailyJournal.exclusive` hands out that lock for a whole check-then-write (the conversation
journal decides under it which messages are new); on PostgreSQL everything written inside it is
one transaction. On SQLite, like the database (WAL, ``synchronous=NORMAL``), an append is not
fsynced: it survives a killed process, and an OS crash may lose the last moments; with
``sqlite_synchronous = "full"`` each append is fsynced before it returns (docs/durability.md).

Retention (R12) removes a day file older than ``retention_days`` only while a Deep Dream's mark
covers all of it: a dream records the prefix it read of each day (length in bytes and SHA-256,
:class:`~tiermem.storage.journal.PrefixMark`), and the file goes only when it still has exactly
that length and hash. A record appended after the dream read the file, or a hand edit, voids the
mark until a later dream reads the whole file again; a day no dream read is kept however old.
"""

from __future__ import annotations

import errno
import hashlib
import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tiermem import validate
from tiermem.clock import Clock
from tiermem.errors import InvalidInput, StorageError, UnsafePath
from tiermem.paths import DAILY_DIR, FILE_MODE, UserPaths, day_of, make_dirs
from tiermem.storage.files import MemoryFiles
from tiermem.storage.journal import ConsolidatedDayRepository, FlushHashRepository, PrefixMark
from tiermem.storage.sql import WriteKey, user_key
from tiermem.tiers.markdown import fold, normalise_text, render_record

log = logging.getLogger(__name__)

MAX_KIND_CHARS = 64
MAX_RECORDS = 10_000
MAX_RECORD_CHARS = validate.MAX_MESSAGE_CHARS + 1_000  # a whole message plus its speaker label
CONVERSATION_NAMESPACE = "conv"  # flush hashes of conversations: conv:<user>:<agent>:<conversation>
_LEGACY_NAMESPACES = ("daily", "queue", "ingest")  # one hash store per writer, before the shared one
LOCK_FILE = ".journal.lock"
LOCK_TIMEOUT_SECONDS = 120.0
LOCK_POLL_SECONDS = 0.002
_T = TypeVar("_T")
Locker = Callable[[str, float], AbstractContextManager[Any]]  # (lock name under the root, timeout) -> lock


@dataclass(frozen=True)
class AppendEvent:
    """What one append did to a file: enough to index the new block without rereading it."""

    path: Path  # the file a person reads (on PostgreSQL: its local mirror)
    rel: str  # memory/YYYY-MM-DD.md
    day: date
    old_sha256: str  # of the file before the append ("" content when it did not exist)
    new_sha256: str  # of the file right after it
    first_line: int  # 1-based line number of the block's first line
    block: str


class JournalListener(Protocol):
    """Told about every change the journal makes, under the journal lock (the search index is one).

    ``notifications_after()`` wraps each locked section: work the listener wants to do outside
    the lock (telling its own listeners) runs when that block ends."""

    def appended(self, event: AppendEvent) -> None: ...

    def removed(self, rel: str) -> None: ...

    def notifications_after(self) -> AbstractContextManager[None]: ...

    def prefetch(self, rel: str) -> None:
        """``rel`` is about to be appended to: send ahead what :meth:`appended` will read."""
        ...


def conversation_namespace(user_id: str, agent_name: str, conversation_id: str) -> str:
    """The flush-hash namespace of one conversation (R9): a session id and a thread id name the
    same conversation, so the session flush and the update queue share it."""
    return f"{CONVERSATION_NAMESPACE}:{user_id}:{agent_name}:{conversation_id}"


def namespace_prefixes(user_id: str) -> list[str]:
    """Prefixes of every flush-hash namespace of ``user_id`` (retention forgets old hashes)."""
    return [f"{name}:{user_id}:" for name in (CONVERSATION_NAMESPACE, *_LEGACY_NAMESPACES)]


def day_rel(day: date) -> str:
    """``memory/YYYY-MM-DD.md``: a day's file relative to the user's root."""
    return f"{DAILY_DIR}/{day.isoformat()}.md"


def file_lock(path: Path) -> AbstractContextManager[Any]:
    """A cross-process lock at ``path`` (created with its directory)."""
    from filelock import FileLock

    make_dirs(path.parent)  # 0700 folders, a 0600 lock file (filelock opens it with O_NOFOLLOW)
    return FileLock(path, timeout=LOCK_TIMEOUT_SECONDS, poll_interval=LOCK_POLL_SECONDS, mode=FILE_MODE)


def check_kind(kind: Any) -> str:
    text = validate.text(kind, "kind", MAX_KIND_CHARS)
    if "\n" in text or "\r" in text:
        raise InvalidInput("kind must be a single line")
    return fold(text)


def check_lines(lines: Any) -> list[str]:
    """Records to write: a string is one record, a list several. A record is kept whole and exact
    — newlines, indentation and trailing spaces too — except that ``\\r\\n``/``\\r`` become ``\\n``
    and a leading bullet marker (``- ``/``* ``) is dropped (it is the record form's own). Empty
    records, control characters and records over :data:`MAX_RECORD_CHARS` raise ``InvalidInput``."""
    items = [lines] if isinstance(lines, str) else lines
    if not isinstance(items, Sequence) or isinstance(items, (bytes, bytearray)):
        raise InvalidInput(f"lines must be a string or a list of strings, got {type(lines).__name__}")
    if not items:
        raise InvalidInput("lines must not be empty (a daily file is never written empty)")
    if len(items) > MAX_RECORDS:
        raise InvalidInput(f"at most {MAX_RECORDS} lines per append, got {len(items)}")
    records: list[str] = []
    for index, item in enumerate(items):
        validate.text(item, f"lines[{index}]", MAX_RECORD_CHARS)
        text = normalise_text(item)
        if text.startswith(("- ", "* ")):
            text = text[2:].lstrip(" \t")
        if not text.strip():
            raise InvalidInput(f"lines[{index}] is only a bullet marker")
        records.append(text)
    return records


def parse_day(value: Any, tz: tzinfo) -> date:
    """A ``date``, an aware ``datetime`` (taken in ``tz``) or ``"YYYY-MM-DD"``."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise InvalidInput("datetime must be timezone-aware")
        return value.astimezone(tz).date()
    if isinstance(value, date):
        return value
    if isinstance(value, str):
        try:
            return date.fromisoformat(value.strip())
        except ValueError as exc:
            raise InvalidInput(f"date {value[:40]!r} is not YYYY-MM-DD") from exc
    raise InvalidInput(f"date must be a date, datetime or YYYY-MM-DD string, got {type(value).__name__}")


@dataclass(frozen=True)
class DaySnapshot:
    """A day file as read at one moment: its text (undecodable bytes replaced) and the length and
    SHA-256 of the bytes behind it — what a consolidation mark records (R12)."""

    day: date
    text: str
    size: int
    sha256: str

    @property
    def mark(self) -> PrefixMark:
        return PrefixMark(self.day.isoformat(), self.size, self.sha256)


@dataclass(frozen=True)
class PendingBlock:
    """A checked ``## kind (HH:MM)`` block, rendered and ready to append to ``day``'s file."""

    day: date
    text: str
    records: int


class JournalWriter:
    """Appends blocks while :meth:`DailyJournal.exclusive` holds the journal lock."""

    def __init__(self, journal: DailyJournal) -> None:
        self._journal = journal
        self.created_file = False  # a new day's file appeared (retention runs afterwards)

    def append(self, kind: str, lines: str | Sequence[str], *, at: datetime | None = None) -> Path:
        """Like :meth:`DailyJournal.append`, under the lock already held."""
        return self.write(self._journal.block(kind, lines, at))

    def write(self, block: PendingBlock) -> Path:
        created = self._journal._write_block(block.day, block.text)
        self.created_file = self.created_file or created
        return self._journal.paths.daily(block.day)


class DailyJournal:
    """One user's daily files (``memory/`` of :class:`MemoryFiles`; a bare :class:`UserPaths`
    means the local files, locked with lock files)."""

    def __init__(self, files: MemoryFiles | UserPaths, clock: Clock, tz: tzinfo, *, retention_days: int = 90,
                 consolidated: ConsolidatedDayRepository | None = None,
                 flush_hashes: FlushHashRepository | None = None,
                 listener: JournalListener | None = None,
                 scrub: Callable[[str], str] | None = None,
                 lock: Locker | None = None) -> None:
        if isinstance(files, UserPaths):
            from tiermem.storage.sqlite.files import LocalFiles

            files = LocalFiles(files)
        self.files = files
        self.paths = files.paths
        self.scrub = scrub  # e.g. tiermem.redact.redact: every write path passes through append
        self.clock = clock
        self.tz = tz
        self.retention_days = retention_days
        self.consolidated = consolidated
        self.flush_hashes = flush_hashes
        self.listener = listener
        self._lock = lock
        self.on_lock: dict[str, Callable[[], None]] = {}  # run first in each locked section (settle crashed writes)
        self.on_lock_reads: dict[str, Callable[[], None]] = {}  # send the reads of those hooks ahead

    # --- reading -----------------------------------------------------------------------------
    def now(self) -> datetime:
        return self.clock.now().astimezone(self.tz)

    def today(self) -> date:
        return self.now().date()

    def path_for(self, day: date | datetime | str) -> Path:
        """The file a person reads for that day (on PostgreSQL: its local mirror)."""
        return self.paths.daily(parse_day(day, self.tz))

    def rel_for(self, day: date | datetime | str) -> str:
        """``memory/YYYY-MM-DD.md`` of that day."""
        return day_rel(parse_day(day, self.tz))

    def read(self, day: date | datetime | str | None = None) -> str:
        """The text of that day's file (today by default); ``""`` when nothing was written that day."""
        data = self.files.read(self.rel_for(self.today() if day is None else day))
        return "" if data is None else data.decode("utf-8", errors="replace")

    def stamp(self, day: date | datetime | str) -> object:
        """A cheap key that changes whenever that day's file may have (None: no file)."""
        found = self.files.stat(self.rel_for(day))
        return None if found is None else found.key

    def days(self) -> list[date]:
        """Days that have a file, oldest first."""
        return [day for day, _ in self._day_files()]

    def _day_files(self) -> list[tuple[date, str]]:
        found = [(day, rel) for rel in self.files.list(DAILY_DIR)
                 if (day := day_of(rel.rpartition("/")[2])) is not None]
        return sorted(found)

    def snapshot(self, day: date | datetime | str) -> DaySnapshot | None:
        """That day's file as it is now, read once (``None``: no file). A Deep Dream reads the
        days it consolidates this way, so its mark names exactly the bytes it read."""
        parsed = parse_day(day, self.tz)
        data = self.files.read(day_rel(parsed))
        if data is None:
            return None
        return DaySnapshot(parsed, data.decode("utf-8", errors="replace"), len(data), hashlib.sha256(data).hexdigest())

    # --- writing -----------------------------------------------------------------------------
    def append(self, kind: str, lines: str | Sequence[str], *, at: datetime | None = None) -> Path:
        """Append a ``## <kind> (HH:MM)`` block of records (see :func:`check_lines`; each may span
        several lines) to the file of ``at``'s day (now by default); returns the file's path."""
        block = self.block(kind, lines, at)
        with self.exclusive(days=[block.day]) as writer:
            return writer.write(block)

    def block(self, kind: str, lines: str | Sequence[str], at: datetime | None = None) -> PendingBlock:
        """Check and render a block without writing it (``InvalidInput`` on bad input)."""
        kind = check_kind(kind)
        records = check_lines(lines)
        moment = self.moment(at)
        body = "".join(render_record(r) + "\n" for r in records)
        if self.scrub is not None:  # the whole block at once: a key split over records is still one key
            kind, body = self.scrub(kind), self.scrub(body)
        text = f"## {kind} ({moment:%H:%M})\n" + body
        return PendingBlock(moment.date(), text, len(records))

    def moment(self, at: datetime | None = None) -> datetime:
        """``at`` (now by default) in the journal's time zone; a naive or non-datetime ``at`` raises."""
        if at is not None and (not isinstance(at, datetime) or at.tzinfo is None):
            raise InvalidInput("at must be a timezone-aware datetime")
        return (at if at is not None else self.clock.now()).astimezone(self.tz)

    @contextmanager
    def exclusive(self, key: WriteKey | None = None, *, days: Iterable[date] = (),
                  reads: Iterable[Callable[[], None]] = ()) -> Iterator[JournalWriter]:
        """Hold the journal's cross-process lock for a whole check-then-write: nobody else appends
        until the block ends, and ``writer.write`` inside it does not take the lock again. Where
        the files live in the database, the block's writes (files and records) are one transaction.
        Index listeners hear about the writes when the block ends; retention runs after that.
        ``key``: what the transaction locks (the user's files by default; a purge: ``STORE``).
        ``days``: the days it will append to (their files and index entries are read ahead, with
        the first read the block makes: one round trip on PostgreSQL), as are the reads of the
        ``on_lock`` hooks (``on_lock_reads``) and ``reads`` (callables that prefetch what the block reads)."""
        writer = JournalWriter(self)
        with self._after_lock(), self._guarded(key):
            for rel in (day_rel(day) for day in days):
                self.files.prefetch(rel)
                if self.listener is not None:
                    self.listener.prefetch(rel)
            for send in [*self.on_lock_reads.values(), *reads]:
                send()
            for settle in list(self.on_lock.values()):
                settle()
            yield writer
        if writer.created_file:
            self._retention_quietly()

    @contextmanager
    def _guarded(self, key: WriteKey | None) -> Iterator[None]:
        """The journal's lock and the files' write block. Local files: the lock (file), then the
        block. Files kept as rows: the block's transaction holds the journal's named lock shared
        beside its lock of the user's files (taken with ``BEGIN``: no connection of its own), so
        appenders, which all hold the user's lock, take turns, and whoever holds the named lock
        itself (a purge) keeps them all out."""
        if self.files.durable_files:
            with self.locked(), self.files.writing(key):
                yield
            return
        shared = WriteKey.sharing(self.paths.store_name(f"{DAILY_DIR}/{LOCK_FILE}"))
        with self.files.writing((user_key(self.paths.user_id) if key is None else key) | shared):
            yield

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The journal's cross-process lock alone (``StorageError`` when it cannot be had)."""
        folder = self.paths.daily_dir
        with ExitStack() as stack:
            try:
                if self._lock is not None:
                    stack.enter_context(self._lock(self.paths.store_name(f"{DAILY_DIR}/{LOCK_FILE}"),
                                                   LOCK_TIMEOUT_SECONDS))
                else:
                    stack.enter_context(file_lock(self.paths.inside(folder / LOCK_FILE)))
            except TimeoutError as exc:
                raise StorageError(f"timed out waiting for the journal lock of {folder}") from exc
            except OSError as exc:
                if exc.errno == errno.ELOOP:  # the lock file is a link (opened with O_NOFOLLOW)
                    raise UnsafePath(f"{folder / LOCK_FILE} is a symbolic link; tiermem does not follow it",
                                     folder / LOCK_FILE) from exc
                raise StorageError(f"cannot lock the journal in {folder}: {exc}") from exc
            yield

    def _write_block(self, day: date, block: str) -> bool:
        """Append ``block`` to ``day``'s file; the caller holds the journal lock. True when the
        append created the file."""
        rel = day_rel(day)
        old = self.files.read(rel) or b""
        prefix = _separator(old, day)
        data = (prefix + block).encode("utf-8")
        digest = hashlib.sha256(old)
        old_sha = digest.hexdigest()
        self.files.append(rel, data)
        digest.update(data)
        first_line = (old + prefix.encode("utf-8")).count(b"\n") + 1
        event = AppendEvent(self.paths.daily(day), rel, day, old_sha, digest.hexdigest(), first_line, block)
        if self.listener is not None:  # under the lock: the index follows the file's order
            _notify(self.listener.appended, event, rel)
        return not old

    # --- retention (R12) -----------------------------------------------------------------------
    def mark_read(self, snapshots: Iterable[DaySnapshot]) -> None:
        """Record that a Deep Dream read these days whole, as they were in ``snapshots``."""
        if self.consolidated is None:
            raise StorageError("this journal has no database to record consolidated days")
        self.consolidated.mark(self.paths.user_id, [s.mark for s in snapshots], self.clock.now())

    def mark_consolidated(self, days: Iterable[date | datetime | str]) -> None:
        """Record that a Deep Dream consumed these days as their files are now (a day without a
        file is skipped). The dream itself marks what it read (:meth:`mark_read`)."""
        found = [snap for day in days if (snap := self.snapshot(day)) is not None]
        self.mark_read(found)

    def consolidated_days(self) -> list[date]:
        """Days whose file a dream's mark covers whole (retention may remove them once old)."""
        marks = self._marks()
        return [day for day, rel in self._day_files() if self._covered(rel, marks.get(day))]

    def apply_retention(self) -> list[date]:
        """Remove daily files older than ``retention_days`` that a Deep Dream's mark covers whole.

        A day no dream read, or one changed after the dream read it, is kept however old it is.
        Flush hashes (R9) older than the retention window are dropped too. Returns the removed days."""
        cutoff = self.today() - timedelta(days=self.retention_days)
        if self.flush_hashes is not None:
            oldest = self.now() - timedelta(days=self.retention_days)
            for prefix in namespace_prefixes(self.paths.user_id):
                self.flush_hashes.forget_before(prefix, oldest)
        marks = self._marks()
        candidates = [(d, rel) for d, rel in self._day_files() if d < cutoff and d in marks]
        if not candidates:
            return []
        removed: list[date] = []
        try:
            with self._after_lock(), self._guarded(None):  # no append between check and removal
                for day, rel in candidates:
                    if self._covered(rel, marks[day]) and self._remove(rel):
                        removed.append(day)
        finally:
            if removed and self.consolidated is not None:
                self.consolidated.forget(self.paths.user_id, [d.isoformat() for d in removed])
        return removed

    def _marks(self) -> dict[date, PrefixMark]:
        if self.consolidated is None:
            return {}
        return {date.fromisoformat(day): mark for day, mark in self.consolidated.marks(self.paths.user_id).items()}

    def _covered(self, rel: str, mark: PrefixMark | None) -> bool:
        """Whether ``mark`` is the whole current file: same length (checked first, cheaply), same hash."""
        if mark is None:
            return False
        found = self.files.stat(rel)
        if found is None or found.size != mark.offset:
            return False
        data = self.files.read(rel)
        return data is not None and (len(data), hashlib.sha256(data).hexdigest()) == (mark.offset, mark.sha256)

    def _remove(self, rel: str) -> bool:
        if not self.files.remove(rel):
            return False
        log.info("retention removed %s (consolidated whole, older than %d days)", rel, self.retention_days)
        if self.listener is not None:
            _notify(self.listener.removed, rel, rel)
        return True

    def _after_lock(self) -> AbstractContextManager[Any]:
        return self.listener.notifications_after() if self.listener is not None else nullcontext()

    def _retention_quietly(self) -> None:
        """Retention runs when a new day's file appears; its failure never fails the append."""
        try:
            self.apply_retention()
        except Exception as exc:  # the append succeeded; retention will run again tomorrow
            log.warning("daily retention failed: %s", exc)


def _separator(old: bytes, day: date) -> str:
    """What goes before a block: a new file's title, else a blank line."""
    if not old:
        return f"# Daily Memory: {day.isoformat()}\n\n"
    return "\n" if old.endswith(b"\n") else "\n\n"


def _notify(call: Callable[[_T], None], argument: _T, rel: str) -> None:
    """Run a listener; the file is the truth, so a failing index is logged and healed later."""
    try:
        call(argument)
    except Exception as exc:
        log.warning("index update for %s failed (refresh_index will retry): %s", rel, exc)
