"""Which ``Host`` and ``Origin`` the HTTP server answers: the defence against DNS rebinding.

A web page the operator visits can make the browser send requests to
``127.0.0.1``; the browser refuses it the answers, unless the page's own
name is made to resolve to this machine (DNS rebinding), in which case the
page reads them as its own. Such a request still names the page's site in
its ``Host`` header, and a cross-site one in ``Origin``: :class:`OriginCheck`
answers every HTTP request (MCP on both of its paths, the web view's pages,
event streams, forms and static files) only when ``Host`` is one of the
allowed names and ``Origin``, when present, one of the allowed origins.

Allowed by default: the loopback names (``127.0.0.1``, ``localhost``,
``[::1]``) with the server's port, and the address the server listens on
when it is not a wildcard. :data:`ORIGINS_ENV` (and ``gitmail serve
--allow-origin``) adds more: each entry is an origin
(``https://mail.example.org``) or a host with an optional port
(``box.lan:8765``); entries are compared exactly, without case, with what
clients send. A refused request gets HTTP 421 (``Host``: the request was
meant for a server of another name) or 403 (``Origin``), and nothing runs.

The origins added this way are also the ones whose pages may call the MCP
endpoint from a browser (CORS): :class:`OriginCheck` answers their
preflight (``OPTIONS`` on the MCP path) and marks the MCP answers to them
readable (``Access-Control-Allow-Origin``, with ``Mcp-Session-Id`` exposed).
Nothing is allowed by default: the server's own loopback origins are the
same origin as its pages and need no CORS, and any other page's request is
refused before it runs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gitmail.model.errors import HOST_NOT_ALLOWED, ORIGIN_NOT_ALLOWED, GitmailError, invalid

ORIGINS_ENV = "GITMAIL_ALLOWED_ORIGINS"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
WILDCARDS = ("", "0.0.0.0", "::", "[::]", "*")
_HOST = r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)(:\d{1,5})?"
_ENTRY_RE = re.compile(rf"^(?P<scheme>https?://)?(?P<host>{_HOST})/?$", re.IGNORECASE)


def _bracketed(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def entries_from(text: str | None) -> list[str]:
    """The entries of a setting's value: separated by commas or white space."""
    return [part for part in re.split(r"[,\s]+", text or "") if part]


@dataclass(frozen=True)
class AllowedOrigins:
    """The ``Host`` values and ``Origin`` values the server answers, lowercased."""

    hosts: frozenset[str]
    origins: frozenset[str]
    cross: frozenset[str] = frozenset()  # the origins the operator added: their pages may call MCP (CORS)

    @classmethod
    def for_server(cls, host: str, port: int, extra: Iterable[str] = ()) -> AllowedOrigins:
        """The defaults for a server listening on ``host``:``port``, plus the ``extra`` entries.

        Raises INVALID_ARGUMENT naming the setting for an entry that is neither an origin nor a host.
        """
        names = list(LOOPBACK_NAMES)
        if host.strip().lower() not in WILDCARDS:
            names.append(_bracketed(host.strip().lower()))
        hosts = {f"{name}:{port}" for name in names} | (set(names) if port == 80 else set())
        origins = {f"http://{name}" for name in hosts}
        cross: set[str] = set()
        for entry in extra:
            match = _ENTRY_RE.match(entry.strip())
            if match is None:
                raise invalid(f"{entry!r} in {ORIGINS_ENV} (or --allow-origin) is neither an origin "
                              "(https://mail.example.org) nor a host with an optional port (box.lan:8765)",
                              setting=ORIGINS_ENV, entry=entry)
            named = match.group("host").lower()
            hosts.add(named)
            added = ({match.group("scheme").lower() + named} if match.group("scheme")
                     else {f"http://{named}", f"https://{named}"})
            origins |= added
            cross |= added
        return cls(frozenset(hosts), frozenset(origins), frozenset(cross))

    @classmethod
    def from_env(cls, host: str, port: int, extra: Iterable[str] = ()) -> AllowedOrigins:
        """:meth:`for_server` with the entries of :data:`ORIGINS_ENV` and then ``extra``."""
        return cls.for_server(host, port, [*entries_from(os.environ.get(ORIGINS_ENV)), *extra])

    def refusal(self, host: str | None, origin: str | None) -> tuple[int, GitmailError] | None:
        """The HTTP status and error for a request with these headers, or None when it may be answered."""
        if host is None or host.lower() not in self.hosts:
            return 421, GitmailError(HOST_NOT_ALLOWED, f"this server does not answer requests for host {host!r}: "
                                     "it answers its loopback names and the address it listens on; to reach it by "
                                     f"another name, add that name to {ORIGINS_ENV} (or gitmail serve "
                                     "--allow-origin)", {"host": host, "setting": ORIGINS_ENV})
        if origin is not None and origin.lower().rstrip("/") not in self.origins:
            return 403, GitmailError(ORIGIN_NOT_ALLOWED, f"this server does not answer requests from pages of "
                                     f"{origin!r}; to allow that origin, add it to {ORIGINS_ENV} (or gitmail serve "
                                     "--allow-origin)", {"origin": origin, "setting": ORIGINS_ENV})
        return None


