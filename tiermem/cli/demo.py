"""``tiermem demo``: the main job on the embedded defaults, end to end, in a minute.

A bundled three-day chat (``tiermem/data/sample_conversation.jsonl``, written for the project)
is replayed on the clock of its own timestamps (the last day is today) through the Context tier
(live sessions with a small token limit, so turns are trimmed into the Daily journal), the
Daily tier, and the Core tier (the facts the assistant was asked to remember; with an LLM also
extracted facts and a Deep Dream into ``MEMORY.md``). Then it searches and prints the injection
text. Running it again on the same root adds nothing twice.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import date, datetime, time, timedelta, tzinfo
from importlib import resources
from itertools import groupby
from typing import Any

import click

from tiermem.cli.app import cli, state_of

QUERIES = ("When is Maya moving to Lisbon?", "Which Python version is the invoice service moving to?",
           "present for her sister")
ENABLE_HINT = ("Set TIERMEM_LLM=openai:gpt-4o-mini (with OPENAI_API_KEY), or a local model: "
               "TIERMEM_LLM=openai-compatible:llama3.1 TIERMEM_LLM_BASE_URL=http://localhost:11434/v1")


class ReplayClock:
    """A clock that stands where the replayed transcript is."""

    def __init__(self, start: datetime) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def set(self, moment: datetime) -> None:
        with self._lock:
            self._now = max(self._now, moment)


def load_sample() -> list[dict[str, Any]]:
    text = resources.files("tiermem").joinpath("data/sample_conversation.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def _when(message: dict[str, Any], today: date, tz: tzinfo, last_day: int) -> datetime:
    day = today - timedelta(days=last_day - int(message["day"]))
    return datetime.combine(day, time.fromisoformat(message["time"]), tz)


def _threads(sample: list[dict[str, Any]]) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    for thread, rows in groupby(sample, key=lambda m: str(m["thread_id"])):
        yield thread, list(rows)


@cli.command()
@click.option("--session-tokens", type=click.IntRange(50, 100_000), default=120, show_default=True,
              help="Token limit of the live sessions (small, so trims happen).")
@click.pass_context
def demo(ctx: click.Context, session_tokens: int) -> None:
    """Replay a bundled 3-day chat through Context -> Daily -> Core, then search and inject.

    \b
    Example:
      tiermem --root ./demo-memory demo
    """
    from tiermem.cli.demo_view import DemoView
    from tiermem.config import load_settings

    state = state_of(ctx)
    tz = load_settings(state.root.resolve(), {}).tz()
    sample = load_sample()
    last_day = max(int(m["day"]) for m in sample)
    today = datetime.now(tz).date()
    clock = ReplayClock(_when(sample[0], today, tz, last_day))
    mem = state.memory(clock=clock, session_max_tokens=session_tokens, extract_min_turns=4)
    view = DemoView(mem)
    view.header()
    for thread, rows in _threads(sample):
        session = mem.session(f"demo-{thread}")
        so_far: list[dict[str, str]] = []
        for row in rows:
            clock.set(_when(row, today, tz, last_day))
            session.add(row["role"], row["content"])
            so_far.append({"role": row["role"], "content": row["content"]})
            if "remember" in row:  # the assistant's remember tool call
                mem.facts.add(**row["remember"], source=thread)
            if mem.llm is not None:
                mem.queue.add(thread, list(so_far))
        clock.set(clock.now() + timedelta(minutes=1))
        view.session_done(thread, session)
        session.end()
    mem.wait_idle(60)
    view.consolidate(last_day + 1)
    view.tiers()
    view.searches(QUERIES)
    view.injection(QUERIES[0])
    view.footer(ENABLE_HINT)
