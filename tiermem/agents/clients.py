"""The coding-agent clients tiermem serves, by name: what each one's hook events mean to tiermem,
how it wants additional context back, how its transcript lines read, and where its config lives.

A client is one module (``claude_code``, ``codex``, ``gemini``) defining an :class:`AgentClient`
and registering it with :func:`register`; nothing here asks "which client?".
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from tiermem.errors import InvalidInput

if TYPE_CHECKING:
    from tiermem.agents.config_files import ConfigPlan, SetupPlace

# What a hook event asks of tiermem.
START = "start"  # a session starts, resumes, is cleared or compacted: inject the memory text
PROMPT = "prompt"  # the user sent a prompt: inject what is relevant to it, once per session
SAVE = "save"  # before compaction, after a turn, at the end: journal the new transcript lines, queue them
ACTIONS = (START, PROMPT, SAVE)
# How long each action may take before the hook gives up and exits 0 with nothing (R73). The
# timeouts setup writes in the clients' configs are a little longer (:func:`hook_timeout_seconds`),
# so the client never kills a hook that is still within its budget.
BUDGET_SECONDS = {START: 2.0, PROMPT: 1.0, SAVE: 5.0}
LIMIT_MARGIN_SECONDS = 0.5  # under a client's own cut-off, so the hook ends first and logs why

CLIENT_MODULES = ("tiermem.agents.claude_code", "tiermem.agents.codex", "tiermem.agents.gemini")


class TranscriptLine(Protocol):
    """Turns one parsed transcript line (a JSON object) into chat messages (OpenAI or Anthropic
    shape, as :func:`tiermem.tiers.turns.to_message` reads them); ``[]`` for the client's own
    bookkeeping lines. Must depend on the line alone, so a message keeps its position."""

    def __call__(self, line: Mapping[str, Any]) -> list[dict[str, Any]]: ...


class ConfigWriter(Protocol):
    """What ``tiermem setup`` changes in the client's config for one place (``place.project``
    folder, or ``None`` for the user's global config): the edits and the notes for the user;
    :mod:`tiermem.agents.setup` applies the plan. Raises ``InvalidInput`` for a place the client
    cannot be set up in."""

    def __call__(self, place: SetupPlace) -> ConfigPlan: ...


class AgentClient(NamedTuple):
    """One coding-agent client. (A named tuple: ``dataclasses`` costs every hook 15 ms of imports.)"""

    name: str  # as on the command line: "claude-code", "codex", "gemini"
    label: str  # for people: "Claude Code"
    events: Mapping[str, str]  # the client's hook event name -> START | PROMPT | SAVE
    context_output: Any  # (event name, text) -> the JSON object to print on stdout, or None
    transcript_line: TranscriptLine
    config: ConfigWriter
    notes: tuple[str, ...] = ()  # what setup tells the user (e.g. how to trust hooks)
    # a client that writes a message again when it changes: the line's message id (the transcript
    # reader then reads only what a rewrite adds; see tiermem.agents.transcript), else None
    transcript_key: Callable[[Mapping[str, Any]], str | None] | None = None
    # events the client itself cuts off sooner than tiermem's budget for them: event -> its limit (s)
    event_limits: Mapping[str, float] = MappingProxyType({})

    def action(self, event: str) -> str | None:
        """The action of a hook event, ``None`` for events tiermem does not use."""
        return self.events.get(event)

    def budget(self, event: str) -> float:
        """The hook's own time limit for ``event``: the budget of its action, and a margin under
        the client's limit where the client cuts the hook off sooner (Codex's SessionEnd)."""
        budget = BUDGET_SECONDS.get(self.action(event) or PROMPT, BUDGET_SECONDS[PROMPT])
        limit = self.event_limits.get(event)
        return budget if limit is None else max(0.5, min(budget, limit - LIMIT_MARGIN_SECONDS))


def hook_timeout_seconds(action: str) -> int:
    """The timeout setup writes for a hook of ``action``: its budget plus a second, whole seconds."""
    return math.ceil(BUDGET_SECONDS[action]) + 1


_CLIENTS: dict[str, AgentClient] = {}


def register(client: AgentClient) -> AgentClient:
    _CLIENTS[client.name] = client
    return client


def _load() -> None:
    """Import every client module (each registers itself; one imported directly is not all)."""
    for module in CLIENT_MODULES:
        importlib.import_module(module)


def client_names() -> list[str]:
    _load()
    return sorted(_CLIENTS)


def client(name: str) -> AgentClient:
    """The client called ``name``; an unknown name is an ``InvalidInput`` listing the known ones."""
    _load()
    found = _CLIENTS.get(name) if isinstance(name, str) else None
    if found is None:
        raise InvalidInput(f"unknown coding-agent client {name!r}; known: {', '.join(sorted(_CLIENTS))}")
    return found
