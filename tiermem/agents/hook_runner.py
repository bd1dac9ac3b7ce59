"""``tiermem hook CLIENT EVENT``: one coding-agent hook, from the JSON on stdin to the client's
output on stdout (R72, R73).

The client's event names its action (:data:`~tiermem.agents.clients.START`, ``PROMPT``, ``SAVE``;
other events: nothing). The payload's ``cwd`` names the person and project scopes
(:mod:`tiermem.agents.project`):

- start: the memory text of both scopes (:func:`tiermem.agents.inject.start_context`), after
  forgetting what the session was given when the client compacted or cleared it; the resident
  server is started if it is not running (never waited for);
- prompt: the resident server's answer (:func:`tiermem.agents.server_client.ask_prompt`); when
  it is down: nothing (and it is started), as a cold process cannot load the embedder in time;
- save: the transcript's new messages journaled in the project scope and queued for extraction
  (:func:`tiermem.agents.save.save_transcript`) by the resident server, nothing when the transcript
  did not grow; with no server, by the hook for :data:`SAVE_ALONE_SECONDS`, the rest left to the
  server it starts (:mod:`tiermem.agents.pending_saves`).

A hook never gets in the client's way: the stores open without queue replay, shutdown flush or
embedding, and with no LLM (``llm="none"``), so no model is ever called here; any failure is one
line in the hook log (:mod:`tiermem.agents.hook_log`) and nothing on stdout; a watchdog thread
ends the process (``os._exit(0)``, nothing printed) when the action runs past its budget
(:data:`~tiermem.agents.clients.BUDGET_SECONDS`). Stdout is written once, at the very end.

:func:`main` is the process entry (``tiermem`` sends ``hook`` here before importing its command
modules); :func:`run_hook` does one hook in-process and returns what to print.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, NamedTuple  # not dataclasses: 15 ms of imports for every hook

from tiermem.agents import hook_log
from tiermem.agents.clients import BUDGET_SECONDS, PROMPT, SAVE, START, AgentClient, client

if TYPE_CHECKING:
    from tiermem.agents.project import CodingScopes
    from tiermem.memory import Memory

MAX_PAYLOAD_BYTES = 10 * 1024 * 1024
DEFAULT_ROOT = ".tiermem"  # the CLI's default (``--root``, env TIERMEM_HOME)
HOOK_SETTINGS: dict[str, Any] = {"llm": "none", "queue_replay": False, "shutdown_flush_seconds": 0,
                                 "embed_on_write": False}
START_TIMEOUT = 0.5  # seconds the start hook waits for the server's text before making it itself
SAVE_SHARE = 0.6  # a save starts no new batch after this share of its budget (closing the store takes the rest)
# With no resident server to hand a save to, the hook journals for this long from its start, in
# batches of SAVE_ALONE_BATCH messages, and leaves the rest to the server it starts (P8: a stop
# hook in 1 s; a batch of 1,000 messages takes seconds, 100 about a tenth of one).
SAVE_ALONE_SECONDS = 0.6
SAVE_ALONE_BATCH = 100
CWD_VARIABLES = ("CLAUDE_PROJECT_DIR", "GEMINI_CWD", "GEMINI_PROJECT_DIR")  # when a payload has no cwd


class HookInputError(ValueError):
    """The hook's stdin is not a payload tiermem can use (not JSON, not an object, too big)."""


class ServerPort(NamedTuple):
    """How a hook reaches the resident server of its root (:mod:`tiermem.agents.server_client`).
    Each ``ask_*`` answers ``None`` when no server is there (one is started, never waited for):
    ``ask_prompt(root, client, session_id, cwd, prompt)`` and ``ask_start(..., source)`` the text,
    ``ask_save(..., transcript_path)`` ``{"accepted": True}`` when the server took the save over;
    ``ensure(root, cwd)`` starts it if needed (it loads the project of ``cwd`` first)."""

    ask_prompt: Callable[[Path, str, str, str, str], str | None]
    ask_start: Callable[[Path, str, str, str, str], str | None]
    ask_save: Callable[[Path, str, str, str, str], object]
    ensure: Callable[[Path, str], object]


