"""Session-less JSON-RPC over HTTP: one POST, one answer, no ``initialize`` first.

Streamable HTTP clients open a session (``initialize``, then the
``mcp-session-id`` header on every request), and sessions are what lets an
agent that registered act without its token afterwards. A plain JSON-RPC
POST, as a script with curl or httpx sends it, has no session: the MCP
transport alone would answer 400 "Missing session ID". This wrapper serves
such a request on a transport of its own for that one request (the SDK's
stateless mode), so it needs no handshake; it carries no session either, so
every call that acts as an agent passes the agent's token. Requests that
open or use a session go to the transport untouched.

A session-less POST gets the same request-body limit as the transport
gives a session's (4 MiB, the SDK's): a body declared larger, or one that
grows past the limit while it streams in, is answered 413 before more of it
is read. A body that does not parse (too deeply nested included) goes to
the transport, which answers a JSON-RPC parse error as it does for a
session.

The endpoint answers on its path with and without a trailing slash
(``/mcp`` and ``/mcp/``) instead of redirecting, since not every client
follows a redirect of a POST.
"""

from __future__ import annotations

import json
from typing import Any

from mcp.server.streamable_http import MCP_SESSION_ID_HEADER
from mcp.server.transport_security import RequestBodyLimitMiddleware
from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS
from starlette.applications import Starlette
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

_ACCEPT = b"application/json, text/event-stream"


def _opens_session(body: bytes) -> bool:
    """Whether a request body is (or holds) ``initialize``, which opens a session."""
    try:
        parsed = json.loads(body)
    except (ValueError, RecursionError):
        return True  # not JSON (or nested past what the parser follows): the transport answers a parse error
    items = parsed if isinstance(parsed, list) else [parsed]
    return any(isinstance(item, dict) and item.get("method") == "initialize" for item in items)


class Sessionless:
    """Wraps the MCP endpoint's ASGI app; serves session-less POSTs statelessly."""

    def __init__(self, inner: Any):
        self.inner = inner  # fastmcp's StreamableHTTPASGIApp; its session manager exists while the app runs

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        headers = dict(scope["headers"])
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode("ascii"))
        if MCP_SESSION_ID_HEADER.encode("ascii") in headers or (
                version is not None and version.decode("latin-1") not in HANDSHAKE_PROTOCOL_VERSIONS):
            await self.inner(scope, receive, send)
            return
        # the transport limits the body of a request it reads itself; this one is read here first
        limit = self.inner.session_manager.max_request_body_size
        await RequestBodyLimitMiddleware(self._post, limit)(scope, receive, send)

    async def _post(self, scope: Scope, receive: Receive, send: Send) -> None:
        """A POST without a session, its body within the limit: opens a session, or is served on its own."""
        headers = dict(scope["headers"])
        version = headers.get(MCP_PROTOCOL_VERSION_HEADER.encode("ascii"))
        body, replay = await _buffered(receive)
        if _opens_session(body):
            await self.inner(scope, replay, send)
            return
        accept = headers.get(b"accept", b"")
        if b"application/json" not in accept or b"text/event-stream" not in accept:
            # a script's POST rarely says it accepts both forms the transport may answer in
            kept = [(k, v) for k, v in scope["headers"] if k != b"accept"]
            scope = dict(scope, headers=[*kept, (b"accept", _ACCEPT)])
        manager = self.inner.session_manager
        await manager._handle_stateless_request(  # noqa: SLF001 - the SDK's per-request transport
            version.decode("latin-1") if version is not None else None, scope, replay, send)


async def _buffered(receive: Receive) -> tuple[bytes, Receive]:
    """The whole request body, and a ``receive`` that hands it out again."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    body = b"".join(chunks)
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return body, replay


def serve_sessionless(app: Starlette, path: str) -> None:
    """Let ``app``'s MCP endpoint at ``path`` answer session-less POSTs, at ``path`` and ``path/``."""
    for route in list(app.router.routes):
        if not isinstance(route, Route) or route.path != path:
            continue
        endpoint: Any = route.app
        target = getattr(endpoint, "app", None)
        if target is not None and hasattr(target, "session_manager"):
            endpoint.app = Sessionless(target)  # behind the bearer check, which stays in front
        elif hasattr(endpoint, "session_manager"):
            route.app = Sessionless(endpoint)
        else:
            raise RuntimeError(f"the MCP endpoint at {path} is not the transport gitmail expects")
        slash = path.rstrip("/") + "/"
        app.router.routes.append(Route(slash, endpoint=route.app, methods=route.methods))
        return
    raise RuntimeError(f"no MCP endpoint at {path}")
