"""Shared set-up of the export/import tests: a store with something in every section, and ways to
look at a store (what its commands answer, and its raw database and files).

A store is a root; on PostgreSQL (the ``backend`` fixture set ``TIERMEM_DATABASE_URL``) each root a
test uses gets a schema of its own (:func:`url_for`), so a "source" and a "restored" store are two
databases there as they are two files on SQLite. :func:`separate_stores` (autouse in the modules
that import it) gives conftest's ``root`` the fixture's schema and drops the others afterwards.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from tiermem import Memory
from tiermem.storage.outbox import OutboxRepository
from tiermem.testing import FakeClock, HashEmbedder, ScriptedChatModel

START = datetime(2026, 3, 13, 9, 30, tzinfo=UTC)
DREAM_REPLY = """[MEMORY]
## Work
- Works as a backend engineer at Acme Corp.
- Is moving to Lisbon in August.

[DREAM]
Added the move to Lisbon.
"""
QUERIES = ("Lisbon move in August", "dark mode", "chess opening", "backend engineer Acme")
LATIN1_DAY = b"# Daily Memory: 2026-03-10\n\n## Notes (08:00)\n- caf\xe9 cr\xe8me, typed in Latin-1\n"


class CountingEmbedder:
    """:class:`HashEmbedder` that counts the texts it embeds (``model_id`` may be changed)."""

    def __init__(self, model_id: str = "hash-256") -> None:
        self.inner = HashEmbedder()
        self._model_id = model_id
        self.texts = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def model_id(self) -> str:
        return self._model_id

    def embed(self, texts: list[str]) -> npt.NDArray[np.float32]:
        self.texts += len(texts)
        return self.inner.embed(texts)


URL_ENV = "TIERMEM_DATABASE_URL"
_URLS: dict[Path, str] = {}  # root -> its schema (PostgreSQL)
_SCHEMAS = ExitStack()  # the schemas made for this test


def url_for(root: Path) -> str | None:
    """The database URL of the store at ``root``: None on SQLite (the file under the root), else a
    schema of its own (made on first use)."""
    root = Path(root)
    if root not in _URLS:
        if not os.environ.get(URL_ENV):
            return None
        from pg_helpers import fresh_schema

        _URLS[root] = _SCHEMAS.enter_context(fresh_schema())
    return _URLS[root]


def store_env(root: Path) -> dict[str, str]:
    """Environment for a CLI call on the store at ``root``."""
    url = url_for(root)
    return {URL_ENV: url} if url is not None else {}


@pytest.fixture(autouse=True)
def separate_stores(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """Each root its own store (see the module docstring); runs after the ``backend`` fixture."""
    if "backend" in request.fixturenames:
        request.getfixturevalue("backend")
    url = os.environ.get(URL_ENV)
    if url:
        _URLS[tmp_path / "mem"] = url  # conftest's root and mem fixtures use the fixture's schema
    try:
        yield
    finally:
        for root in [r for r in _URLS if r.is_relative_to(tmp_path)]:
            del _URLS[root]
        _SCHEMAS.close()


class Templates:
    """One filled store per backend, for a test module, made on first use (on PostgreSQL in a schema
    kept until the module ends); :meth:`copy` gives a test its own copy, as ``shutil.copytree``
    of the root does on SQLite."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.roots: dict[bool, Path] = {}
        self.schemas = ExitStack()

    def root(self) -> Path:
        """The filled store of the backend the test runs on."""
        on_server = bool(os.environ.get(URL_ENV))
        if on_server not in self.roots:
            root = self.base / ("postgres" if on_server else "sqlite") / "source"
            if on_server:
                from pg_helpers import fresh_schema

                _URLS[root] = self.schemas.enter_context(fresh_schema())
            fill(root, FakeClock(START))
            self.roots[on_server] = root
        return self.roots[on_server]

    def copy(self, target: Path, clock: FakeClock) -> Path:
        """A copy of the filled store at ``target`` (PostgreSQL: its rows through export and import)."""
        import shutil

        template = self.root()
        shutil.copytree(template, target)
        if url_for(template) is not None:
            with open_memory(template, clock) as mem:
                data = mem.export()
            with open_memory(target, clock) as copy:
                copy.import_(data)
                assert copy.export() == data  # a store made on PostgreSQL comes back whole
        return target

    def close(self) -> None:
        for root in self.roots.values():
            _URLS.pop(root, None)
        self.schemas.close()


def open_memory(root: Path, clock: FakeClock, llm: ScriptedChatModel | None = None, **settings: Any) -> Memory:
    embedder = settings.pop("embedder", None) or HashEmbedder()
    url = url_for(root)
    if url is not None:
        settings.setdefault("database_url", url)
    return Memory(root, llm=llm, embedder=embedder, clock=clock, timezone="UTC", queue_replay=False, **settings)


