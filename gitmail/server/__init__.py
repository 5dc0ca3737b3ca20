"""The MCP server: gitmail's tools and resources over Streamable HTTP and stdio.

:func:`build_server` makes the FastMCP instance for a store;
:mod:`gitmail.server.serve` runs it. The server is a thin layer over
:class:`gitmail.mail.facade.Mail`: it checks who the caller may act as, turns
failures into error results, and shapes reads for a context window.
"""

from typing import Any

__all__ = ["build_server"]


def __getattr__(name: str) -> Any:
    # Imported on first use: the CLI loads this package for its defaults
    # without paying for FastMCP on every command.
    if name == "build_server":
        from .app import build_server

        return build_server
    raise AttributeError(name)
