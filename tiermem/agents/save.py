"""Saving a coding session: the transcript's new messages to the journal and the update queue (R73).

:func:`save_transcript` reads the transcript from the session's cursor
(:mod:`tiermem.agents.transcript`) in batches, and for each batch:

1. prepares the messages: tool output (results, and call arguments) cut at
   ``tool_result_max_chars``, secrets redacted (``redact_secrets``), each message checked; one
   that cannot be kept (too long, malformed) is skipped and counted, and keeps its position empty;
2. journals them in the project scope through the one conversation writer (conversation id
   ``<client>-<session_id>``, each message at its position in the transcript, R9 digests);
3. puts them in the outbox with their first position (:meth:`OutboxRepository.put`), for a worker
   to extract later — no LLM call, no queue thread, no embedding here when the Memory was opened
   with ``embed_on_write = false``;
4. moves the cursor past the batch and writes the session state.

Transcript lines that could not be read (not JSON, or over the line limit: the reader skips and
counts them) are said once, in one line of the hook log, which ``tiermem doctor`` shows.

A crash anywhere leaves a state the next save repairs: the cursor moves last, so the batch is read
again; the journal skips what it wrote (position digests, and its write-ahead intents), the outbox
merges the same messages at the same positions, and extraction skips what it extracted (R28).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiermem import validate
from tiermem.agents.clients import client
from tiermem.agents.transcript import BATCH_MESSAGES, MAX_LINE_BYTES, TranscriptRead, read_transcript
from tiermem.errors import InvalidInput, NotFound

if TYPE_CHECKING:
    from tiermem.agents.clients import AgentClient
    from tiermem.agents.session_state import SessionState
    from tiermem.memory import Memory


@dataclass(frozen=True)
class SaveReport:
    """What one save did."""

    conversation: str  # the conversation id: "<client>-<session_id>"
    first_position: int  # the position of the first message read
    read: int  # messages read from the transcript (positions first_position ...)
    journaled: int  # messages written to the journal now (the rest were there, or skipped)
    queued: int  # messages put in the outbox for extraction
    skipped: int  # messages that could not be kept (their positions stay empty)
    bad_lines: int  # transcript lines that were not readable
    long_lines: int  # transcript lines over the line limit, skipped unread
    restarted: bool = False  # the transcript shrank or was replaced: read again from its start
    missing: bool = False  # no transcript at the path (yet): nothing read, the cursor stays
    more: bool = False  # stopped at ``until``: the rest is read by the next save

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def conversation_id(client_name: str, session_id: str) -> str:
    """The conversation (and queue thread) id of a coding session."""
    return validate.thread_id(f"{client_name}-{validate.thread_id(session_id)}")


def save_transcript(project: Memory, client_name: str, session_id: str, transcript: Path, state: SessionState,
                    *, until: float | None = None, batch: int = BATCH_MESSAGES) -> SaveReport:
    """Journal and queue the messages ``transcript`` gained since ``state.cursor`` in ``project``'s
    scope, advancing (and saving) ``state`` after each batch of at most ``batch`` messages (see the
    module docstring). ``until``: a ``time.monotonic()`` moment after which no new batch starts
    (the rest waits for the next save). A missing transcript saves nothing; one that is not a file
    is ``InvalidInput``."""
    agent = client(client_name)
    conversation = conversation_id(agent.name, session_id)
    totals = _Totals(state.cursor.messages)
    for read in _reads(agent, Path(transcript), state, until, totals, batch):
        if read.messages:
            kept, skipped = _prepared(read.messages, project.settings.tool_result_max_chars,
                                      project.settings.redact_secrets)
            totals.add(read, skipped, _journal(project, conversation, read.start.messages, kept))
            _queue(project, conversation, read.start.messages, kept)
        else:
            totals.add(read, 0, 0)
        state.cursor = read.end
        state.save()
    report = totals.report(conversation)
    if report.bad_lines or report.long_lines:  # counted once: the cursor has moved past them
        from tiermem.agents import hook_log

        unread = [f"{report.bad_lines} unreadable"] if report.bad_lines else []
        unread += [f"{report.long_lines} over {MAX_LINE_BYTES // (1 << 20)} MB"] if report.long_lines else []
        hook_log.write(project.root, agent.name, "save", session_id,
                       f"skipped {' and '.join(unread)} transcript lines in {transcript}")
    return report


@dataclass
class _Totals:
    first: int
    read: int = 0
    journaled: int = 0
    queued: int = 0
    skipped: int = 0
    bad: int = 0
    long: int = 0
    restarted: bool = False
    missing: bool = False
    more: bool = False

    def add(self, read: TranscriptRead, skipped: int, journaled: int) -> None:
        if read.restarted:
            self.first, self.restarted = 0, True
        self.read += len(read.messages)
        self.queued += len(read.messages) - skipped
        self.skipped += skipped
        self.journaled += journaled
        self.bad += read.bad_lines
        self.long += read.long_lines

    def report(self, conversation: str) -> SaveReport:
        return SaveReport(conversation, self.first, self.read, self.journaled, self.queued, self.skipped, self.bad,
                          self.long, self.restarted, self.missing, self.more)


def _reads(agent: AgentClient, path: Path, state: SessionState, until: float | None,
           totals: _Totals, batch: int) -> Iterator[TranscriptRead]:
    """The transcript's batches from the state's cursor (the caller moves the cursor after each)."""
    while True:
        try:
            read = read_transcript(path, state.cursor, agent.transcript_line, line_key=agent.transcript_key,
                                   max_messages=batch)
        except NotFound:
            totals.missing = True
            return
        yield read
        if not read.more:
            return
        if until is not None and time.monotonic() >= until:
            totals.more = True
            return


def _prepared(messages: list[dict[str, Any]], tool_max_chars: int,
              scrub: bool) -> tuple[list[dict[str, Any] | None], int]:
    """Each message capped, checked and redacted, or None where it cannot be kept; and how many
    were not."""
    from tiermem.queue.process import prepare_messages

    kept: list[dict[str, Any] | None] = []
    for message in messages:
        try:
            kept.append(prepare_messages([cap_tool_output(message, tool_max_chars)], scrub=scrub)[0])
        except InvalidInput:
            kept.append(None)
    return kept, sum(1 for m in kept if m is None)


def cap_tool_output(message: dict[str, Any], max_chars: int) -> dict[str, Any]:
    """``message`` with its tool output — a ``tool`` message's content, ``tool_result`` blocks,
    tool-call arguments and ``tool_use`` inputs — cut at ``max_chars`` characters with
    ``[… N characters omitted]`` (:func:`tiermem.tiers.records.cap`); other text is kept whole."""
    from tiermem.tiers.records import cap

    out = dict(message)
    if out.get("role") == "tool" and isinstance(out.get("content"), str):
        out["content"] = cap(out["content"], max_chars)
    if isinstance(out.get("content"), list):
        out["content"] = [_cap_block(block, max_chars) for block in out["content"]]
    calls = out.get("tool_calls")
    if isinstance(calls, list):
        out["tool_calls"] = [_cap_call(call, max_chars) for call in calls]
    return out


def _cap_block(block: Any, max_chars: int) -> Any:
    import json

    from tiermem.tiers.records import cap

    if not isinstance(block, dict):
        return block
    if block.get("type") == "tool_result" and isinstance(block.get("content"), str):
        return {**block, "content": cap(block["content"], max_chars)}
    if block.get("type") == "tool_use" and block.get("input") is not None:
        text = json.dumps(block["input"], ensure_ascii=False, sort_keys=True, default=str)
        return {**block, "input": cap(text, max_chars)} if len(text) > max_chars else block
    return block


def _cap_call(call: Any, max_chars: int) -> Any:
    from tiermem.tiers.records import cap

    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(function, dict) or not isinstance(function.get("arguments"), str):
        return call
    return {**call, "function": {**function, "arguments": cap(function["arguments"], max_chars)}}


def _journal(project: Memory, conversation: str, first: int, messages: list[dict[str, Any] | None]) -> int:
    """Journal the kept messages at their positions; how many were written now."""
    from tiermem.queue.process import CONVERSATION_KIND, conversation_journal
    from tiermem.storage.journal import FlushHashRepository
    from tiermem.tiers.conversation import NumberedMessage
    from tiermem.tiers.turns import to_message

    numbered = [NumberedMessage(first + i, to_message(m, count=False)) for i, m in enumerate(messages) if m is not None]
    if not numbered:
        return 0
    return conversation_journal(project, FlushHashRepository(project.db)).write(
        conversation, CONVERSATION_KIND, numbered).written


def _queue(project: Memory, conversation: str, first: int, messages: list[dict[str, Any] | None]) -> None:
    """Put the batch in the outbox at its first position (gaps where messages were skipped)."""
    from tiermem.storage.outbox import OutboxRepository

    present = [i for i, m in enumerate(messages) if m is not None]
    if present:
        start, end = present[0], present[-1] + 1
        OutboxRepository(project.db).put(conversation, project.scope, messages[start:end], project.clock.now(),
                                         first_position=first + start)
