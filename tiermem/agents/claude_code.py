"""Claude Code (``@anthropic-ai/claude-code``): its hook events, its hook output, its transcript
lines, and where ``tiermem setup claude-code`` writes (see docs/coding-agents.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tiermem.agents.clients import PROMPT, SAVE, START, AgentClient, hook_timeout_seconds, register
from tiermem.agents.config_files import ConfigPlan, Edit, SetupPlace, hook_marker
from tiermem.agents.config_json import JsonHooks, JsonListValue, JsonMcpServer

NAME = "claude-code"
EVENTS = {"SessionStart": START, "UserPromptSubmit": PROMPT, "PreCompact": SAVE, "Stop": SAVE, "SessionEnd": SAVE}
MCP_TOOLS_RULE = "mcp__tiermem"  # a permission rule allowing every tool of the MCP server "tiermem"


# ----------------------------------------------------------------------------- hook output (engineer C)


def context_output(event: str, text: str) -> dict[str, Any] | None:
    """The stdout object that adds ``text`` to the conversation (SessionStart, UserPromptSubmit)."""
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# ----------------------------------------------------------------------------- transcript (engineer A)


def transcript_line(line: Any) -> list[dict[str, Any]]:
    """Placeholder until the transcript reader lands: no messages."""
    return []


# ----------------------------------------------------------------------------- setup (engineer B)


def config_dir(place: SetupPlace) -> Path:
    """Claude Code's user folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    chosen = place.env.get("CLAUDE_CONFIG_DIR")
    return Path(chosen).expanduser() if chosen else place.home / ".claude"


def write_config(place: SetupPlace) -> ConfigPlan:
    """Hooks in ``<project>/.claude/settings.json`` (or the user's ``settings.json``); the MCP
    server in ``<project>/.mcp.json`` (or ``mcpServers`` of the user's ``.claude.json``). Its
    tools are allowed (``permissions.allow``), and a project's server approved
    (``enabledMcpjsonServers``), in the project's ``settings.local.json`` — the only project file
    whose permissions Claude Code honours before the workspace is trusted — or the user's
    ``settings.json``."""
    handlers = {event: {"type": "command", "command": place.hook_command(NAME, event),
                        "timeout": hook_timeout_seconds(action)} for event, action in EVENTS.items()}
    argv = place.mcp_argv()
    # alwaysLoad: the server is connected before the first model request (else its tools may be
    # missing from it); a server that fails to start still leaves the session running.
    server = {"type": "stdio", "command": argv[0], "args": argv[1:], "alwaysLoad": True}
    edits: tuple[Edit, ...]
    if place.project is None:
        user_dir = config_dir(place)
        settings = user_dir / "settings.json"
        state = user_dir / ".claude.json" if place.env.get("CLAUDE_CONFIG_DIR") else place.home / ".claude.json"
        edits = (JsonHooks(settings, hook_marker(NAME), handlers),
                 JsonListValue(settings, ("permissions", "allow"), MCP_TOOLS_RULE),
                 JsonMcpServer(state, ("mcpServers",), "tiermem", server))
        return ConfigPlan(edits)
    folder = place.project / ".claude"
    local = folder / "settings.local.json"
    edits = (JsonHooks(folder / "settings.json", hook_marker(NAME), handlers),
             JsonMcpServer(place.project / ".mcp.json", ("mcpServers",), "tiermem", server),
             JsonListValue(local, ("enabledMcpjsonServers",), "tiermem"),
             JsonListValue(local, ("permissions", "allow"), MCP_TOOLS_RULE))
    notes = (f"{local} approves the tiermem server for you alone: keep it out of git. .claude/settings.json and "
             ".mcp.json name this machine's tiermem and memory root: commit them only where everyone has that path.",)
    return ConfigPlan(edits, notes)


CLIENT = register(AgentClient(
    name=NAME,
    label="Claude Code",
    events=EVENTS,
    context_output=context_output,
    transcript_line=transcript_line,
    config=write_config,
))
