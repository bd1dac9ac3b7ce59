"""``tiermem ui``: the local web viewer (docs/ui.md)."""

from __future__ import annotations

import click

from tiermem.cli.app import cli, state_of


@cli.command("ui")
@click.option("--port", type=click.IntRange(1, 65535), default=None, metavar="PORT",
              help="Port to serve on (default 8767, printed at start).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Interface to bind; anything that is not loopback needs a token.")
@click.option("--token", envvar="TIERMEM_UI_TOKEN", default=None, metavar="TOKEN",
              help="Token the browser logs in with (at /login; scripts may send Authorization: Bearer TOKEN); "
                   "prefer the TIERMEM_UI_TOKEN variable, a command line is visible to other users.")
@click.option("--allow-host", "allow_hosts", multiple=True, metavar="NAME[:PORT]",
              help="Another Host header browsers may use (a LAN name, a reverse proxy); repeatable.")
@click.pass_context
def ui_command(ctx: click.Context, port: int | None, host: str, token: str | None,
               allow_hosts: tuple[str, ...]) -> None:
    """Serve a local web viewer of this memory: Core (MEMORY.md, its versions with diff, dream
    diary and rollback), Journal, Facts (search with scores, edit, delete, purge), Search (every
    tier, as tiermem search shows it), Prompt (the injection text and system context with token
    counts), Queue (retry) and LLM Calls.

    Binds 127.0.0.1 by default; another --host needs a token (--token or TIERMEM_UI_TOKEN). Host
    and Origin headers are checked, every form carries a CSRF token, stored text is escaped.
    The scope picker opens any user/agent of the root; --user/--agent choose the first one.

    \b
    Example:
      tiermem ui
      tiermem --user alice ui --port 9000
      TIERMEM_UI_TOKEN=... tiermem ui --host 0.0.0.0 --allow-host myhost.lan
    """
    from tiermem.mcp.http import listen
    from tiermem.ui.guard import DEFAULT_PORT, ui_options
    from tiermem.ui.server import serve, url_of

    options = ui_options(port or DEFAULT_PORT, host, token or None, allow_hosts)  # before the store opens
    with listen(options, "--port") as sock:  # the port first: the line below means "ready"
        mem = state_of(ctx).memory(create=False)
        guard = "log in with the token" if options.token else "no token"
        click.echo(f"tiermem ui on {url_of(options)} (scope {mem.scope.user_id}/{mem.scope.agent_name}, {guard}, "
                   f"store {mem.db.label}); Ctrl-C stops it", err=True)
        serve(mem, options, sock)
