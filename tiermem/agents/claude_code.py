"""Claude Code (``@anthropic-ai/claude-code``): its hook events, its hook output, its transcript
lines, and where ``tiermem setup claude-code`` writes (see docs/coding-agents.md)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem.agents.clients import PROMPT, SAVE, START, AgentClient, hook_timeout_seconds, register
from tiermem.agents.context_text import is_context_text

if TYPE_CHECKING:  # setup's modules are imported by setup alone (every hook loads this module)
    from tiermem.agents.config_files import ConfigPlan, Edit, SetupPlace

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


#: Lines Claude Code writes for itself, not the conversation: local slash commands and their
#: output, interruption notes (``isMeta`` lines, the caveat among them, are left out by flag).
BOOKKEEPING_PREFIXES = ("<command-name>", "<command-message>", "<command-args>", "<local-command-",
                        "[Request interrupted by user")
_SKIPPED_FLAGS = ("isMeta", "isSidechain", "isCompactSummary", "isVisibleInTranscriptOnly", "isApiErrorMessage")


def transcript_line(line: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The message of one line of a Claude Code transcript (``~/.claude/projects/<dir>/<session>.jsonl``):
    ``type`` "user" and "assistant" lines carry an Anthropic-shaped ``message``; the rest
    (attachments — among them the context our hooks injected —, queue operations, ``system``
    compaction boundaries, ``last-prompt``, ``mode``, ``summary``) is Claude Code's bookkeeping.
    Left out too: ``isMeta`` lines, a subagent's (``isSidechain``), the compaction summary,
    API error notices, replies Claude Code made up (model ``<synthetic>``), local slash commands,
    thinking blocks. Tool calls and results are kept (a result as its text), images as ``[image]``."""
    message = line.get("message")
    if line.get("type") not in ("user", "assistant") or not isinstance(message, Mapping):
        return []
    role = message.get("role")
    if role not in ("user", "assistant") or any(line.get(flag) for flag in _SKIPPED_FLAGS):
        return []
    if role == "assistant" and message.get("model") == "<synthetic>":
        return []
    content = message.get("content")
    if isinstance(content, str):
        return [] if _bookkeeping(content) else [{"role": role, "content": content}]
    blocks = [kept for block in content if (kept := _block(block)) is not None] if isinstance(content, list) else []
    return [{"role": role, "content": blocks}] if blocks else []


def _bookkeeping(text: str) -> bool:
    return not text.strip() or is_context_text(text, BOOKKEEPING_PREFIXES)


def _block(block: Any) -> dict[str, Any] | None:
    """A content block as tiermem keeps it: text, tool_use, tool_result (its content as text),
    media as a placeholder; thinking and unknown blocks left out."""
    from tiermem.tiers.turns import block_text  # not at import: the hook's fast path loads every client

    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "text":
        text = block.get("text")
        return None if not isinstance(text, str) or _bookkeeping(text) else {"type": "text", "text": text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("input", {})}
    if kind == "tool_result":
        kept = {"type": "tool_result", "tool_use_id": block.get("tool_use_id"),
                "content": block_text(block.get("content"))}
        return {**kept, "is_error": True} if block.get("is_error") else kept
    if kind in ("image", "document"):
        return {"type": "text", "text": "[image]" if kind == "image" else "[file]"}
    return None


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
    from tiermem.agents.config_files import ConfigPlan, hook_marker
    from tiermem.agents.config_json import JsonHooks, JsonListValue, JsonMcpServer

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
