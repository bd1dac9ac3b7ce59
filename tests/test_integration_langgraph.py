"""TiermemStore, LangGraph's BaseStore on tiermem (issue 17), on both backends.

The installed ``langgraph`` ships no shared store test suite, so the cases of LangGraph's own
store tests (libs/checkpoint/tests/test_store.py, libs/checkpoint-sqlite/tests/test_store.py and
test_async_store.py of langchain-ai/langgraph) are mirrored here, against a store bound to one
user (``user_id=``: LangGraph's namespaces are free labels there), plus tiermem's own rules:
scopes, exact values, validation, TTL with an injected clock, purge and export.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

import pytest

from tiermem import Memory
from tiermem.errors import InvalidInput
from tiermem.search.indexer import text_hash
from tiermem.testing import FakeClock, HashEmbedder

pytest.importorskip("langgraph.store.base")

from langgraph.store.base import GetOp, Item, ListNamespacesOp, Op, PutOp, SearchOp  # noqa: E402

from tiermem.integrations.langgraph import TiermemStore  # noqa: E402

pytestmark = pytest.mark.usefixtures("backend")  # every test on SQLite and on PostgreSQL


@pytest.fixture
def store(mem: Memory) -> TiermemStore:
    return TiermemStore(mem, user_id="tester")


def rows(mem: Memory) -> list[tuple[Any, ...]]:
    return sorted(tuple(r) for r in mem.db.conn.execute("SELECT * FROM store_items"))


# --- mirrored from LangGraph's store tests -------------------------------------------------------
def test_batch_order(store: TiermemStore) -> None:
    store.put(("test", "foo"), "key1", {"data": "value1"})
    store.put(("test", "bar"), "key2", {"data": "value2"})
    ops: list[Op] = [
        GetOp(namespace=("test", "foo"), key="key1"),
        PutOp(namespace=("test", "bar"), key="key2", value={"data": "value2"}),
        SearchOp(namespace_prefix=("test",), filter={"data": "value1"}, limit=10, offset=0),
        ListNamespacesOp(match_conditions=None, max_depth=None, limit=10, offset=0),
        GetOp(namespace=("test",), key="key3"),
    ]
    results = store.batch(ops)
    first = cast(Item, results[0])
    assert (first.value, first.key, first.namespace) == ({"data": "value1"}, "key1", ("test", "foo"))
    assert results[1] is None
    found = cast(list[Item], results[2])
    assert [(i.key, i.value) for i in found] == [("key1", {"data": "value1"})]
    assert set(cast(list[tuple[str, ...]], results[3])) == {("test", "foo"), ("test", "bar")}
    assert results[4] is None
    later = store.batch([SearchOp(("test",), None, 5, 0), PutOp(("test",), "key3", {"data": "value3"}),
                         GetOp(("test",), "key3")])
    assert len(cast(list[Item], later[0])) == 2 and later[1] is None
    assert cast(Item, later[2]).value == {"data": "value3"}  # ops run in order: a put is seen by the next get


def test_batch_put_and_delete_ops(store: TiermemStore) -> None:
    results = store.batch([PutOp(("test",), "key1", {"data": "value1"}), PutOp(("test",), "key2", {"data": "value2"}),
                           PutOp(("test",), "key3", None)])
    assert results == [None, None, None]
    assert [store.get(("test",), k) is not None for k in ("key1", "key2", "key3")] == [True, True, False]


def test_batch_search_ops(store: TiermemStore) -> None:
    for ns, key, value in [(("test", "foo"), "key1", {"data": "value1", "tag": "a"}),
                           (("test", "bar"), "key2", {"data": "value2", "tag": "a"}),
                           (("test", "baz"), "key3", {"data": "value3", "tag": "b"})]:
        store.put(ns, key, value)
    tagged, two, foo = store.batch([SearchOp(("test",), {"tag": "a"}, 10, 0), SearchOp(("test",), None, 2, 0),
                                    SearchOp(("test", "foo"), None, 10, 0)])
    assert sorted(i.key for i in cast(list[Item], tagged)) == ["key1", "key2"]
    assert len(cast(list[Item], two)) == 2
    assert [i.namespace for i in cast(list[Item], foo)] == [("test", "foo")]


def test_basic_store_ops(store: TiermemStore, clock: FakeClock) -> None:
    namespace = ("test", "documents")
    store.put(namespace, "doc1", {"title": "Test Document", "content": "Hello, World!"})
    item = store.get(namespace, "doc1")
    assert item is not None and item.namespace == namespace and item.key == "doc1"
    assert item.value == {"title": "Test Document", "content": "Hello, World!"}
    clock.advance(5)
    store.put(namespace, "doc1", {"title": "Updated Document", "content": "Hello, Updated!"})
    updated = store.get(namespace, "doc1")
    assert updated is not None and updated.value["title"] == "Updated Document"
    assert updated.created_at == item.created_at and (updated.updated_at - item.updated_at).total_seconds() == 5
    assert store.get(("test", "other_documents"), "doc1") is None
    store.delete(namespace, "doc1")
    assert store.get(namespace, "doc1") is None


def test_list_namespaces_operations(store: TiermemStore) -> None:
    p = "pref"
    namespaces = [(p, "test", "documents", "public", p), (p, "test", "documents", "private", p),
                  (p, "test", "images", "public", p), (p, "test", "images", "private", p),
                  (p, "prod", "documents", "public", p), (p, "prod", "documents", "some", "nesting", "public", p),
                  (p, "prod", "documents", "private", p)]
    for ns in namespaces:
        store.put(ns, "dummy", {"content": "dummy"})
    assert len(store.list_namespaces(prefix=(p, "test"))) == 4
    assert len(store.list_namespaces(prefix=(p, "test", "documents"))) == 2
    assert len(store.list_namespaces(suffix=("public", p))) == 4
    assert len(store.list_namespaces(prefix=(p, "test"), suffix=("public", p))) == 2
    assert len(store.list_namespaces(prefix=(p, "*", "documents"))) == 5
    assert len(store.list_namespaces(suffix=("*", "public", p))) == 4
    assert store.list_namespaces(suffix=("some", "*", "public", p)) == [namespaces[5]]
    assert store.list_namespaces(max_depth=3) == [(p, "prod", "documents"), (p, "test", "documents"),
                                                  (p, "test", "images")]
    assert len(store.list_namespaces(max_depth=4, prefix=(p, "*", "documents"))) == 5
    assert store.list_namespaces(prefix=(p,), limit=3) == sorted(namespaces)[:3]
    assert store.list_namespaces(prefix=(p,), offset=3) == sorted(namespaces)[3:]
    assert set(store.list_namespaces(prefix=[p])) == set(namespaces)  # a list works as LangGraph's own stores allow


def test_search_items_filters_and_pages(store: TiermemStore, clock: FakeClock) -> None:
    base = "test_search_items"
    data = [((base, "documents", "user1"), {"title": "Doc 1", "author": "John Doe", "tags": ["important"]}),
            ((base, "documents", "user2"), {"title": "Doc 2", "author": "Jane Smith", "tags": ["draft"]}),
            ((base, "reports", "department1"), {"title": "Report A", "author": "John Doe", "tags": ["final"]}),
            ((base, "reports", "department2"), {"title": "Report B", "author": "Alice Johnson", "tags": ["draft"]})]
    for ns, value in data:
        store.put(ns, f"item_{ns[-1]}", value)
        clock.advance(1)
    assert {i.namespace[1] for i in store.search((base, "documents"))} == {"documents"}
    first, second = store.search((base,), limit=2, offset=0), store.search((base,), limit=2, offset=2)
    assert [i.key for i in first + second] == ["item_department2", "item_department1", "item_user2", "item_user1"]
    assert sorted(i.key for i in store.search((base,), filter={"author": "John Doe"})) == [
        "item_department1", "item_user1"]
    assert sorted(i.key for i in store.search((base,), filter={"tags": ["draft"]})) == ["item_department2",
                                                                                          "item_user2"]
    assert [i.key for i in store.search((base,), filter={"tags": ["draft"]}, limit=1, offset=1)] == ["item_user2"]


def test_filter_injection_keys_and_values_are_plain_data(store: TiermemStore) -> None:
    store.put(("docs",), "public", {"access": "public", "data": "public info"})
    store.put(("docs",), "private", {"access": "private", "data": "secret", "password": "123"})
    malicious_key = "access') = 'public' OR '1'='1' OR json_extract(value, '$."
    assert store.search(("docs",), filter={malicious_key: "dummy"}) == []
    for value in ["public' OR '1'='1", "public'; --", "public' UNION SELECT * FROM store_items --", "''''"]:
        assert store.search(("docs",), filter={"access": value}) == []
    store.put(("docs",), "doc4", {"title": "O'Brien's Document", "access": "public"})
    assert [i.key for i in store.search(("docs",), filter={"title": "O'Brien's Document"})] == ["doc4"]


def test_numeric_boolean_and_nested_filters(store: TiermemStore) -> None:
    for key, price in [("item1", 10), ("item2", 20), ("item3", 30.5)]:
        store.put(("items",), key, {"price": price})
    keys = lambda flt: sorted(i.key for i in store.search(("items",), filter=flt))  # noqa: E731
    assert keys({"price": {"$gt": 15}}) == ["item2", "item3"]
    assert keys({"price": {"$gte": 20, "$lt": 30.5}}) == ["item2"]
    assert keys({"price": {"$lt": float("inf")}}) == ["item1", "item2", "item3"]
    assert keys({"price": {"$eq": float("nan")}}) == []
    assert keys({"price": {"$lt": 10**100}}) == ["item1", "item2", "item3"]
    assert keys({"price": {"$ne": 10}}) == ["item2", "item3"]
    store.put(("flags",), "on", {"active": True, "n": 1, "user": {"access-level": "nested", "123abc": "ok2"}})
    store.put(("flags",), "off", {"active": False, "n": 0})
    assert [i.key for i in store.search(("flags",), filter={"active": True})] == ["on"]
    assert [i.key for i in store.search(("flags",), filter={"n": True})] == []  # JSON true is not 1
    assert [i.key for i in store.search(("flags",), filter={"user.access-level": "nested"})] == ["on"]
    assert [i.key for i in store.search(("flags",), filter={"user": {"123abc": "ok2"}})] == ["on"]
    with pytest.raises(InvalidInput, match="unknown operator"):
        store.search(("flags",), filter={"n": {"$regex": ".*"}})


def test_prefix_search_stops_at_label_boundaries_and_is_literal(store: TiermemStore) -> None:
    for ns in [("foo",), ("foo", "child"), ("foo", "child", "deep"), ("foobar",), ("foobar", "baz"), ("foo2",),
               ("user_1",), ("user_1", "child"), ("userX1",), ("a%b",), ("axxb",), ("star*",), ("starX",),
               ("Foo",)]:
        store.put(ns, "k", {"v": 1})

    def under(prefix: tuple[str, ...]) -> set[tuple[str, ...]]:
        return {item.namespace for item in store.search(prefix, limit=100)}

    assert under(("foo",)) == {("foo",), ("foo", "child"), ("foo", "child", "deep")}
    assert under(("foobar",)) == {("foobar",), ("foobar", "baz")}
    assert under(("fo",)) == set()
    assert under(("user_1",)) == {("user_1",), ("user_1", "child")}
    assert under(("a%b",)) == {("a%b",)} and under(("star*",)) == {("star*",)}
    assert under(("Foo",)) == {("Foo",)}  # case-sensitive, as get and put are
    assert len(under(())) == 14  # a store bound to one user: the empty prefix is all of that user's items
    assert set(store.list_namespaces(prefix=["foo"], limit=100)) == {("foo",), ("foo", "child"),
                                                                     ("foo", "child", "deep")}


def test_non_ascii_query_search(store: TiermemStore) -> None:
    texts = ["这是中文", "これは日本語です", "이건 한국어야", "Это русский", "यह रूसी है"]
    for i, text in enumerate(texts, 1):
        store.put(("user_123", "memories"), str(i), {"text": text})
    for i, text in enumerate(texts, 1):
        found = store.search(("user_123", "memories"), query=text)
        assert found[0].key == str(i) and found[0].value == {"text": text}
        assert found[0].score is not None and found[0].score > (found[1].score or 0.0)


def test_query_search_ranks_by_evidence_and_respects_filters_and_index(store: TiermemStore) -> None:
    store.put(("mem",), "tea", {"text": "Prefers green tea in the morning", "kind": "pref"})
    store.put(("mem",), "climb", {"text": "Goes climbing in Sintra on weekends", "kind": "hobby"})
    store.put(("mem",), "secret", {"text": "green tea green tea"}, index=False)
    store.put(("mem",), "field", {"title": "Sintra trip", "body": "green tea"}, index=["title"])
    found = store.search(("mem",), query="which tea does she drink")
    assert [i.key for i in found][:1] == ["tea"] and 0 < (found[0].score or 0) <= 1
    assert found[-1].key == "secret" and found[-1].score is None  # not indexed: after the ranked ones
    assert [i.key for i in store.search(("mem",), query="Sintra climbing", limit=2)] == ["climb", "field"]
    assert [i.key for i in store.search(("mem",), query="tea", filter={"kind": "hobby"})] == ["climb"]
    paged = [i.key for i in store.search(("mem",), query="green tea", limit=2, offset=1)]
    assert paged == [i.key for i in store.search(("mem",), query="green tea", limit=10)][1:3]


@pytest.mark.parametrize("keyword_weight", [0.0, 1.0])
def test_query_scores_are_on_the_scale_of_memory_search(root: Path, clock: FakeClock, keyword_weight: float) -> None:
    """One fact and one store item with the same text score the same for the same query."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC",
                search_keyword_weight=keyword_weight) as mem:
        mem.facts.add("Prefers green tea in the morning", confidence=0.9)
        store = TiermemStore(mem)
        store.put(("default", "memories"), "tea", {"text": "Prefers green tea in the morning"})
        (hit,) = mem.search("green tea please", k=1, min_score=0)
        (item,) = store.search(("default",), query="green tea please")
        assert item.score == pytest.approx(hit.score, abs=1e-6) and 0 < hit.score < 1


