"""tiermem's entries in TOML config files (Codex ``config.toml``) through ``tomlkit``, so the user's
comments and layout survive: the format and the edits; see :mod:`tiermem.agents.config_files`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiermem.agents.config_files import (
    ADDED,
    REMOVED,
    TOML_MARK,
    UNCHANGED,
    UPDATED,
    Change,
    FileFormat,
    bad_config,
    is_tiermem_server,
)
from tiermem.errors import InvalidInput


class TomlFormat:
    """TOML through ``tomlkit``: comments, order and layout of what is not ours survive."""

    name = "TOML"

    def load(self, text: str, path: Path) -> Any:
        import tomlkit
        from tomlkit.exceptions import TOMLKitError

        try:
            return tomlkit.parse(text)
        except TOMLKitError as exc:
            raise bad_config(path, f"not valid TOML ({exc})") from exc

    def dump(self, doc: Any, original: str | None) -> str:
        import tomlkit

        text = tomlkit.dumps(doc)
        if not text.strip():
            return ""
        # the file ends as it did: a table added at the end, or taken out, leaves no extra blank line
        ends = 1 if original is None or not original.strip() else len(original) - len(original.rstrip("\n"))
        return text.rstrip("\n") + "\n" * ends

    def is_empty(self, doc: Any) -> bool:
        import tomlkit

        return not tomlkit.dumps(doc).strip()


TOML = TomlFormat()


def toml_table(doc: Any, keys: Sequence[str], path: Path, create: bool, super_last: bool = False) -> Any:
    """The table at ``keys`` (made, with its parents, when ``create``: parents as super tables so
    they get no header of their own, the last one too with ``super_last``); ``None`` when absent
    and not made. A part that is not a
    table is an :class:`InvalidInput`."""
    import tomlkit
    from tomlkit.items import Table
    from tomlkit.toml_document import TOMLDocument

    node = doc
    for depth, key in enumerate(keys):
        if key not in node:
            if not create:
                return None
            node[key] = tomlkit.table(is_super_table=super_last or depth < len(keys) - 1)
        child = node[key]
        if not isinstance(child, (Table, TOMLDocument)):
            where = ".".join(keys[: depth + 1])
            raise bad_config(path, f"{where} is not a table")
        node = child
    return node


def prune_toml(doc: Any, keys: Sequence[str]) -> None:
    """Delete the empty tables along ``keys``, deepest first."""
    for depth in range(len(keys), 0, -1):
        parent = toml_table(doc, keys[: depth - 1], Path(), create=False)
        table = None if parent is None else toml_table(parent, keys[depth - 1: depth], Path(), create=False)
        if table is not None and not table:
            del parent[keys[depth - 1]]


def toml_mark(item: Any) -> str | None:
    """The text after ``tiermem setup`` in an item's comment (``""`` for the bare mark), or
    ``None`` when the item is not marked as ours."""
    comment = str(getattr(getattr(item, "trivia", None), "comment", "") or "").lstrip("#").strip()
    if comment == TOML_MARK:
        return ""
    return comment[len(TOML_MARK) + 1:].strip() if comment.startswith(TOML_MARK + ";") else None


@dataclass(frozen=True)
class TomlFlag:
    """``keys`` set to ``value`` (Codex's ``[features] hooks = true``). Setup adds the key with
    the comment ``tiermem setup``, or changes another value and notes it (``tiermem setup; was
    false``); remove takes out the key it added, or puts the old value back."""

    path: Path
    keys: tuple[str, ...]
    value: Any
    format: FileFormat = TOML

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        import tomlkit

        item_name, key = ".".join(self.keys), self.keys[-1]
        table = toml_table(doc, self.keys[:-1], self.path, create=not remove)
        current = None if table is None or key not in table else table.item(key)
        mark = toml_mark(current)
        if remove:
            if current is None or mark is None:
                return [Change(item_name, UNCHANGED)]
            if mark.startswith("was "):
                table[key] = tomlkit.parse(f"old = {mark[4:]}")["old"]
            else:
                del table[key]
                prune_toml(doc, self.keys[:-1])
            return [Change(item_name, REMOVED)]
        if current is not None and current.unwrap() == self.value:
            return [Change(item_name, UNCHANGED)]
        new = tomlkit.item(self.value)
        new.comment(TOML_MARK if current is None else f"{TOML_MARK}; was {mark[4:] if mark else current.as_string()}")
        table[key] = new
        return [Change(item_name, ADDED if current is None else UPDATED)]


@dataclass(frozen=True)
class TomlMcpServer:
    """Our MCP server as the table ``[mcp_servers.<name>]`` (Codex): as :class:`JsonMcpServer`."""

    path: Path
    name: str
    entry: Mapping[str, Any]
    keys: tuple[str, ...] = ("mcp_servers",)
    format: FileFormat = TOML

    def apply(self, doc: Any, remove: bool, docs: Mapping[Path, Any]) -> list[Change]:
        import tomlkit

        item = ".".join((*self.keys, self.name))
        servers = toml_table(doc, self.keys, self.path, create=not remove, super_last=True)
        current = None if servers is None else toml_table(servers, (self.name,), self.path, create=False)
        if current is not None and not is_tiermem_server(current.unwrap()):
            if remove:
                return [Change(item, UNCHANGED)]
            raise InvalidInput(f"{self.path}: [{item}] is already there and does not run tiermem; rename or remove "
                               "that server and run tiermem setup again (nothing was changed)")
        if servers is None or (remove and current is None):
            return [Change(item, UNCHANGED)]
        if remove:
            del servers[self.name]
            prune_toml(doc, self.keys)
            return [Change(item, REMOVED)]
        if current is None:
            table = tomlkit.table()
            for key, value in self.entry.items():
                table[key] = value
            table.add(tomlkit.nl())  # a blank line before whatever table follows
            servers[self.name] = table
            return [Change(item, ADDED)]
        stale = {key: value for key, value in self.entry.items() if key not in current or current[key] != value}
        for key, value in stale.items():
            current[key] = value
        return [Change(item, UPDATED if stale else UNCHANGED)]
