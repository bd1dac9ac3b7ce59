"""What the resident server (:mod:`tiermem.agents.server`) keeps open, and the work it does.

- The **person** scope's ``Memory`` (R74), open for the server's whole life: it builds the
  providers once (the embedder is loaded and warmed before the server takes requests; the LLM),
  and its update queue is the server's worker: like ``tiermem worker`` it looks for items the
  hooks queued every tick and extracts them with the configured LLM, whatever their scope.
- A **project** ``Memory`` per project scope the server has seen, at most :data:`MAX_PROJECTS`,
  least recently used closed first (once no request holds it); each shares the person's providers
  and runs the Deep Dream scheduler of its scope (``dream_schedule``).
- Nothing the server writes is embedded inline (``embed_on_write = false``, as in the hooks): each
  open scope's items without vectors are embedded by its own ``Memory`` right after a save and
  every tick, so a prompt's search of that scope meanwhile uses the vectors there are instead of
  embedding them itself (a search embeds only its own scope's pending items).

Requests: :meth:`Residents.prompt` (the relevant memory for a prompt, via
:func:`tiermem.agents.inject.prompt_context`, not given before in the session) and
:meth:`Residents.save` (the hooks' save, :mod:`tiermem.agents.save`, done here after the
answer, :mod:`tiermem.agents.background_saves`); every tick it also takes the saves hooks left
unfinished when no server was up (:mod:`tiermem.agents.pending_saves`). A session's state
file is read and written under a lock of that session, so two requests of one session do not
lose each other's "given" ids.
"""

from __future__ import annotations

import logging
import os
import threading
import zlib
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from tiermem import validate
from tiermem.agents.background_saves import BackgroundSaves
from tiermem.agents.project import CodingScopes, coding_scopes
from tiermem.config import Settings, load_settings
from tiermem.errors import InvalidInput
from tiermem.memory import Memory
from tiermem.types import Scope

log = logging.getLogger(__name__)

MAX_PROJECTS = 8  # project memories kept open (each holds a database connection and a vector index)
SESSION_LOCKS = 64  # stripes of the per-session locks
MAX_WARMING = 16  # project folders waiting to be loaded (POST /warm); more are not queued
BACKGROUND_NICENESS = 10  # saves, embedding and the queue poll yield the CPU to the requests
MAX_FIELD_CHARS = 4096  # client, session id, paths


def lower_priority(niceness: int = BACKGROUND_NICENESS) -> None:
    """Lower the calling thread's CPU priority by ``niceness`` (Linux: a thread's own nice value,
    which the threads it starts inherit, such as the embedder's); elsewhere nothing."""
    with suppress(AttributeError, OSError):
        thread = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, thread, min(os.getpriority(os.PRIO_PROCESS, thread) + niceness, 19))


@dataclass
class _Held:
    memory: Memory
    users: int = 0
    evicted: bool = False
    dreaming: bool = False  # its Deep Dream scheduler was started (by a tick, not by a request)


@dataclass(frozen=True)
class HookRequest:
    """What a hook sends: who, which session, where, and the prompt, transcript path or source."""

    client: str
    session_id: str
    cwd: str
    text: str = ""


def _field(payload: dict[str, Any], name: str, limit: int = MAX_FIELD_CHARS) -> str:
    value = payload.get(name)
    if not isinstance(value, str) or not value.strip():
        raise InvalidInput(f"{name} must be a non-empty string")
    if len(value) > limit or "\x00" in value:
        raise InvalidInput(f"{name} is over {limit} characters or holds a NUL character")
    return value


def _request(payload: dict[str, Any], text_field: str | None) -> HookRequest:
    """The checked fields of a request (``text_field``: the one that becomes ``text``)."""
    from tiermem.agents.clients import client

    name = client(_field(payload, "client")).name
    cwd = _field(payload, "cwd")
    if not Path(cwd).is_absolute():
        raise InvalidInput(f"cwd must be an absolute path, got {cwd!r}")
    text = ""
    if text_field == "prompt":
        text = payload.get("prompt")  # type: ignore[assignment]
        validate.text(text, "prompt", validate.MAX_QUERY_CHARS)
    elif text_field == "source":  # optional: startup, resume, clear, compact
        source = payload.get("source")
        text = _field(payload, "source", 64) if source is not None else ""
    elif text_field is not None:
        text = _field(payload, text_field)
    return HookRequest(name, _field(payload, "session_id"), cwd, text)


