"""Gemini CLI (``@google/gemini-cli``): its hook events, its hook output, its chat-file lines, and
where ``tiermem setup gemini`` writes (see docs/coding-agents.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiermem.agents.clients import PROMPT, SAVE, START, AgentClient, hook_timeout_seconds, register
from tiermem.agents.config_files import ConfigPlan, SetupPlace, hook_marker
from tiermem.agents.config_json import JsonHooks, JsonMcpServer, JsonSwitchOn

NAME = "gemini"
# AfterAgent (once per turn) journals the turn, SessionEnd the rest. Not PreCompress: Gemini CLI 0.61
# fires it (asynchronously) before every model call, compressing or not: a process per model call,
# racing the others, for nothing AfterAgent does not already save (the chat file keeps every message).
EVENTS = {"SessionStart": START, "BeforeAgent": PROMPT, "AfterAgent": SAVE, "SessionEnd": SAVE}
HOOK_NAME = "tiermem"  # one name for all our hooks: `hooksConfig.disabled: ["tiermem"]` turns them all off


# ----------------------------------------------------------------------------- hook output (engineer C)


def context_output(event: str, text: str) -> dict[str, Any] | None:
    """The stdout object that adds ``text`` to the conversation (SessionStart, BeforeAgent)."""
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# ----------------------------------------------------------------------------- transcript (engineer A)


def transcript_line(line: Any) -> list[dict[str, Any]]:
    """Placeholder until the chat-file reader lands: no messages."""
    return []


# ----------------------------------------------------------------------------- setup (engineer B)


def gemini_home(place: SetupPlace) -> Path:
    """The folder holding Gemini CLI's user ``.gemini``: ``$GEMINI_CLI_HOME``, else the home folder."""
    chosen = place.env.get("GEMINI_CLI_HOME")
    return Path(chosen).expanduser() if chosen else place.home


def write_config(place: SetupPlace) -> ConfigPlan:
    """Hooks and the MCP server (its tools trusted) in ``<project>/.gemini/settings.json`` or the
    user's ``settings.json`` (``~/.gemini``, or ``$GEMINI_CLI_HOME/.gemini``); hooks switched on
    (``hooksConfig.enabled``) if they were off. Hook timeouts are in milliseconds."""
    folder = (gemini_home(place) if place.project is None else place.project) / ".gemini"
    settings = folder / "settings.json"
    handlers = {event: {"name": HOOK_NAME, "type": "command", "command": place.hook_command(NAME, event),
                        "timeout": 1000 * hook_timeout_seconds(action)} for event, action in EVENTS.items()}
    argv = place.mcp_argv()
    server = {"command": argv[0], "args": argv[1:], "trust": True}
    edits = (JsonHooks(settings, hook_marker(NAME), handlers),
             JsonMcpServer(settings, ("mcpServers",), "tiermem", server),
             JsonSwitchOn(settings, ("hooksConfig", "enabled")))
    where = "this project" if place.project is not None else "a project"
    notes = (f"Gemini CLI skips project settings and MCP servers in a folder it does not trust: trust {where} "
             "when it asks (or list it in ~/.gemini/trustedFolders.json).",)
    return ConfigPlan(edits, notes)


CLIENT = register(AgentClient(
    name=NAME,
    label="Gemini CLI",
    events=EVENTS,
    context_output=context_output,
    transcript_line=transcript_line,
    config=write_config,
))
