"""One Deep Dream of one user (R36-R43): read, ask, check, guard, write, record.

Order of a run, each step able to end it:

1. take the user's dream lock without waiting (held: ``skipped``, reason ``locked``);
2. read the daily files of the window: no records -> ``skipped`` (``MEMORY.md`` untouched);
3. their hash equals the last processed one (and not ``force``) -> ``skipped``;
4. no LLM configured -> ``skipped`` with the reason;
5. one LLM call with the current ``MEMORY.md`` and the newest daily records that fit the input
   budget (:mod:`~tiermem.dream.window`, :mod:`~tiermem.dream.prompt`); older ones are left out
   and counted in the result and the diary;
6. parse (:mod:`~tiermem.dream.parse`): no usable ``[MEMORY]`` -> ``refused``;
7. drop unsupported bullets (:mod:`~tiermem.dream.support`), then the guards
   (:mod:`~tiermem.dream.guards`): empty, >25% of the prior bullets lost, over budget -> ``refused``;
8. ``dry_run`` stops here (``skipped``, with the diff); ``MEMORY.md`` changed since step 5 (a hand
   edit during the LLM call) -> ``refused``; otherwise keep the old ``MEMORY.md`` as a version and
   replace it, in one step (which re-indexes it), append the diary, mark consolidated the
   days read whole — each mark names the bytes the dream read (length and SHA-256), so a record
   appended since, or a hand edit, keeps the file from retention (R12); never a day with records
   left out — and store the hash -> ``written``.

Provider failures raise :class:`~tiermem.errors.ProviderError`; nothing is written then.

The dream lock is the store's named lock ``.dream.lock`` of the user
(:attr:`~tiermem.storage.sql.Backend.lock`): a lock file under the root on SQLite, an advisory
lock on PostgreSQL, so one dream per user runs at a time across processes and hosts.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, ExitStack
from dataclasses import dataclass, field, replace
from datetime import date, timedelta, tzinfo
from typing import TYPE_CHECKING, Any

from tiermem.calls.trace import call_purpose, note_parse_failure
from tiermem.clock import Clock
from tiermem.dream.diary import append_diary, diary_entry
from tiermem.dream.guards import check_rewrite
from tiermem.dream.parse import Bullet, DreamReplyError, parse_dream_reply, render_memory
from tiermem.dream.prompt import DailySource, DreamBudget, build_dream_messages
from tiermem.dream.support import SupportChecker, SupportPolicy
from tiermem.dream.window import DreamInput, fit_to_budget
from tiermem.errors import DreamError, NotFound, ProviderError, TiermemError
from tiermem.paths import FILE_MODE, make_dirs
from tiermem.plural import counted
from tiermem.storage.dreams import CoreVersion, DreamRepository
from tiermem.tiers.core import CoreChanged, Locker, parse_core
from tiermem.tiers.markdown import parse_records

if TYPE_CHECKING:
    from tiermem.models.protocols import ChatModel, Embedder
    from tiermem.tiers.core import CoreFile
    from tiermem.tiers.daily import DailyJournal, DaySnapshot

log = logging.getLogger(__name__)

LOCK_FILE = ".dream.lock"
ROLLBACK_LOCK_TIMEOUT = 30.0
MAX_LOOKBACK_DAYS = 3660


@dataclass(frozen=True)
class DroppedBullet:
    """A bullet of the reply that the no-fabrication check removed, and why."""

    text: str
    reason: str


@dataclass(frozen=True)
class DreamResult:
    """The outcome of :meth:`Memory.deep_dream`; ``status`` is "written", "skipped" or "refused"."""

    status: str
    reason: str = ""
    days: list[str] = field(default_factory=list)
    diff: str = ""
    dropped: list[DroppedBullet] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)
    bullets: int = 0
    prior_bullets: int = 0
    version_id: int | None = None
    diary_path: str | None = None
    dry_run: bool = False
    forced: bool = False
    left_out: int = 0  # older records not read whole: over the input budget (dream_input_tokens)
    partial_days: list[str] = field(default_factory=list)  # days with records left out (not consolidated)

    @property
    def written(self) -> bool:
        return self.status == "written"

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status, "reason": self.reason, "days": self.days, "diff": self.diff,
            "dropped": [{"text": d.text, "reason": d.reason} for d in self.dropped], "lost": self.lost,
            "bullets": self.bullets, "priorBullets": self.prior_bullets, "versionId": self.version_id,
            "diaryPath": self.diary_path, "dryRun": self.dry_run, "forced": self.forced,
            "leftOut": self.left_out, "partialDays": self.partial_days,
        }


@dataclass(frozen=True)
class RollbackResult:
    """What :meth:`Memory.rollback` restored, and the version that now keeps the replaced text."""

    restored: CoreVersion
    saved_version_id: int | None
    diff: str

    def to_dict(self) -> dict[str, Any]:
        return {"restored": self.restored.to_dict(with_content=False), "savedVersionId": self.saved_version_id,
                "diff": self.diff}


@dataclass(frozen=True)
class _Plan:
    """A checked rewrite, ready to write."""

    text: str
    bullets: list[Bullet]
    dropped: list[DroppedBullet]
    lost: list[str]
    forced: bool
    diary: str
    diff: str


def file_lines(text: str) -> list[str]:
    """The lines of a file's text as the file has them (``\\n`` ends a line; ``\\u2028``, form feed
    and the other breaks of ``str.splitlines`` do not), each with its ``\\n``."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


