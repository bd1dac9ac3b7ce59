"""The two scopes of a coding session (R74): the person's and the project's.

- **Person**: ``Scope(coding_person_name(), coding_agent_name)`` (by default the OS user name and
  ``"coding"``): what the person says about themselves (the categories of
  ``coding_person_categories``), which follows them to every repository.
- **Project**: ``Scope("project-" + sha256(key)[:16], coding_agent_name)``: the journal,
  ``MEMORY.md``, plans, summaries and the other categories of what is learned in a repository.

The project key of a working directory, in order (its kind in parentheses):

1. ``root-commit:<sha>`` (``root-commit``): the smallest of ``git rev-list --max-parents=0 HEAD``,
   the same in every clone, worktree and moved copy of the repository. Not used in a shallow
   clone, whose oldest commit is only where the download stopped;
2. ``remote:<url>`` (``remote``): the ``origin`` URL without user, password, query or a trailing
   ``.git``, for a repository without commits (or a shallow clone);
3. ``path:<dir>`` (``path``): the repository's top folder (the nearest folder holding ``.git``),
   or the working directory itself outside any repository (no git run then).

Each git command gets one second (:data:`GIT_TIMEOUT`); no git, a timeout or a refusal (a
repository owned by someone else) falls to the next kind. The result is cached by top folder in
``<root>/agents/projects.json`` (``{"version": 1, "projects": {top: {key, kind, user}}}``), so git
runs once per repository; only a ``path`` key of a repository is asked again (it becomes a
``root-commit`` key with the first commit: memory kept before that stays under the path key).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from tiermem.agents.hook_log import agents_dir
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.config import Settings
    from tiermem.memory import Memory

log = logging.getLogger(__name__)

PROJECTS_FILE = "projects.json"
PROJECT_PREFIX = "project-"
GIT_TIMEOUT = 1.0  # seconds for all git commands of one lookup
KINDS = ("root-commit", "remote", "path")
MAX_CACHED = 10_000  # projects kept in projects.json (the oldest entries go first)

#: Runs ``git ARGS`` in a folder within a timeout: stdout, or ``None`` on any failure.
GitRunner = Callable[[Path, Sequence[str], float], "str | None"]


@dataclass(frozen=True)
class ProjectKey:
    """What identifies the project of a working directory; ``user`` is its scope's user id."""

    key: str  # "root-commit:<sha>" | "remote:<url>" | "path:<dir>"
    kind: str  # one of KINDS
    top: Path  # the repository's top folder (or the working directory outside a repository)

    @property
    def user(self) -> str:
        return PROJECT_PREFIX + hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True)
class CodingScopes:
    """The person and project scopes of one working directory."""

    person: Scope
    project: Scope
    key: ProjectKey


