"""Reading a coding agent's transcript (JSON Lines) from where the last read stopped.

A client appends one JSON object per line to its transcript while the session runs (Claude Code's
``~/.claude/projects/.../<session>.jsonl``, Codex's rollout file, Gemini CLI's chat file). A hook
reads what was added since its last read, turns each line into chat messages with the client's
:class:`~tiermem.agents.clients.TranscriptLine` function, and journals them at their positions.

- **Cursor** (:class:`Cursor`): the byte offset of the first line not read yet, the number of
  messages the lines before it gave (the position of the next message), a digest of the file's
  first bytes (:data:`HEAD_BYTES`, to notice a replaced file) and, for clients that rewrite a
  message in place (:data:`Cursor.recent`), how many messages the recent rewritable lines gave.
- **Bounded memory**: lines are read one at a time; a line longer than ``max_line_bytes`` is
  skipped (counted in ``long_lines``) without being held whole; one read returns at most
  ``max_messages`` messages or ``max_bytes`` of lines (``more`` says there is more to read).
- **A line still being written** (no newline yet: the client is writing it) is left for the next
  read: the cursor stays before it. A complete line that is not a JSON object, or that the
  client's function cannot read, is skipped and counted (``bad_lines``); it gives no message, so
  positions do not move when it is read again.
- **A transcript that shrank or was replaced** (the offset is past its end, or its first bytes
  differ) is read again from the start (``restarted``): the journal's position digests (R9) make
  the messages journaled before a no-op.
- **Rewritten lines**: a client may write a message again when it changes (Gemini CLI adds tool
  calls to a model message it wrote before). Its ``line_key`` names such lines; a line whose key
  was seen recently gives only the messages beyond those its earlier version gave.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tiermem.agents.context_text import INJECTED_PREFIX as INJECTED_PREFIX  # re-exported
from tiermem.agents.context_text import is_context_text as is_context_text  # re-exported
from tiermem.errors import InvalidInput, NotFound, TiermemError

if TYPE_CHECKING:
    from tiermem.agents.clients import TranscriptLine

MAX_LINE_BYTES = 8 * 1024 * 1024  # a longer line is skipped and counted, never held whole
HEAD_BYTES = 4096  # the prefix whose digest tells a replaced transcript from a grown one
BATCH_MESSAGES = 1000  # messages one read returns at most
BATCH_BYTES = 16 * 1024 * 1024  # bytes of lines one read consumes at most
RECENT_KEYS = 256  # rewritable lines remembered (a client rewrites a message soon after writing it)
_SKIP_CHUNK = 1024 * 1024
_BAD_LINE = (TiermemError, ValueError, TypeError, LookupError, AttributeError, RecursionError)

LineKey = Callable[[Mapping[str, Any]], "str | None"]  # a rewritable line's message id, else None



@dataclass(frozen=True)
class Cursor:
    """Where the next read of a transcript starts (see the module docstring)."""

    offset: int = 0  # bytes of complete lines read
    messages: int = 0  # messages those lines gave: the position of the next one
    head: str = ""  # sha256 of the first min(offset, HEAD_BYTES) bytes
    recent: tuple[tuple[str, int], ...] = ()  # (key, messages given) of recent rewritable lines, oldest first


@dataclass(frozen=True)
class TranscriptRead:
    """What one read found: ``messages`` at positions ``start.messages`` on."""

    messages: list[dict[str, Any]]
    start: Cursor  # the cursor the read started from (``Cursor()`` when it restarted)
    end: Cursor  # the cursor to keep
    lines: int = 0  # complete lines read (bad and long ones included)
    bad_lines: int = 0  # not a JSON object, or not readable by the client's function
    long_lines: int = 0  # longer than the line limit: skipped unread
    restarted: bool = False  # the transcript shrank or was replaced: read from its start
    more: bool = False  # stopped at the batch limit: read again from ``end``


@dataclass
class _Scan:
    """The state of one read while it runs."""

    offset: int
    messages: int
    recent: dict[str, int]
    found: list[dict[str, Any]] = field(default_factory=list)
    lines: int = 0
    bad: int = 0
    long: int = 0


def read_transcript(path: Path, cursor: Cursor, line_messages: TranscriptLine, *,
                    line_key: LineKey | None = None, max_messages: int = BATCH_MESSAGES,
                    max_bytes: int = BATCH_BYTES, max_line_bytes: int = MAX_LINE_BYTES) -> TranscriptRead:
    """The messages of the lines of ``path`` after ``cursor`` (see the module docstring). A missing
    file is :class:`~tiermem.errors.NotFound`; one that is not a regular file (a FIFO, a folder)
    or cannot be read is :class:`~tiermem.errors.InvalidInput`."""
    with _open(Path(path)) as handle:
        size = os.fstat(handle.fileno()).st_size
        restarted = cursor.offset > size or (cursor.offset > 0 and _head(handle, cursor.offset) != cursor.head)
        start = Cursor() if restarted else cursor
        handle.seek(start.offset)
        scan = _Scan(start.offset, start.messages, dict(start.recent))
        more = False
        while True:
            if len(scan.found) >= max_messages or scan.offset - start.offset >= max_bytes:
                more = True
                break
            if not _next_line(handle, scan, line_messages, line_key, max_line_bytes):
                break
        recent = tuple(scan.recent.items())[-RECENT_KEYS:]
        end = Cursor(scan.offset, scan.messages, _head(handle, scan.offset), recent)
    return TranscriptRead(scan.found, start, end, scan.lines, scan.bad, scan.long, restarted, more)


def _open(path: Path) -> IO[bytes]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise NotFound(f"no transcript at {path}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read the transcript {path}: {exc.strerror or exc}") from exc
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise InvalidInput(f"the transcript {path} is not a regular file")
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _head(handle: IO[bytes], offset: int) -> str:
    """The digest of the file's first ``min(offset, HEAD_BYTES)`` bytes ("" for none)."""
    length = min(offset, HEAD_BYTES)
    if length <= 0:
        return ""
    return hashlib.sha256(os.pread(handle.fileno(), length, 0)).hexdigest()