class OriginCheck:
    """ASGI middleware in front of the whole server: refuses a request whose ``Host`` or ``Origin`` is not allowed.

    Under ``mcp_path`` the refusal is JSON ``{code, message, data}``; elsewhere
    (the web view) it is plain text saying the same.
    """

    def __init__(self, app: ASGIApp, *, allowed: AllowedOrigins, mcp_path: str):
        self.app = app
        self.allowed = allowed
        self.mcp_path = mcp_path.rstrip("/")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan; the server serves no websockets
            await self.app(scope, receive, send)
            return
        headers: dict[bytes, bytes] = {}
        for key, value in scope["headers"]:
            headers.setdefault(key, value)
        host, origin = headers.get(b"host"), headers.get(b"origin")
        refused = self.allowed.refusal(None if host is None else host.decode("latin-1"),
                                       None if origin is None else origin.decode("latin-1"))
        path = scope.get("path", "")
        mcp = path == self.mcp_path or path.startswith(self.mcp_path + "/")
        if refused is None:
            cross = origin is not None and mcp and origin.decode("latin-1").lower().rstrip("/") in self.allowed.cross
            if not cross:
                await self.app(scope, receive, send)
            elif scope.get("method") == "OPTIONS":
                await _preflight(send, origin or b"")
            else:
                await self.app(scope, receive, _readable_by(send, origin or b""))
            return
        status, error = refused
        if mcp:
            body, media = json.dumps(error.to_dict()).encode("utf-8"), b"application/json"
        else:
            body, media = (f"{error.code}: {error.message}\n").encode(), b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", media), (b"content-length", str(len(body)).encode("ascii"))]})
        await send({"type": "http.response.body", "body": body})


_CORS_METHODS = b"GET, POST, DELETE, OPTIONS"
_CORS_HEADERS = b"authorization, content-type, accept, last-event-id, mcp-session-id, mcp-protocol-version"


async def _preflight(send: Send, origin: bytes) -> None:
    """The answer to a browser's preflight from an allowed origin: which methods and headers it may use."""
    await send({"type": "http.response.start", "status": 204, "headers": [
        (b"access-control-allow-origin", origin), (b"vary", b"Origin"),
        (b"access-control-allow-methods", _CORS_METHODS), (b"access-control-allow-headers", _CORS_HEADERS),
        (b"access-control-max-age", b"600"), (b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b""})


def _readable_by(send: Send, origin: bytes) -> Send:
    """``send`` with the headers that let a page of ``origin`` read the answer (and its session ID)."""
    async def marked(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []),
                                               (b"access-control-allow-origin", origin), (b"vary", b"Origin"),
                                               (b"access-control-expose-headers", b"mcp-session-id")]}
        await send(message)
    return marked