def unified_diff(before: str, after: str) -> str:
    lines = difflib.unified_diff(file_lines(before), file_lines(after),
                                 "MEMORY.md (before)", "MEMORY.md (after)")
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def daily_hash(dailies: list[DailySource]) -> str:
    digest = hashlib.sha256()
    for source in sorted(dailies, key=lambda d: d.day):
        digest.update(f"{source.day.isoformat()}\n{source.text}\n\x1e".encode())
    return digest.hexdigest()


def has_records(text: str) -> bool:
    """Whether a daily text holds any record (a heading alone is not content)."""
    return any(r.text.strip() for r in parse_records(text))


class DreamRunner:
    """Deep Dream, rollback and versions of one user's ``MEMORY.md``."""

    def __init__(self, core: CoreFile, daily: DailyJournal, repo: DreamRepository, clock: Clock, tz: tzinfo,
                 llm: Callable[[], ChatModel | None], *, budget: DreamBudget | None = None,
                 policy: SupportPolicy | None = None, embedder: Embedder | None = None,
                 after_write: Callable[[], object] | None = None, lock: Locker | None = None) -> None:
        self.core = core
        self.daily = daily
        self.repo = repo
        self.clock = clock
        self.tz = tz
        self.llm = llm
        self.budget = budget or DreamBudget()
        self.policy = policy or SupportPolicy()
        self.embedder = embedder
        self.after_write = after_write
        self.lock = lock  # the store's named locks; None: lock files under the root
        if core.versions is None:  # a bare CoreFile: its dream and rollback versions go to this repository
            core.versions = repo

    @property
    def user_id(self) -> str:
        return self.core.paths.user_id

    @property
    def lock_name(self) -> str:
        """The user's dream lock: ``.dream.lock`` or ``users/<id>/.dream.lock``."""
        return self.core.paths.store_name(LOCK_FILE)

    def _lock(self, timeout: float) -> AbstractContextManager[Any]:
        if self.lock is not None:
            return self.lock(self.lock_name, timeout)
        from filelock import FileLock

        make_dirs(self.core.paths.root)
        return FileLock(self.core.paths.inside(self.core.paths.root / LOCK_FILE), timeout=timeout, mode=FILE_MODE)

    def window(self, lookback_days: int) -> list[date]:
        """The ``lookback_days`` most recent days up to and including today, oldest first."""
        today = self.clock.now().astimezone(self.tz).date()
        return [today - timedelta(days=i) for i in range(lookback_days - 1, -1, -1)]

    # --- the dream -----------------------------------------------------------------------------
    def run(self, lookback_days: int, force: bool, dry_run: bool) -> DreamResult:
        with ExitStack() as held:
            try:
                held.enter_context(self._lock(timeout=0))
            except TimeoutError:
                return DreamResult("skipped", f"locked: another dream of user {self.user_id!r} is running "
                                              f"({self.lock_name})", dry_run=dry_run)
            return self._run_locked(lookback_days, force, dry_run)

    def _run_locked(self, lookback_days: int, force: bool, dry_run: bool) -> DreamResult:
        snapshots = [snap for day in self.window(lookback_days)
                     if (snap := self.daily.snapshot(day)) is not None and has_records(snap.text)]
        dailies = [DailySource(snap.day, snap.text) for snap in snapshots]
        days = [d.day.isoformat() for d in dailies]
        if not dailies:
            return DreamResult("skipped", f"no daily records in the last {lookback_days} day(s); "
                                          "MEMORY.md left as it is", dry_run=dry_run)
        digest = daily_hash(dailies)
        state = self.repo.state(self.user_id)
        if state is not None and state.daily_sha256 == digest and not force:
            return DreamResult("skipped", "the daily records are unchanged since the last dream "
                                          "(use force to dream again)", days, dry_run=dry_run)
        llm = self.llm()
        if llm is None:
            return DreamResult("skipped", "no LLM configured: pass llm=... or set TIERMEM_LLM "
                                          "(e.g. openai:gpt-4o-mini)", days, dry_run=dry_run)
        read = fit_to_budget(dailies, self.budget.input_tokens)
        result = self._dream(llm, read, snapshots, digest, force, dry_run)
        return replace(result, left_out=read.left_out, partial_days=[d.isoformat() for d in read.partial_days])

    def _dream(self, llm: ChatModel, read: DreamInput, snapshots: list[DaySnapshot], digest: str, force: bool,
               dry_run: bool) -> DreamResult:
        """Steps 5-8 over what fits the input budget (``snapshots``: the whole window, as read)."""
        before = self.core.read()
        prior = [item for section in parse_core(before) for item in section.items]
        days = [d.day.isoformat() for d in read.dailies]
        reply = self._ask(llm, before, read.dailies)
        try:
            plan = self._plan(reply, before, prior, read.dailies, force)
        except _Refusal as refusal:
            log.warning("Deep Dream refused for user %r: %s", self.user_id, refusal.result.reason)
            return refusal.finish(days, len(prior), dry_run)
        if dry_run:
            return DreamResult("skipped", f"dry run: would write {counted(len(plan.bullets), 'bullet')} "
                                          f"({len(plan.dropped)} dropped as unsupported); nothing written",
                               days, plan.diff, plan.dropped, plan.lost, len(plan.bullets), len(prior),
                               dry_run=True, forced=plan.forced)
        whole = [snap for snap in snapshots if snap.day in read.whole_days]  # the bytes read, not the file now
        try:
            return self._write(plan, before, days, digest, len(prior), whole, read.note(self.budget.input_tokens))
        except CoreChanged:  # edited by hand (or another writer) while the model thought
            return DreamResult("refused", "MEMORY.md changed while the dream ran; nothing written (dream again)",
                               days, plan.diff, plan.dropped, plan.lost, len(plan.bullets), len(prior))

    @call_purpose("dream")  # the LLM call log's purpose
    def _ask(self, llm: ChatModel, before: str, dailies: list[DailySource]) -> str:
        today = self.clock.now().astimezone(self.tz).date()
        messages = build_dream_messages(before, dailies, today, self.budget)
        try:
            return llm.complete(messages)
        except TiermemError:
            raise
        except Exception as exc:
            raise ProviderError(f"the LLM call of the Deep Dream failed: {exc}") from exc

    def _plan(self, reply: str, before: str, prior: list[str], dailies: list[DailySource], force: bool) -> _Plan:
        try:
            parsed = parse_dream_reply(reply)
        except DreamReplyError as exc:
            note_parse_failure(reply, exc)  # the call log's row of this reply: parse_failed
            log.debug("unusable dream reply: %.2000s", exc.raw)
            raise _Refusal(DreamResult("refused", f"unusable reply: {exc}")) from exc
        checker = SupportChecker(before, dailies, self.policy, self.embedder)
        kept: list[Bullet] = []
        dropped: list[DroppedBullet] = []
        for bullet in parsed.bullets:
            support = checker.judge(bullet.text)
            if support.supported:
                kept.append(bullet)
            else:
                dropped.append(DroppedBullet(bullet.text, support.reason))
        text = render_memory(kept)
        diff = unified_diff(before, text)
        verdict = check_rewrite(prior, [b.text for b in kept], text, before, self.budget, force)
        if not verdict.ok:
            raise _Refusal(DreamResult("refused", verdict.reason, diff=diff, dropped=dropped, lost=verdict.lost,
                                       bullets=len(kept)))
        return _Plan(text, kept, dropped, verdict.lost, verdict.forced, parsed.diary, diff)

    def _write(self, plan: _Plan, before: str, days: list[str], digest: str, prior_count: int,
               consolidated: list[DaySnapshot], note: str) -> DreamResult:
        """Keep the old text as a version and write ``MEMORY.md`` (unless it is no longer
        ``before``: :class:`CoreChanged`), then the diary, mark ``consolidated`` (the days read
        whole, as they were read), store the hash."""
        now = self.clock.now()
        self.core.paths.inside(self.core.paths.dreams_dir)  # a link out of the root: UnsafePath, nothing written
        # one step: the check, the kept version, the new text; its listener re-indexes MEMORY.md (R43)
        version_id = self.core.rewrite(plan.text, "dream", expect=before).version_id or 0
        self._refresh_index()
        entry = diary_entry(now.astimezone(self.tz), plan.diary, days, prior_count, len(plan.bullets),
                            version_id, [(d.text, d.reason) for d in plan.dropped], plan.lost if plan.forced else [],
                            note)
        diary = append_diary(self.core.files, now.astimezone(self.tz).date(), self.core.clean(entry))
        self.daily.mark_read(consolidated)
        self.repo.set_state(self.user_id, digest, days, now)
        log.info("Deep Dream wrote MEMORY.md for user %r: %d -> %d bullets, %d dropped", self.user_id,
                 prior_count, len(plan.bullets), len(plan.dropped))
        reason = "; ".join(r for r in ("forced past the guards" if plan.forced else "", note) if r)
        return DreamResult("written", reason, days, plan.diff, plan.dropped,
                           plan.lost, len(plan.bullets), prior_count, version_id, diary, forced=plan.forced)

    def _refresh_index(self) -> None:
        if self.after_write is None:
            return
        try:
            self.after_write()
        except Exception as exc:  # the file is written; the next search refreshes the index again
            log.warning("index refresh after the dream failed: %s", exc)

    # --- versions and rollback -----------------------------------------------------------------
    def versions(self) -> list[CoreVersion]:
        return self.repo.versions(self.user_id)

    def rollback(self, version: int | None) -> RollbackResult:
        try:
            with self._lock(timeout=ROLLBACK_LOCK_TIMEOUT):
                return self._rollback_locked(version)
        except TimeoutError as exc:
            raise DreamError(f"a dream of user {self.user_id!r} holds {self.lock_name}; try again") from exc

    def _rollback_locked(self, version: int | None) -> RollbackResult:
        target = self.repo.latest(self.user_id) if version is None else self.repo.get(self.user_id, version)
        if target is None:
            raise NotFound("no MEMORY.md versions to roll back to" if version is None
                           else f"MEMORY.md version {version} does not exist for user {self.user_id!r}")
        current = self.core.read()
        diff = unified_diff(current, target.content)
        saved: int | None = None
        if current != target.content:
            saved = self.core.rewrite(target.content, "rollback").version_id
            self._refresh_index()
        return RollbackResult(target, saved, diff)


class _Refusal(Exception):
    """Internal: a refused rewrite, carried out of :meth:`DreamRunner._plan`."""

    def __init__(self, result: DreamResult) -> None:
        super().__init__(result.reason)
        self.result = result

    def finish(self, days: list[str], prior_count: int, dry_run: bool) -> DreamResult:
        r = self.result
        return DreamResult("refused", r.reason, days, r.diff, r.dropped, r.lost, r.bullets, prior_count,
                           dry_run=dry_run)

