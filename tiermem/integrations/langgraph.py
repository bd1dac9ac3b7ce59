"""LangGraph's long-term memory store on tiermem: :class:`TiermemStore`, a ``BaseStore``.

``pip install 'tiermem[langgraph]'``; importing :mod:`tiermem` never imports LangGraph, only this
module does. Then ``graph.compile(store=TiermemStore(mem))`` or ``create_react_agent(..., store=...)``.

**Items.** An item is a JSON object stored by (namespace, key) in its own table
(:mod:`tiermem.storage.store_items`), exactly as put: not as facts, whose dedup, confidence
threshold and cap would change or drop it. ``put``/``get``/``delete``, ``search`` with value
filters (``{"field": value}``, dotted fields into nested objects, ``$eq $ne $gt $gte $lt $lte``),
``limit``/``offset``, ``list_namespaces`` (prefix, suffix, ``"*"`` wildcards, ``max_depth``,
``limit``, ``offset``) and TTLs (minutes; refreshed on reads unless ``refresh_ttl=False``).
Without a query, search lists the newest updated items first.

**Query search.** ``search(prefix, query=...)`` ranks the items by tiermem's evidence score
(keyword coverage and vector similarity, :mod:`tiermem.integrations.store_search`), best first,
and returns them all (no score floor): ``item.score`` says how good a match is. What is searched is
the value's text (its string leaves), or the fields of ``index=[...]`` / ``index_fields``;
``index=False`` keeps an item out of query ranking (it comes after the ranked ones, score ``None``).

**Scopes.** By default the first label of a namespace is the tiermem user
(``("alice", "memories")``): it must be a valid user id, ``purge(user="alice")`` erases the
user's items with the rest of their memory, and a search never crosses users - its prefix must
name the user. ``TiermemStore(mem, user_id="alice")`` instead puts every namespace inside one
user (any labels; ``search(())`` then means all of that user's items). ``list_namespaces`` lists
namespace names of every user unless the prefix names one (or the store is bound to one).

**Security.** Values are redacted before they are stored, as every write is (R68,
``redact_secrets``): each string in a value goes through :func:`tiermem.redact.redact` (object keys
are kept), so a value without secrets comes back exactly as put (the same JSON text) and one that
held a secret comes back with ``[REDACTED:<kind>]`` in its place. Value filters see the stored
value. Namespace labels and keys are ids: one holding a secret is stored redacted with a short
hash (:func:`tiermem.redact.redact_id`), and still names its item. The texts kept for query search
(and embedded) are redacted too. Everything else is checked before anything is written
(:mod:`tiermem.integrations.store_values`): a bad batch raises
:class:`~tiermem.errors.InvalidInput` and changes nothing.

Async methods never block the event loop: ``abatch`` runs the batch in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.clock import parse_utc
from tiermem.errors import InvalidInput
from tiermem.integrations import store_values as sv
from tiermem.storage.sql import ROWS
from tiermem.storage.store_items import StoredItem, StoreItemRepository, stored_namespace

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        Item,
        ListNamespacesOp,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        get_text_at_path,
        tokenize_path,
    )
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("tiermem.integrations.langgraph needs LangGraph: pip install 'tiermem[langgraph]'") from exc

if TYPE_CHECKING:
    from tiermem.integrations.store_search import ItemScorer
    from tiermem.memory import Memory
    from tiermem.search.engine import SearchEngine

__all__ = ["TiermemStore"]

MAX_TEXT_CHARS = sv.MAX_TEXT_CHARS
MAX_LIMIT = 10_000


@dataclass(frozen=True)
class _Place:
    """Where an item lives: the tiermem user and the namespace's stored text."""

    user_id: str
    namespace: str