def _next_line(handle: IO[bytes], scan: _Scan, line_messages: TranscriptLine, line_key: LineKey | None,
               max_line_bytes: int) -> bool:
    """Read one complete line into ``scan``; False at the end (or before a line still being written)."""
    raw = handle.readline(max_line_bytes + 1)
    if not raw:
        return False
    if not raw.endswith(b"\n"):
        if len(raw) <= max_line_bytes:
            return False  # the client is still writing it: the next read takes it whole
        skipped = _skip_rest(handle)
        if skipped is None:
            return False  # a long line still being written: looked at again next time
        scan.offset += len(raw) + skipped
        scan.lines += 1
        scan.long += 1
        return True
    scan.offset += len(raw)
    scan.lines += 1
    read = _line_messages(raw, line_messages, line_key)
    if read is None:
        scan.bad += 1
        return True
    messages, key = read
    if key is not None:
        given = scan.recent.pop(key, 0)
        scan.recent[key] = max(given, len(messages))
        messages = messages[given:]
    scan.found += messages
    scan.messages += len(messages)
    return True


def _skip_rest(handle: IO[bytes]) -> int | None:
    """Skip to just past the next newline in bounded steps; the bytes skipped, or None at the end
    of the file without one."""
    skipped = 0
    while True:
        chunk = handle.readline(_SKIP_CHUNK)
        if not chunk:
            return None
        skipped += len(chunk)
        if chunk.endswith(b"\n"):
            return skipped


def _line_messages(raw: bytes, line_messages: TranscriptLine,
                   line_key: LineKey | None) -> tuple[list[dict[str, Any]], str | None] | None:
    """The messages of one line and its rewrite key; None for a line that cannot be read."""
    try:
        line = json.loads(raw)
        if not isinstance(line, dict):
            return None
        messages = line_messages(line)
        key = line_key(line) if line_key is not None else None
    except _BAD_LINE:
        return None
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return None
    return messages, key if isinstance(key, str) and key else None

