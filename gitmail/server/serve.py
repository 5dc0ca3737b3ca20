"""Running the server: Streamable HTTP under uvicorn, or stdio."""

from __future__ import annotations

import sys

import uvicorn

from ..store import Store
from .app import build_server
from .binding import DEFAULT_HOST, DEFAULT_PATH, DEFAULT_PORT, check_bind
from .runtime import Listen


def serve_http(store: Store, *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, token: str | None = None,
               path: str = DEFAULT_PATH, log_level: str = "warning") -> None:
    """Serve MCP over Streamable HTTP until interrupted; refuses non-loopback hosts without a token."""
    check_bind(host, token)
    mcp = build_server(store, token=token, listen=Listen("http", host, port, path))
    app = mcp.http_app(path=path)
    shown = f"[{host}]" if ":" in host else host
    print(f"gitmail: serving MCP at http://{shown}:{port}{path} (store {store.home}"
          f"{', bearer token required' if token else ''})", file=sys.stderr, flush=True)
    uvicorn.run(app, host=host, port=port, log_level=log_level)


def serve_stdio(store: Store) -> None:
    """Serve MCP over standard input and output (one client, the parent process)."""
    mcp = build_server(store, listen=Listen("stdio"))
    mcp.run(transport="stdio", show_banner=False)
