"""``tiermem search``, ``daily``, ``reindex``, ``ingest``, ``queue``."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.plural import counted
from tiermem.types import CATEGORIES, TIERS


@contextmanager
def progress_bar(label: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr (silent with --json or when not a terminal)."""
    if not enabled:
        yield lambda done, total: None
        return
    from rich.console import Console
    from rich.progress import Progress

    with Progress(console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


@cli.command()
@click.argument("query")
@click.option("-k", type=click.IntRange(1, 1000), default=10, show_default=True, help="Number of hits.")
@click.option("--tier", type=click.Choice(TIERS), default=None, help="Only facts, MEMORY.md or daily records.")
@click.option("--category", "-c", type=click.Choice(CATEGORIES), default=None)
@click.option("--since", default=None, help="Earliest date (YYYY-MM-DD).")
@click.option("--until", default=None, help="Latest date (YYYY-MM-DD).")
@click.option("--pending", is_flag=True, help="Also show queued turns not extracted yet (provisional).")
@click.option("--min-score", type=click.FloatRange(0.0, 1.0), default=None, metavar="X",
              help="Drop hits scoring below X (0-1); default: the relevance floor of the embedder "
                   "(search_min_score); 0 shows everything.")
@json_option
@click.pass_context
def search(ctx: click.Context, query: str, k: int, tier: str | None, category: str | None, since: str | None,
           until: str | None, pending: bool, min_score: float | None, as_json: bool) -> None:
    """Hybrid keyword + vector search over facts, MEMORY.md and the daily journal. Scores are in
    [0, 1] and comparable across queries; hits below the relevance floor are not shown.

    \b
    Example:
      tiermem search "where does the user live" -k 5 --json
      tiermem search "dark mode" --min-score 0
    """
    mem = state_of(ctx).memory(create=False)
    hits = mem.search(query, k=k, category=category, tier=tier, since=since, until=until, include_pending=pending,
                      min_score=min_score)
    if as_json:
        print_json([h.to_dict() for h in hits])
        return
    if not hits:
        floor = min_score if min_score is not None else mem.search_floor()
        click.echo(f"no memories scored above the relevance floor ({floor:.2f}) for this query"
                   + ("; --min-score 0 shows everything" if floor > 0 else ""))
        return
    from tiermem.cli.render import hit_table

    hit_table(hits)


@cli.command()
@click.argument("day", required=False)
@json_option
@click.pass_context
def daily(ctx: click.Context, day: str | None, as_json: bool) -> None:
    """Print the daily journal of DAY (YYYY-MM-DD; default today). With --json: the day, the
    file's path, its text and its records (line range, heading, text).

    \b
    Example:
      tiermem daily 2026-03-14
      tiermem daily --json
    """
    journal = state_of(ctx).memory(create=False).daily
    text = journal.read(day)
    if not text:
        raise click.ClickException(f"no daily file for {day or 'today'}")
    if as_json:
        from dataclasses import asdict

        from tiermem.tiers.daily import parse_day
        from tiermem.tiers.markdown import parse_records

        when = journal.today() if day is None else parse_day(day, journal.tz)
        print_json({"day": when.isoformat(), "path": str(journal.path_for(when)), "text": text,
                    "records": [asdict(record) for record in parse_records(text)]})
        return
    click.echo(text, nl=not text.endswith("\n"))


@cli.command()
@click.argument("text")
@click.option("--kind", default="Note", show_default=True, help="Heading of the block: Note, Decision, ...")
@json_option
@click.pass_context
def note(ctx: click.Context, text: str, kind: str, as_json: bool) -> None:
    """Append TEXT to today's daily journal as one record under "## <kind> (HH:MM)" (multi-line
    text is kept as one record; "-" reads the text from stdin).

    \b
    Example:
      tiermem note "Chose SQLite for storage" --kind Decision
      git log -1 --format=%B | tiermem note -
    """
    body = sys.stdin.read().rstrip("\r\n") if text == "-" else text  # a piped text's final newline is no content
    mem = state_of(ctx).memory()
    path = mem.daily.append(kind, body)
    shown = path.relative_to(mem.root) if path.is_relative_to(mem.root) else path
    if as_json:
        print_json({"status": "appended", "day": mem.daily.today().isoformat(), "path": str(path)})
    else:
        click.echo(f"noted in {shown.as_posix()}")


@cli.command()
@click.option("--vectors/--no-vectors", default=True, show_default=True,
              help="Also embed items missing a vector for the current embedder.")
@click.option("--embedder", metavar="NAME", default=None,
              help="Embed with NAME and make it the index's model (e.g. local:all-MiniLM-L6-v2-int8 moves a"
                   " store indexed with fp32 to the int8 graph; plain `local` then keeps using it).")
@json_option
@click.pass_context
def reindex(ctx: click.Context, vectors: bool, embedder: str | None, as_json: bool) -> None:
    """Rebuild the search index from MEMORY.md and the daily files (after hand edits or a model change).

    \b
    Example:
      tiermem reindex
      tiermem reindex --embedder local:all-MiniLM-L6-v2-int8
    """
    mem = state_of(ctx).memory(embedder=embedder) if embedder else state_of(ctx).memory()
    files = mem.reindex()
    data: dict[str, object] = {"files": files}
    if vectors:
        with progress_bar("embedding", not as_json and sys.stderr.isatty()) as update:
            result = mem.reindex_vectors(progress=update)
        data.update({"model": result.model, "embedded": result.embedded, "reused": result.reused})
    if as_json:
        print_json(data)
    else:
        click.echo(", ".join(f"{key}: {value}" for key, value in data.items()))


@cli.command()
@click.argument("file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path))
@json_option
@click.pass_context
def ingest(ctx: click.Context, file: Path, as_json: bool) -> None:
    """Feed a transcript (JSON Lines or a JSON list of {"role", "content"} messages, optional
    thread_id, user_id, agent_name, timestamp) through the Daily tier and, with an LLM, extraction.

    \b
    Example:
      TIERMEM_LLM=openai:gpt-4o-mini tiermem ingest chat.jsonl
    """
    from tiermem.ingest import ingest as run_ingest
    from tiermem.ingest import read_transcript

    raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
    messages = read_transcript(raw, "stdin" if str(file) == "-" else str(file))  # bad: nothing changes, no store
    mem = state_of(ctx).memory()
    with progress_bar("ingesting", not as_json and sys.stderr.isatty()) as update:
        report = run_ingest(mem, messages, progress=update)
    if as_json:
        print_json(report.to_dict())
    else:
        click.echo(f"{counted(report.messages, 'message')} in {counted(report.threads, 'thread')}: "
                   f"{counted(report.daily_lines, 'daily line')}, {counted(report.llm_calls, 'LLM call')}, "
                   f"{counted(report.facts_added, 'fact')} added")
        if mem.llm is None:
            click.echo("no LLM configured: facts were not extracted (set TIERMEM_LLM, e.g. openai:gpt-4o-mini)")
    if report.queued:
        them = "them" if report.queued != 1 else "it"
        raise click.ClickException(
            f"extraction failed ({report.error}); {counted(report.queued, 'thread')} queued for extraction"
            f" (`tiermem queue status` lists {them}; `tiermem queue retry` extracts {them} once the LLM is back)")


@cli.group()
def queue() -> None:
    """Inspect and drive the durable update queue.

    \b
    Example:
      tiermem queue status
    """


@queue.command("status")
@json_option
@click.pass_context
def queue_status(ctx: click.Context, as_json: bool) -> None:
    """Pending and dead-lettered items with their last error.

    \b
    Example:
      tiermem queue status --json
    """
    items = state_of(ctx).memory(create=False).queue.pending()
    rows = [{"id": i.id, "thread": i.thread_id, "user": i.scope.user_id, "agent": i.scope.agent_name,
             "status": i.status, "attempts": i.attempts, "error": i.last_error} for i in items]
    if as_json:
        print_json(rows)
    else:
        for row in rows:
            click.echo(" ".join(f"{k}={v}" for k, v in row.items()))
        if not rows:
            click.echo("the queue is empty")


@queue.command("retry")
@click.argument("ids", nargs=-1, type=click.IntRange(min=1))
@click.pass_context
def queue_retry(ctx: click.Context, ids: tuple[int, ...]) -> None:
    """Put dead-lettered items (all, or the item IDS given) back in the queue and process them now.

    \b
    Examples:
      tiermem queue retry
      tiermem queue retry 17 18
    """
    mem = state_of(ctx).memory(create=False)
    count = mem.queue.retry_dead(list(ids) if ids else None)
    drained = mem.queue.flush(timeout=300)
    click.echo(f"retried {counted(count, 'item')}; queue "
               + ("empty" if drained else "still has items (see tiermem queue status)"))


@queue.command("flush")
@click.option("--timeout", type=float, default=300.0, show_default=True)
@click.pass_context
def queue_flush(ctx: click.Context, timeout: float) -> None:
    """Process every pending item now.

    \b
    Example:
      tiermem queue flush --timeout 60
    """
    drained = state_of(ctx).memory(create=False).queue.flush(timeout=timeout)
    click.echo("queue empty" if drained else "items left (see tiermem queue status)")
