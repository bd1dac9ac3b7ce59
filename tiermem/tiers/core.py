"""The Core file ``MEMORY.md`` (R13): ``- `` bullets, optionally grouped under ``## `` headings.

It is read fresh on every call, so a person's edits are seen at once. The text lives where the
store keeps the user's Markdown (:class:`~tiermem.storage.files.MemoryFiles`):

- **SQLite**: the file under the root *is* ``MEMORY.md``. :meth:`CoreFile.write` replaces it
  atomically (temp file, fsync, rename), so a crash leaves the old or the new file, never half of
  one; the file is ``0600``.
- **PostgreSQL**: the text is a row in the shared database, mirrored to ``MEMORY.md`` under each
  process's root. Every text it ever held is kept: a write keeps the text it replaces as a
  version (``core_versions``, cause ``write``), so the current text plus the versions are the
  whole history. A person may still edit the mirrored file: when Core is read and the mirror's
  bytes are neither the current text nor any text the database held for this user (so not merely
  a mirror another host's write left stale), they are imported as a new text (cause of the kept
  one: ``hand edit``; last write wins), and the mirror is rewritten.

:meth:`CoreFile.rewrite` is the write that always keeps what it replaces (a dream, a rollback,
``tiermem core edit``): the check of the text expected, the kept version and the new text are one
step under the store's ``.core.lock``, on both backends.

With a ``scrub`` (the store's redaction, R68) what :meth:`CoreFile.write` writes is redacted, and
so is what :meth:`CoreFile.read` returns: a secret a person typed into ``MEMORY.md`` by hand stays
in their file (SQLite) but not in anything tiermem derives from it. A ``MEMORY.md`` that is a
symlink leading outside the memory root is refused (see :mod:`tiermem.paths`).
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from tiermem import validate
from tiermem.clock import Clock, SystemClock
from tiermem.errors import InvalidInput, StorageError, TiermemError
from tiermem.paths import CORE_FILE, UserPaths, atomic_write, read_file
from tiermem.storage.sql import user_key
from tiermem.tiers.markdown import fold, parse_records

if TYPE_CHECKING:
    from tiermem.storage.dreams import DreamRepository
    from tiermem.storage.files import MemoryFiles

log = logging.getLogger(__name__)

LOCK_FILE = ".core.lock"
LOCK_TIMEOUT_SECONDS = 120.0
_NESTED_BULLET_RE = re.compile(r"^\s*[-*+][ \t]+(.*\S)\s*$")
MAX_CORE_CHARS = 2_000_000
Locker = Callable[[str, float], AbstractContextManager[Any]]  # (lock name under the root, timeout) -> lock


@dataclass(frozen=True)
class CoreSection:
    """Bullets under one heading (``None`` for those before the first heading)."""

    heading: str | None
    items: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class CoreRewrite:
    """What :meth:`CoreFile.rewrite` replaced: the text before (``""`` when there was none) and
    the version that keeps it (None when nothing was kept)."""

    before: str
    existed: bool
    version_id: int | None


class CoreChanged(TiermemError):
    """``MEMORY.md`` is no longer the text a rewrite expected (a hand edit or another writer)."""


class CoreListener(Protocol):
    def rewritten(self, path: Path) -> None: ...


def parse_core(text: str) -> list[CoreSection]:
    """The sections of a ``MEMORY.md`` text; text that is not a bullet is not an item. An item is
    one line: a bullet's continuation lines (indented or lazy) are folded onto it, and a nested
    bullet (``  - ...``) is an item of its own."""
    sections: list[CoreSection] = []
    for record in parse_records(text):
        if not record.bullet:
            continue
        items = bullet_items(record.text)
        if not items:
            continue
        if not sections or sections[-1].heading != record.heading:
            sections.append(CoreSection(record.heading))
        sections[-1].items.extend(items)
    return sections


def bullet_items(text: str) -> list[str]:
    """The one-line items of one bullet's text: nested bullets split off, whitespace folded."""
    groups: list[list[str]] = [[]]
    for line in text.split("\n"):
        nested = _NESTED_BULLET_RE.match(line)
        if nested is not None and groups[-1]:
            groups.append([nested.group(1)])
        else:
            groups[-1].append(line)
    return [item for item in (fold(" ".join(group)) for group in groups) if item]


def render_core(sections: Sequence[CoreSection]) -> str:
    """``MEMORY.md`` text for ``sections``: ``## heading`` blocks of ``- `` bullets."""
    blocks: list[str] = []
    for section in sections:
        lines = [f"- {fold(item)}" for item in section.items if fold(item)]
        if section.heading:
            lines.insert(0, f"## {fold(section.heading)}")
        if lines:
            blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + "\n" if blocks else ""