def resident_server() -> ServerPort:
    """The real resident server."""
    from tiermem.agents.server_client import ask_prompt, ask_save, ensure_server

    return ServerPort(ask_prompt, _ask_start, ask_save, ensure_server)


def _ask_start(root: Path, client_name: str, session_id: str, cwd: str, source: str) -> str | None:
    """The server's session-start text (``POST /start``; its tokenizer is warm), ``None`` when it
    is down or cannot make it (a server without that route): then the hook makes it."""
    from tiermem.agents.server_client import ServerError, request

    try:
        reply = request(root, "POST", "/start", {"client": client_name, "session_id": session_id, "cwd": cwd,
                                                 "source": source}, START_TIMEOUT)
    except ServerError:
        return None
    text = reply.get("text") if reply is not None else None
    return text if isinstance(text, str) else None


class HookCall(NamedTuple):
    """One hook: who called, what it sent, where memory lives, and its resident server."""

    agent: AgentClient
    event: str
    payload: Mapping[str, Any]
    root: Path
    env: Mapping[str, str]
    server: ServerPort
    deadline: float | None = None  # time.monotonic() after which a save starts no new batch
    started: float | None = None  # time.monotonic() when the hook started (a save alone stops sooner)

    @property
    def session_id(self) -> str:
        value = self.payload.get("session_id")
        return value if isinstance(value, str) and value.strip() else "unknown"

    @property
    def cwd(self) -> str:
        value = self.payload.get("cwd")
        if isinstance(value, str) and value.strip():
            return value
        return next((self.env[name] for name in CWD_VARIABLES if self.env.get(name)), os.getcwd())

    def text(self, name: str) -> str | None:
        value = self.payload.get(name)
        return value if isinstance(value, str) else None


Action = Callable[[HookCall], str]


class HookResult(NamedTuple):
    """What a hook prints (``stdout``, often nothing) and how it went: ``outcome`` is ``"ok"``,
    ``"ignored"`` (an event tiermem does not use) or ``"failed"`` (logged; ``detail`` says why)."""

    stdout: bytes = b""
    action: str | None = None
    outcome: str = "ok"
    detail: str = ""


def parse_payload(data: bytes) -> dict[str, Any]:
    """The hook's JSON object; :class:`HookInputError` for anything else."""
    if len(data) > MAX_PAYLOAD_BYTES:
        raise HookInputError(f"the payload is over {MAX_PAYLOAD_BYTES} bytes")
    try:
        payload = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise HookInputError(f"the payload is not JSON: {exc}") from None
    if not isinstance(payload, dict):
        raise HookInputError(f"the payload is a JSON {type(payload).__name__}, not an object")
    return payload


# --- the actions ----------------------------------------------------------------------------------------
def quiet_library() -> None:
    """The library logs through ``logging``; with no handler, its warnings would reach stderr (the
    client's screen). Installed by the actions that load it (``logging`` costs a prompt hook 15 ms)."""
    import logging

    library = logging.getLogger("tiermem")
    if not any(isinstance(handler, logging.NullHandler) for handler in library.handlers):
        library.addHandler(logging.NullHandler())


def _open(call: HookCall) -> tuple[Memory, Memory, CodingScopes]:
    """The person and project memories of the payload's ``cwd``, opened as a hook must (no LLM,
    no queue replay, no shutdown flush, no embedding)."""
    quiet_library()
    from tiermem.agents.project import open_scopes

    return open_scopes(call.root, call.cwd, **HOOK_SETTINGS)


def start_action(call: HookCall) -> str:
    """The memory text of both scopes: the resident server's when it is up, else made here (see
    :func:`tiermem.agents.inject.start_context`; the server is started then)."""
    source = call.text("source") or ""
    text = call.server.ask_start(call.root, call.agent.name, call.session_id, call.cwd, source)
    if text is not None:
        return text
    quiet_library()
    from tiermem.agents.inject import start_context
    from tiermem.agents.session_state import SessionState

    person, project, _ = _open(call)
    try:
        state = SessionState.load(call.root, call.agent.name, call.session_id)
        text = start_context(person, project, state, source, project.settings.coding_start_tokens)
        state.save()
    finally:
        project.close()
        person.close()
    _start_server(call)
    return text


