"""Deep Dream never half-writes: the cross-process lock and a crash between temp write and rename."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from dream_helpers import GOOD_REPLY, NOW, PRIOR_MEMORY, open_memory, seed
from filelock import FileLock

from tiermem import StorageError
from tiermem.dream.runner import LOCK_FILE
from tiermem.testing import FakeClock

pytestmark = pytest.mark.usefixtures("backend")

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


def _python(code: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=f"{REPO}{os.pathsep}{REPO / 'tests'}")
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def test_a_second_process_is_skipped_while_one_dreams(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        # the other process holds the store's dream lock of the user (a lock file, or an advisory lock)
        holder = _python(f"""
            import sys
            from tiermem import Memory
            with Memory({str(root)!r}, embedder="hash") as other:
                with other.db.parts.lock(other.db, {LOCK_FILE!r}, -1):
                    print("held", flush=True)
                    sys.stdin.read()
        """)
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
            result = mem.deep_dream(lookback_days=2)
            assert result.status == "skipped" and result.reason.startswith("locked")
            assert llm.requests == [] and mem.core.path.read_text(encoding="utf-8") == PRIOR_MEMORY
        finally:
            holder.communicate("", timeout=30)
        assert mem.deep_dream(lookback_days=2).status == "written"


def test_a_lock_held_by_another_holder_in_this_process_skips_the_dream(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        with mem.db.parts.lock(mem.db, LOCK_FILE, 0):
            assert mem.deep_dream(lookback_days=2).reason.startswith("locked")
        assert llm.requests == []
        assert mem.deep_dream(lookback_days=2).status == "written"


@pytest.mark.sqlite_only  # the lock file itself: a process of an older tiermem version takes it by this name
def test_the_dream_lock_file_of_older_versions_is_respected(root: Path, clock: FakeClock) -> None:
    mem, llm = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
        with FileLock(root / LOCK_FILE):
            assert mem.deep_dream(lookback_days=2).reason.startswith("locked")
        assert llm.requests == []
        assert mem.deep_dream(lookback_days=2).status == "written"


def test_another_users_dream_lock_does_not_block(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY], user_id="alice")
    with mem:
        seed(mem)
        with mem.db.parts.lock(mem.db, LOCK_FILE, 0):  # the default user's lock; alice's is users/alice/.dream.lock
            assert mem.deep_dream(lookback_days=2).status == "written"


@pytest.mark.sqlite_only  # the rename of MEMORY.md is the commit on SQLite; on PostgreSQL the database commits
def test_failed_rename_leaves_the_old_memory_intact(root: Path, clock: FakeClock,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY, GOOD_REPLY])
    with mem:
        seed(mem)
        before = mem.core.path.read_bytes()

        def broken_replace(src: object, dst: object) -> None:
            raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "replace", broken_replace)
        with pytest.raises(StorageError, match="No space left"):
            mem.deep_dream(lookback_days=2)
        monkeypatch.undo()
        assert mem.core.path.read_bytes() == before
        assert [p.name for p in root.iterdir() if p.name.startswith(".MEMORY.md")] == []  # temp file removed
        assert mem.dream_versions() == [] and mem.daily.consolidated_days() == []
        assert not (root / "memory" / "dreams").exists()
        assert mem.deep_dream(lookback_days=2).status == "written"  # nothing recorded the failed run as done


@pytest.mark.sqlite_only  # as above: on PostgreSQL the rename only rewrites the local mirror
def test_process_killed_before_the_rename_leaves_the_old_memory_intact(root: Path, clock: FakeClock) -> None:
    mem, _ = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        seed(mem)
    before = (root / "MEMORY.md").read_bytes()
    child = _python(f"""
        import os
        from datetime import datetime
        from dream_helpers import GOOD_REPLY, NOW, open_memory
        from tiermem.testing import FakeClock

        mem, _ = open_memory({str(root)!r}, FakeClock(NOW), [GOOD_REPLY])
        os.replace = lambda src, dst: os._exit(9)  # die after the temp file is written and fsynced
        mem.deep_dream(lookback_days=2)
    """)
    child.communicate("", timeout=60)
    assert child.returncode == 9
    assert (root / "MEMORY.md").read_bytes() == before
    leftovers = [p for p in root.iterdir() if p.name.startswith(".MEMORY.md.")]
    assert len(leftovers) == 1 and "Siemens" in leftovers[0].read_text(encoding="utf-8")
    mem, _ = open_memory(root, clock, [GOOD_REPLY])
    with mem:
        assert mem.core.items()[0] == "Works as a backend engineer at Acme Corp."
        assert mem.deep_dream(lookback_days=2).status == "written"  # the killed run left no hash behind


class EditingModel:
    """A chat model during whose call a person edits MEMORY.md by hand."""

    def __init__(self, path: Path, reply: str) -> None:
        self.path, self.reply = path, reply

    def complete(self, messages: list[dict[str, object]], *, json_schema: dict[str, object] | None = None) -> str:
        self.path.write_text(self.path.read_text(encoding="utf-8") + "- Added by hand meanwhile.\n", encoding="utf-8")
        return self.reply


def test_a_hand_edit_during_the_dream_is_never_overwritten(root: Path, clock: FakeClock, backend: str) -> None:
    from tiermem import Memory

    with Memory(root, llm=EditingModel(root / "MEMORY.md", GOOD_REPLY), embedder="hash", clock=clock,
                timezone="UTC") as mem:
        seed(mem)
        result = mem.deep_dream(lookback_days=2)
        assert result.status == "refused" and "changed while the dream ran" in result.reason
        assert mem.core.items()[-1] == "Added by hand meanwhile."
        # no dream version; on PostgreSQL the imported hand edit keeps the text it replaced
        versions = [(v.cause, v.content) for v in mem.dream_versions()]
        assert versions == ([] if backend == "sqlite" else [("hand edit", PRIOR_MEMORY)])
