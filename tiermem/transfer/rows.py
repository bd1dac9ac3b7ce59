"""The database sections of an export, one per table that holds something only this store knows.

Exported: facts, summaries, tombstones, audit, plans, ``MEMORY.md`` versions, dream state,
consolidation marks, flush digests (R9), extracted-message digests (R28), queue items (pending and
dead) and embeddings. Not exported, because import rebuilds them: the search index (``chunks``,
``indexed_files``, ``search_docs`` and its FTS tables) is cut again from the Markdown files, which
travel whole; ``change_epochs`` are counters the inserts move; ``search_removed`` and ``meta``
(the index's model, the removal-log watermark) describe this database's own index.
:data:`NOT_EXPORTED` lists them, and a test fails when a new table is in neither list.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import TYPE_CHECKING, Any

from tiermem.errors import ImportConflict, InvalidInput
from tiermem.integrations.store_values import whole_value_texts
from tiermem.redact import Redactor, redact_json
from tiermem.storage.facts import TOMBSTONE_HASH_PREFIX
from tiermem.storage.store_items import stored_namespace
from tiermem.transfer import schema as s
from tiermem.transfer.schema import where
from tiermem.transfer.section import Restore, Row, Section, TableSpec, names, rows_of, scope_filter, table_section
from tiermem.types import CATEGORIES, SUMMARY_KEYS, Scope
from tiermem.validate import json_depth, normalise

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

NOT_EXPORTED = frozenset({
    "chunks", "indexed_files", "search_docs", "search_removed", "search_words", "search_grams",
    "search_words_vocab", "search_grams_vocab", "change_epochs", "meta", "sqlite_sequence",
    "journal_intents",  # write-ahead marks of Daily appends in flight: settled by the next writer, never carried
    "memory_files", "memory_blocks",  # PostgreSQL: the Markdown files as rows, which travel as the files section
    "search_models", "search_vectors", "search_terms",  # PostgreSQL's vector index and keyword vocabulary
    "call_log",  # the LLM call log: a record of this store's model calls, not memory (docs/calls.md)
})
AGENT_SCOPE = {"user_id": s.name, "agent_name": s.name}


# --- facts: restored as they were, never re-admitted (R69) ---------------------------------------
_FACT_FIELDS = {"id": s.identifier, **AGENT_SCOPE, "content": s.content, "category": s.one_of(*CATEGORIES),
                "confidence": s.number, "created_at": s.timestamp, "updated_at": s.timestamp, "source": s.text(True)}

_FACT_SAME = [f for f in _FACT_FIELDS if f != "id"]


def _dump_facts(db: Database, scope: Scope | None) -> list[Row]:
    flt, args = scope_filter("agent", scope)
    return rows_of(db, f"SELECT {', '.join(_FACT_FIELDS)} FROM facts WHERE {flt}"
                         " ORDER BY user_id, agent_name, created_at, id", args)


def _restore_facts(db: Database, rows: list[Row], how: Restore) -> int:
    """Each fact as it was, merged by id: an equal fact is left alone; another fact with its id, or
    another id with its content in its scope, is a conflict unless ``replace`` (then it goes). The
    decisions are made row by row in Python, then written in two batches."""
    conn = db.conn
    stored, norms = _stored_facts(db, rows)
    writes: dict[str, tuple[Any, ...]] = {}
    gone: list[tuple[Any, ...]] = []
    for row in rows:
        content = how.clean(row["content"])
        norm = normalise(content)
        new = {**{k: row[k] for k in _FACT_SAME}, "content": content}
        old = stored.get(row["id"])
        if old is not None and {k: old[k] for k in _FACT_SAME} == new:
            continue
        if old is not None and not how.replace:
            raise ImportConflict(f"fact {row['id']} exists with other content; use --replace to overwrite")
        key = (row["user_id"], row["agent_name"], norm)
        twin = norms.get(key)
        if twin is not None and twin != row["id"]:
            if not how.replace:
                raise ImportConflict(f"fact {row['id']} has the content of fact {twin} in scope"
                                     f" {row['user_id']}/{row['agent_name']}; use --replace to keep the imported one")
            stored.pop(twin, None)
            writes.pop(twin, None)
        if old is not None:
            norms.pop((old["user_id"], old["agent_name"], old["norm"]), None)
        gone.append((row["id"], *key))
        stored[row["id"]] = {**new, "norm": norm}
        norms[key] = row["id"]
        writes.pop(row["id"], None)  # written in the order of the file (insertion order is kept)
        writes[row["id"]] = (row["id"], *key[:2], content, norm, row["category"], float(row["confidence"]),
                             row["created_at"], row["updated_at"], how.clean_id(row["source"]))
    conn.executemany("DELETE FROM facts WHERE id = ? OR (user_id = ? AND agent_name = ? AND norm = ?)", gone)
    conn.executemany("INSERT INTO facts (id, user_id, agent_name, content, norm, category, confidence, created_at,"
                     " updated_at, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", list(writes.values()))
    return len(rows)


def _stored_facts(db: Database, rows: list[Row]) -> tuple[dict[str, Row], dict[tuple[str, str, str], str]]:
    """The target's facts with the imported ids (``id -> row``), and the ids of its facts in the
    imported scopes by ``(user, agent, norm)``."""
    fields = ", ".join(["id", "norm", *_FACT_SAME])
    ids = sorted({row["id"] for row in rows})
    stored: dict[str, Row] = {}
    for start in range(0, len(ids), 500):
        part = ids[start:start + 500]
        found = db.conn.execute(f"SELECT {fields} FROM facts WHERE id IN ({', '.join('?' for _ in part)})", part)
        stored.update({r["id"]: dict(r) for r in found})
    norms: dict[tuple[str, str, str], str] = {}
    for user, agent in sorted({(row["user_id"], row["agent_name"]) for row in rows}):
        found = db.conn.execute("SELECT id, norm FROM facts WHERE user_id = ? AND agent_name = ?", (user, agent))
        norms.update({(user, agent, str(r[1])): str(r[0]) for r in found})
    return stored, norms


def _check_confidence(section: str, rows: list[Row]) -> None:
    for index, row in enumerate(rows):
        if not 0.0 <= row["confidence"] <= 1.0:
            raise InvalidInput(f"{where(section, index, 'confidence')}: must be within [0, 1]")


# --- audit: a log; merging appends the entries the target lacks ----------------------------------
_AUDIT_FIELDS = {"id": s.count, **AGENT_SCOPE, "at": s.timestamp, "action": s.text(), "fact_id": s.text(True),
                 "content": s.text(True), "reason": s.text(), "source": s.text(True), "run_id": s.text(True)}
_AUDIT_BODY = [f for f in _AUDIT_FIELDS if f != "id"]


def _dump_audit(db: Database, scope: Scope | None) -> list[Row]:
    flt, args = scope_filter("agent", scope)
    return rows_of(db, f"SELECT {', '.join(_AUDIT_FIELDS)} FROM audit WHERE {flt} ORDER BY id", args)


def _restore_audit(db: Database, rows: list[Row], how: Restore) -> int:
    """An entry equal to one the target has is skipped; a new one keeps its id when that is free
    and gets the next id otherwise, past every id there (ids of a log are positions, not
    identities). Written in one batch; the database's own numbering then moves past them."""
    conn = db.conn
    known: dict[tuple[str, str], set[tuple[Any, ...]]] = {}
    taken = {int(r[0]) for r in conn.execute("SELECT id FROM audit")}
    next_id = max(taken, default=0) + 1
    new: list[tuple[Any, ...]] = []
    for row in rows:
        entry = {**row, "content": how.clean_optional(row["content"]), "reason": how.clean(row["reason"]),
                 "source": how.clean_id(row["source"])}
        scope = (entry["user_id"], entry["agent_name"])
        if scope not in known:
            found = conn.execute(f"SELECT {', '.join(_AUDIT_BODY)} FROM audit WHERE user_id = ? AND agent_name = ?",
                                 scope)
            known[scope] = {tuple(r) for r in found}
        body = tuple(entry[f] for f in _AUDIT_BODY)
        if body in known[scope]:
            continue
        entry_id = next_id if entry["id"] in taken else int(entry["id"])
        taken.add(entry_id)
        next_id = max(next_id, entry_id + 1)
        new.append((entry_id, *body))
        known[scope].add(body)
    marks = ", ".join("?" for _ in _AUDIT_FIELDS)
    conn.executemany(f"INSERT INTO audit ({names(list(_AUDIT_FIELDS))}) VALUES ({marks})", new)
    db.parts.sync_ids(db, "audit", "id")  # the next entry's id comes after the ones written here
    return len(rows)


