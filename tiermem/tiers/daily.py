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

Date and time come from the injected clock, in the configured time zone. Appends take a
cross-process file lock and write the block with one ``write`` (rolled back on failure), so
threads and processes appending at once never interleave or lose lines; the search index is
updated under the same lock, so it sees blocks in file order. :meth:`DailyJournal.exclusive`
hands out that lock for a whole check-then-write (the conversation journal decides under it which
messages are new). Like the database (WAL, ``synchronous=NORMAL``), an append is not fsynced: it
survives a killed process, and an OS crash may lose the last moments; with ``sqlite_synchronous =
"full"`` each append is fsynced before it returns (docs/durability.md).

Retention (R12) removes a day file older than ``retention_days`` only while a Deep Dream's mark
covers all of it: a dream records the prefix it read of each day (length in bytes and SHA-256,
:class:`~tiermem.storage.journal.PrefixMark`), and the file goes only when it still has exactly
that length and hash. A record appended after the dream read the file, or a hand edit, voids the
mark until a later dream reads the whole file again; a day no dream read is kept however old.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo
from pathlib import Path
from typing import Any, Protocol, TypeVar

from tiermem import validate
from tiermem.clock import Clock
from tiermem.errors import InvalidInput, StorageError
from tiermem.storage.journal import ConsolidatedDayRepository, FlushHashRepository, PrefixMark
from tiermem.tiers.markdown import fold, normalise_text, render_record
from tiermem.tiers.paths import FILE_MODE, UserPaths, make_dirs, open_private, read_file

log = logging.getLogger(__name__)

MAX_KIND_CHARS = 64
MAX_RECORDS = 10_000
MAX_RECORD_CHARS = validate.MAX_MESSAGE_CHARS + 1_000  # a whole message plus its speaker label
CONVERSATION_NAMESPACE = "conv"  # flush hashes of conversations: conv:<user>:<agent>:<conversation>
_LEGACY_NAMESPACES = ("daily", "queue", "ingest")  # one hash store per writer, before the shared one
LOCK_FILE = ".journal.lock"
LOCK_TIMEOUT_SECONDS = 120.0
LOCK_POLL_SECONDS = 0.002
_EMPTY_SHA = hashlib.sha256(b"").hexdigest()
_T = TypeVar("_T")


@dataclass(frozen=True)
class AppendEvent:
    """What one append did to a file: enough to index the new block without rereading it."""

    path: Path
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

    def removed(self, path: Path) -> None: ...

    def notifications_after(self) -> AbstractContextManager[None]: ...


def conversation_namespace(user_id: str, agent_name: str, conversation_id: str) -> str:
    """The flush-hash namespace of one conversation (R9): a session id and a thread id name the
    same conversation, so the session flush and the update queue share it."""
    return f"{CONVERSATION_NAMESPACE}:{user_id}:{agent_name}:{conversation_id}"


def namespace_prefixes(user_id: str) -> list[str]:
    """Prefixes of every flush-hash namespace of ``user_id`` (retention forgets old hashes)."""
    return [f"{name}:{user_id}:" for name in (CONVERSATION_NAMESPACE, *_LEGACY_NAMESPACES)]


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


def _file_state(path: Path) -> tuple[bytes, int, str] | None:
    """The bytes of ``path``, their length and SHA-256; ``None`` when there is no such file."""
    try:
        data = read_file(path)  # not through a final symlink
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StorageError(f"cannot read {path}: {exc}") from exc
    return data, len(data), hashlib.sha256(data).hexdigest()


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
        path = self._journal.paths.daily(block.day)
        event = self._journal._write_block(path, block.day, block.text)
        self.created_file = self.created_file or event.old_sha256 == _EMPTY_SHA
        return path