def prompt_action(call: HookCall) -> str:
    """The resident server's memory for the prompt; "" when it is down (it is started then)."""
    prompt = call.text("prompt")
    if not prompt or not prompt.strip():
        return ""
    return call.server.ask_prompt(call.root, call.agent.name, call.session_id, call.cwd, prompt) or ""


def save_action(call: HookCall) -> str:
    """Journal the transcript's new messages and queue them (the resident server does it when it
    is up); prints nothing. A transcript that did not grow since the last save costs no store at
    all (Claude Code's Stop after each turn, Gemini CLI's hooks). With no server to take it, the
    hook saves for :data:`SAVE_ALONE_SECONDS` and leaves the rest to the server it started
    (:mod:`tiermem.agents.pending_saves`), or to the session's next save."""
    from tiermem.agents.session_state import SessionState

    transcript = call.text("transcript_path")
    if not transcript or not SessionState.load(call.root, call.agent.name, call.session_id).transcript_grew(
            Path(transcript)):
        return ""
    taken = call.server.ask_save(call.root, call.agent.name, call.session_id, call.cwd, transcript)
    if isinstance(taken, Mapping) and taken.get("accepted") is True:
        return ""  # the server saves it after answering
    quiet_library()
    from tiermem.agents import pending_saves
    from tiermem.agents.project import open_project
    from tiermem.agents.save import save_transcript

    project, _ = open_project(call.root, call.cwd, **HOOK_SETTINGS)
    try:
        state = SessionState.load(call.root, call.agent.name, call.session_id)
        report = save_transcript(project, call.agent.name, call.session_id, Path(transcript), state,
                                 until=_alone_until(call), batch=SAVE_ALONE_BATCH)
    finally:
        project.close()
    if not report.more:
        pending_saves.clear(call.root, call.agent.name, call.session_id)
    elif Path(transcript).is_absolute() and Path(call.cwd).is_absolute():
        pending_saves.leave(call.root, pending_saves.PendingSave(call.agent.name, call.session_id, call.cwd,
                                                                 transcript))
    return ""


def _alone_until(call: HookCall) -> float | None:
    """When a save with no server starts no new batch: :data:`SAVE_ALONE_SECONDS` after the hook
    started, within its budget's deadline."""
    moments = [moment for moment in (call.deadline, None if call.started is None else
                                     call.started + SAVE_ALONE_SECONDS) if moment is not None]
    return min(moments) if moments else None


def _start_server(call: HookCall) -> None:
    try:
        call.server.ensure(call.root, call.cwd)
    except Exception as exc:  # the text is ready: a server that cannot start is only logged
        hook_log.write(call.root, call.agent.name, call.event, call.session_id,
                       f"could not start the resident server: {type(exc).__name__}: {exc}")


ACTION_FUNCTIONS: dict[str, Action] = {START: start_action, PROMPT: prompt_action, SAVE: save_action}


# --- one hook -------------------------------------------------------------------------------------------
def run_hook(client_name: str, event: str, stdin: bytes, root: Path, env: Mapping[str, str] | None = None,
             actions: Mapping[str, Action] | None = None, server: ServerPort | None = None,
             deadline: float | None = None, started: float | None = None) -> HookResult:
    """Do one hook in-process: what to print and how it went. Never raises (but on
    ``BaseException``s such as ``KeyboardInterrupt``); a failure is one line in the hook log.
    ``actions`` (action -> function) and ``server`` replace the real ones (tests); ``deadline``
    (``time.monotonic()``): a save leaves what it cannot read by then to the next one; ``started``:
    when the hook started (a save with no server stops :data:`SAVE_ALONE_SECONDS` after it)."""
    action: str | None = None
    session: str | None = None
    try:
        agent = client(client_name)
        action = agent.action(event)
        if action is None:
            return HookResult(outcome="ignored")
        call = HookCall(agent, event, parse_payload(stdin), Path(root), os.environ if env is None else env,
                        server or resident_server(), deadline, started)
        session = call.session_id
        text = (actions or ACTION_FUNCTIONS)[action](call)
        shown = agent.context_output(event, text) if text else None
        out = b"" if shown is None else json.dumps(shown, ensure_ascii=False).encode("utf-8") + b"\n"
        return HookResult(out, action)
    except Exception as exc:
        detail = f"{type(exc).__name__}: {exc}"
        hook_log.write(Path(root), client_name, event, session, detail)
        return HookResult(b"", action, "failed", detail)


