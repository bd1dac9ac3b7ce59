"""What every repository codes against, whichever database holds the store.

One SQL text serves both backends when it keeps to the portable subset (``docs/postgres.md``):
``?`` placeholders, ``ON CONFLICT``, ``RETURNING``, no PRAGMA. Where the mechanism itself
differs (full-text index, vectors, locks, the Daily files, claims), the concern has one
implementation per backend, reached through :attr:`Database.parts` — chosen once, when the store
opens (:func:`tiermem.storage.backend.open_database`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any, Protocol

from tiermem.errors import InvalidInput

if TYPE_CHECKING:
    from tiermem.redact import Redactor
    from tiermem.storage.embeddings import EmbeddingRepository, VectorQueries
    from tiermem.storage.files import FilesFactory
    from tiermem.storage.outbox import ClaimRequest
    from tiermem.storage.search import SearchIndex
    from tiermem.types import Scope


class Row(Protocol):
    """A result row: ``row[0]`` and ``row["name"]``; ``keys()`` lists the column names."""

    def __getitem__(self, key: int | str, /) -> Any: ...

    def keys(self) -> list[str]: ...


class Cursor(Protocol):
    rowcount: int

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...

    def __iter__(self) -> Iterator[Any]: ...


class Connection(Protocol):
    """This thread's connection: autocommit outside :meth:`Database.transaction`."""

    @property
    def in_transaction(self) -> bool: ...

    def execute(self, sql: str, args: Sequence[Any] = (), /) -> Any: ...

    def executemany(self, sql: str, rows: Any, /) -> Any: ...


@dataclass(frozen=True)
class WriteKey:
    """What a write transaction's read-check-write must keep other writers out of
    (:meth:`Database.transaction`; docs/postgres.md, "What can run at once").

    ``store``: the whole store (migrations' kin: purge, import, the export's snapshot, maintenance
    over every scope) - it waits for every other writer and every writer waits for it. Otherwise
    ``names``: what it locks (a scope, a user's files, one queue thread); writers with no name in
    common run at once. No name (:data:`ROWS`): the statements' own row locks and unique
    constraints keep the rules (``ON CONFLICT``, an update by id), so it waits only for a
    store-wide writer. ``shares``: named locks of the store (:attr:`Backend.lock`, e.g. the
    journal's) the transaction holds shared, so it waits while someone holds one of them and
    keeps them from being taken until it ends. On SQLite every write transaction is store-wide
    (``BEGIN IMMEDIATE``)."""

    names: frozenset[str] = frozenset()
    store: bool = False
    shares: frozenset[str] = frozenset()

    @classmethod
    def named(cls, *parts: str) -> WriteKey:
        """The key of one thing, e.g. ``WriteKey.named("scope", user, agent)``."""
        return cls(frozenset({"\x1f".join(parts)}))

    @classmethod
    def sharing(cls, *locks: str) -> WriteKey:
        """The key that holds the named locks ``locks`` shared (and nothing else)."""
        return cls(shares=frozenset(locks))

    def covers(self, other: WriteKey) -> bool:
        """True when holding this key keeps out every writer ``other`` keeps out."""
        return (self.store or (not other.store and other.names <= self.names)) and other.shares <= self.shares

    def __or__(self, other: WriteKey) -> WriteKey:
        return WriteKey(self.names | other.names, self.store or other.store, self.shares | other.shares)


#: Put before a read whose right plan changes as its tables grow (a join by a key the planner may
#: instead scan for): PostgreSQL plans it at every run instead of settling on one generic plan made
#: with the table sizes of the moment it was prepared (a fresh store's are near empty then: a scan
#: per row, growing with the square of the table). SQLite reads it as a comment.
PLAN_EACH_RUN = "/* planned at each run */ "

STORE = WriteKey(store=True)  # the default: correct for any write, and waits for every other one
ROWS = WriteKey()


def scope_key(scope: Scope) -> WriteKey:
    """One scope's rules: its facts (duplicates, the cap, tombstones), summaries, audit, plans."""
    return WriteKey.named("scope", scope.user_id, scope.agent_name)


def user_key(user_id: str) -> WriteKey:
    """One user's files (Daily journal, diaries, ``MEMORY.md`` and its versions) and their index."""
    return WriteKey.named("user", user_id)


