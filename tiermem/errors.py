"""The one error tree of tiermem.

Every error tiermem raises on purpose is a :class:`TiermemError`. Errors caused by the caller's
input are also ``ValueError`` (or ``KeyError`` for unknown ids) so that ordinary ``except``
clauses keep working. Foreign errors (SDKs, sqlite3) are converted at the boundary with
``raise ... from exc``.
"""

from __future__ import annotations


class TiermemError(Exception):
    """Base class of every error tiermem raises."""


class InvalidInput(TiermemError, ValueError):
    """The caller passed a value tiermem cannot accept; nothing was changed."""


class FactNotFound(TiermemError, KeyError):
    """No fact with this id exists in the scope."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "fact not found"


class NotFound(TiermemError, KeyError):
    """A plan, version or other stored object with this id does not exist."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else "not found"


class ConfigError(TiermemError):
    """The configuration (arguments, environment, tiermem.toml) is invalid."""


class StorageError(TiermemError):
    """The database could not be read or written."""


class StoreDamaged(StorageError):
    """The database file is damaged: truncated, not a SQLite file, failing SQLite's integrity
    check, or emptied (zero bytes) beside existing Daily files or ``MEMORY.md``. Nothing was
    written to it; ``tiermem doctor --repair`` rebuilds the store beside it and keeps it as
    ``tiermem.db.damaged-<time>``. ``path`` is the file, ``reason`` what is wrong with it."""

    def __init__(self, message: str, path: object = None, reason: str = "") -> None:
        super().__init__(message)
        self.path = path
        self.reason = reason


class UnsafePath(InvalidInput):
    """A file or folder inside the memory root is a symbolic link that leads outside it (a
    ``users/<id>`` folder, ``memory/``, a Daily file, ``MEMORY.md``, the database ...). tiermem
    refuses to read or write through it unless the setting ``allow_symlinks = true``; nothing was
    read or written. ``path`` is the link (or the path that passes through it)."""

    def __init__(self, message: str, path: object = None) -> None:
        super().__init__(message)
        self.path = path


class ProviderError(TiermemError):
    """An LLM or embedding provider failed (after its retries)."""


class ExtractionError(TiermemError):
    """An LLM reply could not be turned into facts; ``raw`` holds the reply."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class DreamError(TiermemError):
    """A Deep Dream could not run (lock held, no LLM, ...)."""


class ImportConflict(TiermemError):
    """An imported id already exists with different content."""
