"""Every column of every table that may hold text, classified for ``tiermem purge`` (the SQL is
in :mod:`tiermem.storage.purge`).

:data:`CONTENT_COLUMNS` hold what people, agents or models wrote: a text purge deletes the facts
that contain the text, turns tombstones into hashes and replaces the text by ``[purged]``
everywhere else (inside the string values of :data:`JSON_COLUMNS`). :data:`KEY_COLUMNS` hold ids,
names, hashes, times and days: never changed (a user purge deletes the user's rows whatever they
hold; a LangGraph store item whose key or a namespace label holds the text is deleted whole).
:func:`unclassified_columns` lists any column in neither, and a test fails on it, so a new table
cannot slip past purge.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiermem.storage.sql import Database

#: What people, agents or models wrote. (Derived copies too: ``chunks`` and ``search_docs`` are
#: cut from the Markdown files and rebuilt from them after the files are rewritten.)
CONTENT_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("content", "norm", "source"),
    "audit": ("content", "reason", "source"),
    "tombstones": ("norm", "content", "reason"),
    "summaries": ("summary",),
    "outbox": ("messages", "last_error"),
    "plans": ("data",),
    "core_versions": ("content",),
    "chunks": ("text",),
    "search_docs": ("text", "context"),
    "store_items": ("value", "texts"),  # LangGraph store items (tiermem.integrations.langgraph)
    "call_log": ("prompt", "completion", "error"),  # the LLM call log: texts only with log_prompts (and errors)
    "session_items": ("item",),  # agent SDK session items, verbatim (tiermem.integrations.openai_agents)
}

#: Ids, names, hashes, times, days, enum values: nothing a person wrote.
KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("id", "user_id", "agent_name", "category", "created_at", "updated_at"),
    "audit": ("user_id", "agent_name", "at", "action", "fact_id", "run_id"),
    "tombstones": ("user_id", "agent_name", "at"),
    "summaries": ("user_id", "agent_name", "key", "updated_at"),
    "meta": ("key", "value"),
    "chunks": ("user_id", "agent_name", "tier", "path", "day", "content_hash"),
    "indexed_files": ("user_id", "path", "sha256"),
    "outbox": ("thread_id", "user_id", "agent_name", "status", "enqueued_at", "not_before", "claimed_by",
               "claimed_at", "lease_until"),
    "extracted_hashes": ("user_id", "agent_name", "thread_id", "md5", "at"),
    "flush_hashes": ("namespace", "digest", "at"),
    "consolidated_days": ("user_id", "day", "at"),
    "consolidated_prefix": ("user_id", "day", "sha256", "at"),
    "plans": ("id", "user_id", "agent_name", "status", "created_at", "updated_at"),
    "change_epochs": ("user_id", "agent_name", "topic"),
    "search_docs": ("source", "ref", "user_id", "agent_name", "tier", "category", "at", "embed_hash"),
    "search_removed": ("user_id",),
    "embeddings": ("content_hash", "model"),
    "core_versions": ("user_id", "created_at", "cause", "sha256"),
    "dream_state": ("user_id", "daily_sha256", "days", "at"),
    "journal_intents": ("user_id", "namespace", "day", "blocks", "at"),  # hashes and lengths, no text
    # PostgreSQL: the Daily files and MEMORY.md as rows (their bytes, in memory_blocks.data, are the
    # files a purge rewrites or removes through MemoryFiles)
    "memory_files": ("user_id", "rel"),
    "memory_blocks": ("user_id", "rel"),
    # PostgreSQL: the vector index (halfvec copies of the embeddings, dropped with their search items)
    "search_models": ("model",),
    "search_terms": ("kind",),
    "search_vectors": ("content_hash", "user_id", "agent_name", "tier", "category", "at"),
    "store_items": ("user_id", "namespace", "key", "created_at", "updated_at", "expires_at"),
    "call_log": ("at", "user_id", "agent_name", "purpose", "provider", "model", "outcome"),
    "session_items": ("user_id", "agent_name", "session_id", "added_at"),
    "agent_sessions": ("user_id", "agent_name", "session_id", "created_at", "updated_at"),
}

#: Columns the database computes from content columns (PostgreSQL's text search vectors, and its
#: keyword vocabulary kept by triggers): they change with them and need no handling of their own
#: (a term no item holds any more is dropped when the purge compacts the store).
DERIVED_COLUMNS: dict[str, tuple[str, ...]] = {
    "search_docs": ("words", "grams"),
    "search_terms": ("term",),
}

#: JSON documents: the text is replaced inside their string values, and they are written back
#: the way their owners write them (a document that does not parse, such as a prompt clipped by
#: the call log, is matched as text: its JSON strings are decoded all the same).
JSON_COLUMNS: dict[tuple[str, str], dict[str, Any]] = {
    ("call_log", "prompt"): {"ensure_ascii": False},  # the messages sent (tiermem.calls.recorder)
    ("outbox", "messages"): {"ensure_ascii": False},
    ("plans", "data"): {"ensure_ascii": False, "sort_keys": True, "separators": (",", ":")},
    ("store_items", "value"): {"ensure_ascii": False},
    ("store_items", "texts"): {"ensure_ascii": False},
    ("session_items", "item"): {"ensure_ascii": False},
}

#: Columns a text purge rewrites in place (facts, tombstones, audit entries, the queue, plans,
#: items of LangGraph stores and agent sessions, and the search index have their own handling).
SCRUBBED_COLUMNS: dict[str, tuple[str, ...]] = {
    "facts": ("source",),
    "summaries": ("summary",),
    "call_log": ("prompt", "completion", "error"),
}

#: The key of each table whose rows a text purge rewrites in place.
ROW_KEYS: dict[str, tuple[str, ...]] = {
    "facts": ("id",), "summaries": ("user_id", "agent_name", "key"), "core_versions": ("id",), "call_log": ("id",),
}


def unclassified_columns(db: Database) -> list[str]:
    """``table.column`` of every column that may hold text, of every plain table (not the index
    shadow tables), that is in neither :data:`CONTENT_COLUMNS` nor :data:`KEY_COLUMNS`."""
    out: list[str] = []
    for table in db.parts.tables(db):
        known = {*CONTENT_COLUMNS.get(table, ()), *KEY_COLUMNS.get(table, ()), *DERIVED_COLUMNS.get(table, ())}
        out += [f"{table}.{column}" for column in db.parts.text_columns(db, table) if column not in known]
    return out