def test_embed_with_path(mem: Memory) -> None:
    store = TiermemStore(mem, user_id="tester", index_fields=["key0", "key1", "key3"])
    store.put(("test",), "doc1", {"key1": "xxx", "key2": "yyy", "key3": "zzz"})  # no key0: no error
    store.put(("test",), "doc2", {"key0": "uuu", "key1": "vvv", "key2": "www", "key3": "xxx"})
    both = store.search(("test",), query="xxx")
    assert {i.key for i in both} == {"doc1", "doc2"} and all((i.score or 0) > 0.9 for i in both)
    for query, best in (("uuu", "doc2"), ("zzz", "doc1")):
        first, second = store.search(("test",), query=query)
        assert first.key == best and (first.score or 0) > (second.score or 0)
    assert all((i.score or 0) < 0.9 for i in store.search(("test",), query="www"))  # key2 is not indexed


def test_index_fields_choose_the_searched_text(mem: Memory) -> None:
    store = TiermemStore(mem, user_id="tester", index_fields=["title", "tags[*]"])
    store.put(("docs",), "a", {"title": "Trip to Sintra", "tags": ["climbing", "weekend"], "body": "green tea"})
    store.put(("docs",), "b", {"title": "Tea notes", "body": "Sintra"}, index=["body"])
    assert sorted(json.loads(r[0]) for r in mem.db.conn.execute("SELECT texts FROM store_items")) == [
        ["Sintra"], ["Trip to Sintra", "climbing", "weekend"]]
    assert all((i.score or 0) < 0.1 for i in store.search(("docs",), query="green tea"))  # bodies are not read
    assert [i.key for i in store.search(("docs",), query="climbing weekend")][:1] == ["a"]


