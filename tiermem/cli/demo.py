"""``tiermem demo``: the whole loop on the embedded defaults, end to end, in a few seconds.

A bundled three-day chat (``tiermem/data/sample_conversation.jsonl``, written for the project)
is replayed on the clock of its own timestamps, ending before the real clock: its last day is
today when its conversations were over by now, else yesterday (:func:`place_replay`), so nothing
is stamped later than the moment the demo runs. Each conversation goes
through a live session (Context tier, a small token limit so turns are trimmed into the Daily
journal) and the update queue (``mem.queue.add`` after every message, as an agent would); when
a conversation ends, the queue is flushed — the debounce window passing — so its facts are
extracted. After the last day a Deep Dream consolidates the journal into ``MEMORY.md``. Then
"the next session" opens a new :class:`~tiermem.Memory` on the same root, as after a restart,
asks the demo's questions (each with the answer it should find in the top 3), and prints the
injection text and the system context an agent would get.

Without a configured LLM the model is :class:`~tiermem.cli.demo_model.DemoChatModel`: canned
replies bundled with the demo, which only restate the conversation and go through the real
parsers, fact store and support check. With ``TIERMEM_LLM`` set, the real model is used.
Running the demo again on the same root adds nothing twice and says what it found.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, tzinfo
from importlib import resources
from itertools import groupby
from typing import TYPE_CHECKING, Any

import click

from tiermem.cli.app import CliState, cli, state_of

if TYPE_CHECKING:
    from tiermem.cli.demo_view import DemoView
    from tiermem.memory import Memory


@dataclass(frozen=True)
class Question:
    """A question the demo asks its memory, and the words of the answer it must find."""

    text: str
    answer: str


QUESTIONS = (
    Question("When is Maya moving to Lisbon?", "Lisbon in August"),
    Question("Which Python version is the invoice service moving to?", "3.12"),
    Question("What is the present for Maya's sister?", "guidebook"),
)
ENABLE_HINT = ("TIERMEM_LLM=openai:gpt-4o-mini (with OPENAI_API_KEY), or a local model: "
               "TIERMEM_LLM=openai-compatible:llama3.1 TIERMEM_LLM_BASE_URL=http://localhost:11434/v1")
REPLAY_TAIL = timedelta(hours=2)
"""How long the replay runs after its last message: the session's end (a minute), the queue's
pauses (replay time, seconds) and the next session an hour later, with room to spare."""
QUIET_DEBOUNCE_SECONDS = 86_400.0
"""The replay moves its clock by minutes between messages, which would fire the 30 s debounce in
the middle of a conversation at a moment that depends on thread timing; the demo sets a long
window instead and flushes the queue when each conversation ends, so the output is stable."""


class ReplayClock:
    """A clock that stands where the replayed transcript is (it never goes back)."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, moment: datetime) -> None:
        with self._lock:
            self._now = max(self._now, moment)

    def sleep(self, seconds: float) -> None:
        """Pauses of the update queue move replay time instead of waiting."""
        self.set(self.now() + timedelta(seconds=seconds))


