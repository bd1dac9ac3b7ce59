"""Merging tiermem's entries into a coding agent's config files, and taking them out again.

A client's config writer (``claude_code.write_config`` ...) gets a :class:`SetupPlace` and
describes what it wants as *edits*, each about one part of one file: our hook handlers in a JSON
``hooks`` object, our MCP server, a value in a JSON list, a switch that must be on (the edits of
:mod:`tiermem.agents.config_json` and :mod:`tiermem.agents.config_toml`). :func:`plan_files`
reads each file once, applies its edits in order and says what changed; :func:`write_files`
writes the changed files atomically.

The rules every edit keeps:

- everything that is not ours stays as it was, in its place (JSON key order kept, TOML through
  ``tomlkit`` with its comments and layout);
- a second run changes nothing, and a file nothing changed in is not written at all (so it stays
  byte-identical);
- ``remove`` takes out what is ours and the containers that became empty, nothing else. Ours is:
  a hook handler whose command holds the marker `` hook <client> ``; the MCP server named
  ``tiermem`` whose command is a tiermem command; a TOML key or table whose comment starts with
  ``tiermem setup`` (a value we changed says ``tiermem setup; was <old value>`` and gets it back);
- a file that cannot be parsed, or whose parts have the wrong type, is an :class:`InvalidInput`
  naming the file, and no file is written;
- a file that does not exist is created (``0600``, missing folders ``0700``); an existing one
  keeps its mode (and its owner, when we may set it); a symbolic link is written through, so a
  config kept in a dotfiles repository stays a link.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any, Protocol

from tiermem.errors import InvalidInput

ADDED, UPDATED, REMOVED, UNCHANGED = "added", "updated", "removed", "unchanged"
TOML_MARK = "tiermem setup"  # the comment on TOML keys and tables that setup wrote
NEW_FILE_MODE = 0o600


@dataclass(frozen=True)
class Change:
    """What happened to one part of a file: ``item`` (``hooks.SessionStart``,
    ``mcpServers.tiermem``) and ``status`` (added, updated, removed, unchanged)."""

    item: str
    status: str


class FileFormat(Protocol):
    """How a kind of config file is parsed and written back."""

    name: str

    def load(self, text: str, path: Path) -> Any: ...

    def dump(self, doc: Any, original: str | None) -> str: ...

    def is_empty(self, doc: Any) -> bool: ...


class Edit(Protocol):
    """One part of one file that setup adds (``remove=False``) or takes out (``remove=True``).
    ``docs`` holds the documents of the files already edited in this run, by path."""

    @property
    def path(self) -> Path: ...

    @property
    def format(self) -> FileFormat: ...

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]: ...


@dataclass(frozen=True)
class SetupPlace:
    """What a config writer builds from: the command that runs tiermem (absolute), the memory
    root (absolute), the project folder (``None``: the user's global config), and the home
    folder and environment the client's own config paths come from."""

    tiermem: tuple[str, ...]
    root: Path
    project: Path | None
    home: Path
    env: Mapping[str, str]

    def hook_command(self, client: str, event: str) -> str:
        """The shell command of one hook: ``<tiermem> --root <root> hook <client> <event>``, quoted."""
        import shlex

        return shlex.join([*self.tiermem, "--root", str(self.root), "hook", client, event])

    def mcp_argv(self) -> list[str]:
        """The MCP server's command line: ``<tiermem> --root <root> mcp --coding-agent`` (the
        project scope of the folder the client starts it in, and the person's: R74)."""
        return [*self.tiermem, "--root", str(self.root), "mcp", "--coding-agent"]


def hook_marker(client: str) -> str:
    """What every hook command of ``client`` that setup wrote holds (and no other command does)."""
    return f" hook {client} "


@dataclass(frozen=True)
class FilePlan:
    """One file's outcome: its bytes before (``None``: it did not exist) and after (``None``: it
    goes away, nothing of the user's being left in it), and the changes."""

    path: Path
    changes: tuple[Change, ...]
    before: bytes | None
    after: bytes | None

    @property
    def changed(self) -> bool:
        return self.before != self.after

    @property
    def outcome(self) -> str:
        """created, deleted, changed or unchanged."""
        if not self.changed:
            return "unchanged"
        if self.before is None:
            return "created"
        return "deleted" if self.after is None else "changed"


@dataclass(frozen=True)
class ConfigPlan:
    """What a client's config writer wants: the edits, in order, and what to tell the user."""

    edits: tuple[Edit, ...]
    notes: tuple[str, ...] = field(default=())


# ----------------------------------------------------------------------------- files


def bad_config(path: Path, what: str) -> InvalidInput:
    """The error for a config file setup cannot edit: it names the file and says nothing changed."""
    return InvalidInput(f"{path}: {what}; tiermem setup changed nothing (fix the file and run it again)")


def plan_files(edits: Sequence[Edit], remove: bool) -> list[FilePlan]:
    """Read every file the edits name (once, in order of first mention), apply the edits, and
    say what each file becomes. Writes nothing; a malformed file is an :class:`InvalidInput`."""
    order: list[Path] = []
    formats: dict[Path, FileFormat] = {}
    for edit in edits:
        if edit.path not in formats:
            order.append(edit.path)
            formats[edit.path] = edit.format
        elif formats[edit.path] is not edit.format:
            raise bad_config(edit.path, f"edited as both {formats[edit.path].name} and {edit.format.name}")
    texts = {path: _read_text(path) for path in order}
    docs: dict[Path, Any] = {path: formats[path].load(texts[path] or "", path) for path in order}
    changes: dict[Path, list[Change]] = {path: [] for path in order}
    for edit in edits:
        changes[edit.path].extend(edit.apply(docs[edit.path], remove, docs))
    return [_file_plan(path, formats[path], texts[path], docs[path], changes[path], remove) for path in order]


def _file_plan(path: Path, fmt: FileFormat, text: str | None, doc: Any, changes: list[Change],
               remove: bool) -> FilePlan:
    before = None if text is None else text.encode("utf-8")
    if all(change.status == UNCHANGED for change in changes):
        return FilePlan(path, tuple(changes), before, before)
    if remove and fmt.is_empty(doc) and not path.is_symlink():
        return FilePlan(path, tuple(changes), before, None)
    return FilePlan(path, tuple(changes), before, fmt.dump(doc, text).encode("utf-8"))


def _read_text(path: Path) -> str | None:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise bad_config(path, f"not UTF-8 text ({exc.reason} at byte {exc.start})") from exc


def write_files(plans: Sequence[FilePlan]) -> None:
    """Write (or delete) the files whose content changed."""
    for plan in plans:
        if not plan.changed:
            continue
        if plan.after is None:
            plan.path.unlink(missing_ok=True)
        else:
            write_atomic(plan.path, plan.after)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace the file ``path`` leads to (through symbolic links) with ``data`` via a temporary
    file in its folder: fsync, the old mode (and owner) or ``0600`` for a new file, rename."""
    import tempfile

    from tiermem.paths import make_dirs, sync_dir  # not at import: hooks load the client modules

    target = Path(os.path.realpath(path))
    try:
        info: os.stat_result | None = target.stat()
    except FileNotFoundError:
        info = None
        make_dirs(target.parent)
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, NEW_FILE_MODE if info is None else stat.S_IMODE(info.st_mode))
        if info is not None and hasattr(os, "chown") and (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(OSError):  # only root may give a file away; others keep theirs
                os.chown(temp, info.st_uid, info.st_gid)
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    sync_dir(target.parent)


def is_tiermem_command(argv: Sequence[Any]) -> bool:
    """True when the command runs tiermem: the ``tiermem`` executable, or ``python -m tiermem``."""
    if not argv or not all(isinstance(arg, str) for arg in argv):
        return False
    if PurePath(argv[0]).name.lower() in ("tiermem", "tiermem.exe"):
        return True
    return list(argv[1:3]) == ["-m", "tiermem"]


def is_tiermem_server(entry: Any) -> bool:
    """True when an MCP server entry (``command`` + ``args``) runs tiermem."""
    if not isinstance(entry, Mapping):
        return False
    args = entry.get("args") or []
    return isinstance(args, list) and is_tiermem_command([entry.get("command"), *args])