def test_values_and_query_texts_are_redacted(mem: Memory, store: TiermemStore) -> None:
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4"
    store.put(("keys",), "openai", {"note": f"the key is {secret}", "n": 1})
    item = store.get(("keys",), "openai")  # R68: the secret is replaced, the rest as put
    assert item is not None and item.value == {"note": "the key is [REDACTED:openai_key]", "n": 1}
    (texts,) = [r[0] for r in mem.db.conn.execute("SELECT texts FROM store_items")]
    assert secret not in texts and "[REDACTED" in texts


def test_cannot_put_empty_or_reserved_namespaces(store: TiermemStore) -> None:
    doc = {"foo": "bar"}

    async def scenario() -> None:
        for namespace in [(), ("the", "thing.about"), ("some", "fun", ""), ("langgraph", "foo")]:
            with pytest.raises(ValueError):  # LangGraph's InvalidNamespaceError or tiermem's InvalidInput
                store.put(namespace, "foo", doc)
            with pytest.raises(ValueError):
                await store.aput(namespace, "foo", doc)
        for namespace in [("foo", "langgraph", "foo"), ("langgraph", "foo")]:  # the second only past put()
            await store.abatch([PutOp(namespace, "bar", doc)])
            assert (await store.aget(namespace, "bar")).value == doc  # type: ignore[union-attr]
            assert (await store.asearch(namespace, query="bar"))[0].value == doc
            await store.adelete(namespace, "bar")
            assert await store.aget(namespace, "bar") is None

    asyncio.run(scenario())


