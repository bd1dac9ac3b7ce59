"""Gemini CLI (``@google/gemini-cli``): its hook events, its hook output, its chat-file lines, and
where ``tiermem setup gemini`` writes (see docs/coding-agents.md)."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.agents.clients import PROMPT, SAVE, START, AgentClient, hook_timeout_seconds, register
from tiermem.agents.context_text import is_context_text

if TYPE_CHECKING:  # setup's modules are imported by setup alone (every hook loads this module)
    from tiermem.agents.config_files import ConfigPlan, SetupPlace

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


_HOOK_CONTEXT_RE = re.compile(r"<hook_context>.*?</hook_context>\s*", re.DOTALL)  # what our hooks added


def transcript_line(line: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of one line of a Gemini CLI chat file (``~/.gemini/tmp/<project>/chats/session-*.jsonl``):
    a ``user`` line's text (the ``<hook_context>`` blocks of the context our hooks added taken out;
    the ``<session_context>`` setup message left out) and its tool results (``functionResponse``
    parts); a ``gemini`` line's text, then one message per tool call (its result comes in the next
    ``user`` line). Left out: the header, ``$set`` patches, info/error/warning lines, thoughts.
    Gemini CLI writes a model message again when it adds tool calls to it: :func:`transcript_key`
    names the message so that only what a rewrite adds is read (the text before, the calls after)."""
    kind = line.get("type")
    if kind == "user":
        return _user_messages(line.get("content"))
    if kind != "gemini":
        return []
    text = line.get("content")
    out: list[dict[str, Any]] = []
    if isinstance(text, str) and text.strip():
        out.append({"role": "assistant", "content": text})
    calls = line.get("toolCalls")
    for call in calls if isinstance(calls, list) else []:
        if isinstance(call, Mapping) and isinstance(call.get("name"), str):
            arguments = json.dumps(call.get("args", {}), ensure_ascii=False, sort_keys=True)
            function = {"name": call["name"], "arguments": arguments}
            out.append({"role": "assistant", "content": None, "tool_calls": [
                {"id": str(call.get("id") or call["name"]), "type": "function", "function": function}]})
    return out


def transcript_key(line: Mapping[str, Any]) -> str | None:
    """The id of a message line (Gemini CLI rewrites a message under the same id)."""
    key = line.get("id")
    return key if isinstance(key, str) and line.get("type") in ("user", "gemini") else None


def _user_messages(content: Any) -> list[dict[str, Any]]:
    parts = [{"text": content}] if isinstance(content, str) else content if isinstance(content, list) else []
    out: list[dict[str, Any]] = []
    texts: list[str] = []
    for part in parts:
        if not isinstance(part, Mapping):
            continue
        if isinstance(part.get("text"), str):
            texts.append(_HOOK_CONTEXT_RE.sub("", part["text"]).strip())
        response = part.get("functionResponse")
        if isinstance(response, Mapping):
            out.append(_tool_result(response))
    text = "\n".join(t for t in texts if t)
    if text and not is_context_text(text):
        out.append({"role": "user", "content": text})
    return out


def _tool_result(response: Mapping[str, Any]) -> dict[str, Any]:
    body = response.get("response")
    output = body.get("output") if isinstance(body, Mapping) else None
    text = output if isinstance(output, str) else json.dumps(body, ensure_ascii=False, sort_keys=True, default=str)
    name = response.get("name")
    call_id = response.get("id") or name or "call"
    return {"role": "tool", "tool_call_id": str(call_id), "content": text,
            **({"name": name} if isinstance(name, str) else {})}


# ----------------------------------------------------------------------------- setup (engineer B)


def gemini_home(place: SetupPlace) -> Path:
    """The folder holding Gemini CLI's user ``.gemini``: ``$GEMINI_CLI_HOME``, else the home folder."""
    chosen = place.env.get("GEMINI_CLI_HOME")
    return Path(chosen).expanduser() if chosen else place.home


def write_config(place: SetupPlace) -> ConfigPlan:
    """Hooks and the MCP server (its tools trusted) in ``<project>/.gemini/settings.json`` or the
    user's ``settings.json`` (``~/.gemini``, or ``$GEMINI_CLI_HOME/.gemini``); hooks switched on
    (``hooksConfig.enabled``) if they were off. Hook timeouts are in milliseconds."""
    from tiermem.agents.config_files import ConfigPlan, hook_marker
    from tiermem.agents.config_json import JsonHooks, JsonMcpServer, JsonSwitchOn

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
    transcript_key=transcript_key,
))