def run_git(folder: Path, args: Sequence[str], timeout: float) -> str | None:
    """``git -C folder ARGS`` (no ``GIT_*`` variables of the caller, no prompt): its stdout, or
    ``None`` when git is missing, fails or runs past ``timeout``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env["GIT_TERMINAL_PROMPT"] = "0"
    try:
        done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=max(timeout, 0.01),
                              env=env, stdin=subprocess.DEVNULL, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    if done.returncode != 0:
        return None
    return done.stdout.decode("utf-8", "replace").strip()


def repository_top(cwd: Path) -> Path | None:
    """The nearest folder at or above ``cwd`` holding ``.git`` (a folder, or a worktree's file)."""
    for folder in (cwd, *cwd.parents):
        if (folder / ".git").exists():
            return folder
    return None


def without_credentials(url: str) -> str:
    """A remote URL without user and password, query and fragment, trailing ``/`` or ``.git``
    (``https://tok@host/o/r.git?x`` -> ``https://host/o/r``); scp-like ``git@host:o/r`` keeps its form."""
    parts = urlsplit(url.strip())
    if parts.scheme and parts.netloc:
        host = parts.netloc.rpartition("@")[2]
        url = urlunsplit((parts.scheme, host, parts.path, "", ""))
    return url.rstrip("/").removesuffix(".git")


def _from_git(top: Path, git: GitRunner, timeout: float) -> ProjectKey:
    deadline = time.monotonic() + timeout

    def ask(*args: str) -> str | None:
        left = deadline - time.monotonic()
        return git(top, args, left) if left > 0 else None

    shallow = ask("rev-parse", "--is-shallow-repository")
    if shallow == "false":
        roots = (ask("rev-list", "--max-parents=0", "HEAD") or "").split()
        if roots:
            return ProjectKey("root-commit:" + min(roots), "root-commit", top)
    remote = ask("config", "--get", "remote.origin.url")
    if remote:
        return ProjectKey("remote:" + without_credentials(remote), "remote", top)
    return ProjectKey(f"path:{top}", "path", top)


def project_key(root: Path, cwd: str | Path, *, git: GitRunner = run_git, timeout: float = GIT_TIMEOUT) -> ProjectKey:
    """The project key of ``cwd`` (see the module docstring), from ``<root>/agents/projects.json``
    when known there; a new key is written to it (a cache that cannot be written is skipped)."""
    folder = Path(os.path.abspath(Path(cwd).expanduser()))
    folder = folder.resolve() if folder.exists() else folder
    top = repository_top(folder)
    if top is None:
        return ProjectKey(f"path:{folder}", "path", folder)
    cache = _read_cache(root)
    entry = cache.get(str(top))
    if isinstance(entry, dict) and entry.get("kind") in ("root-commit", "remote") and isinstance(entry.get("key"), str):
        return ProjectKey(entry["key"], entry["kind"], top)
    found = _from_git(top, git, timeout)
    if entry is None or entry.get("key") != found.key:
        cache.pop(str(top), None)
        cache[str(top)] = {"key": found.key, "kind": found.kind, "user": found.user}
        _write_cache(root, cache)
    return found


def _read_cache(root: Path) -> dict[str, Any]:
    try:
        data = json.loads((agents_dir(root) / PROJECTS_FILE).read_bytes())
    except (OSError, ValueError):
        return {}
    projects = data.get("projects") if isinstance(data, dict) else None
    return dict(projects) if isinstance(projects, dict) else {}


def _write_cache(root: Path, projects: dict[str, Any]) -> None:
    from tiermem.paths import atomic_write

    kept = dict(list(projects.items())[-MAX_CACHED:])
    data = json.dumps({"version": 1, "projects": kept}, indent=1, sort_keys=False).encode("utf-8")
    try:
        atomic_write(agents_dir(root) / PROJECTS_FILE, data + b"\n")
    except Exception as exc:  # a read-only root still answers, git is just asked again next time
        log.debug("cannot write the project cache: %s", exc)


def coding_scopes(root: Path, cwd: str | Path, settings: Settings, *, git: GitRunner = run_git) -> CodingScopes:
    """The person and project scopes of a coding session in ``cwd``."""
    key = project_key(root, cwd, git=git)
    agent = settings.coding_agent_name
    return CodingScopes(Scope(settings.coding_person_name(), agent), Scope(key.user, agent), key)


def open_project(root: Path, cwd: str | Path, *, git: GitRunner = run_git,
                 **overrides: Any) -> tuple[Memory, CodingScopes]:
    """The project ``Memory`` of ``cwd`` alone (a save needs no person scope); the caller closes it."""
    from tiermem.config import load_settings
    from tiermem.memory import Memory

    base = Path(root).expanduser().resolve()
    settings = load_settings(base, {k: v for k, v in overrides.items() if k not in ("llm", "embedder", "clock")})
    scopes = coding_scopes(base, cwd, settings, git=git)
    return Memory(base, user_id=scopes.project.user_id, agent_name=scopes.project.agent_name, **overrides), scopes


def open_scopes(root: Path, cwd: str | Path, *, git: GitRunner = run_git,
                **overrides: Any) -> tuple[Memory, Memory, CodingScopes]:
    """The person and project ``Memory`` of ``cwd`` under ``root`` (each its own, so neither
    builds the other's providers), with the same settings ``overrides``; the caller closes both."""
    from tiermem.memory import Memory

    project, scopes = open_project(root, cwd, git=git, **overrides)
    base = Path(root).expanduser().resolve()
    try:
        person = Memory(base, user_id=scopes.person.user_id, agent_name=scopes.person.agent_name, **overrides)
    except BaseException:
        project.close()
        raise
    return person, project, scopes
