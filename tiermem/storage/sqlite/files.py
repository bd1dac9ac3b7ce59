"""The Markdown files of the SQLite backend: plain files under the memory root, which are the store.

Written as :mod:`tiermem.paths` describes: ``0600`` files in ``0700`` folders, never
through a final symlink (``O_NOFOLLOW``), a link leading out of the root refused
(:class:`~tiermem.errors.UnsafePath`) unless ``allow_symlinks``. An append is one ``write``,
undone on failure; like the database (WAL, ``synchronous=NORMAL``) it is not fsynced unless
``sqlite_synchronous = "full"`` (docs/durability.md). A replace is atomic (temp file, fsync,
rename). A person may edit the files by hand: what is read is what is on disk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING

from tiermem.errors import StorageError
from tiermem.paths import UserPaths, atomic_write, make_dirs, open_private, read_file, sync_dir
from tiermem.storage.files import FileStat, MemoryFiles

if TYPE_CHECKING:
    from tiermem.storage.sql import Database, WriteKey


def open_files(db: Database, paths: UserPaths, *, mirror: bool = True) -> MemoryFiles:
    """``db.parts.files`` of SQLite (``mirror`` has no meaning here: the files are the store)."""
    del mirror
    return LocalFiles(paths, fsync=db.synchronous == "full")


class LocalFiles:
    """One user's Markdown files on the local disk (see the module docstring)."""

    durable_files = True

    def __init__(self, paths: UserPaths, *, fsync: bool = False) -> None:
        self._paths = paths
        self.fsync = fsync  # each append is on disk before it returns
        self._on_refresh: dict[str, Callable[[], None]] = {}

    @property
    def on_refresh(self) -> dict[str, Callable[[], None]]:
        return self._on_refresh

    @property
    def paths(self) -> UserPaths:
        return self._paths

    def mirror_path(self, rel: str) -> Path:
        return self._paths.root / rel

    def _real(self, rel: str) -> Path:
        return self._paths.inside(self._paths.root / rel)

    # --- reading -------------------------------------------------------------------------------
    def read(self, rel: str) -> bytes | None:
        path = self._real(rel)
        try:
            return read_file(path)  # not through a final symlink
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc

    def stat(self, rel: str) -> FileStat | None:
        path = self._real(rel)
        try:
            info = os.stat(path)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise StorageError(f"cannot read {path}: {exc}") from exc
        return _file_stat(info)

    def scan_with(self, folder: str, rels: Sequence[str]) -> dict[str, FileStat]:
        found = self.scan(folder)
        for rel in rels:
            stat = self.stat(rel)
            if stat is not None:
                found[rel] = stat
        return found

    def scan(self, folder: str) -> dict[str, FileStat]:
        found: dict[str, FileStat] = {}
        base = self._real(folder) if folder else self._paths.root
        prefix = f"{folder.rstrip('/')}/" if folder else ""
        try:
            with os.scandir(base) as entries:
                names = [(e.name, e.path) for e in entries if not e.name.startswith(".")]
        except (FileNotFoundError, NotADirectoryError):
            return {}
        except OSError as exc:
            raise StorageError(f"cannot list {base}: {exc}") from exc
        for name, path in names:
            try:
                info = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise StorageError(f"cannot read {path}: {exc}") from exc
            if stat.S_ISREG(info.st_mode):
                found[prefix + name] = _file_stat(info)
        return found


    # --- writing -------------------------------------------------------------------------------
    def append(self, rel: str, data: bytes) -> int:
        path = self._real(rel)
        try:
            make_dirs(path.parent)
            flags = os.O_RDWR | os.O_CREAT | os.O_APPEND  # 0600, never through a symlink
            with os.fdopen(open_private(path, flags), "r+b") as handle:
                start = os.fstat(handle.fileno()).st_size
                try:
                    handle.seek(0, os.SEEK_END)
                    handle.write(data)
                    handle.flush()
                    if self.fsync:
                        os.fsync(handle.fileno())
                        if start == 0:
                            sync_dir(path.parent)
                except OSError:
                    handle.truncate(start)
                    if start == 0:
                        path.unlink(missing_ok=True)
                    raise
        except OSError as exc:
            raise StorageError(f"cannot append to {path}: {exc}") from exc
        return start

    def truncate(self, rel: str, size: int) -> None:
        path = self._real(rel)
        try:
            if size == 0:
                path.unlink(missing_ok=True)
            else:
                with os.fdopen(open_private(path, os.O_RDWR), "r+b") as handle:
                    handle.truncate(size)
        except OSError as exc:
            raise StorageError(f"cannot cut {path} back to {size} bytes: {exc}") from exc

    def replace(self, rel: str, data: bytes) -> None:
        atomic_write(self._real(rel), data)

    def remove(self, rel: str) -> bool:
        path = self._real(rel)
        try:
            path.unlink()
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise StorageError(f"cannot remove {path}: {exc}") from exc
        return True

    def refresh(self, *, full: bool = False) -> list[str]:
        """Run the :attr:`on_refresh` hooks; nothing else to do: the files are the store."""
        for hook in list(self.on_refresh.values()):
            hook()
        return []

    def writing(self, key: WriteKey | None = None) -> AbstractContextManager[None]:
        return nullcontext()

    def prefetch(self, rel: str) -> None:
        """Nothing to send ahead: the file is read when asked for."""

    def list(self, folder: str) -> list[str]:
        return sorted(self.scan(folder))


def _file_stat(info: os.stat_result) -> FileStat:
    return FileStat(info.st_size, (info.st_mtime_ns, info.st_size, info.st_ino))
