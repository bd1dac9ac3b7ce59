"""Erasure you can rely on: :meth:`Memory.purge <tiermem.memory.Memory.purge>` and ``tiermem purge``.

``forget`` (``facts delete``) removes a fact from what the agent sees, but keeps its text where
tiermem needs history: the tombstone, the audit trail, ``MEMORY.md`` versions, the Daily files.
A purge erases the content itself, for one of:

- **a fact** (``fact_id``, in the Memory's scope): the fact, and every copy of its text;
- **a text** (``text``, at least :data:`MIN_TEXT_CHARS` characters): every occurrence in the
  Memory's user (all of its agents), matched case-insensitively, any run of white space matching
  any other, in plain text and JSON-encoded alike (a line break stored as ``\\n`` in a logged
  prompt or a tool call's arguments: :mod:`tiermem.storage.matcher`);
- **a user** (``user``): everything stored for that user id, in every agent.

For a fact or a text, in that user: facts that contain the text are deleted (each keeps a hashed
tombstone, so extraction still does not bring it back — R27 — and an audit entry without its
content); other tombstones keep only the hash of their casefolded text; the text is replaced by
``[purged]`` in audit entries, summaries, plans, queued messages (whose journal and extraction
digests carry over, so processing them later writes no second record), every kept ``MEMORY.md``
version, ``MEMORY.md`` itself, the Daily files, the dream diaries, the LLM call log's prompts, replies
and errors (it holds texts only with ``log_prompts``: docs/calls.md), agent session items and the
values of LangGraph store items (an item whose key or a namespace label holds the text is deleted
whole: a rewritten key would change its identity). Rewriting those files is the
one exception to append-only; the purge records it in the audit as a SHA-256 of the purged text
(casefolded, whitespace-folded) and counts, never the text. The rewritten files are re-indexed,
and the vectors embedded from the old text (and their content-hash cache entries) are deleted.

For a user: every row with that user id in every table (the LLM call log's too), the user's journal digests, vectors,
``MEMORY.md``, ``memory/`` (Daily files, diaries) and lock files; the user's folder goes if
nothing else is in it. The purge's audit entry goes to the purging scope (to ``default/default``
when that scope's user is the one purged).

Then, always, on SQLite: ``PRAGMA secure_delete`` during the purge, the FTS5 indexes rebuilt
(their shadow tables keep deleted terms until merged), ``VACUUM`` (no free page keeps old text)
and a WAL checkpoint with ``TRUNCATE``. The report says whether both compaction steps completed;
another process holding the database open can keep the WAL from being truncated (purge again
later). On PostgreSQL the rows, the Daily records and ``MEMORY.md`` versions are rewritten or
deleted in the database and its tables are vacuumed (the server's write-ahead log, replicas and
backups are the administrator's to expire); each process's local mirror is rewritten by this
process at once and by the others when they refresh it (``tiermem mirror``, or when they open).

Not reached (:data:`NOT_REACHED`, said with every report ``tiermem purge`` prints): copies outside
the root (exports, backups, the agent's own context), vectors of texts
the store no longer knows (an old version of a Daily file edited by hand), and writers running at
the same moment in other processes — a live session or a queued item being processed for the
user journals what it holds. Stop the agents of that user first. An interrupted purge is finished
by running it again. ``dry_run`` changes nothing and counts what would go as the purge then
counts it: rows per table, occurrences per file, vectors.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.clock import utc_iso
from tiermem.errors import InvalidInput, NotFound, StorageError, TiermemError
from tiermem.paths import CORE_FILE, DAILY_DIR, DEFAULT_USER, DREAMS_DIR, UserPaths, day_of, read_file
from tiermem.plural import counted
from tiermem.search.index_files import drop_user_files
from tiermem.storage.matcher import Matcher
from tiermem.storage.purge import ErasedFact, OutboxChange, PurgeRepository, sha256_hex
from tiermem.storage.sql import STORE
from tiermem.tiers.daily import LOCK_FILE as JOURNAL_LOCK
from tiermem.tiers.daily import LOCK_TIMEOUT_SECONDS, namespace_prefixes
from tiermem.types import Scope

if TYPE_CHECKING:
    from tiermem.memory import Memory
    from tiermem.storage.files import MemoryFiles
    from tiermem.tiers.daily import DailyJournal

MIN_TEXT_CHARS = 3  # a shorter text would tear through unrelated words
MAX_TEXT_CHARS = validate.MAX_CONTENT_CHARS
DREAM_LOCK_TIMEOUT_SECONDS = 120.0
SHOWN_FILES = 10  # files named in a report's lines (its ``files`` has them all)
#: What no purge reaches, said with every report (docs/security.md).
NOT_REACHED = ("Not reached: exports (tiermem export) and backups taken before this purge, and other copies"
               " outside the root, keep what they held.")


@dataclass(frozen=True)
class PurgeReport:
    """What a purge erased (or, with ``dry_run``, would erase).

    ``sha256``: of the purged text casefolded and whitespace-folded (a fact's content, a text), or
    of the user id. ``rows``: rows deleted or rewritten per table (``chunks``: search-index pieces
    that held the text, rebuilt from the rewritten files). ``files``: paths relative to the memory
    root that were rewritten or removed, with the occurrences replaced (0 for a removed file).
    ``vectors``: stored embeddings deleted. ``vacuumed``/``wal_truncated``: the compaction steps
    completed (both False for a dry run)."""

    kind: str  # "fact" | "text" | "user"
    user_id: str
    sha256: str
    dry_run: bool
    facts: tuple[str, ...] = ()
    rows: dict[str, int] = field(default_factory=dict)
    files: dict[str, int] = field(default_factory=dict)
    vectors: int = 0
    vacuumed: bool = False
    wal_truncated: bool = False

    @property
    def occurrences(self) -> int:
        """Occurrences of the text replaced in files."""
        return sum(self.files.values())

    @property
    def complete(self) -> bool:
        """Nothing left to do: a dry run, or a purge whose VACUUM and WAL truncation both ran."""
        return self.dry_run or (self.vacuumed and self.wal_truncated)

    def summary(self) -> str:
        """One line, e.g. ``2 facts, 7 rows in 3 tables, 4 occurrences in 2 files, 3 vectors``."""
        rows = f"{counted(sum(self.rows.values()), 'row')} in {counted(len(self.rows), 'table')}"
        files, vectors = counted(len(self.files), "file"), counted(self.vectors, "vector")
        if self.kind == "user":
            return f"{rows}, {files}, {vectors}"
        return (f"{counted(self.rows.get('facts', 0), 'fact')}, {rows}, {counted(self.occurrences, 'occurrence')}"
                f" in {files}, {vectors}")

    def where(self) -> list[str]:
        """Where, one line each: ``tables: audit 2, facts 1`` (rows per table), ``files:
        MEMORY.md (1)`` (occurrences per file; a user's files are removed), ``vectors: 3``."""
        names = sorted(self.files)
        shown = [name if self.kind == "user" else f"{name} ({self.files[name]})" for name in names[:SHOWN_FILES]]
        more = [f"and {len(names) - SHOWN_FILES} more"] if len(names) > SHOWN_FILES else []
        files = ("removed " if self.kind == "user" and names else "") + (", ".join(shown + more) or "none")
        tables = ", ".join(f"{table} {n}" for table, n in sorted(self.rows.items())) or "none"
        return [f"tables: {tables}", f"files: {files}", f"vectors: {self.vectors}"]

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "user_id": self.user_id, "sha256": self.sha256, "dry_run": self.dry_run,
                "facts": list(self.facts), "rows": dict(self.rows), "files": dict(self.files),
                "occurrences": self.occurrences, "vectors": self.vectors, "vacuumed": self.vacuumed,
                "wal_truncated": self.wal_truncated, "complete": self.complete, "not_reached": NOT_REACHED}


@dataclass(frozen=True)
class _Target:
    kind: str
    user_id: str
    sha256: str
    matcher: Matcher | None = None  # None: the whole user
    fact_id: str | None = None


@dataclass(frozen=True)
class _File:
    rel: str  # relative to the user's root ("memory/2026-03-14.md")
    local: bool  # only a local file (a leftover the store does not list), not one of the store's files


@dataclass(frozen=True)
class _FileChange:
    file: _File
    shown: str  # relative to the memory root, as the report names it
    count: int
    old: bytes
    new: bytes


def purge(mem: Memory, fact_id: str | None = None, *, text: str | None = None, user: str | None = None,
          dry_run: bool = False) -> PurgeReport:
    """Erase one fact, a text or a whole user for good (see the module docstring). Bad arguments,
    an unknown fact id or a user with nothing stored raise before anything changes."""
    target = _target(mem, fact_id, text, user, dry_run)
    if target.matcher is None:
        return _purge_user(mem, target, dry_run)
    return _purge_text(mem, target, target.matcher, dry_run)


def _target(mem: Memory, fact_id: object, text: object, user: object, dry_run: object) -> _Target:
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run must be True or False")
    given = [name for name, value in (("fact_id", fact_id), ("text", text), ("user", user)) if value is not None]
    if len(given) != 1:
        raise InvalidInput(f"purge needs exactly one of fact_id, text, user (got {', '.join(given) or 'none'})")
    if fact_id is not None:
        fact = mem.facts.get(validate.fact_id(fact_id))
        return _Target("fact", mem.scope.user_id, _digest(fact.content), Matcher(fact.content), fact.id)
    if text is not None:
        checked = validate.text(text, "text", MAX_TEXT_CHARS)
        if len(validate.normalise(checked)) < MIN_TEXT_CHARS:
            raise InvalidInput(f"text to purge must have at least {MIN_TEXT_CHARS} characters, got {checked!r}")
        return _Target("text", mem.scope.user_id, _digest(checked), Matcher(checked))
    name = validate.name(user, "user")
    return _Target("user", name, sha256_hex(name))


def _digest(text: str) -> str:
    return sha256_hex(validate.normalise(text))


# --- a fact or a text ------------------------------------------------------------------------
def _purge_text(mem: Memory, target: _Target, matcher: Matcher, dry_run: bool) -> PurgeReport:
    files = mem.daily.files  # the user's files and index (a text or fact purge is of the Memory's user)
    repo = PurgeRepository(mem.db)
    if dry_run:  # found as the purge below finds them: the preview counts what the purge erases
        vectors = _vectors_to_delete(repo, target.user_id, matcher)
        return PurgeReport(target.kind, target.user_id, target.sha256, True, rows=repo.count_text(
            target.user_id, matcher), files={c.shown: c.count for c in _file_changes(files, matcher)}, vectors=vectors)
    mem.wait_idle()  # background session summaries land before, not after, the purge
    previous = repo.secure_delete(True)
    try:
        with _locks(mem, files, mem.daily):
            chunks = repo.count_text(target.user_id, matcher).get("chunks", 0)  # rebuilt from the files
            hashes, texts = repo.known_texts(target.user_id, matcher)
            changes = _file_changes(files, matcher)  # every file read (and checked) before any write
            at = utc_iso(mem.clock.now())
            with files.writing(STORE):  # where the files are rows, they change in the rows' transaction
                with mem.db.transaction():
                    erased, rows = _erase_rows(mem, repo, target, matcher, at)
                    _move_prefix_marks(repo, files.paths, matcher, changes)
                _write_files(files, changes)
        mem.refresh_index()
        rows["chunks"] = chunks + repo.drop_stale_index(target.user_id, matcher)
        vectors = repo.delete_vectors(hashes | _vector_hashes(texts, matcher))
        drop_user_files(mem.db, target.user_id)  # the user's vector index files held the old vectors
        report = PurgeReport(target.kind, target.user_id, target.sha256, False, tuple(f.id for f in erased),
                             {t: n for t, n in rows.items() if n}, {c.shown: c.count for c in changes}, vectors)
        return _finish(mem, repo, report, mem.scope, at, target.fact_id)
    finally:
        repo.secure_delete(previous)


def _erase_rows(mem: Memory, repo: PurgeRepository, target: _Target, matcher: Matcher,
                at: str) -> tuple[list[ErasedFact], dict[str, int]]:
    """Everything but the files, inside the purge's transaction: the facts erased, and rows per
    table (as :meth:`PurgeRepository.count_text` counts them)."""
    user_id = target.user_id
    doomed = repo.facts_to_delete(user_id, matcher, target.fact_id)
    rows = {"audit": repo.erase_audit(user_id, matcher, {str(r["id"]) for r in doomed})}  # before the purge's own
    erased = repo.delete_facts(doomed, at)
    rows.update(repo.scrub_columns(user_id, matcher))
    rows["facts"] = len(erased)  # deleted (a fact whose source held the text is rewritten)
    rows["tombstones"] = repo.hash_tombstones(user_id, matcher)
    rows["plans"] = repo.scrub_plans(user_id, matcher)
    rows["store_items"] = repo.scrub_store_items(user_id, matcher)
    rows["session_items"] = repo.scrub_session_items(user_id, matcher)
    changed = repo.scrub_outbox(user_id, matcher)
    _carry_digests(mem, changed)
    rows["outbox"] = len(changed)
    return erased, rows


def _carry_digests(mem: Memory, changes: Sequence[OutboxChange]) -> None:
    """A rewritten queued message keeps its standing: journaled (R9) or extracted (R28) before
    means so now, so processing the item later writes no second Daily record and extracts nothing
    again."""
    from tiermem.redact import redact
    from tiermem.storage.journal import FlushHashRepository
    from tiermem.storage.outbox import OutboxRepository
    from tiermem.tiers.conversation import conversation_digest, numbered
    from tiermem.tiers.daily import conversation_namespace
    from tiermem.tiers.flush import message_digest
    from tiermem.tiers.turns import to_message

    hashes, outbox = FlushHashRepository(mem.db), OutboxRepository(mem.db)
    scrub = redact if mem.settings.redact_secrets else None
    now = mem.clock.now()
    for change in changes:
        try:
            pairs = list(zip(numbered(to_message(m) for m in change.old), numbered(to_message(m) for m in change.new),
                             strict=False))
        except TiermemError:  # a stored message tiermem cannot read: it was never journaled either
            continue
        namespace = conversation_namespace(change.scope.user_id, change.scope.agent_name, change.thread_id)
        journaled = [(conversation_digest(o, scrub), conversation_digest(n, scrub)) for o, n in pairs]
        seen = hashes.seen(namespace, [old for old, new in journaled if old != new])
        hashes.remember(namespace, [new for old, new in journaled if old in seen and old != new], now)
        extracted = outbox.extracted(change.scope, change.thread_id)
        digests = [(message_digest(o.message), message_digest(n.message)) for o, n in pairs]
        carried = [new for old, new in digests if old != new and old in extracted]
        if carried:
            outbox.mark_extracted(change.scope, change.thread_id, carried, now)


def _local_files(paths: UserPaths) -> list[Path]:
    """``MEMORY.md``, everything under ``memory/`` (Daily files, diaries) but lock files, and
    temp files a crashed ``MEMORY.md`` write left behind, on the local disk."""
    found = [paths.core] if paths.core.is_file() else []
    if paths.daily_dir.is_dir():
        found += sorted(p for p in paths.daily_dir.rglob("*") if p.is_file() and not p.name.endswith(".lock"))
    found += sorted(p for p in paths.root.glob(f".{CORE_FILE}.*.tmp") if p.is_file())
    return found


def _user_files(files: MemoryFiles) -> list[_File]:
    """The user's files in the store (``MEMORY.md``, Daily files, dream diaries), then local files
    the store does not list (anything else under ``memory/``, crashed writes' temp files; where the
    store is a database, local mirrors it no longer holds)."""
    paths = files.paths
    stored = [CORE_FILE] if files.stat(CORE_FILE) is not None else []
    stored += files.list(DAILY_DIR) + files.list(f"{DAILY_DIR}/{DREAMS_DIR}")
    local = [p.relative_to(paths.root).as_posix() for p in _local_files(paths) if p.is_relative_to(paths.root)]
    return [_File(rel, False) for rel in stored] + [_File(rel, True) for rel in local if rel not in stored]


def _read(files: MemoryFiles, file: _File) -> bytes:
    if file.local:
        return read_file(files.paths.inside(files.paths.root / file.rel))
    data = files.read(file.rel)
    return b"" if data is None else data


def _file_changes(files: MemoryFiles, matcher: Matcher) -> list[_FileChange]:
    changes: list[_FileChange] = []
    for file in _user_files(files):
        old = _read(files, file)
        text, count = matcher.sub(old.decode("utf-8", errors="surrogateescape"))
        if count:
            changes.append(_FileChange(file, files.paths.store_name(file.rel), count, old,
                                       text.encode("utf-8", errors="surrogateescape")))
    return changes


def _write_files(files: MemoryFiles, changes: Sequence[_FileChange]) -> None:
    from tiermem.paths import atomic_write

    for change in changes:
        if change.file.local:
            atomic_write(files.paths.inside(files.paths.root / change.file.rel), change.new)
        else:
            files.replace(change.file.rel, change.new)


def _move_prefix_marks(repo: PurgeRepository, paths: UserPaths, matcher: Matcher,
                       changes: Sequence[_FileChange]) -> None:
    """A Daily file a Deep Dream consolidated stays consolidated once rewritten: its prefix mark
    (R12) moves to the purged prefix when the old mark still matched the file and the purged
    prefix starts the new file; otherwise the mark stays void and the next dream renews it."""
    import hashlib

    for change in changes:
        folder, _, name = change.file.rel.rpartition("/")
        day = day_of(name)
        if day is None or folder != DAILY_DIR or change.file.local:
            continue
        mark = repo.prefix_mark(paths.user_id, day.isoformat())
        if mark is None or hashlib.sha256(change.old[:mark[0]]).hexdigest() != mark[1]:
            continue
        prefix = matcher.sub(change.old[:mark[0]].decode("utf-8", errors="surrogateescape"))[0]
        data = prefix.encode("utf-8", errors="surrogateescape")
        if change.new.startswith(data):
            repo.move_prefix_mark(paths.user_id, day.isoformat(), len(data), hashlib.sha256(data).hexdigest())


@contextmanager
def _locks(mem: Memory, files: MemoryFiles, journal: DailyJournal | None = None) -> Iterator[None]:
    """The user's dream lock (no Deep Dream rewrites ``MEMORY.md`` from text read before the
    purge), ``MEMORY.md``'s lock and the journal lock (no append lands between read and rewrite;
    taken through ``journal`` when given, which first settles appends a crashed writer left).
    Named locks of the store (:attr:`~tiermem.storage.sql.Backend.lock`): lock files under the
    root, or locks every host sharing the database sees."""
    from tiermem.dream.runner import LOCK_FILE as DREAM_LOCK
    from tiermem.tiers.core import LOCK_FILE as CORE_LOCK

    paths = files.paths

    def named(rel: str, timeout: float) -> Callable[[], AbstractContextManager[Any]]:
        return lambda: mem.db.parts.lock(mem.db, paths.store_name(rel), timeout)

    journal_rel = f"{DAILY_DIR}/{JOURNAL_LOCK}"
    wanted: list[tuple[str, Callable[[], AbstractContextManager[Any]]]] = [
        (DREAM_LOCK, named(DREAM_LOCK, DREAM_LOCK_TIMEOUT_SECONDS)),
        (CORE_LOCK, named(CORE_LOCK, LOCK_TIMEOUT_SECONDS)),
        (journal_rel, (lambda: journal.exclusive(STORE)) if journal is not None
         else named(journal_rel, LOCK_TIMEOUT_SECONDS))]
    with ExitStack() as stack:
        for rel, make in wanted:
            if files.durable_files and not (paths.root / rel).parent.is_dir():
                continue  # no folder, no files to rewrite there
            try:
                stack.enter_context(make())
            except TimeoutError as exc:
                raise StorageError(f"{paths.store_name(rel)} is held (a Deep Dream or a writer of user"
                                   f" {paths.user_id!r} is running); try the purge again when it ends") from exc
        yield


def _vector_hashes(texts: Iterable[str], matcher: Matcher | None) -> set[str]:
    """Cache keys of what may have been embedded from ``texts``: each text, its sentence parts,
    and for a ``MEMORY.md`` version its bullets alone and with the bullet before (a chunk is
    embedded with its predecessor). With ``matcher``, only the pieces that hold the text."""
    from tiermem.search.indexer import text_hash
    from tiermem.search.parts import sentence_parts
    from tiermem.tiers.indexer import chunks_of

    pieces: set[str] = set()
    for text in texts:
        pieces.add(text)
        pieces.update(sentence_parts(text))
        bullets = [c.text for c in chunks_of(CORE_FILE, text)] if "\n" in text else []
        pieces.update(bullets)
        pieces.update(f"{before}\n{after}" for before, after in zip(bullets, bullets[1:], strict=False))
    return {text_hash(p) for p in pieces if matcher is None or matcher.found(p)}


def _vectors_to_delete(repo: PurgeRepository, user_id: str, matcher: Matcher | None) -> int:
    """How many stored vectors a purge deletes (a dry run's count): those of what the text (the
    user's every text, ``matcher`` None) may have been embedded from, that no item links to once
    the purge is done — items of other users keep theirs, and so do the user's items embedded from
    a text without it (a fact, a chunk alone or with the chunk before it, as the indexer embeds)."""
    from tiermem.search.indexer import text_hash

    hashes, texts = repo.known_texts(user_id, matcher)
    wanted = hashes | _vector_hashes(texts, matcher)
    kept = set()
    for embed_hash, owner, text, before in repo.linked_items(wanted):
        embedded = text if before is None or text_hash(text) == embed_hash else f"{before}\n{text}"
        if owner != user_id or (matcher is not None and not matcher.found(embedded)):
            kept.add(embed_hash)
    return repo.count_vectors(wanted - kept)


# --- a user ----------------------------------------------------------------------------------
def _purge_user(mem: Memory, target: _Target, dry_run: bool) -> PurgeReport:
    user = target.user_id
    paths = UserPaths.for_user(mem.root, user, mem.settings.allow_symlinks)
    files = mem.db.parts.files(mem.db, paths, mirror=mem.settings.mirror_files)
    repo = PurgeRepository(mem.db)
    prefixes = namespace_prefixes(user)
    rows = repo.user_rows(user, prefixes)
    shown = [paths.store_name(f.rel) for f in _user_files(files)]
    if not rows and not shown:
        raise NotFound(f"nothing is stored for user {user!r} in {mem.db.label}")
    if dry_run:
        return PurgeReport("user", user, target.sha256, True, rows=rows, files=dict.fromkeys(shown, 0),
                           vectors=_vectors_to_delete(repo, user, None))
    if user == mem.scope.user_id:
        mem.wait_idle()
    previous = repo.secure_delete(True)
    try:
        with _locks(mem, files):
            hashes, texts = repo.known_texts(user, None)
            rows = repo.user_rows(user, prefixes)  # every one is deleted (the files' rows, where the files are rows)
            with files.writing(STORE):
                for file in _user_files(files):
                    if file.local:
                        paths.inside(paths.root / file.rel).unlink(missing_ok=True)
                    else:
                        files.remove(file.rel)
                with mem.db.transaction():
                    repo.delete_user(user, prefixes)
        _remove_folders(paths)
        from tiermem.storage.search import SearchRepository

        SearchRepository(mem.db).prune_removed_log(keep=0)  # every loaded vector index reloads
        vectors = repo.delete_vectors(hashes | _vector_hashes(texts, None))
        drop_user_files(mem.db, user)
        report = PurgeReport("user", user, target.sha256, False, rows=rows, files=dict.fromkeys(shown, 0),
                             vectors=vectors)
        scope = mem.scope if mem.scope.user_id != user else Scope(DEFAULT_USER, "default")
        return _finish(mem, repo, report, scope, utc_iso(mem.clock.now()), None)
    finally:
        repo.secure_delete(previous)


def _remove_folders(paths: UserPaths) -> None:
    """``memory/`` (lock files, empty folders), the lock files beside ``MEMORY.md``, and the
    user's folder if nothing else is in it (a default user's root stays)."""
    from tiermem.dream.runner import LOCK_FILE as DREAM_LOCK
    from tiermem.tiers.core import LOCK_FILE as CORE_LOCK

    try:
        if paths.daily_dir.is_dir():
            shutil.rmtree(paths.inside(paths.daily_dir))
        for name in (DREAM_LOCK, CORE_LOCK):
            (paths.root / name).unlink(missing_ok=True)
        if paths.user_id != DEFAULT_USER and paths.root.is_dir() and not any(paths.root.iterdir()):
            paths.root.rmdir()
    except OSError as exc:
        raise StorageError(f"the rows of user {paths.user_id!r} are erased, but removing {paths.root} failed: {exc}"
                           "; run the purge again") from exc


# --- both ------------------------------------------------------------------------------------
def _finish(mem: Memory, repo: PurgeRepository, report: PurgeReport, scope: Scope, at: str,
            fact_id: str | None) -> PurgeReport:
    """Audit the purge (hash and counts, never the text), then rebuild FTS, VACUUM, truncate the WAL."""
    repo.record(scope, at, fact_id, f"purged {report.kind} sha256:{report.sha256}: {report.summary()}")
    vacuumed, truncated = repo.compact()
    return PurgeReport(report.kind, report.user_id, report.sha256, False, report.facts, report.rows, report.files,
                       report.vectors, vacuumed, truncated)