@dataclass
class Residents:
    """The memories of one root the server keeps open (see the module docstring)."""

    root: Path
    settings: Settings
    person: Memory
    max_projects: int = MAX_PROJECTS
    _projects: OrderedDict[Scope, _Held] = field(default_factory=OrderedDict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _session_locks: tuple[threading.Lock, ...] = field(
        default_factory=lambda: tuple(threading.Lock() for _ in range(SESSION_LOCKS)))
    _warming: set[str] = field(default_factory=set)
    _saves: BackgroundSaves[HookRequest] = field(init=False)
    _stopping: threading.Event = field(default_factory=threading.Event)
    _ticker: threading.Thread | None = None
    _warmer: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="tiermem-agents-warm"))

    def __post_init__(self) -> None:
        self._saves = BackgroundSaves(self._save, on_start=lower_priority)

    @classmethod
    def open(cls, root: Path, warm_cwd: str | None = None) -> Residents:
        """The person's memory of ``root`` with its providers built and everything a prompt needs
        loaded (see :meth:`warm_up`); with ``warm_cwd``, that folder's project memory too."""
        settings = load_settings(root)
        person = Memory(root, user_id=settings.coding_person_name(), agent_name=settings.coding_agent_name,
                        embed_on_write=False)  # the queue's writes too: each scope is embedded by its tick
        residents = cls(root, settings, person)
        try:
            residents.warm_up(warm_cwd)
            if person.settings.enabled:
                person.queue.start()
        except BaseException:
            residents.close()
            raise
        return residents

    def warm(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``POST /warm {cwd}``: load that folder's project memory in the background (a session
        starts there: its first prompt should not wait for it); answers at once."""
        cwd = _field(payload, "cwd")
        if not Path(cwd).is_absolute():
            raise InvalidInput(f"cwd must be an absolute path, got {cwd!r}")
        with self._lock:
            queued = cwd not in self._warming and len(self._warming) < MAX_WARMING
            if queued:
                self._warming.add(cwd)
        if queued:
            self._warmer.submit(self._warm_project, cwd)
        return {"queued": queued}

    def _warm_project(self, cwd: str) -> None:
        try:
            with self.project(self.scopes(cwd).project) as project:
                project.search("warm up", k=1)
        except Exception:
            log.warning("could not load the project memory of %s", cwd, exc_info=True)
        finally:
            with self._lock:
                self._warming.discard(cwd)

    def warm_up(self, cwd: str | None = None) -> None:
        """Load now what the first prompt would wait for: the modules of a request, the clients,
        the tokenizer, the embedding model, the person's vector index (and the project's of ``cwd``)."""
        from tiermem.agents import inject, save, session_state  # noqa: F401 - imported for their cost
        from tiermem.agents.clients import client_names
        from tiermem.tokens import count_tokens

        client_names()
        count_tokens("warm up")
        _ = self.person.llm  # a missing API key shows in the server log now
        self.person.search("warm up", k=1)  # the embedder model and the person's vector index
        if cwd is not None:
            with self.project(self.scopes(cwd).project) as project:
                project.search("warm up", k=1)

    # --- the memories ------------------------------------------------------------------------
    def scopes(self, cwd: str) -> CodingScopes:
        return coding_scopes(self.root, cwd, self.settings)

    @contextmanager
    def project(self, scope: Scope) -> Iterator[Memory]:
        """The project ``Memory`` of ``scope``, held for the block (not closed while held)."""
        held = self._hold(scope)
        try:
            yield held.memory
        finally:
            self._release(held)

    def _release(self, held: _Held) -> None:
        with self._lock:
            held.users -= 1
            close = held.evicted and held.users == 0
        if close:
            held.memory.close()

    def _hold(self, scope: Scope) -> _Held:
        with self._lock:
            held = self._projects.get(scope)
            if held is not None:
                self._projects.move_to_end(scope)
                held.users += 1
                return held
        memory = self._open_project(scope)  # outside the lock: opening takes a while
        closing: list[Memory] = []
        with self._lock:
            held = self._projects.get(scope)
            if held is None:
                held = self._projects[scope] = _Held(memory)
            else:
                closing.append(memory)  # another request opened it meanwhile
            held.users += 1
            self._projects.move_to_end(scope)
            while len(self._projects) > self.max_projects:
                _, old = self._projects.popitem(last=False)
                old.evicted = True
                if old.users == 0:
                    closing.append(old.memory)
        for mem in closing:
            mem.close()
        return held

    def _open_project(self, scope: Scope) -> Memory:
        person = self.person
        return Memory(self.root, llm=person.llm or "none", embedder=person.embedder, clock=person.clock,
                      user_id=scope.user_id, agent_name=scope.agent_name, queue_replay=False,
                      embed_on_write=False)  # a save answers at once; the next tick embeds

    def open_scopes(self) -> list[str]:
        with self._lock:
            projects = [f"{s.user_id}/{s.agent_name}" for s in self._projects]
        return [f"{self.person.scope.user_id}/{self.person.scope.agent_name}", *projects]

    @contextmanager
    def session_lock(self, client: str, session_id: str) -> Iterator[None]:
        stripe = zlib.crc32(f"{client}\x00{session_id}".encode("utf-8", "backslashreplace")) % SESSION_LOCKS
        with self._session_locks[stripe]:
            yield

    # --- requests ----------------------------------------------------------------------------
    def prompt(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``{"text"}``: what is relevant to the prompt and not given yet in the session."""
        request = _request(payload, "prompt")
        from tiermem.agents.inject import prompt_context
        from tiermem.agents.session_state import SessionState

        scopes = self.scopes(request.cwd)
        with self.project(scopes.project) as project, self.session_lock(request.client, request.session_id):
            state = SessionState.load(self.root, request.client, request.session_id)
            given = len(state.given)
            text = prompt_context(self._person_for(scopes), project, state, request.text,
                                  self.settings.coding_prompt_tokens)
            if len(state.given) != given:  # only adds: nothing new given, nothing to write
                state.save()
        return {"text": text}

    def start(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``{"text"}``: the session-start memory text of both scopes (forgetting what the session
        was given first when ``source`` is compact or clear); the tokenizer is loaded here already."""
        request = _request(payload, "source")
        from tiermem.agents.inject import start_context
        from tiermem.agents.session_state import SessionState

        scopes = self.scopes(request.cwd)
        with self.project(scopes.project) as project, self.session_lock(request.client, request.session_id):
            state = SessionState.load(self.root, request.client, request.session_id)
            text = start_context(self._person_for(scopes), project, state, request.text or None,
                                 self.settings.coding_start_tokens)
            state.save()
        return {"text": text}

    def save(self, payload: dict[str, Any]) -> dict[str, Any]:
        """``{"accepted"}``: the save (the transcript's new messages journaled in the project scope
        and queued for extraction) is done after the answer, on the saves thread; ``False`` when
        too many sessions wait (the hook then saves by itself)."""
        request = _request(payload, "transcript_path")
        if not Path(request.text).is_absolute():
            raise InvalidInput(f"transcript_path must be an absolute path, got {request.text!r}")
        return {"accepted": self._saves.submit((request.client, request.session_id), request)}

    def _save(self, request: HookRequest) -> None:
        """One save (see :mod:`tiermem.agents.save`); a failure is a line in the hook log. A
        request a hook left for this session (:mod:`tiermem.agents.pending_saves`) is done then."""
        from tiermem.agents import hook_log, pending_saves
        from tiermem.agents.save import save_transcript
        from tiermem.agents.session_state import SessionState

        try:
            with self.project(self.scopes(request.cwd).project) as project, \
                    self.session_lock(request.client, request.session_id):
                state = SessionState.load(self.root, request.client, request.session_id)
                report = save_transcript(project, request.client, request.session_id, Path(request.text), state)
            log.info("saved %s: %d messages read, %d journaled", report.conversation, report.read, report.journaled)
            self.person.queue.wake()
            with self.project(self.scopes(request.cwd).project) as project:
                project.embed_pending()  # now, by the memory whose searches then need not wait for it
        except Exception as exc:
            log.warning("saving %s-%s failed", request.client, request.session_id, exc_info=True)
            hook_log.write(self.root, request.client, "save (resident server)", request.session_id,
                           f"{type(exc).__name__}: {exc}")
        finally:  # done, or failed and logged: the session's next save reads from its cursor
            pending_saves.clear(self.root, request.client, request.session_id)

    def take_pending_saves(self) -> int:
        """Queue the saves hooks left unfinished (a hook with no server to hand them to); how many."""
        from tiermem.agents import pending_saves

        taken = 0
        for left in pending_saves.waiting(self.root):
            key = (left.client, left.session_id)
            if self._saves.holds(key):
                continue
            try:
                request = _request(asdict(left), "transcript_path")
                if not Path(request.text).is_absolute():
                    raise InvalidInput(f"transcript_path must be an absolute path, got {request.text!r}")
            except InvalidInput:
                pending_saves.clear(self.root, left.client, left.session_id)
                continue
            taken += self._saves.submit(key, request)
        return taken

    def _person_for(self, scopes: CodingScopes) -> Memory:
        if scopes.person != self.person.scope:  # the settings name one person per root
            raise InvalidInput(f"person scope {scopes.person} is not the server's {self.person.scope}")
        return self.person

    # --- background work ---------------------------------------------------------------------
    def start_background(self, interval: float) -> None:
        """Run :meth:`tick` every ``interval`` seconds on a thread of lower CPU priority (until
        :meth:`close`), so embedding a long transcript leaves the cores to the prompts."""
        def loop() -> None:
            lower_priority()
            while not self._stopping.wait(interval):
                self.tick()

        if self._ticker is None:
            self._ticker = threading.Thread(target=loop, name="tiermem-agents-background", daemon=True)
            self._ticker.start()

    def tick(self) -> None:
        """Take the saves hooks left unfinished, look for queued items other processes added (as
        ``tiermem worker`` does) and embed each open scope's items written without vectors, through
        that scope's memory (a search of the scope meanwhile uses its index as it is rather than
        embedding them too)."""
        try:
            if self.take_pending_saves():
                log.info("took the saves hooks left unfinished")
            if self.person.settings.enabled:
                self.person.queue.start()
            with self._lock:
                held = list(self._projects.values())
                for entry in held:
                    entry.users += 1
            try:
                for entry in held:
                    self._background(entry)
            finally:
                for entry in held:
                    self._release(entry)
            if self.person.embed_pending():
                log.info("embedded new items (%s)", self.person.scope.user_id)
        except Exception:
            log.warning("background work failed; the next tick retries", exc_info=True)

    def _background(self, entry: _Held) -> None:
        memory = entry.memory
        if not entry.dreaming:
            entry.dreaming = True
            try:
                memory.start_dream_scheduler()
            except Exception:
                log.warning("no Deep Dream scheduler for %s/%s", memory.scope.user_id, memory.scope.agent_name,
                            exc_info=True)
        if memory.embed_pending():
            log.info("embedded new items (%s)", memory.scope.user_id)

    # --- life cycle --------------------------------------------------------------------------
    def close(self) -> None:
        """Close every memory (the person's last: its queue drains for ``shutdown_flush_seconds``)."""
        self._stopping.set()
        if self._ticker is not None:
            self._ticker.join()
        self._saves.close()  # what was accepted is written
        self._warmer.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            projects = [held.memory for held in self._projects.values()]
            self._projects.clear()
        for memory in projects:
            memory.close()
        self.person.close()

    def __enter__(self) -> Residents:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
