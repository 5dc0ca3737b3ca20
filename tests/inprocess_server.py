"""A real gitmail MCP server under uvicorn on a loopback port, in this process, over a store the test owns.

:class:`tests.mcp_harness.ServerProcess` runs ``gitmail serve`` in a child
process, whose clock is the system's. Behaviour that waits for time to pass
(a lease running out, an acknowledgement falling overdue) is tested here
instead: the server serves the test's own :class:`~gitmail.Store`, made with
``wall=`` the test's hand-moved clock, over real HTTP, to the official MCP
client, so hours pass with ``wall.advance`` and nothing sleeps.
"""

from __future__ import annotations

import threading

import uvicorn
from fastmcp import Client

from gitmail.mail.facade import Mail
from gitmail.server import build_server
from gitmail.server.runtime import Listen
from gitmail.storage.store import Store

from .conftest import wait_until
from .mcp_harness import free_port


class InProcessServer:
    """``build_server(store)`` served over Streamable HTTP on a free loopback port until :meth:`stop`."""

    def __init__(self, store: Store, *, mail: Mail | None = None):
        self.store = store
        self.mail = mail or Mail(store)
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        mcp = build_server(store, mail=self.mail, listen=Listen("http", "127.0.0.1", self.port, "/mcp"))
        app = mcp.http_app(path="/mcp", json_response=True)
        self._server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning"))
        self._thread = threading.Thread(target=self._server.run, name="test-uvicorn", daemon=True)
        self._thread.start()
        wait_until(lambda: self._server.started or not self._thread.is_alive(), "the server to listen")
        if not self._server.started:
            raise RuntimeError("the in-process server did not start")

    def client(self) -> Client:
        """A client keeping one MCP session."""
        return Client(self.url, mode="legacy", timeout=60)

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)

    def __enter__(self) -> InProcessServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