class DailyJournal:
    """One user's daily files under ``paths.daily_dir``."""

    def __init__(self, paths: UserPaths, clock: Clock, tz: tzinfo, *, retention_days: int = 90,
                 consolidated: ConsolidatedDayRepository | None = None,
                 flush_hashes: FlushHashRepository | None = None,
                 listener: JournalListener | None = None,
                 scrub: Callable[[str], str] | None = None) -> None:
        self.paths = paths
        self.scrub = scrub  # e.g. tiermem.redact.redact: every write path passes through append
        self.clock = clock
        self.tz = tz
        self.retention_days = retention_days
        self.consolidated = consolidated
        self.flush_hashes = flush_hashes
        self.listener = listener
        self.on_lock: dict[str, Callable[[], None]] = {}  # run first in each locked section (settle crashed writes)
        self.fsync = False  # sqlite_synchronous = "full": an append is on disk (fsync) before it returns

    # --- reading -----------------------------------------------------------------------------
    def now(self) -> datetime:
        return self.clock.now().astimezone(self.tz)

    def today(self) -> date:
        return self.now().date()

    def path_for(self, day: date | datetime | str) -> Path:
        return self.paths.daily(parse_day(day, self.tz))

    def read(self, day: date | datetime | str | None = None) -> str:
        """The text of that day's file (today by default); ``""`` when nothing was written that day."""
        path = self.path_for(self.today() if day is None else day)
        try:
            return read_file(self.paths.inside(path)).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return ""
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    def days(self) -> list[date]:
        """Days that have a file, oldest first."""
        return [day for day, _ in self.paths.daily_files()]

    def snapshot(self, day: date | datetime | str) -> DaySnapshot | None:
        """That day's file as it is now, read once (``None``: no file). A Deep Dream reads the
        days it consolidates this way, so its mark names exactly the bytes it read."""
        parsed = parse_day(day, self.tz)
        state = _file_state(self.paths.inside(self.paths.daily(parsed)))
        if state is None:
            return None
        data, size, digest = state
        return DaySnapshot(parsed, data.decode("utf-8", errors="replace"), size, digest)

    # --- writing -----------------------------------------------------------------------------
    def append(self, kind: str, lines: str | Sequence[str], *, at: datetime | None = None) -> Path:
        """Append a ``## <kind> (HH:MM)`` block of records (see :func:`check_lines`; each may span
        several lines) to the file of ``at``'s day (now by default); returns the file's path."""
        block = self.block(kind, lines, at)
        with self.exclusive() as writer:
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
    def exclusive(self) -> Iterator[JournalWriter]:
        """Hold the journal's cross-process lock for a whole check-then-write: nobody else appends
        until the block ends, and ``writer.write`` inside it does not take the lock again.
        Index listeners hear about the writes when the block ends; retention runs after that."""
        writer = JournalWriter(self)
        with self._after_lock(), ExitStack() as stack:
            try:
                stack.enter_context(file_lock(self.paths.inside(self.paths.daily_dir / LOCK_FILE)))
            except TimeoutError as exc:
                raise StorageError(f"timed out waiting for the journal lock of {self.paths.daily_dir}") from exc
            except OSError as exc:
                raise StorageError(f"cannot lock the journal in {self.paths.daily_dir}: {exc}") from exc
            for settle in list(self.on_lock.values()):
                settle()
            yield writer
        if writer.created_file:
            self._retention_quietly()

    def _write_block(self, path: Path, day: date, block: str) -> AppendEvent:
        """Append ``block`` to ``path``; the caller holds the journal lock."""
        try:
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND  # 0600, never through a symlink out of the root
            with os.fdopen(open_private(self.paths.inside(path), flags), "a+b") as handle:
                handle.seek(0)
                old = handle.read()
                if not old:
                    prefix = f"# Daily Memory: {day.isoformat()}\n\n"
                else:
                    prefix = "\n" if old.endswith(b"\n") else "\n\n"
                data = (prefix + block).encode("utf-8")
                digest = hashlib.sha256(old)
                old_sha = digest.hexdigest()
                try:
                    handle.write(data)
                    handle.flush()
                    if self.fsync:
                        _sync(handle.fileno(), path, created=not old)
                except OSError:
                    handle.truncate(len(old))
                    if not old:
                        path.unlink(missing_ok=True)
                    raise
                digest.update(data)
                first_line = (old + prefix.encode("utf-8")).count(b"\n") + 1
                event = AppendEvent(path, day, old_sha, digest.hexdigest(), first_line, block)
                if self.listener is not None:  # under the lock: the index follows the file's order
                    _notify(self.listener.appended, event, path)
        except OSError as exc:
            raise StorageError(f"cannot append to {path}: {exc}") from exc
        return event

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
        return [day for day, path in self.paths.daily_files() if self._covered(path, marks.get(day))]

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
        candidates = [(d, p) for d, p in self.paths.daily_files() if d < cutoff and d in marks]
        if not candidates:
            return []
        removed: list[date] = []
        try:
            lock = file_lock(self.paths.inside(self.paths.daily_dir / LOCK_FILE))
            with self._after_lock(), lock:  # no append between check and unlink
                for day, path in candidates:
                    if self._covered(path, marks[day]) and self._remove(path):
                        removed.append(day)
        finally:
            if removed and self.consolidated is not None:
                self.consolidated.forget(self.paths.user_id, [d.isoformat() for d in removed])
        return removed

    def _marks(self) -> dict[date, PrefixMark]:
        if self.consolidated is None:
            return {}
        return {date.fromisoformat(day): mark for day, mark in self.consolidated.marks(self.paths.user_id).items()}

    @staticmethod
    def _covered(path: Path, mark: PrefixMark | None) -> bool:
        """Whether ``mark`` is the whole current file: same length (checked first, cheaply), same hash."""
        if mark is None:
            return False
        try:
            if path.stat().st_size != mark.offset:
                return False
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        state = _file_state(path)
        return state is not None and state[1:] == (mark.offset, mark.sha256)

    def _remove(self, path: Path) -> bool:
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot remove {path}: {exc}") from exc
        log.info("retention removed %s (consolidated whole, older than %d days)", path, self.retention_days)
        if self.listener is not None:
            _notify(self.listener.removed, path, path)
        return True

    def _after_lock(self) -> AbstractContextManager[Any]:
        return self.listener.notifications_after() if self.listener is not None else nullcontext()

    def _retention_quietly(self) -> None:
        """Retention runs when a new day's file appears; its failure never fails the append."""
        try:
            self.apply_retention()
        except Exception as exc:  # the append succeeded; retention will run again tomorrow
            log.warning("daily retention failed: %s", exc)




def _sync(fd: int, path: Path, created: bool) -> None:
    """fsync an appended file (and its directory when the append created it)."""
    os.fsync(fd)
    if created and hasattr(os, "O_DIRECTORY"):
        dir_fd = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)


def _notify(call: Callable[[_T], None], argument: _T, path: Path) -> None:
    """Run a listener; the file is the truth, so a failing index is logged and healed later."""
    try:
        call(argument)
    except Exception as exc:
        log.warning("index update for %s failed (refresh_index will retry): %s", path, exc)
