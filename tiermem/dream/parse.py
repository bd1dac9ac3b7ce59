"""Reading a Deep Dream reply as models actually write it.

The reply should hold a ``[MEMORY]`` section (``- `` bullets, optional ``## `` headings) and a
``[DREAM]`` section (the diary). Real replies vary: ``<think>`` blocks, code fences around one or
both sections, markers written ``**[MEMORY]**``, ``### [ Memory ]``, ``<memory>``, ``[MEMORY]:``
or, without brackets, ``## MEMORY`` / ``**Dream:**``; ``*``/``+``/numbered bullets; wrapped
bullet lines; prose the model could not resist. Rules:

- Bracketed (``[...]`` or ``<...>``) markers win; bare-word markers (a whole line that is only
  ``MEMORY`` or ``DREAM``, maybe as a heading or in bold) count only when no bracketed
  ``[MEMORY]`` marker is present. The last ``[MEMORY]`` section is used.
- In ``[MEMORY]``: bullets become ``- `` bullets, indented continuation lines join their bullet,
  ``##``-``######`` headings become ``## `` headings, headings without bullets disappear, a
  repeated bullet (casefold) is kept once. Every other line is dropped and listed in
  :attr:`DreamReply.dropped_lines`.
- No ``[MEMORY]`` marker, or a ``[MEMORY]`` section without a single bullet, raises
  :class:`DreamReplyError` (the caller refuses the rewrite). A missing ``[DREAM]`` is not an
  error: the diary is then empty.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tiermem.errors import DreamError
from tiermem.extract.jsontext import strip_thinking

_EMPH = r"[*_`~]*"
_STRICT_MARKER = re.compile(
    rf"^\s*(?:#{{1,6}}\s*)?{_EMPH}\s*[\[<]\s*{_EMPH}\s*(/)?\s*(MEMORY|DREAM)(?:[ _]?DIARY|\.md)?\s*{_EMPH}\s*[\]>]"
    rf"\s*{_EMPH}\s*:?\s*{_EMPH}\s*(.*?)\s*$",
    re.IGNORECASE,
)
_LOOSE_MARKER = re.compile(
    rf"^\s*(?:#{{1,6}}\s*)?{_EMPH}\s*(MEMORY|DREAM)(?:[ _]?DIARY|\.md)?\s*:?\s*{_EMPH}\s*:?\s*$",
    re.IGNORECASE,
)
_FENCE = re.compile(r"^\s*(```|~~~)")
_BULLET = re.compile(r"^(\s*)(?:[-*+\u2022]|\d{1,3}[.)])\s+(.*\S)\s*$")
_HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)[\s#]*$")
_EMPHASIS_ONLY = re.compile(r"^[*_`~\s]+|[*_`~\s]+$")


class DreamReplyError(DreamError):
    """The reply has no usable ``[MEMORY]`` section; ``raw`` holds the reply."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


@dataclass(frozen=True)
class Bullet:
    """One ``MEMORY.md`` bullet: its text (no ``- ``) and the ``## `` heading it sits under."""

    text: str
    heading: str | None = None


@dataclass(frozen=True)
class DreamReply:
    """What a reply says: the new memory, the diary, and the lines that were not bullets."""

    bullets: list[Bullet]
    diary: str
    dropped_lines: list[str] = field(default_factory=list)
    has_diary: bool = True


def _sections(lines: list[str]) -> dict[str, list[str]]:
    """Lines of the last ``[MEMORY]`` and ``[DREAM]`` sections (missing keys: no such marker)."""
    strict = any((m := _STRICT_MARKER.match(line)) and not m.group(1) and m.group(2).upper() == "MEMORY"
                 for line in lines)
    found: dict[str, list[str]] = {}
    current: str | None = None
    for line in lines:
        match = _STRICT_MARKER.match(line)
        if match is not None:
            current = None if match.group(1) else match.group(2).upper()
            if current is not None:
                found[current] = [match.group(3)] if match.group(3) else []
            continue
        loose = None if strict else _LOOSE_MARKER.match(line)
        if loose is not None:
            current = loose.group(1).upper()
            found[current] = []
            continue
        if current is not None:
            found[current].append(line)
    return found


def _heading_text(text: str) -> str:
    return " ".join(_EMPHASIS_ONLY.sub("", text).split())


def parse_memory_lines(lines: list[str]) -> tuple[list[Bullet], list[str]]:
    """Bullets (with their headings) of a ``[MEMORY]`` section, and the dropped lines."""
    bullets: list[Bullet] = []
    dropped: list[str] = []
    heading: str | None = None
    seen: set[str] = set()
    last_was_bullet = False
    for line in lines:
        if not line.strip():
            last_was_bullet = False
            continue
        bullet = _BULLET.match(line)
        if bullet is not None:
            text = " ".join(bullet.group(2).split())
            key = text.casefold()
            last_was_bullet = key not in seen
            if last_was_bullet:
                seen.add(key)
                bullets.append(Bullet(text, heading))
            continue
        head = _HEADING.match(line)
        if head is not None:
            level, text = len(head.group(1)), _heading_text(head.group(2))
            heading = text if level >= 2 and text else None
            last_was_bullet = False
            continue
        if last_was_bullet and line[:1].isspace() and bullets:
            joined = f"{bullets[-1].text} {' '.join(line.split())}"
            seen.add(joined.casefold())
            bullets[-1] = Bullet(joined, bullets[-1].heading)
            continue
        dropped.append(line.strip())
        last_was_bullet = False
    return bullets, dropped


def parse_dream_reply(raw: str) -> DreamReply:
    """Parse a Deep Dream reply; raises :class:`DreamReplyError` when it has no memory bullets."""
    if not isinstance(raw, str) or not raw.strip():
        raise DreamReplyError("the model returned an empty reply", raw if isinstance(raw, str) else "")
    text, _cut = strip_thinking(raw)
    lines = [line for line in text.replace("\r\n", "\n").split("\n") if not _FENCE.match(line)]
    sections = _sections(lines)
    if "MEMORY" not in sections:
        raise DreamReplyError("the reply has no [MEMORY] section", raw)
    bullets, dropped = parse_memory_lines(sections["MEMORY"])
    if not bullets:
        raise DreamReplyError("the [MEMORY] section has no '- ' bullets", raw)
    diary = "\n".join(sections.get("DREAM", [])).strip()
    return DreamReply(bullets, diary, dropped, has_diary="DREAM" in sections)


def render_memory(bullets: list[Bullet]) -> str:
    """``MEMORY.md`` text: bullets grouped under their ``## `` headings, in first-seen order.

    Bullets without a heading come first; a heading that appears twice is written once with
    all its bullets.
    """
    groups: dict[str | None, list[str]] = {None: []}
    for bullet in bullets:
        groups.setdefault(bullet.heading, []).append(bullet.text)
    blocks: list[str] = []
    for heading, texts in groups.items():
        if not texts:
            continue
        lines = [f"- {t}" for t in texts]
        blocks.append("\n".join(lines if heading is None else [f"## {heading}", *lines]))
    return "\n\n".join(blocks) + "\n" if blocks else ""