# --- plans: the stored records (storage.plans checks and restores them) --------------------------
def _dump_plans(db: Database, scope: Scope | None) -> list[Row]:
    flt, args = scope_filter("agent", scope)
    found = db.conn.execute(f"SELECT data FROM plans WHERE {flt} ORDER BY user_id, agent_name, created_at, id", args)
    return [json.loads(row[0]) for row in found]


_PLAN_FIELDS = {"title": s.text(), "checklist": s.text(), "createdAt": s.timestamp, "updatedAt": s.timestamp,
                "revision": s.count}


def _check_plans(section: str, rows: list[Row]) -> None:
    """The plan record's own checks, and the fields it reads loosely: times as the store writes
    them, title and checklist as text (they are redacted as text), a revision that fits."""
    from tiermem.plans.plan import Plan

    for index, row in enumerate(rows):
        try:
            Plan.from_record(row)
        except InvalidInput as exc:
            raise InvalidInput(f"{where(section, index)}: {exc}") from exc
        for field, check in _PLAN_FIELDS.items():
            problem = check(row[field]) if field in row else None
            if problem is not None:
                raise InvalidInput(f"{where(section, index, field)}: {problem}")


def _restore_plans(db: Database, rows: list[Row], how: Restore) -> int:
    from tiermem.plans.records import restore_plans

    cleaned = [{**row, "title": how.clean(row["title"]), "checklist": how.clean(row["checklist"]),
                "sessionIds": [how.clean_id(i) for i in row.get("sessionIds", [])]} for row in rows]
    return restore_plans(db.conn, cleaned, how.replace)


