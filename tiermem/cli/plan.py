"""``tiermem plan list|show|start|check|uncheck|pause|resume|complete|abandon`` (boulder state)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tiermem.cli.app import cli, json_option, print_json, state_of
from tiermem.cli.render import plan_table
from tiermem.errors import InvalidInput, NotFound
from tiermem.plans.plan import PLAN_STATUSES, Plan


def _show(plan: Plan, as_json: bool) -> None:
    if as_json:
        print_json(plan.to_dict())
        return
    done, total = plan.progress
    click.echo(f"{plan.id}  {plan.status}  {done}/{total}  {plan.title}")
    for item in plan.items:
        click.echo(f"  {item.index:>3}  [{'x' if item.done else ' '}] {item.text}")


@cli.group()
def plan() -> None:
    """Work-in-progress plans that survive the session (one active plan per user and agent).

    \b
    Example:
      tiermem plan start "Ship v1" "write tests" "fix bugs" "release"
      tiermem plan check plan_1a2b3c4d 0
    """


@plan.command("list")
@click.option("--status", type=click.Choice(PLAN_STATUSES), default=None, help="Only plans with this status.")
@json_option
@click.pass_context
def plan_list(ctx: click.Context, status: str | None, as_json: bool) -> None:
    """List the plans of the scope, newest first.

    \b
    Example:
      tiermem plan list --status paused --json
    """
    plans = state_of(ctx).memory(create=False).plans.list(status)
    if as_json:
        print_json([p.to_dict() for p in plans])
    else:
        plan_table(plans)


@plan.command("show")
@click.argument("plan_id", required=False)
@click.option("--prompt", is_flag=True, help="Print the continuation prompt instead of the checklist.")
@json_option
@click.pass_context
def plan_show(ctx: click.Context, plan_id: str | None, prompt: bool, as_json: bool) -> None:
    """Show a plan's checklist (the active plan when no id is given).

    \b
    Example:
      tiermem plan show --prompt
    """
    plans = state_of(ctx).memory(create=False).plans
    found = plans.get(plan_id) if plan_id is not None else plans.active()
    if found is None:
        raise NotFound("no active plan")
    if prompt and not as_json:
        click.echo(found.continuation_prompt())
        return
    _show(found, as_json)


@plan.command("start")
@click.argument("title")
@click.argument("items", nargs=-1)
@click.option("--file", "source", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Read the Markdown checklist ('- [ ] step' lines) from FILE ('-' for stdin).")
@json_option
@click.pass_context
def plan_start(ctx: click.Context, title: str, items: tuple[str, ...], source: Path | None, as_json: bool) -> None:
    """Start a plan from step texts or a Markdown checklist; the active plan is paused.

    \b
    Example:
      tiermem plan start "Ship v1" "write tests" "fix bugs"
      tiermem plan start "Ship v1" --file steps.md
    """
    if (source is None) == (not items):
        raise click.UsageError("give the steps either as arguments or with --file")
    checklist: str | list[str] = list(items)
    if source is not None:
        try:
            checklist = sys.stdin.read() if str(source) == "-" else source.read_text("utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise InvalidInput(f"cannot read {source}: {exc}") from exc
    _show(state_of(ctx).memory().plans.start(title, checklist), as_json)


def _item_command(name: str, doc: str, method: str) -> None:
    @plan.command(name, help=doc)
    @click.argument("plan_id")
    @click.argument("index", type=int)
    @json_option
    @click.pass_context
    def command(ctx: click.Context, plan_id: str, index: int, as_json: bool) -> None:
        plans = state_of(ctx).memory(create=False).plans
        _show(getattr(plans, method)(plan_id, index), as_json)


def _status_command(name: str, doc: str, method: str) -> None:
    @plan.command(name, help=doc)
    @click.argument("plan_id")
    @json_option
    @click.pass_context
    def command(ctx: click.Context, plan_id: str, as_json: bool) -> None:
        plans = state_of(ctx).memory(create=False).plans
        _show(getattr(plans, method)(plan_id), as_json)


_item_command("check", "Mark item INDEX (0-based) of a plan done.\n\n\b\nExample:\n"
              "  tiermem plan check plan_1a2b3c4d 0", "check")
_item_command("uncheck", "Mark item INDEX (0-based) of a plan not done.\n\n\b\nExample:\n"
              "  tiermem plan uncheck plan_1a2b3c4d 0", "uncheck")
_status_command("pause", "Pause a plan (no plan is active afterwards).\n\n\b\nExample:\n"
                "  tiermem plan pause plan_1a2b3c4d", "pause")
_status_command("complete", "Mark a plan completed (final).\n\n\b\nExample:\n"
                "  tiermem plan complete plan_1a2b3c4d", "complete")
_status_command("abandon", "Abandon a plan (final).\n\n\b\nExample:\n  tiermem plan abandon plan_1a2b3c4d",
                "abandon")


@plan.command("resume")
@click.argument("plan_id", required=False)
@json_option
@click.pass_context
def plan_resume(ctx: click.Context, plan_id: str | None, as_json: bool) -> None:
    """Make a paused plan active again; without an id, print the active plan's continuation prompt.

    \b
    Example:
      tiermem plan resume plan_1a2b3c4d
      tiermem plan resume
    """
    plans = state_of(ctx).memory(create=False).plans
    if plan_id is not None:
        _show(plans.resume(plan_id), as_json)
        return
    found = plans.resume()
    if found is None:
        raise NotFound("no active plan")
    if as_json:
        print_json({**found[0].to_dict(), "continuation": found[1]})
    else:
        click.echo(found[1])
