"""The chat model ``tiermem demo`` uses when no LLM is configured: canned replies, chosen by what
is asked.

The replies live in package data (``tiermem/data/demo_replies.json``) and only restate what the
bundled conversation says. Each canned piece is anchored to the words a user said (``said``):
the model answers a request with the pieces whose anchor occurs in the turns the request carries.
So the reply depends on what is asked, never on the order of the calls, and a request about
turns the script does not know gets an honest "nothing new".

Three kinds of request are recognised by the sections their builders write:

- extraction (:func:`tiermem.extract.prompt.build_extraction_messages`, "NEW CONVERSATION"): a
  JSON reply with the anchored ``newFacts`` and summaries; an anchored ``remove`` names the
  content of an existing fact, answered with the short id the prompt shows for it (the way a
  real model reads ``EXISTING FACTS``), or left out when that fact is not shown;
- session summary (:func:`tiermem.tiers.records.summary_request`, "Turns leaving the
  context"): one ``- `` line per anchored event;
- Deep Dream (:func:`tiermem.dream.prompt.build_dream_messages`, "DAILY RECORDS"): the canned
  ``[MEMORY]`` and ``[DREAM]`` sections.

Every reply then goes through the real parsers, the fact store's threshold, dedup and
tombstones, and the dream's support check, like a real model's.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from tiermem.errors import InvalidInput, ProviderError
from tiermem.testing import ScriptedRequest
from tiermem.types import HISTORY_SUMMARY_KEYS, USER_SUMMARY_KEYS

REPLIES_RESOURCE = "data/demo_replies.json"
EXTRACTION_MARK = "NEW CONVERSATION"
SUMMARY_MARK = "Turns leaving the context:"
DREAM_MARK = "DAILY RECORDS"
NOTHING_NEW = "Nothing new worth keeping."
_EXISTING_FACT = re.compile(r"^\[(\d+)\] \([a-z]+, [0-9.]+\) (.+)$", re.MULTILINE)


def _fold(text: str) -> str:
    return " ".join(text.casefold().split())


@dataclass(frozen=True)
class CannedExtraction:
    """What a model would extract from the turn that says ``said`` (in ``thread``)."""

    thread: str
    said: str
    new_facts: tuple[dict[str, Any], ...] = ()
    remove: tuple[str, ...] = ()
    summaries: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CannedLine:
    """The session-summary line for the turn that says ``said``."""

    said: str
    line: str


@dataclass(frozen=True)
class ReplyBook:
    """All canned replies of the demo."""

    extractions: tuple[CannedExtraction, ...]
    summary_lines: tuple[CannedLine, ...]
    dream_memory: tuple[str, ...]
    dream_diary: str

    @classmethod
    def bundled(cls) -> ReplyBook:
        text = resources.files("tiermem").joinpath(REPLIES_RESOURCE).read_text(encoding="utf-8")
        return cls.from_data(json.loads(text))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ReplyBook:
        try:
            extractions = tuple(
                CannedExtraction(str(e["thread"]), str(e["said"]), tuple(e.get("newFacts", ())),
                                 tuple(str(r) for r in e.get("remove", ())), dict(e.get("summaries", {})))
                for e in data["extraction"])
            lines = tuple(CannedLine(str(s["said"]), str(s["line"])) for s in data["summary"])
            dream = data["dream"]
            return cls(extractions, lines, tuple(str(b) for b in dream["memory"]), str(dream["diary"]))
        except (KeyError, TypeError) as exc:
            raise InvalidInput(f"malformed demo replies: {exc!r}") from exc

    def dream_reply(self) -> str:
        return "[MEMORY]\n" + "\n".join(self.dream_memory) + "\n\n[DREAM]\n" + self.dream_diary


def _after(text: str, mark: str) -> str:
    return text.split(mark, 1)[1] if mark in text else ""


class DemoChatModel:
    """A :class:`~tiermem.models.protocols.ChatModel` answering from a :class:`ReplyBook`.

    Like :class:`~tiermem.testing.ScriptedChatModel` it keeps every request in ``requests``;
    ``used`` holds the anchors that were answered, so ``unused()`` tells what never came up.
    """

    def __init__(self, book: ReplyBook | None = None) -> None:
        self.book = book if book is not None else ReplyBook.bundled()
        self.requests: list[ScriptedRequest] = []
        self.used: set[str] = set()
        self._lock = threading.Lock()

    def complete(self, messages: list[dict[str, Any]], *, json_schema: dict[str, Any] | None = None) -> str:
        request = ScriptedRequest(copy.deepcopy(list(messages)), json_schema)
        with self._lock:
            self.requests.append(request)
        asked = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") != "system")
        if EXTRACTION_MARK in asked:
            existing = _after(asked, "EXISTING FACTS").split(EXTRACTION_MARK, 1)[0]
            return self._extraction(_after(asked, EXTRACTION_MARK), existing)
        if SUMMARY_MARK in asked:
            return self._summary(_after(asked, SUMMARY_MARK))
        if DREAM_MARK in asked:
            self._mark("dream")
            return self.book.dream_reply()
        raise ProviderError("the demo's scripted model has no reply for this request; "
                            "set TIERMEM_LLM for a real model")

    def _mark(self, anchor: str) -> None:
        with self._lock:
            self.used.add(anchor)

    def _said(self, anchor: str, turns: str) -> bool:
        if _fold(anchor) not in _fold(turns):
            return False
        self._mark(anchor)
        return True

    def _extraction(self, turns: str, existing: str) -> str:
        shown = {_fold(content): int(short_id) for short_id, content in _EXISTING_FACT.findall(existing)}
        facts: list[dict[str, Any]] = []
        remove: list[int] = []
        summaries: dict[str, str] = {}
        for canned in self.book.extractions:
            if not self._said(canned.said, turns):
                continue
            facts.extend(canned.new_facts)
            remove.extend(shown[_fold(c)] for c in canned.remove if _fold(c) in shown)
            summaries.update(canned.summaries)

        def section(keys: Sequence[str]) -> dict[str, Any]:
            return {k: {"summary": summaries.get(k, ""), "shouldUpdate": k in summaries} for k in keys}

        return json.dumps({"user": section(USER_SUMMARY_KEYS), "history": section(HISTORY_SUMMARY_KEYS),
                           "newFacts": facts, "factsToRemove": remove}, ensure_ascii=False)

    def _summary(self, turns: str) -> str:
        lines = [c.line for c in self.book.summary_lines if self._said(c.said, turns)]
        return "\n".join(f"- {line}" for line in lines or [NOTHING_NEW])

    def unused(self) -> list[str]:
        """Anchors (and ``dream``) of the book that no request asked about."""
        anchors = [e.said for e in self.book.extractions] + [s.said for s in self.book.summary_lines] + ["dream"]
        return [a for a in anchors if a not in self.used]
