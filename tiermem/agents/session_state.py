"""What tiermem keeps per coding-agent session, in ``<root>/agents/sessions/<client>-<session>.json``:
where the last read of its transcript stopped (:class:`~tiermem.agents.transcript.Cursor`) and
what memory the session was given already (fact ids and note refs, :mod:`tiermem.agents.inject`).

The file is written whole and atomically (``0600``, in ``0700`` folders); a missing or unreadable
one is a fresh state — the transcript is then read again from its start, which the journal's
position digests make harmless (R9), and memory may be given once more.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiermem.agents.hook_log import agents_dir
from tiermem.agents.transcript import Cursor

SESSIONS_DIR = "sessions"
VERSION = 1
_SAFE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@-]{0,95}$")


def state_path(root: Path, client: str, session_id: str) -> Path:
    """The session's file: ``<client>-<session_id>.json``, or a digest of them where the session id
    is not a plain file name."""
    name = f"{client}-{session_id}"
    if not _SAFE_NAME_RE.match(name) or ".." in name:
        name = f"{client[:32]}-h{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:40]}"
    return agents_dir(Path(root)) / SESSIONS_DIR / f"{name}.json"


@dataclass
class SessionState:
    """One session's state; :meth:`load` it, change it, :meth:`save` it."""

    path: Path
    cursor: Cursor = field(default_factory=Cursor)
    given: set[str] = field(default_factory=set)

    @classmethod
    def load(cls, root: Path, client: str, session_id: str) -> SessionState:
        """The saved state of the session, or a fresh one (no file, or one that cannot be read)."""
        path = state_path(root, client, session_id)
        try:
            data = json.loads(path.read_bytes())
            return cls(path, _cursor(data["cursor"]), _given(data["given"]))
        except (OSError, ValueError, TypeError, KeyError, RecursionError):
            return cls(path)

    def save(self) -> None:
        """Write the state (atomically, ``0600``)."""
        from tiermem.paths import atomic_write

        cursor = self.cursor
        data = {"version": VERSION,
                "cursor": {"offset": cursor.offset, "messages": cursor.messages, "head": cursor.head,
                           "recent": [list(pair) for pair in cursor.recent]},
                "given": sorted(self.given)}
        atomic_write(self.path, json.dumps(data, ensure_ascii=False).encode("utf-8"))

    def transcript_grew(self, transcript: Path) -> bool:
        """True when the transcript's size is not where the cursor stands (it grew, or shrank or was
        replaced); False when it is, or when there is no such file."""
        try:
            return os.stat(transcript).st_size != self.cursor.offset
        except OSError:
            return False


def _cursor(data: Any) -> Cursor:
    offset, messages, head, recent = data["offset"], data["messages"], data["head"], data["recent"]
    if not (_count(offset) and _count(messages) and isinstance(head, str) and isinstance(recent, list)):
        raise ValueError("not a cursor")
    pairs = tuple((str(key), int(n)) for key, n in recent if isinstance(key, str) and _count(n))
    return Cursor(offset, messages, head, pairs)


def _given(data: Any) -> set[str]:
    if not isinstance(data, list):
        raise ValueError("not a list")
    return {item for item in data if isinstance(item, str)}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
