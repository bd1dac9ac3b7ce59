"""Codex CLI (``@openai/codex``): its hook events, its hook output, its rollout lines, and where
``tiermem setup codex`` writes (see docs/coding-agents.md)."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple  # not dataclasses: every hook loads this module

from tiermem.agents.clients import PROMPT, SAVE, START, AgentClient, hook_timeout_seconds, register
from tiermem.agents.context_text import is_context_text

if TYPE_CHECKING:  # setup's modules are imported by setup alone (every hook loads this module)
    from tiermem.agents.config_files import Change, ConfigPlan, FileFormat, SetupPlace

NAME = "codex"
EVENTS = {"SessionStart": START, "UserPromptSubmit": PROMPT, "PreCompact": SAVE, "Stop": SAVE, "SessionEnd": SAVE}
SESSION_END_MAX_SECONDS = 3  # Codex clamps a SessionEnd hook's timeout to 1-3 s


# ----------------------------------------------------------------------------- hook output (engineer C)


def context_output(event: str, text: str) -> dict[str, Any] | None:
    """The stdout object that adds ``text`` to the conversation (SessionStart, UserPromptSubmit)."""
    if not text:
        return None
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


# ----------------------------------------------------------------------------- transcript (engineer A)


#: How the user-role messages Codex writes for itself begin (older versions carry no provenance
#: metadata): the environment, AGENTS.md and user instructions, a shell command's record, notices.
CONTEXT_PREFIXES = ("<environment_context>", "# AGENTS.md instructions", "<user_instructions>", "<INSTRUCTIONS>",
                    "<user_shell_command>", "<turn_aborted>", "<subagent_notification>", "<skill>",
                    "<codex_internal_context", "<agent_message_board_notification>", "<user_verification_notice>")
_NOT_SAID = frozenset({"developer", "system"})  # base prompt, permissions, skills, the context hooks added
_HARNESS = frozenset({"harness", "skills"})  # provenance of the parts Codex itself wrote


def transcript_line(line: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The messages of one line of a Codex rollout (``$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl``):
    ``response_item`` lines carry a Responses item (:func:`~tiermem.integrations.responses_items.item_messages`:
    messages, tool calls named ``<namespace>__<name>`` for MCP tools, their outputs; reasoning left
    out). Left out: every other line type (session meta, events, turn context, token counts, the
    ``compacted`` record), ``developer`` and ``system`` messages (among them the context tiermem's
    hooks added), parts Codex wrote itself (provenance ``harness``, ``skills``), user-role context it
    injects (``<environment_context>``, AGENTS.md, ...), and the compaction summary (an assistant
    item whose line has ``metadata.compaction_output``)."""
    from tiermem.integrations.responses_items import content_text, item_messages

    item = line.get("payload")
    metadata = line.get("metadata")
    if line.get("type") != "response_item" or not isinstance(item, Mapping):
        return []
    if isinstance(metadata, Mapping) and metadata.get("compaction_output"):
        return []
    if item.get("type") in (None, "message"):
        if item.get("role") in _NOT_SAID or _written_by_codex(item):
            return []
        if item.get("role") == "user" and is_context_text(content_text(item.get("content")), CONTEXT_PREFIXES):
            return []
    namespace, name = item.get("namespace"), item.get("name")
    if isinstance(namespace, str) and namespace and isinstance(name, str) and not name.startswith(namespace):
        item = {**item, "name": f"{namespace}__{name}"}
    ordinal = line.get("ordinal")
    return item_messages(item, ordinal if isinstance(ordinal, int) else 0)


def _written_by_codex(item: Mapping[str, Any]) -> bool:
    """The message's parts are marked as Codex's own (``content_item_metadata[].provenance.type``)."""
    passthrough = item.get("internal_chat_message_metadata_passthrough")
    parts = passthrough.get("content_item_metadata") if isinstance(passthrough, Mapping) else None
    if not isinstance(parts, list) or not parts:
        return False
    provenances = [part.get("provenance") if isinstance(part, Mapping) else None for part in parts]
    return all(isinstance(p, Mapping) and p.get("type") in _HARNESS for p in provenances)


# ----------------------------------------------------------------------------- setup (engineer B)


def codex_home(place: SetupPlace) -> Path:
    """Codex's folder: ``$CODEX_HOME``, else ``~/.codex``."""
    chosen = place.env.get("CODEX_HOME")
    return Path(chosen).expanduser() if chosen else place.home / ".codex"


def write_config(place: SetupPlace) -> ConfigPlan:
    """Hooks in ``$CODEX_HOME/hooks.json`` (or ``<project>/.codex/hooks.json``); the MCP server as
    ``[mcp_servers.tiermem]`` in ``$CODEX_HOME/config.toml`` (or ``<project>/.codex/config.toml``),
    its tools approved; in the user's ``config.toml`` always: ``[features] hooks = true`` and the
    trust of our hooks (``[hooks.state]``, see :class:`CodexTrust`). Not ``required = true``: a
    required server that fails to start stops Codex, and memory must never do that."""
    from tiermem.agents.config_files import ConfigPlan, hook_marker
    from tiermem.agents.config_json import JsonHooks
    from tiermem.agents.config_toml import TomlFlag, TomlMcpServer

    home = codex_home(place)
    config = home / "config.toml"
    folder = home if place.project is None else place.project / ".codex"
    hooks_file = folder / "hooks.json"
    handlers = {event: {"type": "command", "command": place.hook_command(NAME, event),
                        "timeout": _timeout(event, action)} for event, action in EVENTS.items()}
    argv = place.mcp_argv()
    server = {"command": argv[0], "args": argv[1:], "default_tools_approval_mode": "approve"}
    edits = (JsonHooks(hooks_file, hook_marker(NAME), handlers),
             TomlFlag(config, ("features", "hooks"), True),
             TomlMcpServer(folder / "config.toml", "tiermem", server),
             CodexTrust(config, hooks_file, hook_marker(NAME)))
    notes = [f"Codex runs only hooks it trusts: setup marked its own hooks trusted in {config} ([hooks.state], "
             "as Codex's /hooks review does). If they stop running (Codex skips a changed hook silently), run "
             "`tiermem setup codex` again, or review them with /hooks in codex."]
    if place.project is not None:
        notes.append(f"Codex reads {folder} only in a trusted project: accept its prompt in codex, or run "
                     f"`codex exec --trust` once in {place.project}.")
    return ConfigPlan(edits, tuple(notes))


