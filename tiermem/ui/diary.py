"""The dream diary as the Core page shows it: each entry tied to the ``MEMORY.md`` version it kept.

A written dream keeps the text it replaced as a version and appends a diary entry saying so
("the previous file is version N"; :func:`tiermem.dream.diary.diary_entry`). The diary is the
only record of what the model wrote and of the bullets dropped as unsupported by the sources,
so the viewer reads it back here, entry by entry, keyed by that version id.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tiermem.paths import DAILY_DIR, DREAMS_DIR

if TYPE_CHECKING:
    from tiermem.tiers.core import CoreFile

_ENTRY_RE = re.compile(r"^## Dream \((\d\d:\d\d)\)\s*$", re.MULTILINE)
_VERSION_RE = re.compile(r"the previous file is version (\d+)")
DROPPED_HEADING = "### Dropped: not supported by the sources"
LOST_HEADING = "### Prior bullets not kept (forced)"


@dataclass(frozen=True)
class DiaryEntry:
    """One ``## Dream (HH:MM)`` entry: its day and time, the text, the dropped bullets."""

    day: str
    time: str
    version_id: int | None
    text: str  # the summary line(s) and the model's diary, without the dropped/lost lists
    dropped: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def parse_entry(day: str, time: str, body: str) -> DiaryEntry:
    """One entry's body (what follows its heading)."""
    found = _VERSION_RE.search(body)
    text, _, rest = body.partition(f"\n{DROPPED_HEADING}\n")
    text, _, lost_text = text.partition(f"\n{LOST_HEADING}\n")
    dropped_text, _, lost_rest = rest.partition(f"\n{LOST_HEADING}\n")
    lost_text = lost_text or lost_rest

    def bullets(block: str) -> list[str]:
        return [line[2:] for line in block.split("\n") if line.startswith("- ")]

    return DiaryEntry(day, time, int(found.group(1)) if found else None, text.strip(), bullets(dropped_text),
                      bullets(lost_text))


def parse_diary(day: str, text: str) -> list[DiaryEntry]:
    """The entries of one diary file (``memory/dreams/YYYY-MM-DD.md``)."""
    heads = list(_ENTRY_RE.finditer(text))
    entries = []
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        entries.append(parse_entry(day, head.group(1), text[head.end():end]))
    return entries


def diary_entries(core: CoreFile) -> dict[int, DiaryEntry]:
    """Every diary entry of the user that names a version, by version id."""
    found: dict[int, DiaryEntry] = {}
    for rel in core.files.list(f"{DAILY_DIR}/{DREAMS_DIR}"):
        name = rel.rpartition("/")[2]
        if not name.endswith(".md"):
            continue
        data = core.files.read(rel)
        if data is None:
            continue
        for entry in parse_diary(name[:-3], data.decode("utf-8", errors="replace")):
            if entry.version_id is not None:
                found[entry.version_id] = entry
    return found