def load_sample() -> list[dict[str, Any]]:
    text = resources.files("tiermem").joinpath("data/sample_conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _threads(sample: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for thread, rows in groupby(sample, key=lambda m: str(m["thread_id"])):
        yield thread, list(rows)


@dataclass(frozen=True)
class Replay:
    """Where the sample's days fall: its last day is ``today`` (the last day of the replay)."""

    today: date
    tz: tzinfo
    last_day: int

    def when(self, message: dict[str, Any]) -> datetime:
        day = self.today - timedelta(days=self.last_day - int(message["day"]))
        return datetime.combine(day, time.fromisoformat(message["time"]), self.tz)


def place_replay(sample: list[dict[str, Any]], now: datetime) -> Replay:
    """The replay whose last day is the latest one (today or yesterday) on which the whole replay
    is over by ``now`` (an aware datetime): its last message, plus :data:`REPLAY_TAIL`."""
    tz = now.tzinfo
    if tz is None:
        raise ValueError("now must be an aware datetime")
    last_day = max(int(m["day"]) for m in sample)
    replay = Replay(now.date(), tz, last_day)
    if max(replay.when(m) for m in sample) + REPLAY_TAIL > now:
        replay = Replay(now.date() - timedelta(days=1), tz, last_day)
    return replay


def replay_thread(mem: Memory, clock: ReplayClock, replay: Replay, thread: str,
                  rows: list[dict[str, Any]], view: DemoView) -> None:
    """One conversation: a live session and the update queue on the same conversation id."""
    audit_mark = view.audit_mark()
    session = mem.session(thread)
    so_far: list[dict[str, str]] = []
    for row in rows:
        clock.set(replay.when(row))
        session.add(row["role"], row["content"])
        so_far.append({"role": row["role"], "content": row["content"]})
        if "remember" in row:  # the assistant's remember tool call
            mem.facts.add(**row["remember"], source=thread)
        mem.queue.add(thread, list(so_far))
    clock.set(clock.now() + timedelta(minutes=1))
    live, tokens = len(session.messages), session.token_count
    session.end()
    mem.wait_idle(60)  # the session's records and summaries are written
    drained = mem.queue.flush(timeout=600)  # the debounce window passed: extract the conversation
    view.session_done(thread, rows, live, tokens, audit_mark, drained)


def _open(state: CliState, clock: ReplayClock, session_tokens: int) -> tuple[Memory, bool]:
    """The store with the configured LLM, or with the demo's scripted model when there is none."""
    from tiermem.cli.demo_model import DemoChatModel

    options: dict[str, Any] = {"clock": clock, "session_max_tokens": session_tokens,
                               "debounce_seconds": QUIET_DEBOUNCE_SECONDS}
    mem = state.memory(**options)
    if mem.llm is not None:
        return mem, False
    state.close()
    return state.memory(llm=DemoChatModel(), **options), True


def _next_session(state: CliState, mem: Memory, clock: ReplayClock) -> Memory:
    """Close the store (as at the end of a process) and open it again, an hour later."""
    llm, embedder = mem.llm, mem.embedder
    state.close()
    clock.set(clock.now() + timedelta(hours=1))
    return state.memory(clock=clock, llm=llm, embedder=embedder, debounce_seconds=QUIET_DEBOUNCE_SECONDS)


@cli.command()
@click.option("--session-tokens", type=click.IntRange(50, 100_000), default=120, show_default=True,
              help="Token limit of the live sessions (small, so trims happen).")
@click.pass_context
def demo(ctx: click.Context, session_tokens: int) -> None:
    """Replay a bundled 3-day chat through every tier, then open the next session.

    Sessions -> Daily journal -> extraction -> Deep Dream -> MEMORY.md; then a new Memory on
    the same root (as after a restart) answers the demo's questions and shows its injection
    text. Without TIERMEM_LLM the model replies are scripted (bundled with the demo). Running
    it again on the same root adds nothing twice.

    \b
    Example:
      tiermem --root ./demo-memory demo
    """
    from tiermem.cli.demo_view import DemoView
    from tiermem.config import load_settings

    state = state_of(ctx)
    tz = load_settings(state.root.resolve(), {}).tz()
    sample = load_sample()
    replay = place_replay(sample, datetime.now(tz))
    clock = ReplayClock(replay.when(sample[0]))
    mem, scripted = _open(state, clock, session_tokens)
    view = DemoView(mem, scripted)
    view.header()
    for thread, rows in _threads(sample):
        replay_thread(mem, clock, replay, thread, rows, view)
    view.added_by_this_run()
    view.journal()
    view.facts()
    view.dream(mem.deep_dream(lookback_days=replay.last_day + 1))
    view.next_session(_next_session(state, mem, clock), QUESTIONS)
    view.footer(ENABLE_HINT, replay.today)