def check_text(text: object) -> str:
    """``text`` if it can be ``MEMORY.md`` (a string, not too long, no NUL, valid Unicode)."""
    if not isinstance(text, str):
        raise InvalidInput(f"MEMORY.md text must be a string, got {type(text).__name__}")
    if len(text) > MAX_CORE_CHARS:
        raise InvalidInput(f"MEMORY.md text is {len(text)} characters; the limit is {MAX_CORE_CHARS}")
    if "\x00" in text:
        raise InvalidInput("MEMORY.md text contains NUL characters")
    validate.unicode_text(text, "MEMORY.md text")
    return text


def _decode(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", errors="replace")


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class CoreFile:
    """One user's ``MEMORY.md`` (a bare :class:`UserPaths`: the local file, no versions kept)."""

    def __init__(self, files: MemoryFiles | UserPaths, listener: CoreListener | None = None,
                 scrub: Callable[[str], str] | None = None, *, versions: DreamRepository | None = None,
                 lock: Locker | None = None, clock: Clock | None = None, mirror: bool = True) -> None:
        if isinstance(files, UserPaths):
            from tiermem.storage.sqlite.files import LocalFiles

            files = LocalFiles(files)
        self.files = files
        self.paths = files.paths
        self.listener = listener
        self.scrub = scrub  # e.g. tiermem.redact.redact; None: text is kept as it is
        self.versions = versions  # where replaced texts are kept (None: nowhere)
        self._lock = lock
        self.clock: Clock = clock or SystemClock()
        # the local files are a mirror of the database: keep every text, import hand edits of the mirror
        self.mirrored = not files.durable_files
        self._mirror = mirror and self.mirrored
        #: (change key, bytes) of the stored text when a sync last found the mirror the same
        self._agreed: tuple[Hashable | None, bytes | None] | None = None
        hooks = getattr(files, "on_refresh", None)  # PostgreSQL: the mirror's refresh leaves MEMORY.md to Core
        if hooks is not None:
            hooks[CORE_FILE] = self.sync

    def clean(self, text: str) -> str:
        """``text`` redacted by this file's ``scrub`` (the dream diary uses it too)."""
        return self.scrub(text) if self.scrub is not None else text

    @property
    def path(self) -> Path:
        """The file a person reads and edits (on PostgreSQL: the local mirror)."""
        return self.files.mirror_path(CORE_FILE)

    @property
    def user_id(self) -> str:
        return self.paths.user_id

    # --- reading -------------------------------------------------------------------------------
    def read(self) -> str:
        """The text, redacted by ``scrub``; ``""`` when there is none yet. On PostgreSQL a hand
        edit of the mirror is imported first (:meth:`sync`)."""
        return self.clean(_decode(self._current()[0]))

    def exists(self) -> bool:
        """Whether there is a ``MEMORY.md`` (on PostgreSQL: a current text in the database)."""
        return self.files.stat(CORE_FILE) is not None

    def sections(self) -> list[CoreSection]:
        return parse_core(self.read())

    def items(self) -> list[str]:
        """Every bullet's text, in file order; headings dropped."""
        return [item for section in self.sections() for item in section.items]

    # --- the mirror (PostgreSQL) ---------------------------------------------------------------
    def sync(self, scanned: Mapping[str, Hashable] | None = None) -> bool:
        """Bring the mirrored ``MEMORY.md`` and the database together (nothing to do where the
        file is the store): a hand edit of the mirror is imported as the new text; a missing
        mirror, or one another host's write left stale, is rewritten. True when a hand edit was
        imported. ``scanned``: the stored files' change keys (:class:`~tiermem.storage.files.FileStat`)
        just read by the caller, ``MEMORY.md``'s among them if there is one; when neither its key
        nor the mirror's bytes moved since a sync found the two the same, nothing is read again."""
        if not self._mirror:
            return False
        if scanned is not None and self._agreed == (scanned.get(CORE_FILE), self._read_mirror()):
            return False
        return self._current(scanned)[1]

    def _current(self, scanned: Mapping[str, Hashable] | None = None) -> tuple[bytes | None, bool]:
        """The stored bytes after :meth:`sync`'s work, and whether a hand edit was imported."""
        stored = self.files.read(CORE_FILE)
        if not self._mirror:
            return stored, False
        mirror = self._read_mirror()
        if mirror == stored:
            if scanned is not None:  # read at its key or later: a later key (each change takes a new one) reads again
                self._agreed = (scanned.get(CORE_FILE), stored)
            return stored, False
        if mirror is None or self._known(mirror):
            if stored is not None:
                self._write_mirror(stored)
            return stored, False
        with self._locked():  # again under the lock: another process of this root may have imported it
            stored, mirror = self.files.read(CORE_FILE), self._read_mirror()
            if mirror is None or mirror == stored or self._known(mirror):
                return stored, False
            imported = self._import(mirror)
            return self.files.read(CORE_FILE), imported

    def _read_mirror(self) -> bytes | None:
        try:
            return read_file(self.paths.inside(self.path))
        except FileNotFoundError:
            return None
        except OSError as exc:
            log.warning("cannot read the mirrored %s: %s", self.path, exc)
            return None

    def _known(self, mirror: bytes) -> bool:
        """Whether ``mirror`` is a text the database held for this user (a stale mirror, not an edit)."""
        return self.versions is not None and self.versions.has_text(self.user_id, _sha(mirror))

    def _import(self, mirror: bytes) -> bool:
        """Store the hand-edited mirror as the new text (the text it replaces is kept), then
        rewrite the mirror with what was stored (redacted, with its final newline)."""
        try:
            text = self._prepared(check_text(mirror.decode("utf-8")))
        except (UnicodeDecodeError, InvalidInput) as exc:
            log.warning("the hand edit of %s is not imported (%s); MEMORY.md stays as stored", self.path, exc)
            return False
        data = text.encode("utf-8")
        if data != self.files.read(CORE_FILE):  # not only a final newline or a redaction away
            self._replace(text, "hand edit", keep="always", expect=None, held=True, tell=False)
        if self._read_mirror() != data:
            self._write_mirror(data)
        log.info("imported a hand edit of %s for user %r as the new MEMORY.md", self.path, self.user_id)
        return True

    def _write_mirror(self, data: bytes) -> None:
        try:
            atomic_write(self.paths.inside(self.path), data)
        except StorageError as exc:  # the database is the truth; the next read tries again
            log.warning("cannot refresh the mirrored %s: %s", self.path, exc)

    # --- writing -------------------------------------------------------------------------------
    def write(self, text: str) -> Path:
        """Replace ``MEMORY.md`` with ``text`` (redacted by ``scrub``) atomically and re-index it.
        On PostgreSQL a different text it replaces is kept as a version (cause ``write``)."""
        prepared = self._prepared(check_text(text))
        self.sync()  # a hand edit of the mirror first: it is kept too
        self._replace(prepared, "write", keep="changed" if self.mirrored else "never", expect=None, held=False)
        return self.path

    def rewrite(self, text: str, cause: str, *, expect: str | None = None) -> CoreRewrite:
        """Replace ``MEMORY.md`` with ``text`` and keep the text replaced as a version whose
        ``cause`` says what replaced it ("dream", "rollback", "edit"). With ``expect``, raise
        :class:`CoreChanged` (nothing written) unless the current text is ``expect``: the check,
        the kept version and the new text are one step."""
        prepared = self._prepared(check_text(text))
        self.sync()
        return self._replace(prepared, cause, keep="always", expect=expect, held=False)

    def _prepared(self, text: str) -> str:
        text = self.clean(text)
        return text + "\n" if text and not text.endswith("\n") else text

    def _replace(self, text: str, cause: str, *, keep: str, expect: str | None, held: bool,
                 tell: bool = True) -> CoreRewrite:
        """``keep``: "always", "changed" (a different text that existed) or "never". ``tell``: re-index
        now (an imported hand edit is re-indexed by ``refresh_index``, as a hand edit is on SQLite)."""
        data = text.encode("utf-8")
        with nullcontext() if held else self._locked(), ExitStack() as stack:
            if keep != "never" and self.versions is not None:
                stack.enter_context(self.files.writing())  # the version and the text commit together
                stack.enter_context(self.versions.db.transaction(user_key(self.user_id)))
            old = self.files.read(CORE_FILE) if keep != "never" or expect is not None else None
            before = self.clean(_decode(old))
            if expect is not None and before != expect:
                raise CoreChanged("MEMORY.md changed since it was read")
            version_id = None
            if self.versions is not None and (keep == "always" or (keep == "changed" and old not in (None, data))):
                version_id = self.versions.save_version(self.user_id, before, old is not None, cause,
                                                        self.clock.now())
            self.files.replace(CORE_FILE, data)
        if tell:
            self._tell_listener()
        return CoreRewrite(before, old is not None, version_id)  # "never": before is not read

    def _tell_listener(self) -> None:
        if self.listener is None:
            return
        try:
            self.listener.rewritten(self.path)
        except Exception as exc:  # the text is stored; refresh_index heals the index
            log.warning("index update for %s failed (refresh_index will retry): %s", self.path, exc)

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """The store's ``.core.lock`` of this user (a lock file, or an advisory lock)."""
        name = self.paths.store_name(LOCK_FILE)
        if self._lock is None:
            from tiermem.tiers.daily import file_lock

            lock = file_lock(self.paths.inside(self.paths.root / LOCK_FILE))
        else:
            lock = self._lock(name, LOCK_TIMEOUT_SECONDS)
        with ExitStack() as held:
            try:
                held.enter_context(lock)
            except TimeoutError as exc:
                raise StorageError(f"MEMORY.md of user {self.user_id!r} is locked by another writer ({name}); "
                                   "try again") from exc
            yield
