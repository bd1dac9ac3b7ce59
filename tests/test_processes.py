"""Several processes share one root (R65): writes are seen and none is lost."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tiermem import Memory
from tiermem.testing import HashEmbedder

_WRITER = """
import sys
from tiermem import Memory
from tiermem.testing import HashEmbedder
with Memory(sys.argv[1], embedder=HashEmbedder()) as m:
    for i in range(int(sys.argv[3])):
        assert m.facts.add(f"{sys.argv[2]} fact {i}") is not None
"""


def _writer(root: Path, tag: str, n: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", _WRITER, str(root), tag, str(n)])


def test_second_process_sees_first_process_writes(root: Path) -> None:
    assert _writer(root, "first", 3).wait(timeout=60) == 0
    with Memory(root, embedder=HashEmbedder()) as m:
        assert sorted(f.content for f in m.facts.list()) == [f"first fact {i}" for i in range(3)]


def test_two_processes_adding_concurrently_lose_nothing(root: Path) -> None:
    Memory(root, embedder=HashEmbedder()).close()  # create the schema once
    procs = [_writer(root, tag, 200) for tag in ("a", "b")]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    with Memory(root, embedder=HashEmbedder()) as m:
        facts = m.facts.list()
        assert len(facts) == 400
        assert len({f.id for f in facts}) == 400
        assert {f.content for f in facts} == {f"{t} fact {i}" for t in "ab" for i in range(200)}