def fill(root: Path, clock: FakeClock) -> None:
    """Two days of a user's memory (facts, a plan, a session, a queued thread, a hand-written
    Latin-1 day, a dream), another user and another agent, queue items pending and dead."""
    with open_memory(root, clock) as mem:
        mem.facts.add("Prefers dark mode", "preference", 0.95, source="t1")
        gone = mem.facts.add("Works at Initech", "context", 0.8)
        assert gone is not None
        mem.facts.delete(gone.id)
        mem.facts.set_summaries({"workContext": "Backend engineer at Acme", "topOfMind": "Moving to Lisbon"})
        plan = mem.plans.start("Move to Lisbon", ["find a flat", "book movers"], session_id="s1")
        mem.plans.check(plan.id, 1)
        session = mem.session("s1")
        session.add("user", "Morning! I'm Maya.\nI work as a backend engineer at Acme Corp.")
        session.add("assistant", "Hello Maya.")
        session.end()
        mem.queue.add("t1", [{"role": "user", "content": "I am moving to Lisbon in August."}])
        mem.queue.flush()
        mem.daily.files.replace("memory/2026-03-10.md", LATIN1_DAY)  # as if typed in by hand
        bob = mem.for_scope("bob")
        bob.facts.add("Bob plays chess", "preference", 0.7)
        bob.daily.append("Notes", ["bob: my chess opening is the Sicilian"])
        mem.for_scope("default", "coder").facts.add("Uses vim keybindings", "preference", 0.8)
    clock.advance(86400)
    with open_memory(root, clock, ScriptedChatModel([DREAM_REPLY])) as mem:
        mem.daily.append("Conversation", ["user: The movers come on August 3rd."])
        assert mem.deep_dream(lookback_days=2).written
        for user in ("default", "bob"):
            mem.for_scope(user).search("anything")  # index and embed everything before the export
        outbox = OutboxRepository(mem.db)
        outbox.put("t-pending", mem.scope, [{"role": "user", "content": "remember my cat Pixel"}], clock.now())
        dead_id = outbox.put("t-dead", mem.scope, [{"role": "user", "content": "this one failed"}], clock.now())
        dead = next(i for i in outbox.items() if i.id == dead_id)
        outbox.failed(dead, "provider error: timeout", clock.now() + timedelta(seconds=60), max_attempts=1)


def observe(mem: Memory) -> dict[str, Any]:
    """What the store answers: daily files, search hits, injection text, system context, plans."""
    days = sorted(d.isoformat() for d in mem.daily.days())
    return {
        "daily": {day: mem.daily.read(day) for day in days},
        "search": {q: _hits(mem, q) for q in QUERIES},
        "inject": mem.format_for_injection(),
        "inject_query": mem.format_for_injection(query="When is the move to Lisbon?"),
        "system_context": mem.system_context().text,
        "facts": [f.to_dict() for f in mem.facts.list()],
        "plans": [p.to_record() for p in mem.plans.list()],
        "versions": [v.to_dict() for v in mem.dream_versions()],
        "core": mem.core.read(),
    }


def _hits(mem: Memory, query: str) -> list[tuple[float, str, str, str]]:
    """The hits in score order; hits of equal score by reference (their order among themselves
    follows row ids, which an import does not keep)."""
    hits = [(-round(h.score, 6), h.tier, h.ref, h.text) for h in mem.search(query)]
    assert [h[0] for h in hits] == sorted(h[0] for h in hits)
    return sorted(hits)


def snapshot(root: Path) -> dict[str, Any]:
    """The raw store: every row of every table (FTS and index included) and every file but locks."""
    files = {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
             if p.is_file() and not p.name.startswith(("tiermem.db", ".")) }
    url = url_for(root)
    if url is not None:
        return {"files": files, "db": database_rows(url)}
    conn = sqlite3.connect(root / "tiermem.db")
    try:
        dump = list(conn.iterdump())
    finally:
        conn.close()
    return {"files": files, "db": dump}


def database_rows(url: str) -> dict[str, list[str]]:
    """Every row of every table of the PostgreSQL store at ``url`` (as text, sorted), the schema log
    and the search index included; sequences left out (a rolled-back insert still moves them)."""
    import psycopg

    def text(value: object) -> str:
        return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)

    with psycopg.connect(url, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute("SELECT table_name FROM information_schema.tables WHERE table_schema"
                                             " = current_schema() AND table_type = 'BASE TABLE'")]
        return {t: sorted(" | ".join(text(v) for v in row) for row in conn.execute(f'SELECT * FROM "{t}"'))
                for t in sorted(tables)}
