"""tiermem's entries in JSON config files (Claude Code and Gemini CLI settings, ``.mcp.json``,
``~/.claude.json``, Codex ``hooks.json``): the format and the edits; see :mod:`tiermem.agents.config_files`."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.agents.config_files import (
    ADDED,
    REMOVED,
    UNCHANGED,
    UPDATED,
    Change,
    FileFormat,
    bad_config,
    is_tiermem_server,
)
from tiermem.errors import InvalidInput


class JsonFormat:
    """JSON objects, written back in the file's own indentation and final newline."""

    name = "JSON"

    def load(self, text: str, path: Path) -> Any:
        if not text.strip():
            return {}
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise bad_config(path, f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}; comments "
                                   "are not JSON)") from exc
        if not isinstance(doc, dict):
            raise bad_config(path, f"holds a JSON {_json_type(doc)}, not an object")
        return doc

    def dump(self, doc: Any, original: str | None) -> str:
        indent, newline = _json_style(original)
        return json.dumps(doc, indent=indent, ensure_ascii=False) + ("\n" if newline else "")

    def is_empty(self, doc: Any) -> bool:
        return not doc


JSON = JsonFormat()


def _json_style(original: str | None) -> tuple[int | str | None, bool]:
    """The indentation (``None``: all on one line) and final newline of a JSON text."""
    if original is None or not original.strip():
        return 2, True
    newline = original.endswith("\n")
    found = re.search(r"\n([ \t]+)\S", original)
    if found is None:
        return (None if "\n" not in original.strip() else 2), newline
    space = found.group(1)
    return ("\t" * len(space) if space.startswith("\t") else len(space)), newline


def _json_type(value: Any) -> str:
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "list"
    return "null" if value is None else type(value).__name__.replace("str", "string")


def json_object(doc: dict[str, Any], keys: Sequence[str], path: Path, create: bool) -> dict[str, Any] | None:
    """The object at ``keys`` (made, with its parents, when ``create``); ``None`` when absent and
    not made. A part of the wrong type is an :class:`InvalidInput`."""
    node = doc
    for depth, key in enumerate(keys):
        child = node.get(key)
        if child is None:
            if not create:
                return None
            child = node[key] = {}
        if not isinstance(child, dict):
            where = ".".join(keys[: depth + 1])
            raise bad_config(path, f"{where} is a {_json_type(child)}, expected an object")
        node = child
    return node


def prune_json(doc: dict[str, Any], keys: Sequence[str]) -> None:
    """Delete the empty objects and lists along ``keys``, deepest first."""
    for depth in range(len(keys), 0, -1):
        parent = json_object(doc, keys[: depth - 1], Path(), create=False) if depth > 1 else doc
        if parent is None:
            continue
        value = parent.get(keys[depth - 1], 0)
        if isinstance(value, (dict, list)) and not value:
            del parent[keys[depth - 1]]


