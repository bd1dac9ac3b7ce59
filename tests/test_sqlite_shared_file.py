"""Two stores of one process on the same SQLite file, and other processes using it meanwhile.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's among
them (sqlite.org/howtocorrupt.html, 2.2). If opening the second store read the file's header with
an ordinary open/close, the first store's locks were gone: another process closing its last
connection then deleted the write-ahead log this process was still writing to, and those writes
were lost to everyone else (the coding agents' resident server holds the person's store and each
project's on one file, and saw "database disk image is malformed").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tiermem import Memory
from tiermem.testing import HashEmbedder


def _other_process(root: Path, code: str) -> str:
    script = ("import sys\nfrom tiermem import Memory\nfrom tiermem.testing import HashEmbedder\n"
              f"with Memory({str(root)!r}, embedder=HashEmbedder(), user_id='a') as mem:\n    {code}\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TIERMEM_EMBEDDER": "hash"}, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_second_store_on_the_file_keeps_the_first_ones_writes_visible(tmp_path: Path) -> None:
    root = tmp_path / "mem"
    with Memory(root, embedder=HashEmbedder(), user_id="a") as first:
        first.facts.add("Written before the second store opened", "knowledge", 0.9)
        with Memory(root, embedder=HashEmbedder(), user_id="b") as second:
            _other_process(root, "mem.facts.add('Written by another process', 'knowledge', 0.9)")
            first.facts.add("Written after the other process closed", "knowledge", 0.9)
            second.facts.add("Written by the second store", "knowledge", 0.9)
            seen = _other_process(root, "print(sorted(f.content for f in mem.facts.list()))")
            assert "Written after the other process closed" in seen
            assert Path(f"{root / 'tiermem.db'}-wal").exists()  # still the log this process writes to
            assert [f.content for f in first.facts.list()].count("Written by another process") == 1
    with Memory(root, embedder=HashEmbedder(), user_id="a") as again:
        assert len(again.facts.list()) == 3
