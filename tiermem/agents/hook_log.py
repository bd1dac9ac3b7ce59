"""The hook log: one line per coding-agent hook that failed or ran past its budget (R73).

``<root>/agents/hooks.log`` (``0600``, in a ``0700`` folder), one line each::

    2026-03-14T09:30:00Z claude-code Stop session=7938e26c-... what=StorageError: database is locked

A hook never reports to the client (it exits 0 with nothing on stdout), so this file is where a
person, or ``tiermem doctor``, sees what went wrong. It stays under :data:`MAX_BYTES`: past it the
older half is dropped. Writing it never raises: a root that cannot be written loses the line.
"""

from __future__ import annotations

import contextlib
import os
from datetime import UTC, datetime
from pathlib import Path

AGENTS_DIR = "agents"  # <root>/agents: the coding agents' state (hook log, sessions, server, project keys)
LOG_FILE = "hooks.log"
MAX_BYTES = 256 * 1024
MAX_WHAT_CHARS = 500


def agents_dir(root: Path) -> Path:
    """``<root>/agents``, where the coding agents' state lives."""
    return Path(root) / AGENTS_DIR


def log_path(root: Path) -> Path:
    return agents_dir(root) / LOG_FILE


def _field(text: object, limit: int) -> str:
    one = " ".join(str(text).split())  # one line: newlines and tabs of a message become spaces
    return one if len(one) <= limit else one[: limit - 1] + "…"


def log_line(when: datetime, client: str, event: str, session: str | None, what: str) -> str:
    """The line for one failure (secrets redacted, one line, bounded)."""
    from tiermem.redact import redact

    stamp = when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    text = f"{stamp} {_field(client, 40)} {_field(event, 40)} session={_field(session or '-', 80)}" \
           f" what={_field(what, MAX_WHAT_CHARS)}"
    return redact(text)


def write(root: Path, client: str, event: str, session: str | None, what: str,
          when: datetime | None = None) -> bool:
    """Append one line to the hook log; False (and nothing raised) when it cannot be written."""
    try:
        line = log_line(when or datetime.now(UTC), client, event, session, what) + "\n"
        from tiermem.paths import make_dirs, open_private

        make_dirs(agents_dir(root))
        path = log_path(root)
        fd = open_private(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            os.write(fd, line.encode("utf-8", "backslashreplace"))
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > MAX_BYTES:
            _trim(path)
        return True
    except Exception:
        return False


def _trim(path: Path) -> None:
    """Keep the newer half of the log (whole lines)."""
    from tiermem.paths import atomic_write

    with contextlib.suppress(Exception):
        data = path.read_bytes()
        rest = data[-(MAX_BYTES // 2):]
        cut = rest.find(b"\n")
        atomic_write(path, rest[cut + 1:] if cut >= 0 else b"")


class HookLogSummary:
    """What the hook log holds: how many lines, and the last ones. (A plain class: ``dataclasses``
    costs every hook 15 ms of imports.)"""

    __slots__ = ("count", "last")

    def __init__(self, count: int, last: list[str]) -> None:
        self.count = count
        self.last = last

    @property
    def empty(self) -> bool:
        return self.count == 0


def summary(root: Path, last: int = 3) -> HookLogSummary:
    """The number of lines in the hook log and its ``last`` lines (an absent log is empty)."""
    try:
        lines = [line for line in log_path(root).read_text("utf-8", "replace").splitlines() if line.strip()]
    except OSError:
        return HookLogSummary(0, [])
    return HookLogSummary(len(lines), lines[-last:] if last > 0 else [])