@dataclass(frozen=True)
class Backend:
    """The per-backend implementations of the concerns whose mechanism differs. Each field is a
    factory taking the :class:`Database` (and what else its protocol says)."""

    name: str
    columns: Callable[[Database, str], list[str]]  # a table's column names, in order
    tables: Callable[[Database], list[str]]  # the store's plain tables (no index shadow tables)
    # a named cross-process lock: (db, name, timeout seconds) -> context manager; name = the lock file's
    # path under the root ("users/bob/.dream.lock"); 0 = one try, < 0 = no limit; raises TimeoutError
    lock: Callable[[Database, str, float], AbstractContextManager[Any]]
    # (column, ids) -> the condition "column is one of ids" and its arguments: PostgreSQL passes the
    # ids as one array, so psycopg prepares one statement text for any count (SQLite: a placeholder each)
    ids_in: Callable[[str, Sequence[Any]], tuple[str, list[Any]]]
    # claim the oldest due pending outbox item (storage/outbox.py): its row, or None
    claim_outbox: Callable[[Database, ClaimRequest], Any]
    # export, purge, migrate (storage/<backend>/admin.py): the columns of a table that may hold text;
    # a read that sees one consistent state; moving a table's id sequence past ids written explicitly;
    # purge's maintenance: secure_delete on/off (returns the previous setting), and compaction after it
    # (returns (vacuumed, log truncated))
    text_columns: Callable[[Database, str], list[str]]
    snapshot: Callable[[Database], AbstractContextManager[Any]]
    sync_ids: Callable[[Database, str, str], None]
    secure_delete: Callable[[Database, bool], bool]
    compact: Callable[[Database], tuple[bool, bool]]
    files: FilesFactory  # one user's Markdown files: (db, paths, *, mirror) -> MemoryFiles (storage/files.py)
    # search (storage/search.py, storage/embeddings.py): the keyword index and item lookups; the vector
    # cache; nearest-neighbour queries answered by the database (None: the engine searches vectors in memory)
    search_index: Callable[[Database], SearchIndex]
    embeddings: Callable[[Database], EmbeddingRepository]
    vector_queries: Callable[[Database], VectorQueries] | None


class Database(Protocol):
    """A store's database: SQLite file or PostgreSQL schema."""

    backend: str  # "sqlite" or "postgres": for messages and stats, never to branch on
    label: str  # the path, or the URL without its password: what messages name
    redactor: Redactor
    read_only: bool
    allow_symlinks: bool
    synchronous: str
    IntegrityError: type[Exception]
    parts: Backend

    @property
    def conn(self) -> Any: ...

    def rows(self, sql: str, args: Sequence[Any] = (), what: str = "query") -> list[Any]: ...

    def defer(self, sql: str, args: Any = (), /, *, many: bool = False) -> Any:
        """Run a write (``many``: once per row of ``args``) whose result is read later, if at all:
        PostgreSQL queues it inside a
        transaction to go with the next statement that waits or with ``COMMIT`` (one round trip
        for the lot; its error surfaces there); SQLite runs it at once."""
        ...

    def prefetch(self, sql: str, args: Sequence[Any] = (), /) -> None:
        """Send a read the transaction will run soon, so reads queued together cost one round trip
        on PostgreSQL (the later identical read takes the result); nothing on SQLite."""
        ...

    def reading(self) -> AbstractContextManager[None]:
        """A read batch: outside a transaction, reads sent ahead (:meth:`prefetch`) in the block
        travel with the next read that waits (PostgreSQL: one connection in pipeline mode, one
        round trip for independent reads); nothing on SQLite."""
        ...

    def transaction(self, key: WriteKey = STORE, *, queued: bool = False) -> AbstractContextManager[Any]:
        """A write transaction, re-entrant per thread; ``key``: what it must keep others out of.
        ``queued``: its locks may travel with its first statement that waits (PostgreSQL: a
        transaction of deferred writes in one round trip; a lost connection is then found late,
        ``ConnectionLost``); nothing on SQLite."""
        ...

    def close(self) -> None: ...


def check_lock_name(name: str) -> PurePosixPath:
    """A lock's ``name`` (``Backend.lock``) as a relative path that stays under the root (no ``..``, not absolute)."""
    rel = PurePosixPath(name)
    if not name or rel.is_absolute() or ".." in rel.parts or "\\" in name or not rel.name:
        raise InvalidInput(f"a lock name is a relative path under the memory root, got {name!r}")
    return rel
