"""What ``tiermem doctor`` found and what ``--repair`` did.

A *problem* is something wrong that tiermem will not fix by itself (a damaged database, an index
that disagrees with the files, files other users can read, a symlink out of the root, a queue
claim nobody holds any more). A *notice* is worth knowing but not damage (an index that is merely
behind the files: ``tiermem reindex`` or the next search catches up). *Unchecked* lists what could
not be looked at, and why (no store, a schema newer than this tiermem, a locked file).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Repairs a check can ask for (what ``repair`` will do).
REBUILD = "rebuild"  # a new database beside the damaged one, rows salvaged, then swapped in
REINDEX = "reindex"  # the search index of the Markdown files, rebuilt in place
MODES = "modes"  # 0600 on files, 0700 on folders
QUEUE = "queue"  # claims of processes that are gone go back to pending
MARKS = "marks"  # damaged consolidation marks are dropped (retention then keeps those days until the next dream)


@dataclass
class DoctorReport:
    """The result of :func:`tiermem.doctor.check`. ``exit_code``: 0 healthy, 1 problems, 2 could not check."""

    root: Path
    checked: list[str] = field(default_factory=list)  # the checks that ran: "integrity", "schema", ...
    problems: list[str] = field(default_factory=list)  # one line each: what is wrong and how to fix it
    notices: list[str] = field(default_factory=list)  # not damage (an index merely behind, ...)
    unchecked: list[str] = field(default_factory=list)  # what could not be checked, and why
    repairs: set[str] = field(default_factory=set)  # what ``repair`` would do (REBUILD, REINDEX, ...)
    schema_too_new: bool = False
    #: a database server's store (PostgreSQL): its URL without the password, schema version,
    #: extension and rows per table; empty for the SQLite file under the root
    database: dict[str, Any] = field(default_factory=dict)
    #: the embedder model the search vectors were made with (``None``: none yet); plain ``local``
    #: keeps using it (issue 16: a store indexed with fp32 MiniLM stays fp32 until a reindex)
    vector_model: str | None = None

    @property
    def ok(self) -> bool:
        """Everything was checked and nothing is wrong."""
        return not self.problems and not self.unchecked

    @property
    def exit_code(self) -> int:
        return 1 if self.problems else 2 if self.unchecked else 0

    def problem(self, text: str, repair: str | None = None) -> None:
        self.problems.append(text)
        if repair is not None:
            self.repairs.add(repair)

    def to_dict(self) -> dict[str, Any]:
        data = {"root": str(self.root), "ok": self.ok, "exit_code": self.exit_code, "checked": list(self.checked),
                "problems": list(self.problems), "notices": list(self.notices), "unchecked": list(self.unchecked),
                "repairs": sorted(self.repairs)}
        if self.database:
            data["database"] = dict(self.database)
        if self.vector_model is not None:
            data["vector_model"] = self.vector_model
        return data


@dataclass
class RepairReport:
    """The result of :func:`tiermem.doctor.repair`: what was done, then doctor's check of the result."""

    root: Path
    before: DoctorReport
    after: DoctorReport
    actions: list[str] = field(default_factory=list)  # one line per thing done
    rebuilt: bool = False  # a new database was built beside the old one (or where none was) and swapped in
    damaged_copy: Path | None = None  # where the damaged database was kept (when it was rebuilt)
    salvaged: dict[str, int] = field(default_factory=dict)  # rows read back from it, per table
    unreadable: list[str] = field(default_factory=list)  # tables that could not be read back whole

    @property
    def ok(self) -> bool:
        return self.after.ok

    def to_dict(self) -> dict[str, Any]:
        return {"root": str(self.root), "ok": self.ok, "actions": list(self.actions), "rebuilt": self.rebuilt,
                "damaged_copy": str(self.damaged_copy) if self.damaged_copy else None,
                "salvaged": dict(self.salvaged), "unreadable": list(self.unreadable),
                "before": self.before.to_dict(), "after": self.after.to_dict()}
