"""A scope's vector index saved to a file, so a new process maps it instead of rebuilding it.

Rebuilding a scope's :class:`~tiermem.search.vectors.VectorIndex` from SQLite rows costs seconds
at 100k items (a row and a vector blob per item through ``sqlite3``); mapping a file of the same
arrays costs a checksum pass. The file is a cache of the database, never a source of truth:

- **Where.** ``<root>/.vectors/<user_id>/<agent_name>.vec`` (folders ``0700``, files ``0600``,
  never through a symlink). One folder per user, so a purge removes a user's files at once.
- **Layout.** ``MAGIC``, the header's length and CRC-32, a JSON header, then each array at a
  64-byte aligned offset. The header names what the file was built from (:class:`FileKey`: the
  store's id, the scope, the embedder's model id and size, the settings that shape an index, the
  byte order), the database's change counters it reflects (``doc_seq``: the largest item id,
  ``removed_seq``: the removal log), and every array's type, shape, offset and CRC-32.
- **Reading** (:func:`load`) maps the file copy-on-write (``mmap.ACCESS_COPY``): the index may
  change its arrays in place, the file never changes (on Windows it is read into memory instead:
  a mapped file could not be replaced or deleted there). A file that does not match its key, is
  shorter or longer than its header says, or fails a checksum is not used (``None``, with the
  reason logged); :class:`tiermem.search.loaded.LoadedIndexer` then rebuilds from the rows. The
  caller also checks the file against the database (:mod:`tiermem.search.loaded`).
- **Writing** (:func:`save`) goes to a temp file in the same folder that replaces the old file
  in one ``os.replace``: a reader sees the old file or the new one, never a mix, and a reader that
  mapped the old one keeps it. ``commit`` runs under the store's ``.vectors/.lock`` right before
  the rename and may refuse it; a purge deletes files under the same lock (:func:`drop_user`), so
  a file written from rows read before the purge cannot land after it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import mmap
import os
import shutil
import struct
import sys
import tempfile
import time
import zlib
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.paths import NOFOLLOW, make_dirs
from tiermem.search.vectors import VectorIndex
from tiermem.types import Scope

if TYPE_CHECKING:
    import numpy.typing as npt

log = logging.getLogger(__name__)

FOLDER = ".vectors"
LOCK_NAME = f"{FOLDER}/.lock"
SUFFIX = ".vec"
MAGIC = b"TMVECIX\x01"
FORMAT = 1
ALIGN = 64
LEFTOVER_SECONDS = 600  # a temp file this old is a killed writer's
#: Map files (copy-on-write) rather than read them: not on Windows, where a mapped file can be
#: neither replaced nor deleted (a purge must delete it).
MAP_FILES = os.name != "nt"
_PREFIX = struct.Struct("<8sII")  # magic, header length, header CRC-32
#: The arrays a file may hold and their types (anything else makes the file unusable).
DTYPES = {"ids": "int64", "tiers": "int8", "cats": "int8", "when": "int64", "f32": "float32", "q8": "int8",
          "scale": "float32", "bits": "uint64", "center": "float32", "part_row": "int64", "part_f32": "float32"}


@dataclass(frozen=True)
class FileKey:
    """What a file must have been built from to be used: any difference means another index."""

    store_id: str
    user_id: str
    agent_name: str
    model: str
    dim: int
    shape: str  # the settings that decide what an index holds and how (see ``LoadedIndexer``)
    byteorder: str = sys.byteorder


@dataclass(frozen=True)
class Saved:
    """An index read from a file, and the database counters it reflects."""

    index: VectorIndex
    doc_seq: int
    removed_seq: int


def index_path(folder: Path, scope: Scope) -> Path:
    """The file of ``scope`` (user ids and agent names are validated names: no separators, no ``..``)."""
    return folder / scope.user_id / f"{scope.agent_name}{SUFFIX}"


def save(path: Path, key: FileKey, index: VectorIndex, doc_seq: int, removed_seq: int,
         commit: Callable[[Callable[[], None]], bool]) -> bool:
    """Write ``index`` to ``path`` through a temp file; ``commit(rename)`` decides (under a lock)
    whether ``rename`` runs. True when the file was replaced."""
    import numpy as np

    arrays = {name: np.ascontiguousarray(a) for name, a in index.arrays().items()}
    sections: list[dict[str, Any]] = []
    offset = 0
    for name, array in arrays.items():
        sections.append({"name": name, "dtype": str(array.dtype), "shape": list(array.shape), "offset": offset,
                         "nbytes": array.nbytes, "crc": zlib.crc32(_raw(array))})
        offset = _aligned(offset + array.nbytes)
    header = json.dumps({"format": FORMAT, "key": asdict(key), "doc_seq": doc_seq, "removed_seq": removed_seq,
                         "parts_dropped": index.parts_dropped, "sections": sections}).encode()
    start = _aligned(_PREFIX.size + len(header))
    make_dirs(path.parent)
    _drop_leftovers(path)
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)  # 0600, O_EXCL
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(_PREFIX.pack(MAGIC, len(header), zlib.crc32(header)) + header)
            for section, array in zip(sections, arrays.values(), strict=True):
                out.seek(start + section["offset"])
                out.write(_raw(array))
            out.truncate(start + offset)

        def rename() -> None:
            os.replace(temp, path)

        if commit(rename):
            return True
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    Path(temp).unlink(missing_ok=True)
    return False


def load(path: Path, key: FileKey, **options: Any) -> Saved | None:
    """The index saved at ``path`` if it was built from ``key`` and is whole, else ``None``
    (the reason is logged). ``options`` go to :class:`VectorIndex` (thresholds, ``fetch_exact``)."""
    try:
        fd = os.open(path, os.O_RDONLY | NOFOLLOW | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        log.info("vector index file %s not used: %s", path, exc)
        return None
    try:
        size = os.fstat(fd).st_size
        if size < _PREFIX.size:
            return _unusable(path, "too short")
        mapped = mmap.mmap(fd, size, access=mmap.ACCESS_COPY) if MAP_FILES else _read_all(fd, size)
    except (OSError, ValueError) as exc:
        return _unusable(path, str(exc))
    finally:
        os.close(fd)
    try:
        return _read(mapped, key, options)
    except (ValueError, KeyError, TypeError, struct.error) as exc:
        return _unusable(path, str(exc))


def _read_all(fd: int, size: int) -> bytearray:
    """The file's bytes in memory (where a mapped file could not be replaced or deleted)."""
    data = bytearray(size)
    view, done = memoryview(data), 0
    while done < size:
        got = os.readv(fd, [view[done:]]) if hasattr(os, "readv") else _read_into(fd, view[done:])
        if not got:
            raise ValueError("the file shrank while it was read")
        done += got
    return data


