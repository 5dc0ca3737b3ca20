"""``health_check``: is the server up, and what store does it serve."""

from __future__ import annotations

import time
from typing import Any

from fastmcp import FastMCP

from gitmail.model.version import __version__

from .binding import is_loopback
from .results import READ, tool
from .runtime import Runtime


def environment(rt: Runtime) -> dict[str, Any]:
    """The server's settings as clients may see them (no secrets)."""
    listen = rt.listen
    return {
        "environment": "local" if listen.transport == "stdio" or is_loopback(listen.host or "") else "network",
        "version": __version__,
        "transport": listen.transport,
        "http_host": listen.host,
        "http_port": listen.port,
        "http_path": listen.path if listen.transport == "http" else None,
        "bearer_token_required": listen.bearer,
        "store": rt.store.home,
        "database_url": f"git+file://{rt.store.home}/projects",
        "node": rt.store.node,
    }


def register(mcp: FastMCP, rt: Runtime) -> None:
    @tool(mcp, READ, access=rt.access.open())
    def health_check() -> dict[str, Any]:
        """Report whether the gitmail server is ready, with its version, transport and store.

        Cheap and side-effect free: call it first to check that the connection
        works. `database_url` names the folder of per-project git archives.
        """
        return {"status": "ok", **environment(rt), "projects": len(rt.store.slugs()),
                "uptime_seconds": round(time.time() - rt.started, 3)}
