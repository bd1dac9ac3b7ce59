"""``make_dirs`` when other processes make the same folders at once (several writers opening
users of one new root)."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from tiermem.paths import make_dirs


def test_a_parent_made_by_another_process_meanwhile_is_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The mkdir of ``users/u1`` fails because ``users`` is missing; before this process looks again,
    another one has made ``users`` (a race seen with 2 writer processes of 2 users)."""
    real_mkdir = Path.mkdir
    target = tmp_path / "shared" / "users" / "u1"

    def racing_mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        try:
            real_mkdir(self, *args, **kwargs)
        except FileNotFoundError:
            if self == target:
                real_mkdir(self.parent, parents=True, exist_ok=True)  # the other process, just then
            raise

    monkeypatch.setattr(Path, "mkdir", racing_mkdir)
    make_dirs(target / "memory")
    assert (target / "memory").is_dir()
    if os.name == "posix":
        assert stat.S_IMODE((target / "memory").stat().st_mode) == 0o700


def test_a_folder_that_cannot_be_made_under_an_existing_parent_still_raises(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(NotADirectoryError):
        make_dirs(blocker / "a" / "b")
    if Path("/proc/self").is_dir():
        with pytest.raises(FileNotFoundError):
            make_dirs(Path("/proc/no-such-thing/a"))
