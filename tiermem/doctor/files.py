"""Doctor's checks of the files under a root: who may read them, and links that lead out of it.

Files tiermem writes (the database and its ``-wal``/``-shm``, ``tiermem.toml``, ``MEMORY.md``, the
Daily files, dream diaries, lock files, the coding agents' hook log, sessions and server token)
should be ``0600`` and the folders it creates ``0700``: a memory store holds what people told
their agents. The root itself is left alone (people keep
it in folders of their own). A symlink inside the root that leads outside it is refused by
tiermem unless ``allow_symlinks = true``; doctor lists each one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

from tiermem.agents.hook_log import AGENTS_DIR
from tiermem.config import CONFIG_FILE
from tiermem.doctor.report import MODES, DoctorReport
from tiermem.errors import InvalidInput
from tiermem.paths import CORE_FILE, DAILY_DIR, DEFAULT_USER, USERS_DIR, UserPaths
from tiermem.plural import counted
from tiermem.storage.backend import DB_FILE

OWNER_ONLY = 0o700  # files end up 0600 (tiermem writes no executables), folders 0700
_SHOWN = 5  # how many paths a one-line problem names


def users(root: Path) -> list[str]:
    """The users with Markdown files under ``root``: ``default`` and each valid ``users/<id>`` folder."""
    found = [DEFAULT_USER]
    try:
        entries = sorted((root / USERS_DIR).iterdir())
    except OSError:
        return found
    for entry in entries:
        try:
            if entry.is_dir() and entry.name != DEFAULT_USER:
                UserPaths.for_user(root, entry.name)
                found.append(entry.name)
        except InvalidInput:
            continue  # a name tiermem would never create, or a link out of the root (reported as a link)
    return found


def _lead(n: int) -> str:
    return f"{counted(n, 'symlink')} {'leads' if n == 1 else 'lead'}"


def _walk(root: Path) -> Iterator[tuple[Path, os.stat_result]]:
    """Every entry under ``root`` (not the root itself), links not followed."""
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in sorted(dirs) + sorted(files):
            path = Path(folder) / name
            try:
                yield path, path.lstat()
            except OSError:
                continue


def _written_by_tiermem(root: Path, path: Path) -> bool:
    """Files and folders tiermem writes: the database files, the config, ``MEMORY.md`` and
    everything under ``memory/``, ``users/`` and ``agents/`` (the coding agents' state)."""
    top = path.relative_to(root).parts[0]
    return top.startswith(DB_FILE) or top in (CONFIG_FILE, CORE_FILE, DAILY_DIR, USERS_DIR, AGENTS_DIR)


def check_modes(root: Path, report: DoctorReport) -> None:
    """Files readable or writable by others than the owner, folders open to them."""
    if os.name != "posix":
        report.notices.append("file modes: not checked on this platform")
        return
    report.checked.append("modes")
    loose: list[str] = []
    for path, info in _walk(root):
        if stat.S_ISLNK(info.st_mode) or not _written_by_tiermem(root, path):
            continue
        if (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)) and info.st_mode & 0o077:
            loose.append(f"{path.relative_to(root).as_posix()} {stat.S_IMODE(info.st_mode):04o}")
    if loose:
        shown = ", ".join(loose[:_SHOWN]) + (f" and {len(loose) - _SHOWN} more" if len(loose) > _SHOWN else "")
        loose_files = counted(len(loose), "file or folder", "files or folders")
        report.problem(f"{loose_files} can be read by other users ({shown}): "
                       "`tiermem doctor --repair` sets 0600 on files and 0700 on folders", MODES)


def fix_modes(root: Path) -> int:
    """Take every right of group and others from the files and folders tiermem writes (0600 files,
    0700 folders); returns how many changed."""
    changed = 0
    for path, info in _walk(root):
        if stat.S_ISLNK(info.st_mode) or not _written_by_tiermem(root, path):
            continue
        if (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)) and info.st_mode & 0o077:
            os.chmod(path, stat.S_IMODE(info.st_mode) & OWNER_ONLY)
            changed += 1
    return changed


def check_links(root: Path, report: DoctorReport, allowed: bool) -> None:
    """Symlinks inside the root that lead outside it (the root may itself be a link)."""
    report.checked.append("symlinks")
    outside: list[str] = []
    for path, info in _walk(root):
        if not stat.S_ISLNK(info.st_mode):
            continue
        try:
            target = path.resolve()
        except (OSError, RuntimeError):  # a loop
            target = Path(os.readlink(path))
        if not target.is_relative_to(root):
            outside.append(f"{path.relative_to(root).as_posix()} -> {target}")
    if not outside:
        return
    shown = ", ".join(outside[:_SHOWN]) + (f" and {len(outside) - _SHOWN} more" if len(outside) > _SHOWN else "")
    if allowed:
        report.notices.append(f"{_lead(len(outside))} outside the root ({shown}); allowed by allow_symlinks")
    else:
        report.problem(f"{_lead(len(outside))} outside the root ({shown}): tiermem refuses them; "
                       "replace them with the files, or set allow_symlinks = true in tiermem.toml")