# --- the update queue: items waiting for extraction, and dead ones -------------------------------
_OUTBOX_FIELDS = {"thread_id": s.identifier, **AGENT_SCOPE, "messages": s.json_list,
                  "status": s.one_of("pending", "dead"), "attempts": s.count, "last_error": s.text(True),
                  "enqueued_at": s.timestamp, "not_before": s.timestamp}


def _dump_outbox(db: Database, scope: Scope | None) -> list[Row]:
    """Pending and dead items; one being processed is exported as pending (as if the process died),
    unless a newer pending item of its thread already holds its messages."""
    flt, args = scope_filter("agent", scope)
    found = rows_of(db, "SELECT thread_id, user_id, agent_name, messages, status, attempts, last_error,"
                          f" enqueued_at, not_before, first_position FROM outbox WHERE {flt} ORDER BY enqueued_at, id",
                    args)
    pending = {(r["thread_id"], r["user_id"], r["agent_name"]) for r in found if r["status"] == "pending"}
    out: list[Row] = []
    for row in found:
        if row["status"] == "processing":
            if (row["thread_id"], row["user_id"], row["agent_name"]) in pending:
                continue
            row["status"] = "pending"
        out.append({**row, "messages": json.loads(row["messages"])})
    return out


def _check_outbox(section: str, rows: list[Row]) -> None:
    """The fields of :data:`_OUTBOX_FIELDS`, and ``first_position`` where there is one (exports
    made before it existed have none: their items hold their threads from the start)."""
    from tiermem import validate

    s.check_rows(section, rows, _OUTBOX_FIELDS, frozenset({"first_position"}))
    for index, row in enumerate(rows):
        problem = s.count(row.get("first_position", 0))
        if problem is not None:
            raise InvalidInput(f"{where(section, index, 'first_position')}: {problem}")
        try:
            validate.messages([m for m in row["messages"] if m is not None])  # None: a gap (storage/outbox.py)
        except InvalidInput as exc:
            raise InvalidInput(f"{where(section, index, 'messages')}: {exc}") from exc


