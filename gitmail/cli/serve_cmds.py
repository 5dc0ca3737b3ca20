"""``gitmail serve``: run the MCP server over Streamable HTTP or stdio."""

from __future__ import annotations

import sys

import click

from gitmail.model.errors import GitmailError
from gitmail.server.binding import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT, TOKEN_ENV, check_bind
from gitmail.server.profiles import FAMILIES, PROFILES, TOOLS_ENV, Profile, choose

from ._app import Context, command


@command(name="serve")
@click.option("--host", default=DEFAULT_HOST, show_default=True,
              help="Address to listen on. Anything but loopback needs a bearer token.")
@click.option("--port", default=DEFAULT_PORT, show_default=True, type=int, help="TCP port to listen on.")
@click.option("--path", "mcp_path", default=DEFAULT_PATH, show_default=True, help="URL path of the MCP endpoint.")
@click.option("--stdio", is_flag=True, help="Serve one client over standard input/output instead of HTTP.")
@click.option("--token", envvar=TOKEN_ENV, default=None,
              help=f"Bearer token every HTTP request must carry (default: ${TOKEN_ENV}).")
@click.option("--sync-interval", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Every this many seconds, sync each project that has a remote (0: never; see `gitmail sync`).")
@click.option("--allow-origin", "allow_origins", multiple=True, metavar="ORIGIN",
              help="Also answer requests for this host[:port] or from this origin (https://name[:port]); "
                   "repeatable, added to $GITMAIL_ALLOWED_ORIGINS. Loopback names need no entry.")
@click.option("--tools", "tools", envvar=TOOLS_ENV, default=None, metavar="PROFILE[,FAMILY...]",
              help=f"Which tools to list: profiles {', '.join(PROFILES)} (default: default) and families "
                   f"{', '.join(FAMILIES)}, comma-separated (default: ${TOOLS_ENV}).")
@click.option("--log-level", default="warning", show_default=True,
              type=click.Choice(["critical", "error", "warning", "info", "debug"]), help="uvicorn log level.")
def serve(ctx: Context, host: str, port: int, mcp_path: str, stdio: bool, token: str | None,
          sync_interval: float, allow_origins: tuple[str, ...], tools: str | None,
          log_level: str) -> tuple[object, str]:
    """Run the MCP server on the store (default http://127.0.0.1:8765/mcp).

    Agents connect with any MCP client over Streamable HTTP, or launch
    `gitmail serve --stdio` as a subprocess. Runs until interrupted.
    """
    profile = _profile(tools)
    from gitmail.server.serve import serve_http, serve_stdio  # FastMCP loads only when serving

    if stdio:
        serve_stdio(ctx.store, sync_interval=sync_interval, tools=profile)
        # standard output belongs to JSON-RPC until the very end: the note goes to standard error
        click.echo("gitmail: stdio server stopped", err=True)
        sys.exit(0)
    check_bind(host, token)
    serve_http(ctx.store, host=host, port=port, token=token, path=mcp_path, log_level=log_level,
               sync_interval=sync_interval, allow_origins=allow_origins, tools=profile)
    return {"stopped": True, "transport": "http"}, "gitmail: server stopped"


def _profile(spec: str | None) -> Profile:
    """The tool profile ``--tools`` names, checked before the server loads."""
    try:
        return choose(spec)
    except GitmailError as exc:
        raise click.BadParameter(exc.message, param_hint="--tools") from None
