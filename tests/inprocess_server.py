"""A real gitmail server under uvicorn on a loopback port, in this process, over a store the test owns.

:class:`tests.mcp_harness.ServerProcess` runs ``gitmail serve`` in a child
process, whose clock is the system's. Behaviour that waits for time to pass
(a lease running out, an acknowledgement falling overdue, a web session
expiring) is tested here instead: the server serves the test's own
:class:`~gitmail.Store`, made with ``wall=`` the test's hand-moved clock,
over real HTTP (the same application ``gitmail serve`` runs: MCP, the web
view and the Host/Origin check), to the official MCP client or raw HTTP, so
hours pass with ``wall.advance`` and nothing sleeps.
"""

from __future__ import annotations

import threading

import uvicorn
from fastmcp import Client

from gitmail.mail.facade import Mail
from gitmail.server.profiles import choose
from gitmail.server.serve import http_app
from gitmail.server.wake import Wakes
from gitmail.storage.store import Store

from .conftest import wait_until
from .mcp_harness import free_port


class InProcessServer:
    """``gitmail serve``'s application for ``store`` (all tools by default) on a loopback port until :meth:`stop`."""

    def __init__(self, store: Store, *, mail: Mail | None = None, token: str | None = None, tools: str = "all",
                 wakes: Wakes | None = None):
        """``wakes``: the server's wake channels, started here and stopped with the server (default: none run)."""
        self.store = store
        self.mail = mail or Mail(store)
        self.wakes = wakes.start() if wakes is not None else None
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/mcp"
        app = http_app(store, mail=self.mail, host="127.0.0.1", port=self.port, token=token, tools=choose(tools),
                       wakes=wakes)
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
        if self.wakes is not None:
            self.wakes.stop()

    def __enter__(self) -> InProcessServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