# --- values come back exactly; bad input changes nothing -----------------------------------------
def test_values_round_trip_exactly(store: TiermemStore) -> None:
    value = {"z": 1, "a": [1, 2.5, -0.0, 10**30, True, None, "é\n\t✓"], "nested": {"deep": [{"x": "y"}]},
             "empty": {}, "": ""}
    store.put(("exact",), "k", value)
    item = store.get(("exact",), "k")
    assert item is not None and item.value == value
    assert list(item.value) == list(value) and json.dumps(item.value) == json.dumps(value)  # key order kept
    assert isinstance(item.value["a"][3], int) and item.value["a"][3] == 10**30


@pytest.mark.parametrize("bad, message", [
    ({"x": float("nan")}, "NaN"),
    ({"x": float("inf")}, "NaN or infinity"),
    ({"x": b"bytes"}, "bytes"),
    ({"x": {1, 2}}, "set"),
    ({1: "int key"}, "key of type int"),
    ({"x": "nul\x00byte"}, "control"),
    ({"x": "\ud800"}, "surrogate"),
    ({"x": "y" * 1_000_001}, "limit"),
    (["not", "a", "dict"], "dict"),
])
def test_bad_values_are_refused_and_nothing_changes(mem: Memory, store: TiermemStore, bad: Any, message: str) -> None:
    store.put(("ok",), "k", {"v": 1})
    before = rows(mem)
    with pytest.raises(InvalidInput, match=message):
        store.batch([PutOp(("ok",), "other", {"v": 2}), PutOp(("ok",), "k", bad)])
    assert rows(mem) == before