def _read_into(fd: int, view: memoryview) -> int:
    chunk = os.read(fd, len(view))
    view[:len(chunk)] = chunk
    return len(chunk)


def _read(mapped: mmap.mmap | bytearray, key: FileKey, options: dict[str, Any]) -> Saved:
    import numpy as np

    magic, length, crc = _PREFIX.unpack_from(mapped, 0)
    raw = bytes(mapped[_PREFIX.size:_PREFIX.size + length])
    if magic != MAGIC or len(raw) != length or zlib.crc32(raw) != crc:
        raise ValueError("not an index file of this format, or a damaged header")
    header = json.loads(raw)
    if header.get("format") != FORMAT or header.get("key") != asdict(key):
        raise ValueError("built for another store, scope, model or settings")
    start = _aligned(_PREFIX.size + length)
    arrays: dict[str, npt.NDArray[Any]] = {}
    end = start
    view = memoryview(mapped)
    for section in header["sections"]:
        name, offset, nbytes = section["name"], start + int(section["offset"]), int(section["nbytes"])
        shape = tuple(int(d) for d in section["shape"])
        if DTYPES.get(name) != section["dtype"] or name in arrays or offset < start:
            raise ValueError(f"unexpected array {name!r}")
        dtype = np.dtype(section["dtype"])
        if nbytes != dtype.itemsize * int(np.prod(shape, dtype=np.int64)) or offset + nbytes > len(mapped):
            raise ValueError(f"array {name!r} does not fit the file")
        if zlib.crc32(view[offset:offset + nbytes]) != section["crc"]:
            raise ValueError(f"array {name!r} fails its checksum")
        arrays[name] = np.frombuffer(mapped, dtype, int(np.prod(shape, dtype=np.int64)), offset).reshape(shape)
        end = max(end, _aligned(offset + nbytes))
    if end != len(mapped):
        raise ValueError(f"the file holds {len(mapped)} bytes, its header {end}")
    index = VectorIndex.from_arrays(key.dim, arrays, bool(header["parts_dropped"]), **options)
    return Saved(index, int(header["doc_seq"]), int(header["removed_seq"]))


def drop_user(folder: Path, user_id: str) -> None:
    """Delete every index file of ``user_id`` (all agents)."""
    target = folder / user_id
    if target.is_symlink():
        target.unlink()
    elif target.is_dir():
        shutil.rmtree(target)


def drop_all(folder: Path) -> None:
    """Delete every index file of the store (the lock file stays)."""
    if not folder.is_dir() or folder.is_symlink():
        return
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        elif entry.name.endswith(SUFFIX) or entry.is_symlink():
            with contextlib.suppress(FileNotFoundError):
                entry.unlink()


def _raw(array: npt.NDArray[Any]) -> memoryview | bytes:
    """The bytes of a C-contiguous array, without a copy."""
    return array.data.cast("B") if array.nbytes else b""


def _drop_leftovers(path: Path) -> None:
    """Delete temp files of ``path`` that a killed writer left (older than :data:`LEFTOVER_SECONDS`)."""
    now = time.time()
    for temp in path.parent.glob(f".{path.name}.*.tmp"):
        with contextlib.suppress(OSError):
            if now - temp.lstat().st_mtime > LEFTOVER_SECONDS:
                temp.unlink()


def _aligned(offset: int) -> int:
    return -(-offset // ALIGN) * ALIGN


def _unusable(path: Path, reason: str) -> Saved | None:
    log.info("vector index file %s not used (%s): rebuilding from the database", path, reason)
    return None
