"""``tiermem calls``: the LLM call log of the scope (docs/calls.md)."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich import box
from rich.table import Table

from tiermem.calls.records import CALL_OUTCOMES, CALL_PURPOSES, CallRecord
from tiermem.cli.app import cli, json_option, print_json, state_of


@cli.command()
@click.option("--purpose", type=click.Choice(CALL_PURPOSES), default=None, help="Only calls made for this.")
@click.option("--model", default=None, help="Only this model: provider:model (openai:gpt-4o-mini) or its bare name.")
@click.option("--outcome", type=click.Choice(CALL_OUTCOMES), default=None, help="Only attempts that ended so.")
@click.option("--since", default=None, help="Only calls since: ISO date or time (UTC), or a span: 30m, 24h, 7d, 2w.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True, help="At most this many rows.")
@json_option
@click.pass_context
def calls(ctx: click.Context, purpose: str | None, model: str | None, outcome: str | None, since: str | None,
          limit: int, as_json: bool) -> None:
    """The LLM call log: every model call tiermem made for this scope, newest first.

    One row per attempt: time, purpose (extraction, session_summary, dream, compression, embed,
    other), provider:model, prompt and completion tokens (as the provider reported them; * marks
    tokens tiermem counted itself), latency, outcome (ok, retried, parse_failed, provider_error;
    #2 = the second attempt of a call) and the error (numbered notes under the table). Costs need
    prices in tiermem.toml ([prices."openai:gpt-4o-mini"] with input_per_mtok and
    output_per_mtok): the table shows their sum, --json the cost of each row. Prompt and reply
    texts are kept only with log_prompts = true (shown with --json). Rows older than
    call_log_retention_days (default 90) are removed. Totals are in `tiermem stats`.

    \b
    Example:
      tiermem calls
      tiermem calls --purpose extraction --since 24h
      tiermem calls --outcome provider_error --model openai:gpt-4o-mini --json
    """
    mem = state_of(ctx).memory(create=False)
    rows = mem.calls.list(purpose=purpose, model=model, outcome=outcome, since=since, limit=limit)
    if as_json:
        print_json([row.to_dict() for row in rows])
        return
    _table(rows)


def _table(rows: Sequence[CallRecord]) -> None:
    """One line per row; errors as numbered notes under the table (so the table fits 80 columns)."""
    from tiermem.cli.render import console

    if not rows:
        console.print("[dim]no calls[/dim]")
        return
    notes: list[str] = []
    cells: list[list[str]] = []
    for r in rows:
        outcome = r.outcome + (f" #{r.attempt}" if r.attempt > 1 else "")
        if r.error:
            notes.append(f"[{len(notes) + 1}] {r.error[:300]}")
            outcome += f" [{len(notes)}]"
        cells.append([f"{r.at[5:10]} {r.at[11:16]}", r.purpose, r.model_id,
                      f"{r.prompt_tokens}/{r.completion_tokens}{'*' if r.tokens_counted else ''}",
                      f"{r.latency_ms:.0f}", outcome])
    outcome_width = max(len(c[5]) for c in cells)
    model_width = max(12, min(80 - 48 - outcome_width, max(len(c[2]) for c in cells)))  # whole names in 80 columns
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for column in ("at (UTC)", "purpose", "model", "in/out", "ms", "outcome"):
        table.add_column(column, overflow="fold", min_width=model_width if column == "model" else None,
                         no_wrap=column != "model", justify="right" if column in ("in/out", "ms")
                         else "left")
    for row in cells:
        table.add_row(*row)
    console.print(table, markup=False)
    for note in notes:
        console.print(note, markup=False, highlight=False)
    costs = [r.cost for r in rows if r.cost is not None]
    cost = f", ${sum(costs):.6f}" if costs else ""
    console.print(f"{len(rows)} rows: {sum(r.prompt_tokens for r in rows)} prompt + "
                  f"{sum(r.completion_tokens for r in rows)} completion tokens{cost} (* counted by tiermem)",
                  markup=False, highlight=False)
