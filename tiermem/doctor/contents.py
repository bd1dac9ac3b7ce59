"""Doctor's checks of what the database holds: queue claims, the search index, consolidation marks.

- **Queue**: an item in ``processing`` must be held by a live claim, by the queue's own rule: a
  claim whose lease ran out, or whose claiming process is gone, is stuck. ``tiermem queue
  flush`` (or ``doctor --repair``) hands such items back. Dead items are a notice.
- **Search index**: a file whose content differs from what was indexed, or that is not indexed
  yet, or an indexed file that was deleted, means the index is *behind* (a notice: ``tiermem
  reindex`` or the next search catches up). An index that claims a file's current content but
  holds other chunks, or search rows that no fact or chunk backs (or the reverse), is damage.
- **Consolidation marks** (table ``consolidated_prefix``, when present): a mark must name a valid
  day, a non-negative offset and a sha256; a mark whose prefix no longer matches its Daily file
  (edited by hand after the Deep Dream) is void, which keeps the day from retention: a notice.
  (An append leaves the prefix as it was: the mark then covers part of the file, as designed.)
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Callable, Mapping
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any

from tiermem.clock import parse_utc
from tiermem.doctor.report import MARKS, QUEUE, REBUILD, REINDEX, DoctorReport
from tiermem.paths import CORE_FILE, DAILY_DIR, UserPaths
from tiermem.plural import counted, for_count
from tiermem.storage.outbox import claimer_gone
from tiermem.tiers.indexer import chunks_of, is_indexed_path

_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_SHOWN = 5


def _columns(conn: sqlite3.Connection, table: str) -> set[str]:
    return {str(r[1]) for r in conn.execute(f'PRAGMA table_info("{table}")')}


def _some(items: list[str]) -> str:
    return ", ".join(items[:_SHOWN]) + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


# --- the queue ------------------------------------------------------------------------------------
def _stuck(row: Mapping[str, Any] | sqlite3.Row, now: datetime, lease_seconds: float) -> bool:
    """The queue's own rule (:mod:`tiermem.storage.outbox`): a claim stands until its lease runs
    out (``lease_until``, or ``claimed_at`` + the lease for claims made before leases) and while
    its claimer may be running."""
    if row["lease_until"]:
        end: datetime | None = parse_utc(row["lease_until"])
    elif row["claimed_at"]:
        end = parse_utc(row["claimed_at"]) + timedelta(seconds=lease_seconds)
    else:
        end = None
    return (end is not None and end <= now) or claimer_gone(row["claimed_by"])


def check_queue(conn: Any, report: DoctorReport, now: datetime, lease_seconds: float,
                columns_of: Callable[[Any, str], set[str]] = _columns) -> None:
    """Stuck claims and dead items. ``conn``: a connection whose rows read by column name (SQLite's
    read-only one, or PostgreSQL's); ``columns_of(conn, table)``: the table's column names."""
    columns = columns_of(conn, "outbox")
    if not columns:
        return
    report.checked.append("queue")
    fields = ", ".join(c if c in columns else f"NULL AS {c}" for c in ("claimed_by", "claimed_at", "lease_until"))
    rows = conn.execute(f"SELECT id, {fields} FROM outbox WHERE status = 'processing' ORDER BY id").fetchall()
    try:
        stuck = [str(r["id"]) for r in rows if _stuck(r, now, lease_seconds)]
    except ValueError as exc:
        report.problem(f"a queue claim holds an unreadable lease time ({exc}): `tiermem doctor --repair` "
                       "hands the claims of stopped processes back", QUEUE)
        return
    if stuck:
        report.problem(f"{counted(len(stuck), 'queue item')} {for_count(len(stuck), 'is', 'are')} stuck in processing"
                       " (the lease ran out or the claiming "
                       f"process is gone; ids {_some(stuck)}): "
                       "`tiermem queue flush` or `tiermem doctor --repair` hands them back", QUEUE)
    dead = int(conn.execute("SELECT count(*) AS n FROM outbox WHERE status = 'dead'").fetchone()["n"])
    if dead:
        report.notices.append(f"{counted(dead, 'queue item')} failed for good (see `tiermem queue status`; "
                              "`tiermem queue retry` runs them again)")


# --- the search index -----------------------------------------------------------------------------
def files_of(paths: UserPaths) -> dict[str, Path]:
    """``MEMORY.md`` and the Daily files of one user, by their index path."""
    found = {CORE_FILE: paths.core} if paths.core.is_file() else {}
    found.update({f"{DAILY_DIR}/{p.name}": p for _, p in paths.daily_files()})
    return found


def _stored_chunks(conn: sqlite3.Connection, user: str, rel: str) -> list[tuple[object, ...]]:
    rows = conn.execute("SELECT tier, line_start, line_end, text, day FROM chunks WHERE user_id = ? AND path = ?"
                        " ORDER BY line_start, id", (user, rel))
    return [tuple(r) for r in rows]


def _compare_user(conn: sqlite3.Connection, paths: UserPaths, behind: list[str], wrong: list[str]) -> None:
    user = paths.user_id
    indexed = {str(r[0]): str(r[1]) for r in conn.execute(
        "SELECT path, sha256 FROM indexed_files WHERE user_id = ?", (user,))}
    on_disk = files_of(paths)
    label = "" if user == "default" else f"users/{user}/"
    for rel, path in sorted(on_disk.items()):
        data = path.read_bytes()
        if indexed.get(rel) != hashlib.sha256(data).hexdigest():
            behind.append(label + rel)
            continue
        expected = [(c.tier, c.line_start, c.line_end, c.text, c.day)
                    for c in chunks_of(rel, data.decode("utf-8", errors="replace"))]
        if _stored_chunks(conn, user, rel) != expected:
            wrong.append(label + rel)
    behind += [f"{label}{rel} (deleted)" for rel in sorted(indexed) if is_indexed_path(rel) and rel not in on_disk]


_UNBACKED: dict[tuple[str, str], str] = {
    ("fact without a search row", "facts without a search row"): "SELECT count(*) FROM facts f WHERE NOT EXISTS"
    " (SELECT 1 FROM search_docs d WHERE d.source = 'fact' AND d.ref = f.id)",
    ("chunk without a search row", "chunks without a search row"): "SELECT count(*) FROM chunks c WHERE NOT EXISTS"
    " (SELECT 1 FROM search_docs d WHERE d.source = 'chunk' AND d.ref = CAST(c.id AS TEXT))",
    ("search row without a fact or chunk", "search rows without a fact or chunk"):
    "SELECT count(*) FROM search_docs d WHERE NOT EXISTS"
    " (SELECT 1 FROM facts f WHERE d.source = 'fact' AND f.id = d.ref) AND NOT EXISTS"
    " (SELECT 1 FROM chunks c WHERE d.source = 'chunk' AND c.id = CAST(d.ref AS BIGINT))",
}


def find_vector_model(conn: Any, report: DoctorReport, columns: Callable[[Any, str], set[str]]) -> None:
    """Record which embedder model the stored vectors belong to (the ``meta`` key the indexer
    keeps), then check that every search item has a vector of it (:func:`_check_vectors`)."""
    if "value" in columns(conn, "meta"):
        row = conn.execute("SELECT value FROM meta WHERE key = 'embedding_model'").fetchone()
        report.vector_model = str(row["value"]) if row is not None else None
    if report.vector_model is not None and "embed_hash" in columns(conn, "search_docs") and columns(conn, "embeddings"):
        _check_vectors(conn, report)


_WITHOUT_VECTOR = (  # per scope: items with no vector of the store's model, and how many were never embedded
    "SELECT d.user_id AS user_id, d.agent_name AS agent_name, count(*) AS n,"
    " sum(CASE WHEN d.embed_hash IS NULL THEN 1 ELSE 0 END) AS waiting"
    " FROM search_docs d LEFT JOIN embeddings e ON e.content_hash = d.embed_hash"
    " AND e.model = (SELECT value FROM meta WHERE key = 'embedding_model')"
    " WHERE e.content_hash IS NULL GROUP BY d.user_id, d.agent_name ORDER BY d.user_id, d.agent_name")


def _check_vectors(conn: Any, report: DoctorReport) -> None:
    """Search items without a vector of the store's embedder model, which vector search cannot
    find: never embedded yet (a notice: the next search embeds them), or embedded but not with
    that model, a vector lost or a model changed without a re-index (a problem: ``tiermem
    reindex`` gives them one). One pass over the items, each a key lookup."""
    report.checked.append("vectors")
    rows = conn.execute(_WITHOUT_VECTOR).fetchall()
    waiting = sum(int(r["waiting"]) for r in rows)
    lost = {f"{r['user_id']}/{r['agent_name']}": int(r["n"]) - int(r["waiting"]) for r in rows}
    lost = {scope: n for scope, n in lost.items() if n}
    if lost:
        total = sum(lost.values())
        report.problem(f"{counted(total, 'search item')} {for_count(total, 'has', 'have')} no vector for"
                       f" {report.vector_model}, the store's"
                       f" embedder model, so vector search cannot find them"
                       f" ({_some([f'{scope}: {n}' for scope, n in lost.items()])}): run `tiermem reindex`")
    if waiting:
        report.notices.append(f"{counted(waiting, 'search item')} {for_count(waiting, 'has', 'have')} no vector yet:"
                              f" the next search embeds {for_count(waiting, 'it', 'them')}")


def check_index(conn: sqlite3.Connection, report: DoctorReport, root: Path, users: list[str]) -> None:
    if not {"chunks", "indexed_files", "search_docs"} <= {str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table'")}:
        return
    report.checked.append("search index")
    find_vector_model(conn, report, _columns)
    behind: list[str] = []
    wrong: list[str] = []
    for user in users:
        _compare_user(conn, UserPaths.for_user(root, user), behind, wrong)
    if wrong:
        report.problem(f"the search index disagrees with {counted(len(wrong), 'file')} it claims to hold"
                       f" ({_some(wrong)}): "
                       "`tiermem doctor --repair` rebuilds it from the files", REINDEX)
    unbacked = [counted(n, *what) for what, sql in _UNBACKED.items() if (n := int(conn.execute(sql).fetchone()[0]))]
    if unbacked:
        report.problem(f"the search index is inconsistent ({', '.join(unbacked)}): `tiermem doctor --repair` "
                       "rebuilds it", REBUILD)
    if behind:
        report.notices.append(f"the search index is behind {counted(len(behind), 'file')} ({_some(behind)}): not"
                              " damage; run `tiermem reindex` (the next search also catches up)")
        report.repairs.add(REINDEX)


# --- consolidation marks --------------------------------------------------------------------------
def mark_fault(root: Path, row: sqlite3.Row) -> str | None:
    """What is wrong with a mark's fields, or None."""
    try:
        UserPaths.for_user(root, row["user_id"])
        date.fromisoformat(str(row["day"]))
    except (ValueError, TypeError):
        return "user or day"
    if not isinstance(row["offset"], int) or row["offset"] < 0:
        return "offset"
    if not isinstance(row["sha256"], str) or not _SHA256.match(row["sha256"]):
        return "sha256"
    return None


def _mark_void(root: Path, row: sqlite3.Row) -> bool:
    path = UserPaths.for_user(root, row["user_id"]).daily(date.fromisoformat(row["day"]))
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return False  # retention removed the day it covered whole
    offset = int(row["offset"])
    return len(data) < offset or hashlib.sha256(data[:offset]).hexdigest() != str(row["sha256"])


def check_marks(conn: sqlite3.Connection, report: DoctorReport, root: Path, user_id: str | None) -> None:
    if not _columns(conn, "consolidated_prefix"):
        return
    report.checked.append("consolidation marks")
    rows = conn.execute('SELECT user_id, day, "offset", sha256 FROM consolidated_prefix ORDER BY user_id, day')
    bad: list[str] = []
    void: list[str] = []
    for row in rows:
        if user_id is not None and row["user_id"] != user_id:
            continue
        where = f"{row['user_id']} {row['day']}"
        fault = mark_fault(root, row)
        if fault is not None:
            bad.append(f"{where}: {fault}")
        elif _mark_void(root, row):
            void.append(where)
    if bad:
        report.problem(f"{counted(len(bad), 'consolidation mark')} {for_count(len(bad), 'is', 'are')} damaged"
                       f" ({_some(bad)}): `tiermem doctor --repair` "
                       "drops them (retention then keeps those days until the next Deep Dream)", MARKS)
    if void:
        n = len(void)
        report.notices.append(f"{counted(n, 'Daily file')} {for_count(n, 'was', 'were')} edited after the Deep Dream"
                              f" consolidated {for_count(n, 'it', 'them')} ({_some(void)}): "
                              f"{for_count(n, 'its mark no longer matches', 'their marks no longer match')}, so"
                              f" retention keeps {for_count(n, 'it', 'them')}")
