"""The MCP server: gitmail's tools and resources over Streamable HTTP and stdio.

:func:`build_server` makes the FastMCP instance for a store;
:mod:`gitmail.server.serve` runs it. The server is a thin layer over
:class:`gitmail.mail.Mail`: it checks who the caller may act as, turns
failures into error results, and shapes reads for a context window.
"""

from .app import build_server

__all__ = ["build_server"]
