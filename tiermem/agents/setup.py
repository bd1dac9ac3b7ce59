"""``tiermem setup CLIENT`` (R71): register tiermem's hooks and MCP server in a coding agent's
own config, merged with what is there; ``remove`` takes out exactly that.

The commands written name the tiermem executable by absolute path (:func:`tiermem_command`) and
pass ``--root`` explicitly, so they work whatever the client's PATH and working directory. The
memory root defaults to one per person (:func:`default_root`); the project of a session comes
from its working directory (R74), so one global setup serves every repository. Where each
client's config lives is its module's ``write_config`` (:mod:`tiermem.agents.claude_code`, ...).
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.agents.clients import client
from tiermem.agents.config_files import FilePlan, SetupPlace, plan_files, write_files
from tiermem.errors import InvalidInput

SCRIPT_NAMES = ("tiermem", "tiermem.exe")


@dataclass(frozen=True)
class SetupReport:
    """What setup changed (``dry_run``: would change) in each file, the memory root, the command
    to look at it, and what the user should know."""

    client: str
    label: str
    project: Path | None  # None: the user's global config
    root: Path
    dry_run: bool
    remove: bool
    files: tuple[FilePlan, ...]
    ui_command: str
    notes: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return any(plan.changed for plan in self.files)

    def to_json(self) -> dict[str, Any]:
        return {
            "client": self.client,
            "scope": "global" if self.project is None else "project",
            "project": None if self.project is None else str(self.project),
            "root": str(self.root),
            "dry_run": self.dry_run,
            "remove": self.remove,
            "changed": self.changed,
            "files": [{"path": str(plan.path), "outcome": plan.outcome,
                       "changes": [{"item": c.item, "status": c.status} for c in plan.changes]}
                      for plan in self.files],
            "ui": self.ui_command,
            "notes": list(self.notes),
        }


def default_root(env: Mapping[str, str] | None = None) -> Path:
    """The memory root of a person: ``$TIERMEM_HOME``, else the per-user data folder
    (``~/.local/share/tiermem`` on Linux)."""
    chosen = (os.environ if env is None else env).get("TIERMEM_HOME")
    if chosen:
        return Path(chosen).expanduser()
    from platformdirs import user_data_dir

    return Path(user_data_dir("tiermem", appauthor=False))


def tiermem_command(argv0: str | None = None, executable: str | None = None) -> list[str]:
    """The command that runs this tiermem, by absolute path: the running ``tiermem`` script,
    else the ``tiermem`` script beside the running Python (its venv), else ``python -m tiermem``."""
    script = Path(sys.argv[0] if argv0 is None else argv0)
    if script.name in SCRIPT_NAMES and script.is_file():
        return [str(script.resolve())]
    python = Path(sys.executable if executable is None else executable).absolute()  # not resolved: the venv's
    found = shutil.which("tiermem", path=str(python.parent))
    if found:
        return [str(Path(found).absolute())]
    return [str(python), "-m", "tiermem"]


def setup(client_name: str, project: Path | None, root: Path, dry_run: bool = False, remove: bool = False, *,
          tiermem: Sequence[str] | None = None, home: Path | None = None,
          env: Mapping[str, str] | None = None) -> SetupReport:
    """Register (or with ``remove``, unregister) tiermem in ``client_name``'s config: for the
    project folder ``project``, or the user's global config when ``None``. ``dry_run`` writes
    nothing. ``tiermem`` (the command), ``home`` and ``env`` default to this process's. An unknown
    client, a missing project folder or a config file setup cannot edit is an ``InvalidInput``,
    and then no file is written."""
    agent = client(client_name)
    place = SetupPlace(tiermem=tuple(tiermem or tiermem_command()), root=_absolute(root, "memory root"),
                       project=None if project is None else _folder(project),
                       home=Path.home() if home is None else home, env=os.environ if env is None else env)
    plan = agent.config(place)
    files = plan_files(plan.edits, remove)
    if not dry_run:
        write_files(files)
    notes = ((f"The memory in {place.root} stays; delete that folder to forget it.",) if remove
             else (*agent.notes, *plan.notes))
    return SetupReport(client=agent.name, label=agent.label, project=place.project, root=place.root,
                       dry_run=dry_run, remove=remove, files=tuple(files),
                       ui_command=shlex.join([*place.tiermem, "--root", str(place.root), "ui"]), notes=notes)


def _absolute(path: Path, what: str) -> Path:
    absolute = Path(os.path.abspath(path.expanduser()))
    if absolute.exists() and not absolute.is_dir():
        raise InvalidInput(f"the {what} {absolute} is not a folder")
    return absolute


def _folder(project: Path) -> Path:
    folder = _absolute(project, "project")
    if not folder.is_dir():
        raise InvalidInput(f"the project folder {folder} does not exist")
    return folder.resolve()
