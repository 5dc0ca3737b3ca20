"""Install smoke test: is the installed package whole, and does it serve MCP?

Run by ``.ci/run`` with the Python of a fresh virtual environment into which
the built wheel (not the checkout) was installed::

    VENV/bin/python .ci/smoke.py CHECKOUT

It checks, failing loudly on the first problem:

1. the import resolves to the installed package, not the checkout;
2. every module on disk under ``gitmail/``, ``index/`` and ``hooks/`` (and each
   hook script) is in the installed package, ``index/`` and ``hooks/`` as
   ``gitmail.index`` and ``gitmail.hooks``;
3. ``gitmail --help`` works;
4. ``gitmail serve --tools all`` (every tool family, so each one's module
   must load) starts on a free loopback port against a temporary store and
   answers ``initialize``, ``tools/list`` and a ``health_check`` call
   through the official MCP SDK client installed beside it, and its web view
   answers ``/ui`` with a rendered page (templates and static files ship as
   package data, the web view's libraries as dependencies).

The server is stopped however the check ends.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

# The environment under test provides these (the MCP SDK comes with gitmail).
import anyio
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

MAPPED = {"gitmail": "gitmail", "index": "gitmail/index", "hooks": "gitmail/hooks"}  # checkout -> installed
CORE_TOOLS = {"health_check", "ensure_project", "register_agent", "send_message", "fetch_inbox", "catch_up",
              "read_messages", "search_messages", "file_reservation_paths", "take_seat", "sync_project"}
START_TIMEOUT = 60.0
WEB_DATA = {"templates", "static"}  # folders of gitmail/web shipped as package data


class SmokeFailure(Exception):
    pass


def step(text: str) -> None:
    print(f"smoke: {text}", flush=True)


def installed_root() -> str:
    """The folder of the installed ``gitmail`` package; never the checkout's."""
    import gitmail

    root = os.path.dirname(os.path.abspath(gitmail.__file__))
    if os.path.realpath(sys.prefix) not in os.path.realpath(root):
        raise SmokeFailure(f"gitmail imports from {root}, outside the environment {sys.prefix}")
    return root


def expected_files(checkout: str) -> list[str]:
    """Paths, relative to the installed package's parent, of every module and hook script on disk."""
    wanted = []
    for top, installed in MAPPED.items():
        base = os.path.join(checkout, top)
        for folder, dirs, files in os.walk(base):
            dirs[:] = [d for d in dirs if d != "__pycache__" and not d.startswith(".")]
            for name in files:
                is_hook = top == "hooks" and not name.endswith((".pyc", ".md"))
                parent, leaf = os.path.split(folder)
                is_web_data = leaf in WEB_DATA and os.path.basename(parent) == "web"
                if name.endswith(".py") or is_hook or is_web_data:
                    rel = os.path.relpath(os.path.join(folder, name), base)
                    wanted.append(os.path.normpath(os.path.join(installed, rel)))
    return sorted(wanted)


def check_contents(checkout: str) -> None:
    root = installed_root()
    parent = os.path.dirname(root)
    wanted = expected_files(checkout)
    missing = [path for path in wanted if not os.path.isfile(os.path.join(parent, path))]
    if missing:
        raise SmokeFailure("the installed package lacks " + ", ".join(missing))
    step(f"installed package at {root} has all {len(wanted)} modules, hook scripts and web files")


def gitmail_script() -> str:
    script = os.path.join(os.path.dirname(sys.executable), "gitmail")
    if not os.path.isfile(script):
        raise SmokeFailure(f"no gitmail script in {os.path.dirname(sys.executable)}")
    return script


