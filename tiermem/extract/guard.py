"""Keep tiermem's own output out of extraction.

Memory injected into a prompt (``Memory.format_for_injection``) often comes back in the
transcript handed to the queue: as a system message, pasted into a user message, or quoted by
the assistant. Extracting from it would re-add facts that were deleted and inflate
confidence. Callers wrap injected memory in :data:`INJECTION_START` / :data:`INJECTION_END`
(:func:`wrap_injection`); :func:`strip_injected_memory` removes everything between the
markers, and also unmarked blocks in the exact injection format (``User Context:`` /
``History:`` / ``Core Memory:`` / ``Facts:`` / ``Relevant notes:`` headers followed by their
bullets, and fact lines ``- [category | 0.95] content``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from tiermem.extract.prompt import turn_text
from tiermem.types import CATEGORIES

INJECTION_START = "<tiermem-memory>"
INJECTION_END = "</tiermem-memory>"
EXTRACTED_ROLES = ("user", "assistant")
"""Roles that are extracted from; system prompts and tool output are not the user speaking."""

_MARKED = re.compile(re.escape(INJECTION_START) + r".*?(?:" + re.escape(INJECTION_END) + r"|\Z)", re.DOTALL)
_CATS = "|".join(CATEGORIES)
_FACT_LINE = rf"[ \t]*- \[(?:{_CATS}) \| [01]\.\d\d\] [^\n]*"
_SECTION_LINES = {
    "User Context:": r"[ \t]*- (?:Work|Personal|Current Focus): [^\n]*",
    "History:": r"[ \t]*- (?:Recent|Earlier|Background): [^\n]*",
    "Facts:": _FACT_LINE,
    "Core Memory:": r"[ \t]*- [^\n]*",
    "Relevant notes:": r"[ \t]*- (?:\d{4}-\d\d-\d\d )?\([^)\n]*#L\d+(?:-L\d+)?\): [^\n]*",
}
_SECTION = re.compile(
    "|".join(rf"^[ \t]*{re.escape(head)}[ \t]*\n(?:{line}(?:\n|$))+" for head, line in _SECTION_LINES.items()),
    re.MULTILINE,
)
_BARE_FACT = re.compile(rf"^{_FACT_LINE}(?:\n|$)", re.MULTILINE)
_TRUNCATION_TAIL = re.compile(r"^\.\.\.[ \t]*$\n?", re.MULTILINE)


def wrap_injection(text: str) -> str:
    """Injected memory between the markers, so it can be recognised later."""
    return f"{INJECTION_START}\n{text}\n{INJECTION_END}"


def strip_injected_memory(text: str) -> str:
    """``text`` without tiermem's injected memory (see the module docstring)."""
    marked = INJECTION_START in text
    text = _MARKED.sub("", text)
    stripped = _SECTION.sub("", text)
    stripped = _BARE_FACT.sub("", stripped)
    if stripped != text or marked:
        # format_for_injection ends a cut block with a line "..."; collapse the gaps left behind
        stripped = _TRUNCATION_TAIL.sub("", stripped)
        stripped = re.sub(r"\n{3,}", "\n\n", stripped)
    return stripped.strip() if stripped != text or marked else text


def clean_turns(
    turns: Sequence[Mapping[str, Any]],
    *,
    scrub: Callable[[str], str] | None = None,
    roles: Sequence[str] = EXTRACTED_ROLES,
) -> list[dict[str, str]]:
    """The turns to extract from: only ``roles`` (user and assistant), content as text, injected
    memory removed, then ``scrub`` applied (e.g. :func:`tiermem.redact.redact`); turns left
    empty are dropped."""
    cleaned: list[dict[str, str]] = []
    for turn in turns:
        role = str(turn.get("role", ""))
        if role not in roles:
            continue
        text = strip_injected_memory(turn_text(turn.get("content")))
        if scrub is not None:
            text = scrub(text)
        if text.strip():
            cleaned.append({"role": role, "content": text})
    return cleaned
