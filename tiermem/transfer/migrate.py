"""Copy a SQLite store into another database (``tiermem migrate --to``), through the export format.

The source is the ``tiermem.db`` under the root and its Markdown files, read as one snapshot
(:func:`~tiermem.transfer.document.export_data`, every scope). The target is opened with the same
root and settings but ``database_url`` set: its schema is created (migrated) as any store's is,
then the document is imported into it (:meth:`Memory.import_ <tiermem.memory.Memory.import_>`:
rows, files, then the search index cut from the files and the vectors, reused from the export
where the model matches). The local files are left alone (the target does not mirror into the
root while copying), so the SQLite store stays as it was (one an older tiermem wrote gets the
schema upgrade any opening gives it). Once the copy is made the root gets ``tiermem.postgres``
naming the target (:func:`~tiermem.storage.backend.mark_mirror`): a process opening the root
without the URL is refused rather than handed the stale SQLite store; deleting that file opens
the SQLite store again.

A target that holds memory already (a row in any table but those a store fills by itself,
:data:`SELF_FILLED`) is refused unless ``replace``; then rows and files
the target holds with other content are overwritten, as ``tiermem import --replace`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.errors import ImportConflict, NotFound
from tiermem.storage.backend import DB_FILE

if TYPE_CHECKING:
    from tiermem.storage.sql import Database


@dataclass(frozen=True)
class MigrateReport:
    """What was copied: ``counts`` per export section (``files``: Markdown files)."""

    source: str  # the SQLite file
    target: str  # the target URL without its password
    counts: dict[str, int]


def migrate_store(root: Path, url: str, *, replace: bool = False) -> MigrateReport:
    """Copy the SQLite store under ``root`` into the database at ``url`` (see the module docstring).

    ``url`` must name a database server (``postgresql://...``): anything else, an empty one or a
    ``sqlite://`` one included, would be the SQLite store itself, and is a
    :class:`~tiermem.errors.ConfigError`."""
    from dataclasses import replace as evolve

    from tiermem.config import load_settings
    from tiermem.memory import Memory
    from tiermem.redact import Redactor
    from tiermem.storage.backend import mark_mirror, open_database, url_scheme
    from tiermem.storage.sqlite.db import Database as SqliteDatabase
    from tiermem.transfer.document import export_data

    url_scheme(url, "the migration target (--to)")  # not a server's URL: fails before anything is read
    base = Path(root).expanduser().resolve()
    settings = load_settings(base, {"database_url": url})
    path = base / DB_FILE
    if not path.is_file():
        raise NotFound(f"no SQLite store at {base} to migrate ({DB_FILE} is missing; check --root)")
    source = SqliteDatabase(path, redactor=Redactor(settings.redact_secrets), allow_symlinks=settings.allow_symlinks)
    try:
        data = export_data(source, base)
    finally:
        source.close()
    target = open_database(base, evolve(settings, mirror_files=False))
    try:
        label = target.label
        held = holds_memory(target)
    finally:
        target.close()
    if held and not replace:
        raise ImportConflict(f"{label} already holds a tiermem store ({held[0]} has rows); use --replace to copy"
                             " into it anyway (rows and files there with other content are overwritten)")
    with Memory(base, database_url=url, mirror_files=False, queue_replay=False) as mem:
        counts = mem.import_(data, replace=replace)
    mark_mirror(base, label)  # from now on the root opens only with the URL, not as the stale SQLite store
    return MigrateReport(str(path), label, counts)


#: Tables a store fills by itself (settings of its index, counters, the removal log): rows there are
#: no memory of anyone's.
SELF_FILLED = frozenset({"meta", "change_epochs", "search_models", "search_removed", "journal_intents",
                         "call_log"})


def holds_memory(db: Database) -> list[str]:
    """The tables of ``db`` that hold someone's memory (empty: a new store, nothing to overwrite)."""
    return [table for table in db.parts.tables(db) if table not in SELF_FILLED
            and db.rows(f"SELECT 1 FROM {table} LIMIT 1", what="looking into the target")]