# --- the process ----------------------------------------------------------------------------------------
class Watchdog:
    """Ends the process when ``seconds`` pass before :meth:`finish`: ``expire()`` runs (it logs and
    exits). ``wait(seconds)`` is the clock (``threading.Event.wait``; tests pass one that returns
    at once). :meth:`finish` and the expiry exclude each other, so output is printed whole or not at all."""

    def __init__(self, seconds: float, expire: Callable[[], None],
                 wait: Callable[[float], bool] | None = None) -> None:
        self.seconds = seconds
        self.expire = expire
        self.wait = wait
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._fired = False

    def start(self) -> None:
        threading.Thread(target=self._watch, name="tiermem-hook-watchdog", daemon=True).start()

    def _watch(self) -> None:
        (self.wait or self._done.wait)(self.seconds)
        with self._lock:
            if self._done.is_set():
                return
            self._fired = True
            self.expire()

    def finish(self) -> bool:
        """True when the hook finished within its budget (the watchdog will not fire any more)."""
        with self._lock:
            if self._fired:
                return False
            self._done.set()
            return True


class HookArgs(NamedTuple):
    root: Path
    client: str
    event: str


def parse_args(argv: Sequence[str], env: Mapping[str, str]) -> HookArgs:
    """``[--root R | --root=R] [hook] CLIENT EVENT`` (the root: ``--root``, else ``TIERMEM_HOME``,
    else ``.tiermem``); other arguments are a ``HookInputError`` that names the root it found."""
    rest = list(argv)
    root = env.get("TIERMEM_HOME") or DEFAULT_ROOT
    while rest and rest[0].startswith("--root"):
        option = rest.pop(0)
        if option == "--root" and rest:
            root = rest.pop(0)
        elif option.startswith("--root="):
            root = option[len("--root="):]
        else:
            raise UsageError(Path(root), f"unexpected option {option!r}")
    if rest and rest[0] == "hook":
        rest.pop(0)
    if len(rest) != 2:
        raise UsageError(Path(root), "usage: tiermem [--root DIR] hook CLIENT EVENT")
    return HookArgs(Path(root).expanduser(), rest[0], rest[1])


class UsageError(HookInputError):
    """Arguments ``tiermem hook`` does not take (logged under ``root``)."""

    def __init__(self, root: Path, message: str) -> None:
        super().__init__(message)
        self.root = root


def main(argv: Sequence[str] | None = None, *, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None,
         env: Mapping[str, str] | None = None, exit_process: Callable[[int], Any] = os._exit,
         wait: Callable[[float], bool] | None = None, actions: Mapping[str, Action] | None = None,
         server: ServerPort | None = None) -> int:
    """The hook process: always returns 0. ``exit_process``, ``wait``, ``actions`` and ``server``
    are seams for tests."""
    environ = os.environ if env is None else env
    try:
        args = parse_args(sys.argv[1:] if argv is None else argv, environ)
    except UsageError as exc:
        hook_log.write(exc.root.expanduser(), "-", "-", None, str(exc))
        return 0
    budget = _budget(args)
    started = time.monotonic()
    deadline = started + budget * SAVE_SHARE

    def expire() -> None:
        hook_log.write(args.root, args.client, args.event, None, f"ran past its budget of {budget:g} s; gave up")
        exit_process(0)

    watchdog = Watchdog(budget, expire, wait)
    watchdog.start()
    source = stdin if stdin is not None else sys.stdin.buffer
    data = source.read(MAX_PAYLOAD_BYTES + 1)
    result = run_hook(args.client, args.event, data, args.root, environ, actions, server, deadline, started)
    if watchdog.finish() and result.stdout:
        sink = stdout if stdout is not None else sys.stdout.buffer
        sink.write(result.stdout)
        sink.flush()
    return 0


def _budget(args: HookArgs) -> float:
    try:
        return client(args.client).budget(args.event)
    except Exception:  # an unknown client: run_hook logs it; the shortest budget meanwhile
        return BUDGET_SECONDS[PROMPT]


if __name__ == "__main__":  # pragma: no cover - python -m tiermem.agents.hook_runner
    sys.exit(main())
