"""The export file as a whole: write one (version 2), read one (version 1 or 2).

Version 2 (this release) is a full backup (R69)::

    {"format": "tiermem-export", "version": 2, "scope": null | {"user_id": ..., "agent_name": ...},
     "facts": [...], "summaries": [...], ..., "embeddings": [...], "files": [...]}

with one list per database section (:mod:`tiermem.transfer.rows`) and the Markdown files
(:mod:`tiermem.transfer.files`). ``scope`` is ``null`` when the export covers every scope.
A version 2 file written before consolidation prefix marks (issue 14) has ``consolidated_days``
instead of ``consolidated_prefix``: it imports, and its day marks are dropped (see
:data:`~tiermem.transfer.rows.LEGACY_SECTIONS`). Version 1 (tiermem 0.1.0) held facts, summaries,
tombstones, audit, plans, ``MEMORY.md`` versions and dream state, each optional; it imports as a
version 2 file without those other sections.

Import checks the whole file first (one :class:`~tiermem.errors.InvalidInput` naming section,
row and field), then plans the file writes (an existing file with other content is refused unless
``replace``), then restores every row in one transaction and writes the files before it commits.
Any failure leaves the database and the files as they were.
"""

from __future__ import annotations

from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.errors import InvalidInput
from tiermem.storage.sql import STORE
from tiermem.transfer import files
from tiermem.transfer.outcome import ImportCounts, Restored
from tiermem.transfer.rows import ADDED_SECTIONS, LEGACY_SECTIONS, SECTIONS
from tiermem.transfer.schema import name, where
from tiermem.transfer.section import Restore, Section
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

FORMAT = "tiermem-export"
VERSION = 2
V1_SECTIONS = ("facts", "summaries", "tombstones", "audit", "plans", "core_versions", "dream_state")
SECTION_NAMES = tuple(section.name for section in SECTIONS)
LEGACY_NAMES = frozenset(section.name for section in LEGACY_SECTIONS)


@dataclass(frozen=True)
class ImportReport:
    """What an import restored: rows (or files) per section and what became of them
    (:class:`~tiermem.transfer.outcome.ImportCounts`), and the users whose files it covered."""

    counts: ImportCounts
    users: list[str]


def export_data(db: Database, base: Path, scope: Scope | None = None) -> dict[str, Any]:
    """Every section of ``scope`` (every scope for ``None``) as JSON-ready data, read as one
    consistent snapshot: the database in one read transaction, local files under the users' locks."""
    users = [scope.user_id] if scope is not None else files.file_users(db, base)
    with files.lock_users(db, base, users, reading=True), db.parts.snapshot(db):
        data: dict[str, Any] = {
            "format": FORMAT, "version": VERSION,
            "scope": None if scope is None else {"user_id": scope.user_id, "agent_name": scope.agent_name},
        }
        for section in SECTIONS:
            data[section.name] = section.dump(db, scope)
        data[files.SECTION] = files.export_files(db, base, users, db.redactor.scrub)
    return data


def _sections(data: Any) -> dict[str, Any]:
    """The sections of a version 1 or 2 export (version 1: the ones it has)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InvalidInput(f"not a tiermem export (expected an object with \"format\": {FORMAT!r})")
    version = data.get("version")
    if version == 1:
        allowed, required = set(V1_SECTIONS), set()
    elif version == VERSION:
        required = {*SECTION_NAMES, files.SECTION, "scope"} - ADDED_SECTIONS
        allowed = {*required, *ADDED_SECTIONS, *(section.name for section in LEGACY_SECTIONS)}
    else:
        shown = repr(version)[:40] if isinstance(version, (int, float, str)) else type(version).__name__  # no deep repr
        raise InvalidInput(f"unsupported export version {shown} (this tiermem reads versions 1 and {VERSION})")
    body = {k: v for k, v in data.items() if k not in ("format", "version")}
    for key, value in body.items():
        validate.json_depth(value, where(str(key)))  # before anything walks it recursively
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InvalidInput(f"{where(unknown[0])}: unknown in an export of version {version}")
    missing = sorted(required - set(body))
    if missing:
        raise InvalidInput(f"{where(missing[0])}: missing")
    _check_scope(body.get("scope"))
    return body


def _check_scope(scope: Any) -> None:
    if scope is None:
        return
    if not isinstance(scope, dict) or set(scope) != {"user_id", "agent_name"}:
        raise InvalidInput(f"{where('scope')}: expected null or an object with user_id and agent_name")
    for field in ("user_id", "agent_name"):
        problem = name(scope[field])
        if problem is not None:
            raise InvalidInput(f"{where('scope', None, field)}: {problem}")


def import_data(db: Database, base: Path, data: Any, how: Restore, mirror: bool = True) -> ImportReport:
    """Restore an export into the store at ``base``; all or nothing (see the module docstring).
    ``mirror``: where the files are rows, rewrite this process's local copies of the ones written."""
    body = _sections(data)
    present = [section for section in (*SECTIONS, *LEGACY_SECTIONS) if section.name in body]
    for section in present:
        section.check(db, body[section.name])
    entries = files.parse_files(body.get(files.SECTION, []), how)
    files.plan_writes(db, base, entries, how.replace, mirror)  # refuse before taking any lock
    users = sorted({entry.user_id for entry in entries})
    restored: dict[str, Restored] = {}
    with files.lock_users(db, base, users), ExitStack() as grouped:
        writes = files.plan_writes(db, base, entries, how.replace, mirror)
        for handle in {id(w.files): w.files for w in writes}.values():
            grouped.enter_context(handle.writing(STORE))  # files kept as rows: written in the transaction
        written = False
        try:
            with db.transaction():
                for section in present:
                    try:
                        restored[section.name] = _restore(db, section, body[section.name], how)
                    except db.IntegrityError as exc:
                        raise InvalidInput(f"{where(section.name)}: rows break a rule of the store: {exc}") from exc
                files.write_files(writes)
                written = True
        except BaseException:
            if written:
                files.undo(writes)
            raise
    if files.SECTION in body:
        restored[files.SECTION] = Restored(len(entries), added=sum(1 for w in writes if w.old is None))
    return ImportReport(ImportCounts(restored), users)


def _restore(db: Database, section: Section, rows: list[Any], how: Restore) -> Restored:
    """Restore one section (inside the import's transaction): rows its table gained are added; a
    section this store no longer keeps (:data:`~tiermem.transfer.rows.LEGACY_SECTIONS`) refuses
    its rows after checking them."""
    if section.name in LEGACY_NAMES:
        return Restored(section.restore(db, rows, how), refused=len(rows))
    before = _held(db, section.name)
    count = section.restore(db, rows, how)
    return Restored(count, added=min(count, max(0, _held(db, section.name) - before)))


def _held(db: Database, table: str) -> int:
    """Rows in ``table`` (each database section is restored into the table of its name)."""
    return int(db.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])
