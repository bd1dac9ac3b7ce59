"""``tiermem setup CLIENT``: memory for Claude Code, Codex CLI or Gemini CLI in one command (R71)."""

from __future__ import annotations

from pathlib import Path

import click

from tiermem.cli.app import cli, json_option, print_json

STATUS_WORDS = {"added": "add", "updated": "update", "removed": "remove"}


@cli.command("setup")
@click.argument("client_name", metavar="CLIENT")
@click.option("--project", type=click.Path(file_okay=False, path_type=Path), is_flag=False, flag_value=Path("."),
              default=None, metavar="[DIR]",
              help="Set up this project only (DIR, default the current folder) instead of your global config.")
@click.option("--global", "global_", is_flag=True, help="Set up your global config (the default).")
@click.option("--root", "setup_root", type=click.Path(file_okay=False, path_type=Path), default=None, metavar="DIR",
              help="Memory root the hooks and the MCP server use (default: tiermem's --root or TIERMEM_HOME if "
                   "given, else your data folder, e.g. ~/.local/share/tiermem).")
@click.option("--dry-run", is_flag=True, help="Say what would change; write nothing.")
@click.option("--remove", is_flag=True, help="Take out what setup added (the memory itself stays).")
@json_option
@click.pass_context
def setup_command(ctx: click.Context, client_name: str, project: Path | None, global_: bool, setup_root: Path | None,
                  dry_run: bool, remove: bool, as_json: bool) -> None:
    """Give a coding agent (CLIENT: claude-code, codex or gemini) a memory that survives the
    session: register tiermem's MCP server and its hooks (inject memory when a session starts,
    add what is relevant to each prompt, journal the session as it goes) in the client's own
    config, merged with what is there. Running it again changes nothing; --remove takes out
    exactly what it added.

    By default it writes your global config, so every repository gets memory: facts about you
    are shared across projects, the rest is kept per project (found from the session's working
    directory). The commands it writes name this tiermem by absolute path and pass --root.

    \b
    Where it writes:
      claude-code  ~/.claude/settings.json (hooks, tool permission), ~/.claude.json (MCP server);
                   --project: DIR/.claude/settings.json, DIR/.mcp.json, DIR/.claude/settings.local.json
      codex        $CODEX_HOME/hooks.json, $CODEX_HOME/config.toml (MCP server, hooks feature, hook
                   trust); --project: DIR/.codex/hooks.json and DIR/.codex/config.toml
      gemini       ~/.gemini/settings.json; --project: DIR/.gemini/settings.json

    \b
    Example:
      tiermem setup claude-code
      tiermem setup codex --dry-run
      tiermem setup gemini --project ~/src/shop
      tiermem setup claude-code --remove
    """
    from tiermem.agents.setup import default_root, setup

    if project is not None and global_:
        raise click.UsageError("--project and --global exclude each other")
    root = setup_root or _group_root(ctx) or default_root()
    report = setup(client_name, project, root, dry_run=dry_run, remove=remove)
    if as_json:
        print_json(report.to_json())
        return
    where = "your global config" if report.project is None else f"the project {report.project}"
    doing = "remove from" if remove else "set up in"
    click.echo(f"{report.label}: {'would ' if dry_run else ''}{doing} {where}"
               f"{' (dry run, nothing written)' if dry_run else ''}")
    for plan in report.files:
        click.echo(f"  {plan.path}: {_outcome(plan.outcome, dry_run)}")
        for change in plan.changes:
            if change.status != "unchanged":
                verb = STATUS_WORDS.get(change.status, change.status)
                click.echo(f"    {change.item}: {'would ' + verb if dry_run else change.status}")
    click.echo(f"memory root: {report.root}")
    click.echo(f"look at it:  {report.ui_command}")
    for note in report.notes:
        click.echo(f"note: {note}")


def _outcome(outcome: str, dry_run: bool) -> str:
    if not dry_run or outcome == "unchanged":
        return outcome
    return {"created": "would be created", "deleted": "would be deleted", "changed": "would change"}[outcome]


def _group_root(ctx: click.Context) -> Path | None:
    """tiermem's own --root (or TIERMEM_HOME) when the user gave it; not its ``./.tiermem`` default."""
    root_ctx = ctx.find_root()
    if root_ctx.get_parameter_source("root") in (click.core.ParameterSource.DEFAULT, None):
        return None
    root = root_ctx.params.get("root")
    return root if isinstance(root, Path) else None


@cli.command("scopes")
@click.argument("folder", default=".", type=click.Path(exists=True, file_okay=False, path_type=Path))
@json_option
@click.pass_context
def scopes_command(ctx: click.Context, folder: Path, as_json: bool) -> None:
    """The coding-agent scopes of FOLDER (default: the current folder): the person scope (what
    you said about yourself, in every repository) and the project scope (this repository's
    journal, MEMORY.md and facts) that hooks and `mcp --coding-agent` use there, and the
    --user/--agent options that reach each from the other commands. The root is setup's: tiermem's
    --root or TIERMEM_HOME if given, else your data folder.

    \b
    Example:
      tiermem scopes ~/src/shop
      tiermem --user project-1a2b3c4d5e6f7a8b --agent coding facts list   # the project id it printed
    """
    from tiermem.agents.project import coding_scopes
    from tiermem.agents.setup import default_root
    from tiermem.config import load_settings

    root = (_group_root(ctx) or default_root()).expanduser().resolve()
    scopes = coding_scopes(root, folder.resolve(), load_settings(root, {}))
    person, project, key = scopes.person, scopes.project, scopes.key
    if as_json:
        print_json({"root": str(root), "person": {"user": person.user_id, "agent": person.agent_name},
                    "project": {"user": project.user_id, "agent": project.agent_name, "key_kind": key.kind,
                                "folder": str(key.top)}})
        return
    click.echo(f"memory root: {root}")
    click.echo(f"person:      --user {person.user_id} --agent {person.agent_name}")
    click.echo(f"project:     --user {project.user_id} --agent {project.agent_name}  ({key.kind} key of {key.top})")
    click.echo(f"e.g.:        tiermem --root {root} --user {project.user_id} --agent {project.agent_name} facts list")