def _prepared(messages: list[Any], scrub: bool) -> str:
    """The stored text of an item's messages, checked and redacted, its gaps (``None``) kept."""
    from tiermem.queue.process import prepare_messages

    present = iter(prepare_messages([m for m in messages if m is not None], scrub=scrub))
    return json.dumps([None if m is None else next(present) for m in messages], ensure_ascii=False)


def _restore_outbox(db: Database, rows: list[Row], how: Restore) -> int:
    conn = db.conn
    for row in rows:
        messages = _prepared(row["messages"], scrub=how.scrub is not None)
        first = row.get("first_position", 0)
        key = (how.clean_id(row["thread_id"]), row["user_id"], row["agent_name"])
        same = conn.execute("SELECT 1 FROM outbox WHERE thread_id = ? AND user_id = ? AND agent_name = ?"
                            " AND status = ? AND messages = ? AND first_position = ?",
                            (*key, row["status"], messages, first)).fetchone()
        if same is not None:
            continue
        values = (*key, messages, row["status"], row["attempts"], how.clean_optional(row["last_error"]),
                  row["enqueued_at"], row["not_before"], first)
        if row["status"] == "pending":
            other = conn.execute("SELECT id FROM outbox WHERE thread_id = ? AND user_id = ? AND agent_name = ?"
                                 " AND status IN ('pending', 'processing')", key).fetchone()
            if other is not None and not how.replace:
                raise ImportConflict(f"outbox: thread {key[0]} of {key[1]}/{key[2]} is queued with other messages;"
                                     " use --replace to queue the imported ones")
            if other is not None:
                conn.execute("DELETE FROM outbox WHERE id = ?", (other[0],))
        conn.execute("INSERT INTO outbox (thread_id, user_id, agent_name, messages, status, attempts, last_error,"
                     " enqueued_at, not_before, first_position) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", values)
    return len(rows)


# --- embeddings: a cache keyed by (hash of the embedded text, model id) --------------------------
_EMBEDDING_FIELDS = {"content_hash": s.text(), "model": s.text(), "dim": s.count, "vector": s.base64_bytes}


def _scope_hashes(db: Database, scope: Scope) -> set[str]:
    """Hashes of the texts embedded for the scope's items: each item's own, and its sentences'."""
    from tiermem.search.indexer import text_hash
    from tiermem.search.parts import sentence_parts
    from tiermem.storage.chunks import SHARED_AGENT

    found = db.conn.execute("SELECT embed_hash, text FROM search_docs WHERE user_id = ? AND agent_name IN (?, ?)",
                         (scope.user_id, scope.agent_name, SHARED_AGENT))
    hashes: set[str] = set()
    for embed_hash, text in found:
        if embed_hash:
            hashes.add(str(embed_hash))
        hashes.update(text_hash(part) for part in sentence_parts(str(text)))
    return hashes


def _dump_embeddings(db: Database, scope: Scope | None) -> list[Row]:
    rows = db.conn.execute("SELECT content_hash, model, dim, vector FROM embeddings ORDER BY model, content_hash")
    wanted = _scope_hashes(db, scope) if scope is not None else None
    return [{"content_hash": h, "model": m, "dim": d, "vector": base64.b64encode(v).decode("ascii")}
            for h, m, d, v in rows if wanted is None or h in wanted]


def _check_embeddings(section: str, rows: list[Row]) -> None:
    for index, row in enumerate(rows):
        if len(base64.b64decode(row["vector"])) != 4 * row["dim"] or row["dim"] < 1:
            raise InvalidInput(f"{where(section, index, 'vector')}: not {row['dim']} float32 values")


