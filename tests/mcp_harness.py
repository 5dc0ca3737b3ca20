"""A real gitmail MCP server in a child process, and a real MCP client for it.

Tests start ``python -m gitmail serve`` on a free loopback port with a private
store and talk to it with fastmcp's client over Streamable HTTP (or spawn
``serve --stdio``), exactly as an agent would.
"""

from __future__ import annotations

import asyncio
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any

from fastmcp import Client
from fastmcp.client.transports import StdioTransport

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def child_env(home: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ, GITMAIL_HOME=home, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("GITMAIL_TOKEN", None)
    env.update(extra)
    return env


def _die_with_parent() -> None:
    """In the child: have the kernel end it if the test process dies first (Linux)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


class ServerProcess:
    """``gitmail serve`` on a free port; ``url`` is its MCP endpoint."""

    def __init__(self, home: str, *, token: str | None = None, host: str = "127.0.0.1",
                 extra_args: tuple[str, ...] = (), env: dict[str, str] | None = None):
        self.home = home
        self.token = token
        self.host = host
        self.port = free_port()
        self.url = f"http://{host}:{self.port}/mcp"
        env = child_env(home, **({"GITMAIL_TOKEN": token} if token else {}), **(env or {}))
        self.log = tempfile.TemporaryFile(mode="w+")  # a pipe nobody reads could fill and stall the server
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gitmail", "serve", "--host", host, "--port", str(self.port), *extra_args],
            env=env, stdout=subprocess.DEVNULL, stderr=self.log, preexec_fn=_die_with_parent)
        self._wait_ready()

    def _wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.seek(0)
                said = self.log.read()
                self.log.close()
                raise RuntimeError(f"gitmail serve exited with {self.proc.returncode}: {said}")
            try:
                with socket.create_connection((self.host, self.port), timeout=0.2):
                    return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise RuntimeError("gitmail serve did not start listening in time")

    def client(self, *, token: str | None = None, mode: str = "legacy") -> Client:
        """A client that keeps one MCP session (mode='legacy') unless told otherwise."""
        auth = token if token is not None else self.token
        return Client(self.url, auth=auth, mode=mode, timeout=60)

    def stop(self) -> None:
        stop_process(self.proc)
        self.log.close()


def stop_process(proc: subprocess.Popen, how: int = signal.SIGTERM, grace: float = 10.0) -> None:
    """Send ``how`` to a child still running and wait for it to end; kill it after ``grace`` seconds."""
    if proc.poll() is None:
        proc.send_signal(how)
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def stdio_client(home: str, *, tools: str | None = None, **options: Any) -> Client:
    """A client that spawns ``gitmail serve --stdio`` on ``home`` (with ``--tools tools`` when given); ``options``
    go to the client (``mode``, ``message_handler``)."""
    profile = ["--tools", tools] if tools else []
    transport = StdioTransport(command=sys.executable, args=["-m", "gitmail", "serve", "--stdio", *profile],
                               env=child_env(home), cwd=ROOT)
    return Client(transport, timeout=60, **options)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


class ToolFailed(AssertionError):
    def __init__(self, name: str, body: dict[str, Any]):
        super().__init__(f"{name} failed: {body}")
        self.body = body


def error_body(result: Any) -> dict[str, Any]:
    """The JSON {code, message, data} of an error result."""
    assert result.is_error, f"expected an error result, got {result}"
    return json.loads(result.content[0].text)


async def call(client: Client, tool_name: str, /, **arguments: Any) -> Any:
    """Call a tool and return its data; a tool error raises ToolFailed with the error body."""
    result = await client.call_tool(tool_name, arguments, raise_on_error=False)
    if result.is_error:
        raise ToolFailed(tool_name, error_body(result))
    if result.structured_content is None:
        return json.loads(result.content[0].text)
    # the JSON as sent (FastMCP's .data would be objects built from the output schema); a list arrives wrapped
    if ((result.meta or {}).get("fastmcp") or {}).get("wrap_result"):
        return result.structured_content["result"]
    return result.structured_content


async def fail(client: Client, tool_name: str, /, **arguments: Any) -> dict[str, Any]:
    """Call a tool that must fail and return its error body."""
    result = await client.call_tool(tool_name, arguments, raise_on_error=False)
    return error_body(result)


async def read_json(client: Client, uri: str) -> Any:
    contents = await client.read_resource(uri)
    return json.loads(contents[0].text)


async def read_error(client: Client, uri: str) -> dict[str, Any]:
    """Read a resource that must fail and return its error body {code, message, data}."""
    try:
        await client.read_resource(uri)
    except Exception as exc:  # noqa: BLE001 - the client raises the protocol error it got
        text = str(exc)
        return json.loads(text[text.index("{"):])
    raise AssertionError(f"reading {uri} did not fail")