def test_deep_values_and_bad_namespaces_and_keys_are_refused(mem: Memory, store: TiermemStore) -> None:
    deep: dict[str, Any] = {}
    node = deep
    for _ in range(100):
        node["x"] = {}
        node = node["x"]
    bad_calls: list[Any] = [
        lambda: store.put(("ok",), "k", deep),
        lambda: store.batch([PutOp(("a.b",), "k", {})]),  # the joined text could pass for ("a", "b")
        lambda: store.batch([PutOp(("a", ""), "k", {})]),
        lambda: store.batch([PutOp(("..", "x"), "k", {})]),
        lambda: store.batch([PutOp(("a/b",), "k", {})]),
        lambda: store.batch([PutOp(("alice\n",), "k", {})]),
        lambda: store.batch([PutOp((), "k", {})]),
        lambda: store.batch([PutOp(("ok",), "", {})]),
        lambda: store.batch([PutOp(("ok",), "k", {"v": 1}, ttl=-1)]),
        lambda: store.batch([PutOp(("ok",), "k", {"v": 1}, index=[""])]),
        lambda: store.batch([PutOp(("ok",), "k", {"v": 1}, index=cast(Any, "v"))]),
        lambda: store.batch([cast(Op, "not an op")]),
        lambda: store.search(("ok",), limit=-1),
    ]
    for call in bad_calls:
        with pytest.raises(InvalidInput):
            call()
    assert rows(mem) == []


# --- scopes: the first label is the user ---------------------------------------------------------
def test_first_label_is_the_user_and_a_search_never_crosses_users(mem: Memory) -> None:
    store = TiermemStore(mem)
    store.put(("alice", "memories"), "1", {"text": "Alice likes green tea"})
    store.put(("bob", "memories"), "1", {"text": "Bob likes green tea too"})
    assert [i.namespace for i in store.search(("alice",), query="green tea")] == [("alice", "memories")]
    assert sorted(r[0] for r in mem.db.conn.execute("SELECT user_id FROM store_items")) == ["alice", "bob"]
    with pytest.raises(InvalidInput, match="must name the user"):
        store.search(())
    with pytest.raises(InvalidInput, match="user id"):
        store.put(("not a user!", "x"), "k", {})
    assert store.list_namespaces(prefix=("bob",)) == [("bob", "memories")]
    bound = TiermemStore(mem, user_id="alice")
    assert [i.value for i in bound.search(("alice",))] == [{"text": "Alice likes green tea"}]  # the same row
    assert bound.list_namespaces() == [("alice", "memories")]


