"""Saves a hook left unfinished, for the resident server to finish (P8).

With no resident server, a stop hook journals what its fraction of a second allows (a 2,000-message
transcript takes seconds) and starts the server; the rest is left as a request in
``<root>/agents/pending-saves/<client>-<session>.json`` (``{client, session_id, cwd,
transcript_path}``, ``0600``). The server looks for these requests at each tick
(:meth:`tiermem.agents.residents.Residents.tick`) and saves each session from its cursor, as for
``POST /save``, then removes the request. A later hook's save of the session (the next Stop) reads
from the same cursor, so whichever comes first journals the rest and the other finds nothing new.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from tiermem.agents.hook_log import agents_dir
from tiermem.agents.session_state import state_path

PENDING_DIR = "pending-saves"
MAX_TAKEN = 64  # requests one look takes (the rest wait for the next)
MAX_REQUEST_BYTES = 64 * 1024


@dataclass(frozen=True)
class PendingSave:
    """The save a hook left unfinished: which session, where, and its transcript."""

    client: str
    session_id: str
    cwd: str
    transcript_path: str


def pending_path(root: Path, client: str, session_id: str) -> Path:
    """The request file of a session (named as its state file)."""
    return agents_dir(Path(root)) / PENDING_DIR / state_path(Path(root), client, session_id).name


def leave(root: Path, request: PendingSave) -> None:
    """Leave ``request`` for the resident server (written atomically, ``0600``)."""
    from tiermem.paths import atomic_write

    atomic_write(pending_path(root, request.client, request.session_id),
                 json.dumps(asdict(request), ensure_ascii=False).encode("utf-8"))


def clear(root: Path, client: str, session_id: str) -> None:
    """Remove the session's request (done, or nothing left to do)."""
    pending_path(root, client, session_id).unlink(missing_ok=True)


def waiting(root: Path, limit: int = MAX_TAKEN) -> list[PendingSave]:
    """The requests left, oldest first; a file that is not a request is removed."""
    folder = agents_dir(Path(root)) / PENDING_DIR
    try:
        files = sorted((entry for entry in folder.iterdir() if entry.suffix == ".json"),
                       key=lambda entry: entry.stat().st_mtime)
    except OSError:
        return []
    found: list[PendingSave] = []
    for path in files[:limit]:
        request = _read(path)
        if request is None:
            path.unlink(missing_ok=True)
        else:
            found.append(request)
    return found


def _read(path: Path) -> PendingSave | None:
    try:
        with path.open("rb") as handle:
            data = json.loads(handle.read(MAX_REQUEST_BYTES + 1))
        fields = [data[name] for name in ("client", "session_id", "cwd", "transcript_path")]
    except (OSError, ValueError, TypeError, KeyError, RecursionError):
        return None
    if not all(isinstance(value, str) and value for value in fields):
        return None
    return PendingSave(*fields)
