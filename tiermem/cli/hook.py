"""``tiermem hook CLIENT EVENT``: one coding-agent hook (what ``tiermem setup`` registers)."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, state_of


@cli.command("hook")
@click.argument("client_name", metavar="CLIENT")
@click.argument("event")
@click.pass_context
def hook_command(ctx: click.Context, client_name: str, event: str) -> None:
    """Run one hook of a coding agent (claude-code, codex, gemini): read the hook's JSON on stdin
    and print the client's additional context, or nothing. Session start: the memory of the person
    and the project; each prompt: what is relevant to it (from the resident server); stop,
    compaction, session end: the new transcript lines are journaled and queued. Never calls an
    LLM; always exits 0: a failure, or a hook past its budget (1 s a prompt, 2 s a start, 5 s a
    save), prints nothing and adds a line to <root>/agents/hooks.log (`tiermem doctor` shows it).
    See docs/coding-agents.md; `tiermem setup` writes these commands.

    \b
    Example:
      echo '{"session_id": "s1", "cwd": "."}' | tiermem --root ~/.local/share/tiermem hook claude-code SessionStart
    """
    from tiermem.agents.hook_runner import main

    main(["--root", str(state_of(ctx).root), client_name, event])
