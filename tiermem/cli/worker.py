"""``tiermem worker``: run the update queue until stopped (one of any number of workers)."""

from __future__ import annotations

import math
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import click

from tiermem.cli.app import cli, state_of

MAX_POLL_SECONDS = 86_400.0  # a day; far beyond what threading's waits accept is an OverflowError


@contextmanager
def stop_on_signals() -> Iterator[threading.Event]:
    """An event set by SIGTERM or SIGINT (Ctrl-C) while the block runs; the old handlers come back after."""
    stop = threading.Event()

    def handle(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {sig: signal.signal(sig, handle) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield stop
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Seconds(click.FloatRange):
    """A finite number of seconds within the range (click's FloatRange lets nan through)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        seconds = super().convert(value, param, ctx)
        if not math.isfinite(seconds):
            self.fail(f"{value!r} is not a number of seconds.", param, ctx)
        return seconds


@cli.command()
@click.option("--poll", type=Seconds(min=0.05, max=MAX_POLL_SECONDS), default=1.0, show_default=True, metavar="SECONDS",
              help="How often to look for items other processes queued.")
@click.pass_context
def worker(ctx: click.Context, poll: float) -> None:
    """Process the update queue of every scope until stopped (SIGTERM or Ctrl-C): the queued
    conversations go to the Daily journal and, with an LLM configured, through fact extraction.

    Run as many workers as you like, on any hosts: each item is claimed under a lease, so it is
    applied once (on PostgreSQL claims skip the items another worker holds; see docs/postgres.md).
    The items' own backoff and batching rules apply. When stopped, a worker finishes the item in
    hand and works on what is pending for up to shutdown_flush_seconds (10 s; 0: not at all); the
    rest stays queued for the others.

    \b
    Example:
      TIERMEM_DATABASE_URL=postgresql://tiermem@db/tiermem tiermem worker
      tiermem worker --poll 5
    """
    mem = state_of(ctx).memory()
    if not mem.settings.enabled:
        raise click.UsageError("the update queue is turned off (enabled = false): nothing for a worker to do")
    _ = mem.llm  # build the provider now: a missing API key stops the worker before it claims anything
    click.echo(f"tiermem worker on {mem.db.label} (LLM {mem.settings.llm}, polling every {poll:g} s); "
               "Ctrl-C stops it", err=True)
    with stop_on_signals() as stop:
        while not stop.is_set():
            mem.queue.start()  # recovers stale claims; pending items become due: the queue thread drains them
            stop.wait(poll)
    click.echo("tiermem worker stopping", err=True)