def test_purge_erases_store_items_of_the_user(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        store = TiermemStore(bob)
        store.put(("bob", "notes"), "1", {"text": "Bob's walrus gala is on Friday", "n": 1})
        store.put(("bob", "notes"), "2", {"text": "nothing to see"})
        store.put(("alice", "notes"), "1", {"text": "walrus gala for Alice"})
        assert store.search(("bob",), query="walrus gala")[0].key == "1"  # embeds the texts
        vector = "SELECT COUNT(*) FROM embeddings WHERE content_hash = ?"
        walrus = text_hash("Bob's walrus gala is on Friday")
        assert bob.db.conn.execute(vector, (walrus,)).fetchone()[0] == 1
        report = bob.purge(text="walrus gala")
        assert report.rows.get("store_items") == 1
        assert bob.db.conn.execute(vector, (walrus,)).fetchone()[0] == 0  # its vector went too
        item = store.get(("bob", "notes"), "1")
        assert item is not None and "walrus" not in json.dumps(item.value) and item.value["n"] == 1
        bob.purge(user="alice")
        assert store.get(("alice", "notes"), "1") is None and store.get(("bob", "notes"), "2") is not None


def test_export_and_import_carry_the_items_exactly(mem: Memory, tmp_path: Path, clock: FakeClock) -> None:
    store = TiermemStore(mem)
    value = {"b": 1.5, "a": ["x", {"y": None}]}
    store.put(("default", "ns"), "k", value, ttl=60)
    data = mem.export()
    with Memory(tmp_path / "copy", embedder=HashEmbedder(), clock=clock, timezone="UTC") as other:
        other.import_(data)
        item = TiermemStore(other).get(("default", "ns"), "k")
        assert item is not None and item.value == value and list(item.value) == ["b", "a"]


# --- TTL, with the injected clock ----------------------------------------------------------------
def test_ttl_expires_refreshes_on_read_and_sweeps(mem: Memory, clock: FakeClock) -> None:
    store = TiermemStore(mem, user_id="tester", ttl={"default_ttl": 10, "refresh_on_read": True})
    assert store.supports_ttl
    store.put(("t",), "default", {"v": 1})  # the default TTL: 10 minutes
    store.put(("t",), "long", {"v": 2}, ttl=30)
    store.put(("t",), "forever", {"v": 3}, ttl=None)
    clock.advance(8 * 60)
    assert store.get(("t",), "default") is not None  # a read refreshes: 10 more minutes from now
    clock.advance(8 * 60)
    assert store.get(("t",), "default", refresh_ttl=False) is not None
    clock.advance(3 * 60)
    assert store.get(("t",), "default") is None  # 11 minutes after the last refreshing read
    assert [i.key for i in store.search(("t",))] == ["forever", "long"]  # refreshes "long" at 19 min
    clock.advance(40 * 60)
    assert [i.key for i in store.search(("t",))] == ["forever"]
    assert store.list_namespaces() == [("t",)]
    assert len(rows(mem)) == 3  # expired items are invisible; the sweep deletes them
    assert store.sweep_ttl() == 2 and len(rows(mem)) == 1


def test_ttl_sweep_interval_runs_with_batches(mem: Memory, clock: FakeClock) -> None:
    store = TiermemStore(mem, user_id="tester", ttl={"sweep_interval_minutes": 5})
    store.put(("t",), "short", {"v": 1}, ttl=1)
    clock.advance(2 * 60)
    store.put(("t",), "other", {"v": 2})  # swept less than 5 minutes ago (the first put)
    assert len(rows(mem)) == 2
    clock.advance(4 * 60)
    store.get(("t",), "other")
    assert [r[2] for r in rows(mem)] == ["other"]


# --- async: the loop keeps running ---------------------------------------------------------------
def test_async_methods_run_in_a_worker_thread(store: TiermemStore) -> None:
    threads: set[str] = set()
    original = store.batch

    def recording(ops: Iterable[Op]) -> list[Any]:
        threads.add(threading.current_thread().name)
        return original(ops)

    store.batch = recording  # type: ignore[method-assign]

    async def scenario() -> None:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        task = asyncio.create_task(ticker())
        await asyncio.gather(*(store.aput(("a", str(i)), "k", {"i": i}) for i in range(20)))
        item = await store.aget(("a", "3"), "k")
        found = await store.asearch(("a",), filter={"i": {"$lt": 5}}, limit=50)
        spaces = await store.alist_namespaces(prefix=("a",))
        await store.adelete(("a", "3"), "k")
        task.cancel()
        assert item is not None and item.value == {"i": 3}
        assert sorted(i.value["i"] for i in found) == [0, 1, 2, 3, 4] and len(spaces) == 20
        assert await store.aget(("a", "3"), "k") is None
        assert ticks > 0

    asyncio.run(scenario())
    assert threads and threading.main_thread().name not in threads


@pytest.mark.sqlite_only  # about imports, not storage: once is enough
def test_importing_tiermem_does_not_import_langgraph() -> None:
    import subprocess
    import sys

    code = ("import sys, tiermem, tiermem.integrations; from tiermem import Memory;"
            " print(sorted(m for m in sys.modules if m.split('.')[0] in ('langgraph', 'langchain_core')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