def check_help() -> None:
    proc = subprocess.run([gitmail_script(), "--help"], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 or "Usage: gitmail" not in proc.stdout:
        raise SmokeFailure(f"gitmail --help exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    step("gitmail --help works")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_until_listening(server: subprocess.Popen[bytes], port: int, log_path: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SmokeFailure(f"gitmail serve exited with {server.returncode}:\n{read(log_path)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise SmokeFailure(f"gitmail serve did not listen on port {port} within {START_TIMEOUT:.0f} s:\n{read(log_path)}")


def read(path: str) -> str:
    with open(path, encoding="utf-8", errors="replace") as handle:
        return handle.read()


async def talk(url: str) -> None:
    """``initialize``, ``tools/list`` and one tool call, with the official SDK client."""
    with anyio.fail_after(60):
        async with streamable_http_client(url) as (read_stream, write_stream), \
                ClientSession(read_stream, write_stream) as session:
            init = await session.initialize()
            if init.server_info.name != "gitmail":
                raise SmokeFailure(f"initialize answered for {init.server_info.name!r}, not gitmail")
            step(f"initialize: {init.server_info.name} {init.server_info.version}, "
                 f"protocol {init.protocol_version}")
            listed = await session.list_tools()
            names = {tool.name for tool in listed.tools}
            if not CORE_TOOLS <= names:
                raise SmokeFailure(f"tools/list lacks {sorted(CORE_TOOLS - names)}; it has {sorted(names)}")
            step(f"tools/list: {len(names)} tools")
            health = await session.call_tool("health_check", {})
            if health.is_error:
                raise SmokeFailure(f"health_check failed: {health.content}")
            step("health_check answered")


def check_serve() -> None:
    home = tempfile.mkdtemp(prefix="gitmail-smoke-")
    log_path = os.path.join(home, "serve.log")
    port = free_port()
    env = dict(os.environ, GITMAIL_HOME=os.path.join(home, "store"))
    env.pop("GITMAIL_TOKEN", None)
    with open(log_path, "wb") as log:
        server = subprocess.Popen([gitmail_script(), "serve", "--tools", "all", "--host", "127.0.0.1",
                                   "--port", str(port)],
                                  stdout=log, stderr=subprocess.STDOUT, env=env, cwd=home, start_new_session=True)
    try:
        wait_until_listening(server, port, log_path)
        step(f"gitmail serve listens on 127.0.0.1:{port} (store {env['GITMAIL_HOME']})")
        anyio.run(talk, f"http://127.0.0.1:{port}/mcp")
        check_web(f"http://127.0.0.1:{port}/ui")
    finally:
        stop(server)
        shutil.rmtree(home, ignore_errors=True)


def check_web(url: str) -> None:
    """The web view renders its first page and serves its stylesheet."""
    for path, marker in (("", "<html"), ("/static/style.css", "{")):
        try:
            with urllib.request.urlopen(url + path, timeout=60) as response:
                body = response.read().decode("utf-8", "replace")
                status = response.status
        except OSError as exc:
            raise SmokeFailure(f"GET {url + path} failed: {exc}") from exc
        if status != 200 or marker not in body:
            raise SmokeFailure(f"GET {url + path} answered {status} without {marker!r}:\n{body[:500]}")
    step("web view answers /ui")


def stop(server: subprocess.Popen[bytes]) -> None:
    """Stop the server and everything it started (it leads its own process group)."""
    if server.poll() is None:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
    try:  # helpers left behind by a server that died first
        os.killpg(server.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def leaves(group: BaseExceptionGroup) -> list[SmokeFailure]:
    """The failures in a (possibly nested) exception group."""
    found: list[SmokeFailure] = []
    for exc in group.exceptions:
        if isinstance(exc, BaseExceptionGroup):
            found += leaves(exc)
        elif isinstance(exc, SmokeFailure):
            found.append(exc)
    return found


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    checkout = os.path.abspath(sys.argv[1])
    failures: list[SmokeFailure] = []
    try:
        check_contents(checkout)
        check_help()
        check_serve()
    except* SmokeFailure as group:  # raised directly, or from inside the client's task group
        failures.extend(leaves(group))
    for failure in failures:
        print(f"smoke: FAILED: {failure}", file=sys.stderr, flush=True)
    if failures:
        return 1
    step("passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
