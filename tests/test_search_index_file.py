"""Vector index files (issue 16, cold start): a new process maps a scope's saved index instead of
rebuilding it from rows, and never answers from a stale or damaged one.

Each ``Memory`` opened here has its own search engine with nothing loaded, as a new process has;
one test runs real processes. Which way a scope was loaded is observable:
``LoadedIndexer.load_sources`` (``"file"`` or ``"rows"``) and ``files_written``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tiermem import Memory
from tiermem.search.loaded import LoadedIndexer
from tiermem.testing import FakeClock, HashEmbedder
from tiermem.types import Scope

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

pytestmark = pytest.mark.usefixtures("backend")

SCOPE = Scope("default", "default")
FACTS = ["The user likes dark roast coffee", "The user has a dog named Rex. It barks at the mailman.",
         "Bees make honey in the garden hive", "The user's sister lives in Lisbon", "Tea is served at five"]


class RenamedHash(HashEmbedder):
    """The hash embedder under another model id (a model change that keeps the dimension)."""

    @property
    def model_id(self) -> str:
        return "hash-renamed"


def open_mem(root: Path, clock: FakeClock, embedder: HashEmbedder | None = None, **settings: Any) -> Memory:
    return Memory(root, embedder=embedder or HashEmbedder(), clock=clock, timezone="UTC", **settings)


def indexer(mem: Memory) -> LoadedIndexer:
    found = mem._search.indexer
    assert isinstance(found, LoadedIndexer)
    return found


def source(mem: Memory) -> str:
    return indexer(mem).load_sources[SCOPE]


def texts(mem: Memory, query: str) -> list[str]:
    return [hit.text for hit in mem.search(query, k=10, min_score=0.0)]


def held_ids(mem: Memory) -> set[int]:
    return set(indexer(mem).index(SCOPE).arrays()["ids"].tolist())


def index_file(root: Path, user: str = "default", agent: str = "default") -> Path:
    return root / ".vectors" / user / f"{agent}.vec"


@pytest.fixture
def saved(root: Path, clock: FakeClock, backend: str) -> Iterator[Path]:
    """A store whose default scope has an index file (SQLite only: PostgreSQL searches pgvector)."""
    if backend != "sqlite":
        pytest.skip("index files exist only where vectors are searched in this process (SQLite)")
    with open_mem(root, clock) as mem:
        for text in FACTS:
            mem.facts.add(text)
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert source(mem) == "rows" and indexer(mem).files_written == 1
    assert index_file(root).is_file()
    yield root


def test_a_new_process_uses_the_file_and_answers_as_from_rows(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock) as mem:
        from_file = [(h.text, h.score) for h in mem.search("dog barks", k=5, min_score=0.0)]
        assert source(mem) == "file" and indexer(mem).files_written == 0
    with open_mem(saved, clock, search_index_file=False) as mem:
        from_rows = [(h.text, h.score) for h in mem.search("dog barks", k=5, min_score=0.0)]
        assert source(mem) == "rows"
        assert not indexer(mem).files_written
    assert from_file == from_rows and from_file[0][0] == FACTS[1]


@pytest.mark.sqlite_only  # files and folders of the SQLite store
def test_files_are_private(saved: Path) -> None:
    assert (saved / ".vectors").stat().st_mode & 0o777 == 0o700
    assert (saved / ".vectors" / "default").stat().st_mode & 0o777 == 0o700
    assert index_file(saved).stat().st_mode & 0o777 == 0o600
    assert [p.name for p in (saved / ".vectors" / "default").iterdir()] == ["default.vec"]  # no temp left


def test_items_added_and_removed_by_another_process_are_caught_up(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock) as other:  # another process writes after the file was saved
        other.facts.add("The user plays the cello on Sundays")
        gone = next(f for f in other.facts.list() if f.content == FACTS[2])
        other.facts.delete(gone.id)
    with open_mem(saved, clock) as mem:
        assert texts(mem, "cello sundays")[0] == "The user plays the cello on Sundays"
        assert FACTS[2] not in texts(mem, "bees honey garden hive")
        assert source(mem) == "file"
        from_file = held_ids(mem)
    with open_mem(saved, clock, search_index_file=False) as mem:
        assert held_ids(mem) == from_file


def test_a_changed_model_never_uses_the_file(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock, embedder=RenamedHash()) as mem:  # same size, other model id
        assert texts(mem, "coffee")[0] == FACTS[0]  # by its keywords
        assert source(mem) == "rows" and held_ids(mem) == set()  # no vector of this model yet
        mem.reindex_vectors()
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert len(held_ids(mem)) == len(FACTS)
    with open_mem(saved, clock) as mem:  # the file is now the other model's
        assert texts(mem, "sister lisbon")[0] == FACTS[3]
        assert source(mem) == "rows"
    with open_mem(saved, clock, embedder=HashEmbedder(dim=64)) as mem:
        assert texts(mem, "sister lisbon")[0] == FACTS[3]
        assert source(mem) == "rows" and held_ids(mem) == set()


def test_reindex_deletes_the_files(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock) as mem:
        mem.reindex_vectors()
    assert not index_file(saved).exists()


def test_changed_index_settings_rebuild(saved: Path, clock: FakeClock) -> None:
    with open_mem(saved, clock, search_sentence_vectors=False) as mem:
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert source(mem) == "rows"


@pytest.mark.parametrize("damage", ["truncate", "vector byte", "header byte", "append", "empty"])
def test_a_damaged_file_is_not_used(saved: Path, clock: FakeClock, damage: str) -> None:
    path = index_file(saved)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) - 100]
    elif damage == "vector byte":
        data[-40] ^= 0x10  # inside the last array
    elif damage == "header byte":
        data[20] ^= 0x01
    elif damage == "append":
        data += b"\0" * 64
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with open_mem(saved, clock) as mem:
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert source(mem) == "rows"
        assert indexer(mem).files_written == 1  # and replaced by a good one
    with open_mem(saved, clock) as mem:
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert source(mem) == "file"


@pytest.mark.sqlite_only  # files of the SQLite store
def test_a_killed_writers_temp_file_is_cleaned_up(saved: Path, clock: FakeClock) -> None:
    folder = saved / ".vectors" / "default"
    old, recent = folder / ".default.vec.killed.tmp", folder / ".default.vec.writing.tmp"
    for temp in (old, recent):
        temp.write_bytes(b"half a file")
    os.utime(old, (1_000_000, 1_000_000))
    index_file(saved).unlink()
    with open_mem(saved, clock) as mem:
        texts(mem, "coffee")
        assert indexer(mem).files_written == 1
    assert sorted(p.name for p in folder.iterdir()) == [recent.name, "default.vec"]


def test_a_file_beside_another_database_is_not_used(saved: Path, clock: FakeClock, tmp_path: Path) -> None:
    """Same scope, same number of items with the same ids, other texts: a new ``tiermem.db``."""
    kept = tmp_path / "kept.vec"
    kept.write_bytes(index_file(saved).read_bytes())
    for name in ("tiermem.db", "tiermem.db-wal", "tiermem.db-shm"):
        (saved / name).unlink(missing_ok=True)
    with open_mem(saved, clock) as mem:
        for text in ["Lisbon trams are yellow", "Rex is a beagle", "Coffee keeps the user awake at night",
                     "The hive swarmed in May", "Five o'clock is tea time"]:
            mem.facts.add(text)
    index_file(saved).write_bytes(kept.read_bytes())
    with open_mem(saved, clock) as mem:
        assert texts(mem, "coffee")[0] == "Coffee keeps the user awake at night"
        assert source(mem) == "rows"


def test_a_file_that_lost_track_of_the_rows_is_not_used(saved: Path, clock: FakeClock) -> None:
    """A database restored from a backup taken before the file: the removal log agrees, the rows do not."""
    import sqlite3

    with sqlite3.connect(saved / "tiermem.db") as conn:  # an item gone without a trace in the log
        conn.execute("DELETE FROM search_removed")
        conn.execute("DELETE FROM facts WHERE content = ?", (FACTS[0],))
        conn.execute("DELETE FROM search_removed")
    with open_mem(saved, clock) as mem:
        assert FACTS[0] not in texts(mem, "dark roast coffee")
        assert source(mem) == "rows"


def test_a_pruned_removal_log_rebuilds(saved: Path, clock: FakeClock) -> None:
    from tiermem.storage.search import SearchRepository

    with open_mem(saved, clock) as other:
        other.facts.delete(next(f for f in other.facts.list() if f.content == FACTS[4]).id)
        SearchRepository(other.db).prune_removed_log(keep=0)
    with open_mem(saved, clock) as mem:
        assert FACTS[4] not in texts(mem, "tea five")
        assert source(mem) == "rows"


def test_scopes_have_their_own_files(saved: Path, clock: FakeClock) -> None:
    with Memory(saved, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="bob") as bob:
        bob.facts.add("Bob collects stamps")
        assert texts(bob, "coffee stamps") == ["Bob collects stamps"]
    assert index_file(saved, "bob").is_file()
    with open_mem(saved, clock) as mem:
        assert "Bob collects stamps" not in texts(mem, "stamps coffee")
        assert source(mem) == "file"


@pytest.mark.sqlite_only  # symlinks under the SQLite store's root
def test_a_link_out_of_the_root_is_not_followed(saved: Path, clock: FakeClock, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "default.vec").write_bytes(index_file(saved).read_bytes())
    folder = saved / ".vectors" / "default"
    index_file(saved).unlink()
    folder.rmdir()
    folder.symlink_to(outside)
    with open_mem(saved, clock) as mem:
        assert texts(mem, "coffee")[0] == FACTS[0]
        assert source(mem) == "rows" and indexer(mem).files_written == 0
    assert [p.name for p in outside.iterdir()] == ["default.vec"]


def _vector(text: str) -> bytes:
    import numpy as np

    vector: npt.NDArray[np.float32] = HashEmbedder().embed([text])[0]
    return (vector / np.linalg.norm(vector)).astype("<f4").tobytes()


def _all_index_bytes(root: Path) -> bytes:
    folder = root / ".vectors"
    return b"".join(p.read_bytes() for p in folder.rglob("*") if p.is_file()) if folder.exists() else b""


@pytest.mark.parametrize("kind", ["fact", "text", "user"])
def test_purge_leaves_no_purged_vector_in_a_file(saved: Path, clock: FakeClock, kind: str) -> None:
    secret = FACTS[3]
    blob = _vector(secret)
    assert blob in _all_index_bytes(saved)  # the file holds the fact's vector as stored
    with open_mem(saved, clock) as mem:
        texts(mem, "coffee")  # this process has the scope loaded (from the file)
        fact = next(f for f in mem.facts.list() if f.content == secret)
        if kind == "fact":
            mem.purge(fact.id)
        elif kind == "text":
            mem.purge(text="sister lives in Lisbon")
        else:
            mem.purge(user="default")
        assert blob not in _all_index_bytes(saved)
        assert secret not in texts(mem, "sister lisbon")
    with open_mem(saved, clock) as mem:
        assert secret not in texts(mem, "sister lisbon")
    assert blob not in _all_index_bytes(saved)


WRITER = textwrap.dedent("""
    import sys
    from tiermem import Memory
    from tiermem.testing import HashEmbedder
    import tiermem.search.loaded
    tiermem.search.loaded.RESAVE_MIN_CHANGES = 0  # rewrite the file after any catch-up: many rewrites
    root, name, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(rounds):
        with Memory(root, embedder=HashEmbedder(), timezone="UTC") as mem:
            mem.facts.add(f"{name} wrote note number {i} about topic {name}{i}")
            if i % 2:
                old = [f for f in mem.facts.list() if f.content.startswith(f"{name} wrote note number {i - 1} ")]
                mem.facts.delete(old[0].id)
            assert mem.search(f"{name}{i}", k=3, min_score=0.0)[0].text.startswith(f"{name} wrote note number {i} ")
            print(mem._search.indexer.load_sources, mem._search.indexer.files_written)
""")


@pytest.mark.sqlite_only  # processes sharing one SQLite store and its index files
def test_concurrent_writer_processes(saved: Path, clock: FakeClock) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(saved), name, "6"], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in ("ann", "ben", "cy")]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err[-2000:] for _, err in outputs]
    lines = [line for out, _ in outputs for line in out.splitlines()]
    assert any(line.endswith("'file'} 1") for line in lines)  # mapped a file, caught it up, rewrote it
    with open_mem(saved, clock) as mem:
        hits = texts(mem, "ann5 ben5 cy5")
        from_file = held_ids(mem)
    with open_mem(saved, clock, search_index_file=False) as mem:
        assert held_ids(mem) == from_file
    assert {h.split(" about")[0] for h in hits[:3]} == {f"{n} wrote note number 5" for n in ("ann", "ben", "cy")}
    assert not [p for p in (saved / ".vectors").rglob("*.tmp")]


def test_postgres_keeps_no_files(root: Path, clock: FakeClock, backend: str) -> None:
    with open_mem(root, clock) as mem:
        mem.facts.add(FACTS[0])
        assert texts(mem, "coffee") == [FACTS[0]]
    assert (root / ".vectors").exists() == (backend == "sqlite")