@dataclass(frozen=True)
class JsonHooks:
    """Our handlers, one per event (``{event: handler}``), in a JSON ``hooks`` object of the
    Claude Code shape ``{"hooks": {"Event": [{"matcher"?, "hooks": [handler, ...]}, ...]}}``.
    A handler is ours when its ``command`` holds ``marker``. Setup appends a group for an event
    without ours, updates ours in place, and drops ours from events no longer in ``handlers``."""

    path: Path
    marker: str
    handlers: Mapping[str, Mapping[str, Any]]
    format: FileFormat = JSON

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        changes: list[Change] = []
        hooks = json_object(doc, ("hooks",), self.path, create=not remove)
        if hooks is not None:
            for event in list(hooks):
                if (remove or event not in self.handlers) and self._take_out(hooks, event, self._ours(hooks, event)):
                    changes.append(Change(f"hooks.{event}", REMOVED))
            if not remove:
                changes += [Change(f"hooks.{event}", self._put(hooks, event, dict(handler)))
                            for event, handler in self.handlers.items()]
            prune_json(doc, ("hooks",))
        done = {change.item for change in changes}
        return changes + [Change(item, UNCHANGED) for item in (f"hooks.{event}" for event in self.handlers)
                          if item not in done]

    def _ours(self, hooks: dict[str, Any], event: str) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(group, handler) of each of our handlers of ``event``, in order (none when the event's
        value is not a list: not a hook list, e.g. an older Gemini CLI's ``hooks.enabled``)."""
        groups = hooks.get(event)
        found = []
        for group in groups if isinstance(groups, list) else []:
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for handler in handlers if isinstance(handlers, list) else []:
                command = handler.get("command") if isinstance(handler, dict) else None
                if isinstance(command, str) and self.marker in command:
                    found.append((group, handler))
        return found

    def _take_out(self, hooks: dict[str, Any], event: str, ours: list[tuple[dict[str, Any], dict[str, Any]]]) -> bool:
        """Remove these handlers, then their groups and the event when they became empty."""
        for group, handler in ours:
            group["hooks"] = [h for h in group["hooks"] if h is not handler]
        groups: list[Any] = hooks[event] if ours else []
        for group, _ in ours:
            if not group["hooks"] and any(g is group for g in groups):
                groups.remove(group)
        if ours and not groups:
            del hooks[event]
        return bool(ours)

    def _put(self, hooks: dict[str, Any], event: str, handler: dict[str, Any]) -> str:
        ours = self._ours(hooks, event)
        if not ours:
            if hooks.get(event) is None:
                hooks[event] = []
            groups = hooks[event]
            if not isinstance(groups, list):
                raise bad_config(self.path, f"hooks.{event} is a {_json_type(groups)}, expected a list")
            groups.append({"hooks": [handler]})
            return ADDED
        first = ours[0][1]
        before = dict(first)
        first.update(handler)
        extra = self._take_out(hooks, event, ours[1:])  # a duplicate of ours: one is enough
        return UPDATED if extra or first != before else UNCHANGED


@dataclass(frozen=True)
class JsonMcpServer:
    """Our MCP server ``name`` in the object at ``keys`` (``("mcpServers",)``). Setup sets the
    keys of ``entry`` (others the user added stay); a server of that name that is not a tiermem
    command is not ours: setup refuses to replace it, remove leaves it."""

    path: Path
    keys: tuple[str, ...]
    name: str
    entry: Mapping[str, Any]
    format: FileFormat = JSON

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        item = ".".join((*self.keys, self.name))
        servers = json_object(doc, self.keys, self.path, create=not remove)
        current = None if servers is None else servers.get(self.name)
        if current is not None and not is_tiermem_server(current):
            if remove:
                return [Change(item, UNCHANGED)]
            raise InvalidInput(f"{self.path}: {item} is already there and does not run tiermem; rename or remove "
                               "that server and run tiermem setup again (nothing was changed)")
        if servers is None or (remove and current is None):
            return [Change(item, UNCHANGED)]
        if remove:
            del servers[self.name]
            prune_json(doc, self.keys)
            return [Change(item, REMOVED)]
        if current is None:
            servers[self.name] = dict(self.entry)
            return [Change(item, ADDED)]
        before = dict(current)
        current.update(self.entry)
        return [Change(item, UPDATED if current != before else UNCHANGED)]


@dataclass(frozen=True)
class JsonListValue:
    """``value`` in the list at ``keys`` (``("permissions", "allow")``): appended once by setup,
    every copy taken out by remove."""

    path: Path
    keys: tuple[str, ...]
    value: Any
    format: FileFormat = JSON

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        item = f"{'.'.join(self.keys)} {self.value}"
        parent = json_object(doc, self.keys[:-1], self.path, create=not remove)
        values = None if parent is None else parent.get(self.keys[-1])
        if values is None and parent is not None and not remove:
            values = parent[self.keys[-1]] = []
        if values is not None and not isinstance(values, list):
            raise bad_config(self.path, f"{'.'.join(self.keys)} is a {_json_type(values)}, expected a list")
        if parent is None or values is None:
            return [Change(item, UNCHANGED)]
        if remove:
            if self.value not in values:
                return [Change(item, UNCHANGED)]
            values[:] = [v for v in values if v != self.value]
            prune_json(doc, self.keys)
            return [Change(item, REMOVED)]
        if self.value in values:
            return [Change(item, UNCHANGED)]
        values.append(self.value)
        return [Change(item, ADDED)]


@dataclass(frozen=True)
class JsonSwitchOn:
    """A switch that is on unless set to ``false`` (Gemini CLI's ``hooksConfig.enabled``): setup
    turns an explicit ``false`` on; absent stays absent. Remove leaves it (it may have been the
    user's own ``true``)."""

    path: Path
    keys: tuple[str, ...]
    format: FileFormat = JSON

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        parent = json_object(doc, self.keys[:-1], self.path, create=False)
        if remove or parent is None or parent.get(self.keys[-1]) is not False:
            return []  # on (or on by default): nothing to say
        parent[self.keys[-1]] = True
        return [Change(".".join(self.keys), UPDATED)]


