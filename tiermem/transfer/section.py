"""What an export section is, and the generic one for a plain table.

A :class:`Section` dumps rows of one scope (or of every scope) to JSON-ready dicts, checks such
rows before anything is written, and restores them inside the import's transaction. Restoring
merges by the section's key: a row that is absent is inserted, an equal one is left alone, and
one that exists with other content is an :class:`~tiermem.errors.ImportConflict` unless
``replace`` (then the imported row wins).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from tiermem.errors import ImportConflict
from tiermem.transfer.schema import Check, check_rows
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

Row = dict[str, Any]
INTERNAL_COLUMNS = frozenset({"rowid"})
#: How a scope selects a table's rows: by (user, agent), by user (files and dreams are per
#: user), or by the flush-hash namespace of the scope.
ScopeKind = Literal["agent", "user", "namespace"]


@dataclass(frozen=True)
class Restore:
    """How an import writes: ``replace`` lets imported rows win conflicts; ``scrub`` is the target
    store's redaction (``None`` when it is off), applied to every text a person or model wrote."""

    replace: bool = False
    scrub: Callable[[str], str] | None = None

    def clean(self, text: str) -> str:
        return self.scrub(text) if self.scrub is not None else text

    def clean_optional(self, text: str | None) -> str | None:
        return None if text is None else self.clean(text)

    def clean_id(self, text: str | None) -> str | None:
        """A thread id, session id or namespace: redacted as :func:`tiermem.redact.redact_id` does,
        as the store's own writes do (when this store redacts at all)."""
        from tiermem.redact import redact_id

        return text if text is None or self.scrub is None else redact_id(text)


@dataclass(frozen=True)
class Section:
    """One section of the export file (a table, or a group of rows that belong together)."""

    name: str
    fields: Mapping[str, Check] | None  # None: ``extra_check`` checks the whole row
    dump: Callable[[Database, Scope | None], list[Row]]
    restore: Callable[[Database, list[Row], Restore], int]  # inside the import's transaction
    table: str | None = None  # its columns added by a newer schema travel along too
    extra_check: Callable[[str, list[Row]], None] | None = None

    def check(self, db: Database, rows: Any) -> None:
        """Raise :class:`~tiermem.errors.InvalidInput` naming the first bad row and field."""
        known = set(self.fields or ())
        extra = frozenset(added_columns(db, self.table, known)) if self.table else frozenset()
        check_rows(self.name, rows, self.fields, extra)
        if self.extra_check is not None:
            self.extra_check(self.name, rows)


def added_columns(db: Database, table: str, known: Collection[str]) -> list[str]:
    """Columns of ``table`` beyond ``known``: those a newer schema added, which travel along. Not the
    insertion order a backend keeps by itself (PostgreSQL's ``rowid`` of facts and tombstones)."""
    return [c for c in db.parts.columns(db, table) if c not in known and c not in INTERNAL_COLUMNS]


def like_prefix(prefix: str) -> str:
    return prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"


def scope_filter(kind: ScopeKind, scope: Scope | None) -> tuple[str, list[Any]]:
    """``WHERE`` text and arguments that keep the rows of ``scope`` (all rows for ``None``)."""
    if scope is None:
        return "1 = 1", []
    if kind == "agent":
        return "user_id = ? AND agent_name = ?", [scope.user_id, scope.agent_name]
    if kind == "user":
        return "user_id = ?", [scope.user_id]
    from tiermem.tiers.daily import namespace_prefixes

    prefixes = [like_prefix(f"{prefix}{scope.agent_name}:") for prefix in namespace_prefixes(scope.user_id)]
    return "(" + " OR ".join("namespace LIKE ? ESCAPE '\\'" for _ in prefixes) + ")", prefixes


def rows_of(db: Database, sql: str, args: Sequence[Any] = ()) -> list[Row]:
    return [dict(row) for row in db.conn.execute(sql, args)]


def names(columns: Sequence[str]) -> str:
    """Column names quoted, joined by commas (``"offset"`` is a reserved word on PostgreSQL)."""
    return ", ".join(f'"{c}"' for c in columns)


def merge_row(db: Database, section: str, table: str, row: Row, key: Sequence[str], restore: Restore,
              ignore: Sequence[str] = ()) -> None:
    """Insert ``row`` unless an equal row (``ignore`` columns aside) has its key; another row with
    that key is a conflict unless ``restore.replace`` (then the imported row replaces it)."""
    conn = db.conn
    columns = list(row)
    where = " AND ".join(f'"{k}" = ?' for k in key)
    old = conn.execute(f"SELECT {names(columns)} FROM {table} WHERE {where}", [row[k] for k in key]).fetchone()
    if old is not None:
        differs = [c for c in columns if c not in ignore and old[c] != row[c]]
        if not differs:
            return
        if not restore.replace:
            raise ImportConflict(f"{section} {', '.join(str(row[k]) for k in key)} exists with other content"
                                 f" ({', '.join(differs)}); use --replace to overwrite")
    marks = ", ".join("?" for _ in columns)
    sets = ", ".join(f'"{c}" = excluded."{c}"' for c in columns if c not in key)
    conflict = f"DO UPDATE SET {sets}" if sets else "DO NOTHING"
    conn.execute(f"INSERT INTO {table} ({names(columns)}) VALUES ({marks}) ON CONFLICT ({names(key)}) {conflict}",
                 [row[c] for c in columns])


@dataclass(frozen=True)
class TableSpec:
    """A plain table exported row by row and merged by ``key``."""

    name: str
    fields: Mapping[str, Check]
    key: tuple[str, ...]
    scope: ScopeKind
    order: str
    ignore: tuple[str, ...] = ()  # columns a merge does not compare (when a mark was made)
    transform: Callable[[Row, Restore], Row] | None = field(default=None)  # redaction, derived columns
    ids: str | None = None  # an id column the database numbers: its sequence moves past the imported ids


def table_section(spec: TableSpec) -> Section:
    """The :class:`Section` of a plain table (its newer columns included)."""

    def dump(db: Database, scope: Scope | None) -> list[Row]:
        where, args = scope_filter(spec.scope, scope)
        wanted = [*spec.fields, *added_columns(db, spec.name, spec.fields)]
        return rows_of(db, f"SELECT {names(wanted)} FROM {spec.name} WHERE {where} ORDER BY {spec.order}", args)

    def restore(db: Database, rows: list[Row], how: Restore) -> int:
        for row in rows:
            merge_row(db, spec.name, spec.name, spec.transform(row, how) if spec.transform else row, spec.key,
                      how, spec.ignore)
        if spec.ids is not None:
            db.parts.sync_ids(db, spec.name, spec.ids)
        return len(rows)

    return Section(spec.name, spec.fields, dump, restore, table=spec.name)
