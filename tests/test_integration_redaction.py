"""R68 for the framework adapters' own tables (issue 17): the LangGraph store's values, keys and
namespaces and the Agents SDK session's items and ids are redacted before they are stored, on
both backends; a value without secrets still comes back exactly as put.

"Never reaches the database" is checked on every table of the store (all rows, every column) and,
on SQLite, on the bytes of every file under the root (database, -wal).
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tiermem import Memory
from tiermem.testing import FakeClock, HashEmbedder

pytest.importorskip("langgraph.store.base")
pytest.importorskip("agents")

from tiermem.integrations.langgraph import TiermemStore  # noqa: E402
from tiermem.integrations.openai_agents import TiermemSession  # noqa: E402

pytestmark = pytest.mark.usefixtures("backend")

KEY = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"  # a leaf that is a key
NAMED = "corp-internal-9f8e7d6c"  # no known shape: a secret only by its name ("api_key": ...)
PASSWORD = "Tr0ub4dor-and-3"
PEM = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n-----END PRIVATE KEY-----"
ID_KEY = "sk-proj-" + "Q9w8E7r6T5y4U3i2O1p0A9s8D7f6"  # a secret inside an id (label, key, session id)
NEEDLES = ["A1b2C3d4E5f6G7h8I9j0", NAMED, PASSWORD, "MIIEvQIBADANBgkqhkiG9w0", "Q9w8E7r6T5y4U3i2O1p0"]


def stored(mem: Memory) -> str:
    """Every row of every table of the store, and on SQLite every file under the root, as text."""
    parts = [repr(mem.db.rows(f"SELECT * FROM {table}")) for table in mem.db.parts.tables(mem.db)]
    if mem.db.backend == "sqlite":
        parts += [p.read_bytes().decode("utf-8", "replace") for p in sorted(mem.root.rglob("*")) if p.is_file()]
    return "\n".join(parts)


def leaks(mem: Memory) -> list[str]:
    text = stored(mem)
    return [needle for needle in NEEDLES if needle in text]


def secret_value() -> dict[str, Any]:
    return {"note": f"the deploy key is {KEY}", "n": 12345678901234567890, "f": 0.1,
            "creds": {"api_key": NAMED, "password": PASSWORD, "ok": True}, "keys": [PEM, None, 3]}


@contextmanager
def other_store(root: Path, clock: FakeClock, **options: Any) -> Iterator[Memory]:
    """A second store: on PostgreSQL in a schema of its own (the test's schema is the first store's)."""
    if not os.environ.get("TIERMEM_DATABASE_URL"):
        with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", **options) as memory:
            yield memory
        return
    from pg_helpers import fresh_schema

    with fresh_schema() as url, Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC",
                                       database_url=url, **options) as memory:
        yield memory


# --- the LangGraph store -------------------------------------------------------------------------
def test_a_value_without_secrets_keeps_its_exact_json_text(mem: Memory) -> None:
    store = TiermemStore(mem, user_id="ada")
    value = {"z": "last key first", "a": [1, 2.5, 1e-07, -0.0, 10**30, True, None], "ü": "ünï\n\"q\" ✓",
             "nested": {"b": {"c": "token in prose, password managers"}}}
    store.put(("docs",), "k", value)
    item = store.get(("docs",), "k")
    assert item is not None and item.value == value
    assert json.dumps(item.value, ensure_ascii=False) == json.dumps(value, ensure_ascii=False)  # key order too
    [(text,)] = mem.db.rows("SELECT value FROM store_items")
    assert text == json.dumps(value, ensure_ascii=False)


def test_secrets_in_a_put_value_never_reach_the_database(mem: Memory) -> None:
    store = TiermemStore(mem, user_id="ada")
    store.put(("keys",), "deploy", secret_value())
    assert leaks(mem) == []
    item = store.get(("keys",), "deploy")
    assert item is not None and item.value == {
        "note": "the deploy key is [REDACTED:openai_key]", "n": 12345678901234567890, "f": 0.1,
        "creds": {"api_key": "[REDACTED:secret]", "password": "[REDACTED:password]", "ok": True},
        "keys": ["[REDACTED:private_key]", None, 3]}
    assert list(item.value) == list(secret_value())  # the rest as put, in its order
    assert [i.key for i in store.search(("keys",), filter={"creds.ok": True})] == ["deploy"]
    assert store.search(("keys",), query="deploy key")[0].key == "deploy"
    asyncio.run(store.aput(("keys",), "again", {"text": f"async {KEY}"}))
    assert leaks(mem) == []


def test_a_secret_in_a_namespace_label_or_key_is_stored_as_a_redacted_id(mem: Memory) -> None:
    store = TiermemStore(mem)  # the first label is the user
    namespace, key = ("ada", f"proj-{ID_KEY}", "notes"), f"k-{ID_KEY}"
    store.put(namespace, key, {"text": "plain"})
    other = ("ada", f"proj-{ID_KEY[:-4]}ZZZZ", "notes")  # differs only in the secret: another namespace
    store.put(other, key, {"text": "other"})
    assert leaks(mem) == []
    item = store.get(namespace, key)  # the same raw names still find it
    assert item is not None and item.value == {"text": "plain"}
    assert item.key.startswith("k-[REDACTED:openai_key~") and item.namespace[0] == "ada"
    assert item.namespace[1].startswith("proj-[REDACTED:openai_key~") and item.namespace[2] == "notes"
    assert [i.value for i in store.search(namespace[:2])] == [{"text": "plain"}]
    assert len(store.search(("ada",))) == 2
    assert store.list_namespaces(prefix=namespace[:2]) == [item.namespace]
    other_item = store.get(other, key)
    assert other_item is not None and other_item.namespace != item.namespace
    assert store.list_namespaces(prefix=("ada",), suffix=("notes",)) == sorted([item.namespace, other_item.namespace])
    store.delete(namespace, key)
    assert store.get(namespace, key) is None and store.get(other, key) is not None


def test_redaction_off_keeps_values_as_put(root: Path, clock: FakeClock) -> None:
    with other_store(root, clock, redact_secrets=False) as mem:
        store = TiermemStore(mem, user_id="ada")
        store.put(("keys",), f"k-{ID_KEY}", secret_value())
        assert store.get(("keys",), f"k-{ID_KEY}").value == secret_value()  # type: ignore[union-attr]
        assert KEY in stored(mem)


# --- the Agents SDK session ----------------------------------------------------------------------
def session_items() -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"log in with {KEY}"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "login",
         "arguments": json.dumps({"api_key": NAMED, "user": "bob"}), "status": "completed"},
        {"type": "function_call_output", "call_id": "call_1", "output": f"ok, password={PASSWORD}"},
        {"type": "message", "id": "msg_1", "role": "assistant", "status": "completed",
         "content": [{"type": "output_text", "text": PEM, "annotations": []}]},
        {"z": 1, "role": "user", "content": [{"type": "input_text", "text": "Thanks! Ünï ✓"}]},
    ]


def test_secrets_in_added_items_never_reach_the_database(mem: Memory) -> None:
    session = TiermemSession(mem, f"chat-{ID_KEY}")  # the session id holds a secret too
    session.add_items_sync(session_items()[:2])
    session.add_items_sync(session_items()[2:])
    assert leaks(mem) == []
    got = session.get_items_sync()
    assert got[0] == {"role": "user", "content": "log in with [REDACTED:openai_key]"}
    assert json.loads(got[1]["arguments"]) == {"api_key": "[REDACTED:secret]", "user": "bob"}
    assert got[2]["output"] == "ok, password=[REDACTED:password]"
    assert got[3]["content"][0]["text"] == "[REDACTED:private_key]"
    assert got[4] == session_items()[4]  # an item without secrets: exactly as added
    assert [list(a) for a in got] == [list(b) for b in session_items()]  # key order kept
    again = TiermemSession(mem, f"chat-{ID_KEY}")  # the same raw id names the same session
    assert again.get_items_sync(limit=1) == [session_items()[4]]
    assert again.pop_item_sync() == session_items()[4]
    again.clear_session_sync()
    assert session.get_items_sync() == []
    mem.queue.flush()
    assert leaks(mem) == []  # the journal and the queue, too


def test_an_import_redacts_store_items_and_session_items(mem: Memory, tmp_path: Path, clock: FakeClock) -> None:
    with other_store(tmp_path / "plain", clock, redact_secrets=False) as src:
        TiermemStore(src).put(("default", f"p-{ID_KEY}"), f"k-{ID_KEY}", secret_value())
        TiermemSession(src, f"chat-{ID_KEY}", journal=False).add_items_sync(session_items())
        data = json.loads(json.dumps(src.export()))
    assert KEY in json.dumps(data)  # the document holds the secrets
    mem.import_(data)
    assert leaks(mem) == []
    store = TiermemStore(mem)
    item = store.get(("default", f"p-{ID_KEY}"), f"k-{ID_KEY}")  # found by its raw names, as if put here
    assert item is not None and item.value["creds"]["api_key"] == "[REDACTED:secret]"
    assert TiermemSession(mem, f"chat-{ID_KEY}").get_items_sync()[4] == session_items()[4]


@pytest.mark.sqlite_only  # a pure function: no storage involved
def test_redact_json_reads_each_string_with_its_key() -> None:
    from tiermem.redact import redact_json

    plain = json.dumps({"secret_santa": "Bob", "notes": "my password manager", "n": 1.5, "big": 10**20})
    assert redact_json(plain) is plain  # nothing found: the very same text
    assert json.loads(redact_json(json.dumps({"x": {"client_secret": "abc", "Key": "sk_live_" + "a1" * 10}}))) == {
        "x": {"client_secret": "[REDACTED:secret]", "Key": "[REDACTED:stripe_key]"}}
    hostile = {"-----BEGIN PRIVATE KEY----- x": "y -----END PRIVATE KEY-----"}  # a match across key and value
    assert json.loads(redact_json(json.dumps(hostile))) == {"-----BEGIN PRIVATE KEY----- x": "y [REDACTED:private_key]"}