def _restore_embeddings(db: Database, rows: list[Row], how: Restore) -> int:
    """Vectors are a cache: one the target has already (same text hash and model) stays."""
    db.conn.executemany("INSERT INTO embeddings (content_hash, model, dim, vector) VALUES (?, ?, ?, ?)"
                        " ON CONFLICT (content_hash, model) DO NOTHING",
                     [(r["content_hash"], r["model"], r["dim"], base64.b64decode(r["vector"])) for r in rows])
    return len(rows)


# --- plain tables -------------------------------------------------------------------------------
def _clean_summary(row: Row, how: Restore) -> Row:
    return {**row, "summary": how.clean(row["summary"])}


def _clean_namespace(row: Row, how: Restore) -> Row:
    return {**row, "namespace": how.clean_id(row["namespace"])}


def _clean_thread(row: Row, how: Restore) -> Row:
    return {**row, "thread_id": how.clean_id(row["thread_id"])}


def _clean_tombstone(row: Row, how: Restore) -> Row:
    if not row["content"] and str(row["norm"]).startswith(TOMBSTONE_HASH_PREFIX):
        return row  # purged: only the hash of the text is kept (tiermem.purge)
    content = how.clean(row["content"])
    return {**row, "content": content, "norm": normalise(content)}


def _clean_version(row: Row, how: Restore) -> Row:
    content = how.clean(row["content"])
    return {**row, "content": content, "sha256": hashlib.sha256(content.encode("utf-8")).hexdigest()}


def _clean_store_item(row: Row, how: Restore) -> Row:
    """A LangGraph store item, redacted as the store's own writes redact it (R68): the strings of
    its value (a value without secrets keeps its exact text) and of its query texts, its namespace
    labels and key as ids (:mod:`tiermem.storage.store_items`). A value that held a secret gets the
    texts of its whole redacted value (a secret known only by its key, ``{"api_key": ...}``, cannot
    be found in texts cut from it)."""
    texts = [str(t) for t in json.loads(row["texts"])] if isinstance(row["texts"], str) else []
    if how.scrub is None:
        return {**row, "texts": json.dumps(texts, ensure_ascii=False)}
    value = redact_json(row["value"], how.scrub)
    if value != row["value"] and texts:
        texts = whole_value_texts(json.loads(value))
    return {**row, "texts": json.dumps([how.clean(t) for t in texts], ensure_ascii=False), "value": value,
            "key": how.clean_id(row["key"]),
            "namespace": stored_namespace(Redactor(True), row["user_id"], row["namespace"])}


def _clean_session_item(row: Row, how: Restore) -> Row:
    """An agent SDK session item (or, without ``item``, a session): its strings and session id
    redacted as the session's own writes redact them (R68)."""
    cleaned = {**row, "session_id": how.clean_id(row["session_id"])}
    if "item" in row and how.scrub is not None:
        cleaned["item"] = redact_json(row["item"], how.scrub)
    return cleaned


def _json_object(value: Any) -> str | None:
    """A store value or an agent SDK session item: the JSON text of an object, nesting no deeper
    than the limit (its strings are then redacted by walking it)."""
    problem = s.text()(value)
    if problem is not None:
        return problem
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError) as exc:
        return f"not JSON: {exc}"
    if not isinstance(parsed, dict):
        return "expected the JSON text of an object"
    try:
        json_depth(parsed, "the object")
    except InvalidInput as exc:
        return str(exc)
    return None


def _optional(check: s.Check) -> s.Check:
    return lambda value: None if value is None else check(value)


