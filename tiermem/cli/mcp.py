"""``tiermem mcp``: serve this memory to MCP clients (stdio, or streamable HTTP with ``--http``)."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, state_of

_LOCAL_HOST = "127.0.0.1"


@cli.command("mcp")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
              help="Serve streamable HTTP on this port (at /mcp) instead of stdio.")
@click.option("--host", default=_LOCAL_HOST, show_default=True,
              help="Interface to bind with --http; anything but 127.0.0.1/localhost exposes your memory.")
@click.pass_context
def mcp_command(ctx: click.Context, http_port: int | None, host: str) -> None:
    """Run the MCP server (tools: remember, recall, forget, list_facts, daily_note, dream,
    plan_*; resources: memory://core, memory://daily/today, memory://injection).

    The scope comes from --user/--agent (or TIERMEM_USER/TIERMEM_AGENT). A provider that cannot
    be built (an unknown name, a missing API key) is reported on stderr before the server starts
    (exit 1). See docs/mcp.md for the client configuration.

    \b
    Example:
      tiermem --root ~/.tiermem --user alice mcp
      tiermem mcp --http 8765
    """
    if http_port is None and host != _LOCAL_HOST:
        raise click.UsageError("--host only applies with --http PORT")
    state = state_of(ctx)
    mem = state.memory(queue_replay=True)  # a long-lived process: replay the queue, run the dreams
    _ = mem.embedder  # build the providers now: a missing API key stops the server before it serves
    if mem.llm is not None:
        mem.start_dream_scheduler()
    from tiermem.mcp.server import HTTP_PATH, serve

    if http_port is not None:
        shown = f"[{host}]" if ":" in host else host
        click.echo(f"tiermem MCP server on http://{shown}:{http_port}{HTTP_PATH} "
                   f"(scope {mem.scope.user_id}/{mem.scope.agent_name}); Ctrl-C stops it", err=True)
    serve(mem, http_port=http_port, host=host)
