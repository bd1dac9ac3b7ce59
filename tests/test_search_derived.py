"""Derived chunk vectors (issue 16): a journal record's own vector is combined from its sentences'
vectors (and the record before's) instead of embedding its text again with the record before."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from recording_embedder import RecordingEmbedder

from tiermem import Memory
from tiermem.search.indexer import combine
from tiermem.search.parts import sentence_parts
from tiermem.testing import FakeClock, HashEmbedder

pytestmark = pytest.mark.usefixtures("backend")

FIRST = "Alice: We planted tomatoes in the garden. The basil grew well too."
SECOND = "Bob: My sister plays the violin."
THIRD = "Alice: The orchestra meets on Fridays. Rehearsals are long. Concerts are in spring."
AT = datetime(2026, 3, 14, 9, 0, tzinfo=UTC)


def unit(vector: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    return (vector / np.linalg.norm(vector)).astype(np.float32)


def alone(text: str) -> npt.NDArray[np.float32]:
    """A record's vector from its sentences, as the index derives it (words weigh)."""
    pieces = sentence_parts(text) or [text]
    return combine([unit(HashEmbedder().embed([p])[0]) for p in pieces], [len(p.split()) for p in pieces])


def own_vectors(mem: Memory) -> dict[str, npt.NDArray[np.float32]]:
    """Each daily record's stored own vector, by its text."""
    rows = mem.db.rows("SELECT id, text FROM search_docs WHERE tier = 'daily' ORDER BY id")
    blobs = mem._search.indexer.vectors.vectors_of([int(r[0]) for r in rows], HashEmbedder().model_id)
    return {str(r[1]): np.frombuffer(blobs[int(r[0])], np.float32) for r in rows}


def test_each_sentence_is_embedded_once_and_the_record_vector_is_combined(root: Path, clock: FakeClock) -> None:
    embedder = RecordingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC") as mem:
        mem.daily.append("Conversation", [FIRST, SECOND], at=AT)
        mem.daily.append("Conversation", [THIRD], at=AT)  # blends in SECOND, embedded by the first append
        expected = [*sentence_parts(FIRST), SECOND, *sentence_parts(THIRD)]
        assert sorted(embedder.texts) == sorted(expected)  # no record text joined to the one before
        stored = own_vectors(mem)
    assert np.allclose(stored[FIRST], alone(FIRST), atol=1e-6)  # the file's first record: nothing before
    words = [len(t.split()) for t in (FIRST, SECOND, THIRD)]
    assert np.allclose(stored[SECOND], combine([alone(FIRST), alone(SECOND)], words[:2]), atol=1e-6)
    assert np.allclose(stored[THIRD], combine([alone(SECOND), alone(THIRD)], words[1:]), atol=1e-6)


def test_without_derived_vectors_the_record_is_embedded_with_the_one_before(root: Path, clock: FakeClock) -> None:
    embedder = RecordingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC", search_derived_vectors=False) as mem:
        mem.daily.append("Conversation", [FIRST, SECOND], at=AT)
        assert f"{FIRST}\n{SECOND}" in embedder.texts
        assert np.allclose(own_vectors(mem)[SECOND], unit(HashEmbedder().embed([f"{FIRST}\n{SECOND}"])[0]),
                           atol=1e-6)


def test_a_reindex_gives_the_same_vectors_as_the_appends(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Conversation", [FIRST, SECOND], at=AT)
        mem.daily.append("Conversation", [THIRD], at=AT)
        before = own_vectors(mem)
        assert mem.reindex() == 1  # the file indexed again from scratch: new items, new vectors
        after = own_vectors(mem)
    assert before.keys() == after.keys()
    for text, vector in before.items():
        assert np.allclose(vector, after[text], atol=1e-6)


_SEARCHER = """
import json, sys
from tiermem import Memory
from tiermem.testing import HashEmbedder
with Memory(sys.argv[1], embedder=HashEmbedder(), timezone="UTC", search_keyword_weight=0.0) as mem:
    print(json.dumps([(h.text, h.score) for h in mem.search(sys.argv[2], k=3, min_score=0.3)]))
"""


def test_an_appended_record_is_found_by_its_vector_here_and_from_another_process(root: Path, clock: FakeClock) -> None:
    # keyword weight 0: a hit's score is its calibrated cosine, so a record without a vector scores 0 and is dropped
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC", search_keyword_weight=0.0) as mem:
        mem.daily.append("Conversation", [FIRST, SECOND], at=AT)
        mem.daily.append("Conversation", [THIRD], at=AT)
        hits = mem.search("orchestra rehearsals on Fridays", k=3, min_score=0.3)
        assert hits and hits[0].text == THIRD
        run = subprocess.run([sys.executable, "-c", _SEARCHER, str(root), "sister violin"],
                             capture_output=True, text=True, timeout=120, check=True)
    found = json.loads(run.stdout)
    assert found and found[0][0] == SECOND and found[0][1] >= 0.3


def test_memory_md_bullets_are_derived_too(root: Path, clock: FakeClock) -> None:
    embedder = RecordingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC", search_keyword_weight=0.0) as mem:
        mem.core.write("- Alice grows tomatoes. She waters them at dawn.\n- Bob plays chess on Sundays.\n")
        hits = mem.search("chess Sundays", k=2, min_score=0.3, tier="core")
        assert hits and hits[0].text == "Bob plays chess on Sundays."
    assert embedder.texts and not [t for t in embedder.texts if "\n" in t]  # no bullet joined to the one before


@pytest.mark.parametrize("settings", [{"search_sentence_vectors": False}, {"search_chunk_context": False}])
def test_derived_vectors_with_sentences_or_context_off(root: Path, clock: FakeClock, settings: dict[str, bool]) -> None:
    embedder = RecordingEmbedder()
    with Memory(root, embedder=embedder, clock=clock, timezone="UTC", search_keyword_weight=0.0, **settings) as mem:
        mem.daily.append("Conversation", [FIRST, SECOND, THIRD], at=AT)
        embedded = list(embedder.texts)
        hits = mem.search("orchestra rehearsals on Fridays", k=3, min_score=0.3)
        assert hits and hits[0].text == THIRD
    assert embedded and not [t for t in embedded if "\n" in t]
    if settings.get("search_sentence_vectors") is False:
        assert sorted(embedded) == sorted([FIRST, SECOND, THIRD])  # one embedding per record


def test_a_new_model_gets_derived_vectors_from_reindex(root: Path, clock: FakeClock) -> None:
    with Memory(root, embedder=HashEmbedder(), clock=clock, timezone="UTC") as mem:
        mem.daily.append("Conversation", [FIRST, SECOND, THIRD], at=AT)
    other = HashEmbedder(128)
    with Memory(root, embedder=other, clock=clock, timezone="UTC") as mem:
        result = mem.reindex_vectors()
        assert result.items == 3 and mem.vector_status().missing == 0
        rows = mem.db.rows("SELECT id, text FROM search_docs WHERE tier = 'daily' ORDER BY id")
        blobs = mem._search.indexer.vectors.vectors_of([int(r[0]) for r in rows], other.model_id)
        stored = {str(r[1]): np.frombuffer(blobs[int(r[0])], np.float32) for r in rows}

    def alone128(text: str) -> npt.NDArray[np.float32]:
        pieces = sentence_parts(text) or [text]
        return combine([unit(other.embed([p])[0]) for p in pieces], [len(p.split()) for p in pieces])

    expected = combine([alone128(SECOND), alone128(THIRD)], [len(SECOND.split()), len(THIRD.split())])
    assert stored[THIRD].shape == (128,) and np.allclose(stored[THIRD], expected, atol=1e-6)
