"""A Markdown chunk's blended text and keyword context (``search_chunk_context``) come from a window of
its file around the new chunks, never from the whole file: an append reads the same few rows however
long the day's journal grew, and the result is the one the whole file gives (blended text: the chunk
before and the chunk; context: the date in words and ``CONTEXT_RADIUS`` neighbours each side)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from recording_embedder import RecordingEmbedder

from tiermem import Memory
from tiermem.search.indexer import CONTEXT_RADIUS, _keyword_context
from tiermem.storage.embeddings import PendingDoc
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

Item = tuple[int, str, "str | None", str]  # (doc id, text, day, stored context), as the index reads them


def file_items(mem: Memory, rel: str | None = None) -> list[Item]:
    """Every chunk item of ``rel`` (today's journal) in line order: the whole file, read by the test."""
    rows = mem.db.rows("SELECT d.id, c.text, c.day, d.context FROM chunks c JOIN search_docs d ON d.source = 'chunk'"
                       " AND d.ref = CAST(c.id AS TEXT) WHERE c.user_id = ? AND c.path = ? ORDER BY c.line_start",
                       (mem.scope.user_id, rel or mem.daily.rel_for(mem.daily.today())), "test")
    return [(int(r[0]), str(r[1]), r[2], str(r[3])) for r in rows]


def blended(items: Sequence[Item]) -> list[str]:
    """What each chunk of the whole file is embedded as (derived vectors off): the one before and it."""
    return [items[0][1]] + [f"{items[i - 1][1]}\n{items[i][1]}" for i in range(1, len(items))]


def contexts(items: Sequence[Item]) -> list[str]:
    return [_keyword_context(items, i) for i in range(len(items))]


def append_many(mem: Memory, records: int, start: int = 0) -> None:
    """``records`` distinct records appended one, two or three at a time."""
    i = start
    while i < start + records:
        size = min(1 + i % 3, start + records - i)
        mem.daily.append("Conversation", [f"user: record {j} about topic {j % 7} and item {j * 13}"
                                          for j in range(i, i + size)])
        i += size


def own_vectors(mem: Memory, tier: str = "daily") -> dict[str, npt.NDArray[np.float32]]:
    rows = mem.db.rows("SELECT id, text FROM search_docs WHERE tier = ? AND user_id = ? ORDER BY id",
                       (tier, mem.scope.user_id))
    blobs = mem._search.indexer.vectors.vectors_of([int(r[0]) for r in rows], HashEmbedder().model_id)
    return {str(r[1]): np.frombuffer(blobs[int(r[0])], np.float32) for r in rows}


def test_a_journal_built_by_many_appends_holds_the_whole_files_contexts_and_blended_texts(
        root: Path, clock: FakeClock) -> None:
    embedder = RecordingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC", search_derived_vectors=False) as mem:
        append_many(mem, 60)
        items = file_items(mem)
        assert len(items) == 60
        assert [item[3] for item in items] == contexts(items)
        assert sorted(t for t in embedder.texts if "\n" in t) == sorted(blended(items)[1:])
        vectors = own_vectors(mem)
    for item, text in zip(items, blended(items), strict=True):
        assert np.allclose(vectors[item[1]], HashEmbedder().embed([text])[0], atol=1e-6)


# SQLite only: it hand-edits a Daily file and indexes it again (on PostgreSQL the file is a mirror;
# the MEMORY.md test below edits a file on both backends)
@pytest.mark.sqlite_only
def test_an_edited_journal_indexed_again_holds_the_whole_files_contexts_and_vectors(
        root: Path, clock: FakeClock) -> None:
    """Records put in at the start and in the middle by hand: the file indexed again gets the
    contexts and vectors of the whole file, the same as a store that appended its records."""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        append_many(mem, 30)
        path = root / mem.daily.rel_for(mem.daily.today())
        lines = path.read_text().splitlines()
        middle = lines.index("- user: record 15 about topic 1 and item 195")
        lines[middle:middle] = ["- user: put in by hand in the middle", "- user: and a second one"]
        first = next(i for i, line in enumerate(lines) if line.startswith("- "))
        lines[first:first] = ["- user: put in by hand at the start"]
        path.write_text("\n".join(lines) + "\n")
        assert mem.reindex() == 1
        items = file_items(mem)
        assert len(items) == 33 and items[0][1] == "user: put in by hand at the start"
        assert [item[3] for item in items] == contexts(items)
        edited = own_vectors(mem)
    with Memory(root.parent / "again", embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        for item in items:  # the edited file's records, appended one at a time
            mem.daily.append("Conversation", [item[1]])
        again = file_items(mem)
        assert [(item[1], item[3]) for item in again] == [(item[1], item[3]) for item in items]
        appended = own_vectors(mem)
    assert edited.keys() == appended.keys()
    for text, vector in edited.items():
        assert np.allclose(vector, appended[text], atol=1e-6), text


def test_memory_md_written_again_with_bullets_put_in_holds_the_whole_files_contexts_and_vectors(
        root: Path, clock: FakeClock) -> None:
    bullets = [f"The user noted fact {i} about topic {i % 5}." for i in range(30)]
    edited = ["Put in at the start.", *bullets[:15], "Put in in the middle.", "And a second one.", *bullets[15:]]
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.core.write("".join(f"- {b}\n" for b in bullets))
        mem.core.write("".join(f"- {b}\n" for b in edited))
        items = file_items(mem, "MEMORY.md")
        assert [item[1] for item in items] == edited
        assert [item[3] for item in items] == contexts(items)
        written = own_vectors(mem, "core")
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", user_id="fresh") as mem:
        mem.core.write("".join(f"- {b}\n" for b in edited))  # a store that only ever held the edited file
        assert [(item[1], item[3]) for item in file_items(mem, "MEMORY.md")] == [(i[1], i[3]) for i in items]
        fresh = own_vectors(mem, "core")
    assert written.keys() == fresh.keys() == set(edited)
    for text, vector in written.items():
        assert np.allclose(vector, fresh[text], atol=1e-6), text


def pending(items: Sequence[Item], positions: Sequence[int], user_id: str) -> list[PendingDoc]:
    return [PendingDoc(items[p][0], "chunk", "", "daily", items[p][1], user_id) for p in positions]


@pytest.mark.parametrize("positions", [
    lambda n: [0, 1, 9, 10, 11, 30, n // 2, n - 2, n - 1],  # runs apart, at the start and at the end
    lambda n: [3, n - 3],  # two chunks far apart
    range,  # the whole file: more chunks than one read's ids (500)
], ids=["runs", "two", "all"])
def test_chunks_anywhere_in_a_file_get_the_whole_files_texts_and_contexts(
        root: Path, clock: FakeClock, positions: Callable[[int], Sequence[int]]) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", embed_on_write=False) as mem:
        mem.daily.append("Conversation", [f"user: line {i} of a long day, topic {i % 11}" for i in range(520)])
        mem.db.conn.execute("UPDATE search_docs SET context = ''")  # every context is written again
        items = file_items(mem)
        asked = sorted(set(positions(len(items))))
        texts, written = mem._search.indexer.prepare(pending(items, asked, mem.scope.user_id))
    touched = sorted({q for p in asked for q in range(max(0, p - CONTEXT_RADIUS), p + 1)})
    assert texts == [blended(items)[p] for p in asked]
    assert sorted(written, key=lambda c: c[1]) == sorted(((contexts(items)[q], items[q][0]) for q in touched),
                                                         key=lambda c: c[1])


def test_an_append_reads_as_many_rows_on_a_long_day_as_on_a_short_one(
        root: Path, clock: FakeClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """The rows the search index's reads return to an append (what it embeds, the chunks around,
    the cached vectors) do not grow with the day's file. Before, each append read every chunk of the
    file to find the new one's neighbours. (The journal's own read of the file's text is not counted.)"""
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        read: list[int] = []
        rows = mem.db.rows

        def counted(sql: str, args: Sequence[Any] = (), what: str = "query") -> list[Any]:
            found = rows(sql, args, what)
            if what in ("search query", "embedding query"):  # SearchRepository's and EmbeddingRepository's
                read.append(len(found))
            return found

        def append_read(text: str) -> int:
            read.clear()
            mem.daily.append("Conversation", [text])
            return sum(read)

        monkeypatch.setattr(mem.db, "rows", counted)
        append_many(mem, 8)
        short = [append_read(f"user: a short day's record {i}") for i in range(3)]
        append_many(mem, 300, start=100)
        long = [append_read(f"user: a long day's record {i}") for i in range(3)]
    assert short[-1] > 0 and long == short, (short, long)
