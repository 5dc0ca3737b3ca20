"""``gitmail serve`` over HTTP plus one tool that does nothing, for benchmarks.

Run: ``python benchmarks/serve_with_floor.py PORT`` with ``GITMAIL_HOME`` set.
The server is the one ``gitmail serve`` runs (same parts, middleware, access
checks and background services); the extra ``bench_noop`` tool is declared and
installed as every tool is, with the open rule, and returns an empty
object, so its cost is the floor every call pays: HTTP, the MCP session,
FastMCP's validation and serialization, the access check. ``bench_text``
does nothing either but answer a text of the size asked for: beside a
cursor page's cost it shows what carrying that many bytes costs alone.
"""

from __future__ import annotations

import json
import os
import sys
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastmcp.tools.base import ToolResult

from gitmail.server import app
from gitmail.server.registry import ANYONE, Toolbox
from gitmail.server.results import READ
from gitmail.server.runtime import Runtime
from gitmail.server.serve import serve_http
from gitmail.storage.store import Store

floor = Toolbox("admin")


@floor.tool(READ, access=ANYONE)
def bench_noop(rt: Runtime) -> dict[str, Any]:
    """Do nothing (the benchmark's floor)."""
    return {}


@floor.tool(READ, access=ANYONE)
def bench_text(rt: Runtime, size: int) -> ToolResult:
    """Answer a JSON text of ``size`` bytes and do nothing else (the floor of a large page)."""
    return ToolResult(content=json.dumps({"text": "x" * max(0, size - 12)}))


def main() -> None:
    app.TOOL_MODULES = (*app.TOOL_MODULES, SimpleNamespace(tools=floor))
    serve_http(Store(), port=int(sys.argv[1]))


if __name__ == "__main__":
    main()