_TABLES = (
    TableSpec("summaries", {**AGENT_SCOPE, "key": s.one_of(*SUMMARY_KEYS), "summary": s.text(),
                            "updated_at": s.timestamp},
              ("user_id", "agent_name", "key"), "agent", "user_id, agent_name, key", transform=_clean_summary),
    TableSpec("tombstones", {**AGENT_SCOPE, "norm": s.text(), "content": s.text(), "reason": s.text(),
                             "at": s.timestamp},
              ("user_id", "agent_name", "norm"), "agent", "user_id, agent_name, norm", transform=_clean_tombstone),
    TableSpec("core_versions", {"id": s.count, "user_id": s.name, "created_at": s.timestamp, "cause": s.text(),
                                "content": s.text(), "existed": s.count, "sha256": s.text()},
              ("id",), "user", "id", transform=_clean_version, ids="id"),
    TableSpec("dream_state", {"user_id": s.name, "daily_sha256": s.text(), "days": s.day_list, "at": s.timestamp},
              ("user_id",), "user", "user_id"),
    TableSpec("consolidated_prefix", {"user_id": s.name, "day": s.day, "offset": s.count, "sha256": s.sha256,
                                      "at": s.timestamp},
              ("user_id", "day"), "user", "user_id, day", ignore=("at",)),
    TableSpec("flush_hashes", {"namespace": s.text(), "digest": s.text(), "at": s.timestamp},
              ("namespace", "digest"), "namespace", "namespace, digest", ignore=("at",), transform=_clean_namespace),
    TableSpec("extracted_hashes", {**AGENT_SCOPE, "thread_id": s.identifier, "md5": s.text(), "at": s.timestamp},
              ("user_id", "agent_name", "thread_id", "md5"), "agent", "user_id, agent_name, thread_id, md5",
              ignore=("at",), transform=_clean_thread),
    TableSpec("store_items", {"user_id": s.name, "namespace": s.text(), "key": s.identifier, "value": _json_object,
                              "texts": s.text(), "created_at": s.timestamp, "updated_at": s.timestamp,
                              "expires_at": _optional(s.timestamp), "ttl_minutes": _optional(s.number)},
              ("user_id", "namespace", "key"), "user", "user_id, namespace, key", transform=_clean_store_item),
    TableSpec("agent_sessions", {**AGENT_SCOPE, "session_id": s.identifier, "generation": s.count,
                                 "created_at": s.timestamp, "updated_at": s.timestamp},
              ("user_id", "agent_name", "session_id"), "agent", "user_id, agent_name, session_id",
              transform=_clean_session_item),
    TableSpec("session_items", {"id": s.count, **AGENT_SCOPE, "session_id": s.identifier, "item": _json_object,
                                "added_at": s.timestamp},
              ("id",), "agent", "id", ids="id", transform=_clean_session_item),
)

# --- day marks of exports made before prefix marks (issue 14) -----------------------------------
def _restore_day_marks(db: Database, rows: list[Row], how: Restore) -> int:
    """An old day mark said only "a dream consumed this day", not which bytes it read, and the
    exported file may hold records appended after that dream: restored, it could let retention
    delete them (R12). Such rows are checked, counted and dropped; those days stay until a dream
    reads them whole again (as the migration step ``_consolidation_prefix`` does without proof)."""
    return len(rows)


#: Sections that older files may hold and import accepts, but that are no longer written.
LEGACY_SECTIONS: tuple[Section, ...] = (
    Section("consolidated_days", {"user_id": s.name, "day": s.day, "at": s.timestamp}, lambda db, scope: [],
            _restore_day_marks),
)
#: Sections of version 2 that files written before them lack (they import without them).
ADDED_SECTIONS = frozenset({"consolidated_prefix", "store_items", "agent_sessions", "session_items"})

#: Every database section, in the order import restores them.
SECTIONS: tuple[Section, ...] = (
    Section("facts", _FACT_FIELDS, _dump_facts, _restore_facts, extra_check=_check_confidence),
    *(table_section(spec) for spec in _TABLES[:2]),
    Section("audit", _AUDIT_FIELDS, _dump_audit, _restore_audit),
    Section("plans", None, _dump_plans, _restore_plans, extra_check=_check_plans),
    *(table_section(spec) for spec in _TABLES[2:]),
    Section("outbox", None, _dump_outbox, _restore_outbox, extra_check=_check_outbox),
    Section("embeddings", _EMBEDDING_FIELDS, _dump_embeddings, _restore_embeddings, extra_check=_check_embeddings),
)
