"""What an import did with each section of the document: rows added, rows there already, rows refused.

:class:`ImportCounts` is what :meth:`Memory.import_ <tiermem.Memory.import_>` returns: the rows
(or files) of each section in the document, a ``dict`` as before, and in
:attr:`ImportCounts.restored` what became of them (:class:`Restored`). A second import of the
same file adds nothing and finds everything there, so the two are told apart.

How it is counted: the rows a section's table holds before and after the section is restored
(the restore runs in the import's transaction), and for files the writes the import planned. A
row that was there is "already there" whether or not ``replace`` overwrote it (the database side
does not tell the two apart; files do, and count an overwritten file as there too, for one
meaning). Rows of a section an older export holds and this store no longer keeps (whole-day
consolidation marks) are checked, counted and refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Restored:
    """What became of the ``rows`` (or files) of one section: ``added``, ``refused`` (checked, not
    kept), and the rest, :attr:`already_there`."""

    rows: int
    added: int = 0
    refused: int = 0

    @property
    def already_there(self) -> int:
        return self.rows - self.added - self.refused

    def to_dict(self) -> dict[str, int]:
        return {"rows": self.rows, "added": self.added, "already_there": self.already_there,
                "refused": self.refused}


class ImportCounts(dict[str, int]):
    """Rows (or files) per section of the imported document (``{"facts": 12, ..., "files": 9}``),
    and :attr:`restored`: what became of them, per section."""

    def __init__(self, restored: Mapping[str, Restored]) -> None:
        super().__init__({name: outcome.rows for name, outcome in restored.items()})
        self.restored: dict[str, Restored] = dict(restored)

    def by_outcome(self) -> dict[str, dict[str, int]]:
        """``{"rows": ..., "added": ..., "already_there": ..., "refused": ...}``, each a map of the
        sections with a count other than zero (``rows``: every section), as ``--json`` prints it."""
        out: dict[str, dict[str, int]] = {"rows": dict(self)}
        for what in ("added", "already_there", "refused"):
            out[what] = {name: n for name, outcome in self.restored.items() if (n := getattr(outcome, what))}
        return out
