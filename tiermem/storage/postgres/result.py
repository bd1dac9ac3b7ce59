"""A PostgreSQL statement's result as the repositories read it (``fetchone``, ``fetchall``, ``rowcount``)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any


class Result:
    """A statement's rows, fetched at once (the connection went back to the pool), or, for a statement
    queued in a transaction's pipeline, when first read (``load`` waits for the server then)."""

    def __init__(self, rows: list[Any], rowcount: int, load: Callable[[], tuple[list[Any], int]] | None = None) -> None:
        self._rows = rows
        self._at = 0
        self._rowcount = rowcount
        self._load = load

    def _ready(self) -> list[Any]:
        if self._load is not None:
            load, self._load = self._load, None
            self._rows, self._rowcount = load()
        return self._rows

    @property
    def pending(self) -> bool:
        """Whether the rows are still to be fetched (a queued statement's)."""
        return self._load is not None

    def load(self) -> Result:
        """Wait for the rows now (a queued statement's error is raised here)."""
        self._ready()
        return self

    @property
    def rowcount(self) -> int:
        self._ready()
        return self._rowcount

    def fetchone(self) -> Any:
        rows = self._ready()
        if self._at >= len(rows):
            return None
        self._at += 1
        return rows[self._at - 1]

    def fetchall(self) -> list[Any]:
        rest = self._ready()[self._at:]
        self._at = len(self._rows)
        return rest

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())
