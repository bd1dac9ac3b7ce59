"""``tiermem mcp``: serve this memory to MCP clients (stdio, or streamable HTTP with ``--http``)."""

from __future__ import annotations

import click
from click.core import ParameterSource

from tiermem.cli.app import CliState, cli, state_of

_LOCAL_HOST = "127.0.0.1"


@cli.command("mcp")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
              help="Serve streamable HTTP on this port (at /mcp) instead of stdio.")
@click.option("--host", default=_LOCAL_HOST, show_default=True,
              help="Interface to bind with --http; anything that is not loopback needs --token (or --insecure).")
@click.option("--token", envvar="TIERMEM_MCP_TOKEN", default=None, metavar="TOKEN",
              help="Bearer token HTTP clients must send (Authorization: Bearer TOKEN); prefer the "
                   "TIERMEM_MCP_TOKEN variable, a command line is visible to other users.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME[:PORT]",
              help="Another Host header clients may use (a LAN name, a reverse proxy); repeatable.")
@click.option("--insecure", is_flag=True,
              help="Serve a non-loopback --host without a token (only behind something that authenticates).")
@click.option("--coding-agent", is_flag=True,
              help="Serve a coding agent working in the current folder: the project scope of the folder (its "
                   "journal, MEMORY.md, plans and facts) and the person scope for what the person says about "
                   "themselves, instead of --user/--agent (what `tiermem setup` registers; docs/coding-agents.md).")
@click.pass_context
def mcp_command(ctx: click.Context, http_port: int | None, host: str, token: str | None,
                allow_hosts: tuple[str, ...], insecure: bool, coding_agent: bool) -> None:
    """Run the MCP server (tools: remember, recall, forget, list_facts, daily_note, dream,
    plan_*; resources: memory://core, memory://daily/today, memory://injection).

    The scope comes from --user/--agent (or TIERMEM_USER/TIERMEM_AGENT), or with --coding-agent
    from the current folder (a repository's scope, and the person's). A provider that cannot
    be built (an unknown name, a missing API key) is reported on stderr before the server starts
    (exit 1). Over HTTP, Host/Origin headers are checked against DNS rebinding, and a host that
    is not loopback is refused without a token. See docs/mcp.md for the client configuration.

    \b
    Example:
      tiermem --root ~/.tiermem --user alice mcp
      tiermem mcp --http 8765
      tiermem --root ~/.local/share/tiermem mcp --coding-agent
      TIERMEM_MCP_TOKEN=... tiermem mcp --http 8765 --host 0.0.0.0 --allow-host myhost.lan
    """
    from contextlib import nullcontext

    from tiermem.mcp.http import HttpOptions, check_exposure, listen

    if coding_agent:
        _use_coding_scope(state_of(ctx))
    explicit = ctx.get_parameter_source("token") not in (ParameterSource.ENVIRONMENT, ParameterSource.DEFAULT)
    if http_port is None and (host != _LOCAL_HOST or allow_hosts or insecure or (token is not None and explicit)):
        raise click.UsageError("--host, --token, --allow-host and --insecure only apply with --http PORT")
    http = None
    if http_port is not None:
        http = HttpOptions(http_port, host, token or None, allow_hosts, insecure)
        check_exposure(http)  # before the store opens: nothing starts on a refused address
    with listen(http, "--http") if http is not None else nullcontext() as sock:  # the port before the store
        mem = state_of(ctx).memory(queue_replay=True)  # a long-lived process: replay the queue, run the dreams
        _ = mem.embedder  # build the providers now: a missing API key stops the server before it serves
        if mem.llm is not None:
            mem.start_dream_scheduler()
        from tiermem.mcp.server import serve

        if http is not None:
            if not http.loopback and http.token is None:
                click.echo(f"WARNING: serving {http.url} without a token (--insecure): anyone who can reach "
                           "this port can read and change this memory", err=True)
            guard = "bearer token required" if http.token else "no token"
            click.echo(f"tiermem MCP server on {http.url} (scope {mem.scope.user_id}/{mem.scope.agent_name}, "
                       f"{guard}, store {mem.db.label}); Ctrl-C stops it", err=True)
        serve(mem, http, sock)


def _use_coding_scope(state: CliState) -> None:
    """Point ``state`` at the project scope of the current folder (R74); the MCP tools add the
    person scope that goes with it (:class:`~tiermem.mcp.tools.MemoryTools`)."""
    import os

    from tiermem.agents.project import coding_scopes
    from tiermem.config import load_settings

    root = state.root.expanduser().resolve()
    scopes = coding_scopes(root, os.getcwd(), load_settings(root))
    state.user, state.agent = scopes.project.user_id, scopes.project.agent_name
