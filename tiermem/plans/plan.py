"""A work-in-progress plan ("boulder state", R54) and its Markdown checklist.

The checklist is kept as the Markdown text it was given: items are the lines that look like
``- [ ] step`` or ``- [x] step`` (``*``, ``+`` and ``1.`` markers and indentation work too); any
other line (headings, notes) is kept as it is and is not an item. Checking an item rewrites only
the box of that line, so the text stays the person's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tiermem import validate
from tiermem.clock import parse_utc, utc_iso
from tiermem.errors import InvalidInput

PLAN_STATUSES: tuple[str, ...] = ("active", "paused", "completed", "abandoned")
OPEN_STATUSES: tuple[str, ...] = ("active", "paused")
MAX_TITLE_CHARS = 200
MAX_ITEM_CHARS = 1000
MAX_ITEMS = 500
MAX_CHECKLIST_CHARS = 100_000
MAX_SESSION_IDS = 500  # the most recent ones are kept
_PLAN_ID_RE = re.compile(r"^plan_[0-9a-f]{8}$")
_ITEM_RE = re.compile(
    r"^(?P<head>[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+\[)(?P<mark>[ xX])(?P<tail>\][ \t]*(?P<text>.*?))[ \t]*$"
)


@dataclass(frozen=True)
class ChecklistItem:
    """One ``- [ ]`` line: its 0-based ``index`` among the items, its text and whether it is done."""

    index: int
    text: str
    done: bool

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "text": self.text, "done": self.done}


def parse_items(checklist: str) -> tuple[ChecklistItem, ...]:
    """The checklist items of a Markdown text, in order."""
    items: list[ChecklistItem] = []
    for line in checklist.split("\n"):
        match = _ITEM_RE.match(line)
        if match:
            items.append(ChecklistItem(len(items), match["text"], match["mark"] != " "))
    return tuple(items)


def set_item(checklist: str, index: int, done: bool) -> str:
    """``checklist`` with the box of item ``index`` set; other bytes unchanged."""
    lines = checklist.split("\n")
    seen = 0
    for number, line in enumerate(lines):
        match = _ITEM_RE.match(line)
        if not match:
            continue
        if seen == index:
            lines[number] = match["head"] + ("x" if done else " ") + line[match.end("mark"):]
            return "\n".join(lines)
        seen += 1
    raise InvalidInput(f"item index {index} is out of range: the checklist has {seen} items")


def _item_text(value: Any, number: int) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"checklist item {number} must be a string, got {type(value).__name__}")
    text = validate.text(value, f"checklist item {number}", MAX_ITEM_CHARS)
    if "\n" in text or "\r" in text:
        raise InvalidInput(f"checklist item {number} must be one line")
    return text


def normalise_checklist(checklist: Any) -> str:
    """Validate a checklist given as Markdown text or a list of item texts; return the Markdown.

    List entries may carry their own box (``"- [x] done"``); plain texts become ``- [ ] text``.
    A checklist needs at least one item, every item needs text.
    """
    if isinstance(checklist, (list, tuple)):
        if not checklist:
            raise InvalidInput("the checklist needs at least one item")
        lines = []
        for number, value in enumerate(checklist):
            text = _item_text(value, number)
            lines.append(text if _ITEM_RE.match(text) else f"- [ ] {text}")
        markdown = "\n".join(lines)
    elif isinstance(checklist, str):
        validate.text(checklist, "checklist", MAX_CHECKLIST_CHARS)
        lines = [line.rstrip() for line in checklist.replace("\r\n", "\n").replace("\r", "\n").split("\n")]
        markdown = "\n".join(lines).strip("\n")  # keeps the first line's indentation
    else:
        raise InvalidInput(f"checklist must be Markdown text or a list of strings, got {type(checklist).__name__}")
    items = parse_items(markdown)
    if not items:
        raise InvalidInput("the checklist has no items: write one '- [ ] step' line per step")
    if len(items) > MAX_ITEMS:
        raise InvalidInput(f"the checklist has {len(items)} items; the limit is {MAX_ITEMS}")
    for item in items:
        if not item.text:
            raise InvalidInput(f"checklist item {item.index} has no text")
    return markdown


def title(value: Any) -> str:
    text = validate.text(value, "title", MAX_TITLE_CHARS)
    if "\n" in text or "\r" in text:
        raise InvalidInput("title must be one line")
    return text


def status(value: Any) -> str:
    if not isinstance(value, str) or value not in PLAN_STATUSES:
        raise InvalidInput(f"status {value!r} is not one of {', '.join(PLAN_STATUSES)}")
    return value


def plan_id(value: Any) -> str:
    return validate.identifier(value, "plan id")


def is_plan_id(value: str) -> bool:
    return bool(_PLAN_ID_RE.match(value))


def index(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInput(f"item index must be an integer, got {type(value).__name__}")
    if value < 0:
        raise InvalidInput(f"item index must be 0 or more (0-based), got {value}")
    return value


@dataclass(frozen=True)
class Plan:
    """One plan of a scope (user, agent). Timestamps are aware UTC datetimes from the clock.

    ``revision`` counts the changes (1 when started); it is the plan's epoch.
    """

    id: str
    title: str
    checklist: str
    status: str
    created_at: datetime
    updated_at: datetime
    session_ids: tuple[str, ...] = ()
    user_id: str = "default"
    agent_name: str = "default"
    revision: int = 1

    @property
    def items(self) -> tuple[ChecklistItem, ...]:
        return parse_items(self.checklist)

    @property
    def progress(self) -> tuple[int, int]:
        """``(done, total)`` over the checklist items."""
        items = self.items
        return sum(1 for item in items if item.done), len(items)

    @property
    def next_item(self) -> ChecklistItem | None:
        """The first item not done yet."""
        return next((item for item in self.items if not item.done), None)

    def continuation_prompt(self) -> str:
        """Text that tells an agent where it left off (no clock, so byte-stable per revision)."""
        done, total = self.progress
        lines = [f'You were working on the plan "{self.title}" ({self.id}, {self.status}); '
                 f"{done} of {total} steps done."]
        finished = [item for item in self.items if item.done]
        open_items = [item for item in self.items if not item.done]
        lines.append("Done:" if finished else "Done: nothing yet.")
        lines.extend(f"- [x] {item.text}" for item in finished)
        if not open_items:
            lines.append("Next: every step is done; check the result, then complete the plan.")
            return "\n".join(lines)
        first, rest = open_items[0], open_items[1:]
        lines.append(f"Next: {first.text} (item {first.index})")
        if rest:
            lines.append("Then:")
            lines.extend(f"- [ ] {item.text} (item {item.index})" for item in rest)
        lines.append("Continue with the next step and mark each step done when it is finished.")
        return "\n".join(lines)

    def to_record(self) -> dict[str, Any]:
        """What is stored (and exported): camelCase, timestamps as ISO-8601 ending in ``Z``."""
        return {
            "id": self.id,
            "title": self.title,
            "checklist": self.checklist,
            "status": self.status,
            "sessionIds": list(self.session_ids),
            "userId": self.user_id,
            "agentName": self.agent_name,
            "createdAt": utc_iso(self.created_at),
            "updatedAt": utc_iso(self.updated_at),
            "revision": self.revision,
        }

    def to_dict(self) -> dict[str, Any]:
        """:meth:`to_record` plus the derived items and progress (CLI ``--json``, MCP)."""
        done, total = self.progress
        return {**self.to_record(), "items": [item.to_dict() for item in self.items],
                "progress": {"done": done, "total": total}}

    @classmethod
    def from_record(cls, data: Any) -> Plan:
        """Inverse of :meth:`to_record`, validating every field (import, stored rows)."""
        if not isinstance(data, dict):
            raise InvalidInput("a plan record must be an object")
        try:
            sessions = data.get("sessionIds", [])
            if not isinstance(sessions, list):
                raise InvalidInput("sessionIds must be a list")
            revision = data.get("revision", 1)
            if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
                raise InvalidInput("revision must be a positive integer")
            plan = cls(
                id=plan_id(data["id"]),
                title=title(data["title"]),
                checklist=normalise_checklist(data["checklist"]),
                status=status(data["status"]),
                created_at=parse_utc(str(data["createdAt"])),
                updated_at=parse_utc(str(data["updatedAt"])),
                session_ids=tuple(validate.thread_id(s) for s in sessions),
                user_id=validate.name(data.get("userId", "default"), "userId"),
                agent_name=validate.name(data.get("agentName", "default"), "agentName"),
                revision=revision,
            )
        except KeyError as exc:
            raise InvalidInput(f"plan record lacks {exc}") from exc
        except ValueError as exc:
            if isinstance(exc, InvalidInput):
                raise
            raise InvalidInput(f"plan record is malformed: {exc}") from exc
        if not is_plan_id(plan.id):
            raise InvalidInput(f"plan id {plan.id!r} is not plan_ + 8 hex digits")
        return plan