class TiermemStore(BaseStore):
    """A LangGraph ``BaseStore`` kept in a tiermem :class:`~tiermem.memory.Memory`'s database
    (see the module docstring). ``index_fields``: the value paths searched by default (LangGraph
    path syntax; ``None`` or ``["$"]``: the whole value); ``ttl``: LangGraph's ``TTLConfig``
    (``default_ttl`` minutes, ``refresh_on_read``, ``sweep_interval_minutes``)."""

    supports_ttl = True

    def __init__(self, mem: Memory, *, user_id: str | None = None, index_fields: Sequence[str] | None = None,
                 ttl: TTLConfig | None = None) -> None:
        self.mem = mem
        self.user_id = None if user_id is None else validate.name(user_id, "user_id")
        fields = list(index_fields) if index_fields is not None else ["$"]
        self.index_fields = [(path, _tokens(path)) for path in fields]
        self.ttl_config = _check_ttl_config(ttl)
        self.items = StoreItemRepository(mem.db)
        self._swept_at: datetime | None = None
        self._lock = threading.Lock()
        self._item_scorer: ItemScorer | None = None

    # --- the protocol ----------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order; all are checked first, and the writes of a batch commit together."""
        checked = [self._check(op) for op in ops]
        now = self.mem.clock.now()
        self._maybe_sweep(now)
        if any(isinstance(op, PutOp) for op, _ in checked):
            with self.mem.db.transaction(ROWS):  # each put is one row's upsert
                return [self._run(op, place, now) for op, place in checked]
        return [self._run(op, place, now) for op, place in checked]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread: the event loop keeps running meanwhile."""
        return await asyncio.to_thread(self.batch, list(ops))

    def sweep_ttl(self) -> int:
        """Delete the expired items now; how many. (Reads never return them anyway.)"""
        now = self.mem.clock.now()
        self._swept_at = now
        return self.items.sweep(now)

    # --- checking --------------------------------------------------------------------------
    def _check(self, op: Any) -> tuple[Any, Any]:
        """``(op, what it needs)``, or ``InvalidInput`` before anything is written."""
        if isinstance(op, PutOp):
            labels = sv.namespace(op.namespace)  # root "langgraph": put() refuses it, a batch may (as in LangGraph)
            if op.index is not None and op.index is not False and (
                    isinstance(op.index, str) or not all(isinstance(p, str) for p in op.index)):
                raise InvalidInput("index must be False, None or a list of field paths")
            place, key, ttl = self._place(labels), sv.key(op.key), _check_ttl(op.ttl)
            if op.value is None:
                return op, (place, key, None, None, ttl)
            encoded = sv.encode(op.value)
            stored = self.mem.db.redactor.json_text(encoded)  # as the storage layer will keep it (R68)
            value = op.value if stored == encoded else sv.decode(stored)  # texts: only what is stored
            texts = json.dumps(self._texts(value, op.index), ensure_ascii=False)
            return op, (place, key, stored, texts, ttl)
        if isinstance(op, GetOp):
            return op, (self._place(sv.namespace(op.namespace)), sv.key(op.key))
        if isinstance(op, SearchOp):
            prefix = sv.namespace(op.namespace_prefix, "namespace prefix", allow_empty=True)
            if op.query is not None and not isinstance(op.query, str):
                raise InvalidInput(f"query must be a string, got {type(op.query).__name__}")
            _check_page(op.limit, op.offset)
            return op, (self._place(prefix), sv.check_filter(op.filter))
        if isinstance(op, ListNamespacesOp):
            conditions = [(c.match_type, sv.pattern(c.path, f"{c.match_type} path")) for c in op.match_conditions or ()]
            if any(kind not in ("prefix", "suffix") for kind, _ in conditions):
                raise InvalidInput("a namespace condition is 'prefix' or 'suffix'")
            if op.max_depth is not None and (isinstance(op.max_depth, bool) or not isinstance(op.max_depth, int)
                                             or op.max_depth < 1):
                raise InvalidInput(f"max_depth must be a positive integer, got {op.max_depth!r}")
            _check_page(op.limit, op.offset)
            return op, conditions
        raise InvalidInput(f"unknown store operation {type(op).__name__}")

    def _place(self, labels: tuple[str, ...]) -> _Place:
        """The user and stored namespace of ``labels`` (see "Scopes" in the module docstring)."""
        if self.user_id is not None:
            return _Place(self.user_id, sv.join(labels))
        if not labels:
            raise InvalidInput("the namespace prefix must name the user (its first label): a search never"
                               " crosses users; or bind the store to one user: TiermemStore(mem, user_id=...)")
        user = validate.name(labels[0], "the namespace's first label (the user id)")
        return _Place(user, sv.join(labels))

    # --- running ---------------------------------------------------------------------------
    def _run(self, op: Any, checked: Any, now: datetime) -> Result:
        if isinstance(op, PutOp):
            place, key, value, texts, ttl = checked
            if value is None:
                self.items.delete(place.user_id, place.namespace, key)
            else:
                self.items.put(place.user_id, place.namespace, key, value, texts, now, ttl)
            return None
        if isinstance(op, GetOp):
            place, key = checked
            found = self.items.get(place.user_id, place.namespace, key, now)
            if found is not None and op.refresh_ttl:
                self.items.refresh([found], now)
            return None if found is None else _item(found)
        if isinstance(op, SearchOp):
            return self._search(op, checked[0], checked[1], now)
        return self._namespaces(op, checked, now)

    def _search(self, op: SearchOp, place: _Place, flt: dict[str, Any], now: datetime) -> list[SearchItem]:
        paged = not flt and not op.query
        stored = self.items.under(place.user_id, place.namespace, now, op.limit if paged else None,
                                  op.offset if paged else 0)
        if flt:
            stored = [item for item in stored if sv.passes(sv.decode(item.value), flt)]
        scores: list[float | None] = [None for _ in stored]
        if op.query:
            scores = self._scorer().scores(op.query, [json.loads(item.texts) for item in stored])
            order = sorted(range(len(stored)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0)))
            stored, scores = [stored[i] for i in order], [scores[i] for i in order]
        if not paged:
            stored = stored[op.offset:op.offset + op.limit]
            scores = scores[op.offset:op.offset + op.limit]
        if op.refresh_ttl:
            self.items.refresh(stored, now)
        return [_search_item(item, score) for item, score in zip(stored, scores, strict=True)]

    def _namespaces(self, op: ListNamespacesOp, conditions: list[tuple[str, tuple[str, ...]]],
                    now: datetime) -> list[tuple[str, ...]]:
        user = self.user_id
        for kind, path in conditions:
            if user is None and kind == "prefix" and path and path[0] != "*":
                user = validate.name(path[0], "the prefix's first label (the user id)")
        conditions = [(kind, self._stored_path(kind, path)) for kind, path in conditions]
        found = {sv.split(ns) for owner, ns in self.items.namespaces(user, now)
                 if self.user_id is not None or sv.split(ns)[:1] == (owner,)}
        kept = [ns for ns in found if all(sv.matches(ns, path, kind == "suffix") for kind, path in conditions)]
        if op.max_depth is not None:
            kept = list({ns[:op.max_depth] for ns in kept})
        return sorted(kept)[op.offset:op.offset + op.limit]

    def _stored_path(self, kind: str, path: tuple[str, ...]) -> tuple[str, ...]:
        """A ``list_namespaces`` condition's labels as stored namespaces hold them (a label with a
        secret is stored redacted; ``"*"`` and a prefix's user label are kept)."""
        user = (self.user_id or path[0]) if kind == "prefix" and path else "*"
        return tuple(sv.split(stored_namespace(self.mem.db.redactor, user, sv.join(path))))

    def _texts(self, value: Any, index: Any) -> list[str]:
        """The texts a query search reads for ``value`` (``index``: see ``PutOp.index``), from the
        value as stored (redacted: a secret named by its key, ``{"api_key": ...}``, is only
        recognisable there); the storage layer redacts the texts as it stores them."""
        if index is False:
            return []
        paths = self.index_fields if index is None else [(p, _tokens(p)) for p in index]
        texts: list[str] = []
        for path, tokens in paths:
            found = sv.string_leaves(value) if path == "$" else get_text_at_path(value, tokens)
            texts.extend(found if path != "$" else ["\n".join(found)])
        return sv.search_texts(texts)

    def _scorer(self) -> ItemScorer:
        """The query scorer, on the Memory's search engine (its embedder, vector cache and score
        scale), made on the first query search."""
        with self._lock:
            if self._item_scorer is None:
                from tiermem.integrations.store_search import ItemScorer

                engine: SearchEngine = self.mem._search  # the facade's engine, shared on purpose
                self._item_scorer = ItemScorer(engine)
            return self._item_scorer

    def _maybe_sweep(self, now: datetime) -> None:
        """Delete expired items at most every ``sweep_interval_minutes`` (a batch notices it is time)."""
        minutes = (self.ttl_config or {}).get("sweep_interval_minutes")
        if not minutes:
            return
        with self._lock:
            if self._swept_at is not None and (now - self._swept_at).total_seconds() < minutes * 60:
                return
            self._swept_at = now
        self.items.sweep(now)