def _timeout(event: str, action: str) -> int:
    seconds = hook_timeout_seconds(action)
    return min(seconds, SESSION_END_MAX_SECONDS) if event == "SessionEnd" else seconds


class CodexTrust(NamedTuple):
    """The trust Codex (0.171) keeps for each hook in the user's ``config.toml``:
    ``[hooks.state."<hooks file>:<event_snake>:<group>:<handler>"]`` with ``enabled = true`` and
    ``trusted_hash = "sha256:<hex>"`` of the handler (:func:`trust_hash`). Setup writes it for our
    handlers of ``hooks_file`` (as edited in this run), marked ``tiermem setup``, and drops our
    marked entries that no longer match a handler; remove drops them all."""

    path: Path
    hooks_file: Path
    marker: str

    @property
    def format(self) -> FileFormat:
        from tiermem.agents.config_toml import TOML

        return TOML

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        import tomlkit

        from tiermem.agents.config_files import ADDED, REMOVED, TOML_MARK, UNCHANGED, UPDATED, Change
        from tiermem.agents.config_toml import prune_toml, toml_mark, toml_table

        source = os.path.realpath(self.hooks_file)
        wanted = {} if remove else dict(self._trusted(docs.get(self.hooks_file) or {}, source))
        item = f"hooks.state (trust of {len(wanted)} tiermem hooks)" if wanted else "hooks.state (tiermem hooks)"
        state = toml_table(doc, ("hooks", "state"), self.path, create=bool(wanted), super_last=True)
        if state is None:
            return [Change(item, UNCHANGED)]
        stale = [key for key in state if key.startswith(source + ":") and key not in wanted
                 and toml_mark(state[key]) is not None]
        for key in stale:
            del state[key]
        fresh = {key: digest for key, digest in wanted.items() if not _trusts(state.get(key), digest)}
        replaced = any(key in state for key in fresh)
        for key, digest in fresh.items():
            entry = tomlkit.table()
            entry.comment(TOML_MARK)
            entry["enabled"] = True
            entry["trusted_hash"] = digest
            state[key] = entry
        prune_toml(doc, ("hooks", "state"))
        if remove:
            return [Change(item, REMOVED if stale else UNCHANGED)]
        if not stale and not fresh:
            return [Change(item, UNCHANGED)]
        return [Change(item, ADDED if len(fresh) == len(wanted) and not stale and not replaced else UPDATED)]

    def _trusted(self, hooks_doc: Mapping[str, Any], source: str) -> Iterator[tuple[str, str]]:
        """(state key, trusted hash) of each of our command handlers in the hooks document."""
        events = hooks_doc.get("hooks")
        for event, groups in events.items() if isinstance(events, dict) else ():
            for gi, group in enumerate(groups if isinstance(groups, list) else ()):
                handlers = group.get("hooks") if isinstance(group, dict) else None
                for hi, handler in enumerate(handlers if isinstance(handlers, list) else ()):
                    command = handler.get("command") if isinstance(handler, dict) else None
                    if handler.get("type") == "command" and isinstance(command, str) and self.marker in command:
                        yield f"{source}:{snake_case(event)}:{gi}:{hi}", trust_hash(event, group, handler)


def _trusts(entry: Any, digest: str) -> bool:
    return entry is not None and entry.get("trusted_hash") == digest and entry.get("enabled", True) is True


def snake_case(event: str) -> str:
    """``SessionStart`` -> ``session_start`` (Codex's event label)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", event).lower()


def trust_hash(event: str, group: Mapping[str, Any], handler: Mapping[str, Any]) -> str:
    """The ``trusted_hash`` Codex 0.171 computes for a command handler: sha256 of the canonical
    JSON (sorted keys, no spaces) of ``{"event_name", "hooks": [{"type", "command", "timeout",
    "async", "statusMessage"?}], "matcher"?}`` — the timeout as Codex normalises it (600 when
    unset; SessionEnd clamped to 1-3 s), no matcher for UserPromptSubmit and Stop."""
    import hashlib

    timeout = handler.get("timeout")
    end = event == "SessionEnd"
    timeout = min(max(timeout or 1, 1), SESSION_END_MAX_SECONDS) if end else max(timeout or 600, 1)
    one: dict[str, Any] = {"type": "command", "command": handler["command"], "timeout": timeout,
                           "async": bool(handler.get("async", False))}
    if handler.get("statusMessage") is not None:
        one["statusMessage"] = handler["statusMessage"]
    identity: dict[str, Any] = {"event_name": snake_case(event), "hooks": [one]}
    matcher = None if event in ("UserPromptSubmit", "Stop") else group.get("matcher")
    if matcher is not None:
        identity["matcher"] = matcher
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


CLIENT = register(AgentClient(
    name=NAME,
    label="Codex CLI",
    events=EVENTS,
    context_output=context_output,
    transcript_line=transcript_line,
    config=write_config,
    event_limits={"SessionEnd": SESSION_END_MAX_SECONDS},
))
