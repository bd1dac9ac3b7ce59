"""Keeps the search index (``chunks``) in step with a user's ``MEMORY.md`` and daily files.

Chunks follow :func:`~tiermem.tiers.markdown.parse_records`: one chunk per ``MEMORY.md`` bullet
and per daily record (a ``- `` line with the lines that continue it), each with its line range so
a hit cites ``memory/2026-03-14.md#L12-L12``. A daily chunk's text is the record's exact text
(newlines kept); a ``MEMORY.md`` chunk's is folded onto one line. A record longer than
:data:`CHUNK_MAX_CHARS` is cut at line boundaries into several chunks, each citing its own lines;
a single line longer than that is cut (at a space where one is near) into pieces that cite the
same line. Blank records are not indexed. Dream diaries are not indexed.

- An append adds just the new block's chunks, provided the index still holds the file exactly as
  it was before the append (same sha256); otherwise the file is re-indexed whole.
- A rewrite of ``MEMORY.md`` re-indexes it.
- :meth:`FileIndexer.refresh` (run before every search) notices edits made by hand (SQLite) and
  writes of other processes (PostgreSQL), even while no process ran: it compares each file's
  sha256 with the indexed one — hashing only files whose change key
  (:class:`~tiermem.storage.files.FileStat`: mtime, size and inode of a file; a revision of a
  file in the database) changed since this process last looked — and forgets deleted files.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from pathlib import Path

from tiermem.paths import CORE_FILE, DAILY_DIR, UserPaths, day_of
from tiermem.storage.chunks import Chunk, ChunkRepository, Ids
from tiermem.storage.files import MemoryFiles
from tiermem.tiers.daily import AppendEvent
from tiermem.tiers.markdown import Record, fold, parse_records

log = logging.getLogger(__name__)

CHUNK_MAX_CHARS = 1500  # a longer record is indexed as several chunks


def is_indexed_path(rel: str) -> bool:
    """``MEMORY.md`` or ``memory/YYYY-MM-DD.md`` (relative to the user's root)."""
    if rel == CORE_FILE:
        return True
    folder, _, name = rel.partition("/")
    return folder == DAILY_DIR and "/" not in name and day_of(name) is not None


def chunks_of(rel: str, text: str, first_line: int = 1) -> list[Chunk]:
    """The chunks of a file's text (or of a block of it starting at ``first_line``)."""
    if rel == CORE_FILE:
        tier, day = "core", None
    else:
        found = day_of(rel.rpartition("/")[2])
        tier, day = "daily", found.isoformat() if found else None
    chunks: list[Chunk] = []
    for record in parse_records(text, first_line):
        for start, end, piece in record_pieces(record):
            body = fold(piece) if tier == "core" else piece
            if body.strip():
                chunks.append(Chunk(tier, rel, start, end, body, day))
    return chunks


def record_pieces(record: Record, max_chars: int = CHUNK_MAX_CHARS) -> list[tuple[int, int, str]]:
    """``(line_start, line_end, text)`` pieces of a record of at most about ``max_chars`` characters,
    cut between lines (a longer line into pieces of its own); a short record is one piece."""
    if len(record.text) <= max_chars:
        return [(record.line_start, record.line_end, record.text)]
    pieces: list[tuple[int, int, str]] = []
    parts: list[str] = []
    start = end = record.line_start
    size = 0
    for number, line in enumerate(record.text.split("\n"), start=record.line_start):
        for part in _line_parts(line, max_chars):
            if parts and size + 1 + len(part) > max_chars:
                pieces.append((start, end, "\n".join(parts)))
                parts, size = [], 0
            if not parts:
                start, size = number, len(part)
            else:
                size += 1 + len(part)
            parts.append(part)
            end = number
    if parts:
        pieces.append((start, end, "\n".join(parts)))
    return pieces


def _line_parts(line: str, max_chars: int) -> list[str]:
    """``line`` cut into pieces of at most ``max_chars`` characters, at a space in the second half
    of a piece when there is one; the pieces joined give ``line`` back."""
    parts: list[str] = []
    while len(line) > max_chars:
        cut = line.rfind(" ", max_chars // 2, max_chars)
        cut = cut + 1 if cut > 0 else max_chars
        parts.append(line[:cut])
        line = line[cut:]
    parts.append(line)
    return parts


class FileIndexer:
    """The index side of one user's Markdown files (read through :class:`MemoryFiles`)."""

    def __init__(self, repo: ChunkRepository, files: MemoryFiles | UserPaths) -> None:
        if isinstance(files, UserPaths):
            from tiermem.storage.sqlite.files import LocalFiles

            files = LocalFiles(files)
        self.repo = repo
        self.files = files
        self.paths = files.paths
        self._seen: dict[str, Hashable] = {}  # change key of each file when this process last hashed it
        self._db_checked = False
        self._lock = threading.Lock()

    @property
    def user_id(self) -> str:
        return self.paths.user_id

    # --- told by the journal and the core file ------------------------------------------------
    @contextmanager
    def notifications_after(self) -> Iterator[None]:
        """Index writes inside this block tell the chunk listeners (embedding) only when it ends,
        so a journal lock taken inside it is not held while they run."""
        held: list[tuple[str, Ids]] = []
        try:
            with self.repo.held_notifications() as held:
                yield
        finally:
            try:
                self.repo.notify(held)
            except Exception as exc:  # the chunks are committed; the next search catches up
                log.warning("chunk listeners failed: %s", exc)

    def appended(self, event: AppendEvent) -> None:
        chunks = chunks_of(event.rel, event.block, event.first_line)
        if not self.repo.append_chunks(self.user_id, event.rel, event.old_sha256, event.new_sha256, chunks):
            self.index_rel(event.rel)

    def prefetch(self, rel: str) -> None:
        self.repo.prefetch_hash(self.user_id, rel)

    def rewritten(self, path: Path | str) -> None:
        self.index_rel(self._rel(path))

    def removed(self, path: Path | str) -> None:
        self._forget(self._rel(path))

    def _rel(self, path: Path | str) -> str:
        return path if isinstance(path, str) else self.paths.relative(path)

    # --- checking the files -----------------------------------------------------------------
    def index_file(self, path: Path, force: bool = False) -> bool:
        """:meth:`index_rel` of a file under the user's root."""
        return self.index_rel(self.paths.relative(path), force)

    def index_rel(self, rel: str, force: bool = False) -> bool:
        """Index ``rel`` if its content differs from the index (always with ``force``);
        True when the index changed."""
        found = self.files.stat(rel)  # a link out of the root: UnsafePath
        data = self.files.read(rel) if found is not None else None
        if found is None or data is None:
            return self._forget(rel)
        sha = hashlib.sha256(data).hexdigest()
        if not force and self.repo.file_hash(self.user_id, rel) == sha:
            self._remember(rel, found.key)
            return False
        chunks = chunks_of(rel, data.decode("utf-8", errors="replace"))
        self.repo.replace_file(self.user_id, rel, sha, chunks)
        self._remember(rel, found.key)
        log.debug("indexed %s: %d chunks", rel, len(chunks))
        return True

    def files_now(self) -> list[str]:
        """The indexable files now: ``MEMORY.md`` and the daily files."""
        return sorted(self.scan())

    def scan(self) -> dict[str, Hashable]:
        """``rel -> change key`` of the indexable files (no hashing; one read on PostgreSQL)."""
        found = self.files.scan_with(DAILY_DIR, [CORE_FILE])
        return {rel: stat.key for rel, stat in found.items() if rel == CORE_FILE or is_indexed_path(rel)}

    def refresh(self, present: dict[str, Hashable] | None = None) -> list[str]:
        """Bring the index up to date with the files (``present``: :meth:`scan` just taken, else
        taken here); returns the paths whose index changed."""
        present = self.scan() if present is None else present
        changed: list[str] = []
        with self._lock:
            known = set(self._seen)
            check_db = not self._db_checked or known != set(present)
            self._db_checked = True
        if check_db:  # files appeared or vanished: forget indexed files that are gone
            for rel in self.repo.indexed_paths(self.user_id):
                if is_indexed_path(rel) and rel not in present and self._forget(rel):
                    changed.append(rel)
        for rel, key in sorted(present.items()):
            with self._lock:
                unchanged = self._seen.get(rel) == key
            if not unchanged and self.index_rel(rel):
                changed.append(rel)
        if changed:
            log.info("index refreshed from the files: %s", ", ".join(changed))
        return changed

    def reindex(self) -> int:
        """Rebuild the index of every file from scratch; returns the number of files indexed."""
        present = self.files_now()
        for rel in self.repo.indexed_paths(self.user_id):
            if is_indexed_path(rel) and rel not in present:
                self._forget(rel)
        for rel in present:
            self.index_rel(rel, force=True)
        return len(present)

    def _remember(self, rel: str, key: Hashable) -> None:
        with self._lock:
            self._seen[rel] = key

    def _forget(self, rel: str) -> bool:
        with self._lock:
            self._seen.pop(rel, None)
        if self.repo.file_hash(self.user_id, rel) is None:
            return False
        self.repo.forget_file(self.user_id, rel)
        return True