def _item(found: StoredItem) -> Item:
    return Item(value=sv.decode(found.value), key=found.key, namespace=sv.split(found.namespace),
                created_at=parse_utc(found.created_at), updated_at=parse_utc(found.updated_at))


def _search_item(found: StoredItem, score: float | None) -> SearchItem:
    return SearchItem(sv.split(found.namespace), found.key, sv.decode(found.value), parse_utc(found.created_at),
                      parse_utc(found.updated_at), score)


def _tokens(path: Any) -> list[str]:
    if not isinstance(path, str) or not path:
        raise InvalidInput(f"an index field is a non-empty path string, got {path!r}")
    return ["$"] if path == "$" else tokenize_path(path)


def _check_ttl(ttl: Any) -> float | None:
    if ttl is None:
        return None
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0:
        raise InvalidInput(f"ttl is minutes, a positive number, got {ttl!r}")
    return float(ttl)


def _check_ttl_config(config: Any) -> TTLConfig | None:
    if config is None:
        return None
    if not isinstance(config, dict):
        raise InvalidInput("ttl must be a TTLConfig dict")
    unknown = set(config) - {"refresh_on_read", "default_ttl", "sweep_interval_minutes", "omit_expired"}
    if unknown:
        raise InvalidInput(f"unknown TTL settings: {', '.join(sorted(unknown))}")
    _check_ttl(config.get("default_ttl"))
    sweep = config.get("sweep_interval_minutes")
    if sweep is not None and (isinstance(sweep, bool) or not isinstance(sweep, int) or sweep < 1):
        raise InvalidInput(f"sweep_interval_minutes must be a positive integer, got {sweep!r}")
    result: TTLConfig = dict(config)  # type: ignore[assignment]
    return result


def _check_page(limit: Any, offset: Any) -> None:
    for name, value, low in (("limit", limit, 0), ("offset", offset, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= (
                MAX_LIMIT if name == "limit" else 10**9):
            raise InvalidInput(f"{name} must be an integer in [{low}, {MAX_LIMIT if name == 'limit' else 10**9}],"
                               f" got {value!r}")
