"""``tiermem calls``: the LLM call log of the scope (docs/calls.md)."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich import box
from rich.table import Table

from tiermem.calls.records import CALL_OUTCOMES, CALL_PURPOSES, CallRecord
from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.plural import counted


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


HEADERS = ("at (UTC)", "purpose", "model", "in/out", "ms", "outcome")
NARROW_DROPS = ("ms", "in/out", "at (UTC)", "purpose")  # left out in this order when the table would not fit
MODEL_MIN = 12  # a longer model name folds over lines


def _table(rows: Sequence[CallRecord]) -> None:
    """One row per attempt (a long model name folds, an outcome may wrap at a space; at narrow widths
    columns are left out, see :func:`_fit`); errors as numbered notes under the table."""
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
    widths = _fit(cells, console.width)
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False)
    for index, width in widths.items():
        header = HEADERS[index]
        table.add_column(header, width=width, overflow="fold", no_wrap=header not in ("model", "outcome"),
                         justify="right" if header in ("in/out", "ms") else "left")
    for row in cells:
        table.add_row(*(row[index] for index in widths))
    console.print(table, markup=False)
    left_out = [header for index, header in enumerate(HEADERS) if index not in widths]
    if left_out:
        console.print(f"(left out at this width: {', '.join(left_out)}; --json has every field)",
                      markup=False, highlight=False)
    for note in notes:
        console.print(note, markup=False, highlight=False)
    costs = [r.cost for r in rows if r.cost is not None]
    cost = f", ${sum(costs):.6f}" if costs else ""
    console.print(f"{counted(len(rows), 'row')}: {sum(r.prompt_tokens for r in rows)} prompt + "
                  f"{sum(r.completion_tokens for r in rows)} completion tokens{cost} (* counted by tiermem)",
                  markup=False, highlight=False)


def _fit(cells: Sequence[Sequence[str]], width: int) -> dict[int, int]:
    """The columns shown and their widths. Every cell whole on one line when that fits, leaving out
    the columns of ``NARROW_DROPS`` one by one; else the model name folds and the outcome wraps at
    its spaces (never inside a word). Each column costs 3 more characters (its gaps and edges)."""
    natural = [max(len(header), *(len(row[index]) for row in cells)) for index, header in enumerate(HEADERS)]
    least = list(natural)
    model, outcome = HEADERS.index("model"), HEADERS.index("outcome")
    least[model] = min(MODEL_MIN, natural[model])
    least[outcome] = max(len(HEADERS[outcome]), *(len(word) for row in cells for word in row[outcome].split()))
    shown = list(range(len(HEADERS)))
    for drop in (None, *NARROW_DROPS):
        if drop is not None:
            shown.remove(HEADERS.index(drop))
        if sum(natural[index] + 3 for index in shown) - 1 <= width:
            return {index: natural[index] for index in shown}
        if drop is not None and sum(least[index] + 3 for index in shown) - 1 <= width:
            break
    widths = {index: least[index] for index in shown}
    spare = width - sum(widths[index] + 3 for index in shown) + 1
    for index in (model, outcome):  # a whole model name first, then an outcome on one line
        grow = max(0, min(spare, natural[index] - least[index]))
        widths[index] += grow
        spare -= grow
    return widths
