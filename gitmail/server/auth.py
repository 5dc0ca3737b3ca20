"""Who may talk to the HTTP server at all: the shared bearer token.

One token (``GITMAIL_TOKEN``) guards the whole HTTP endpoint. It is optional
when the server listens on a loopback address only and required anywhere
else, so a server reachable from the network is never open by accident. When
set, every HTTP request must carry ``Authorization: Bearer <token>``; a missing
or wrong token gets HTTP 401 before any tool runs. Which *agent* a caller may
act as is a separate question, answered in :mod:`gitmail.server.identity`.
"""

from __future__ import annotations

import hmac
import ipaddress

from fastmcp.server.auth import AccessToken, TokenVerifier

from ..errors import GitmailError, UNAUTHORIZED

TOKEN_ENV = "GITMAIL_TOKEN"


class BearerToken(TokenVerifier):
    """Accepts exactly one shared token, compared in constant time."""

    def __init__(self, token: str):
        super().__init__()
        if not token:
            raise ValueError("a bearer token must not be empty")
        self._token = token.encode("utf-8")

    async def verify_token(self, token: str) -> AccessToken | None:
        if not hmac.compare_digest(token.encode("utf-8"), self._token):
            return None
        return AccessToken(token=token, client_id="gitmail", scopes=[])


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``127.0.0.0/8``, ``::1``, ``localhost``)."""
    if host.strip().lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_bind(host: str, token: str | None) -> None:
    """Refuse to listen beyond loopback without a bearer token."""
    if not token and not is_loopback(host):
        raise GitmailError(
            UNAUTHORIZED,
            f"refusing to listen on {host} without a bearer token: set {TOKEN_ENV} to a long random "
            "secret (for example `export GITMAIL_TOKEN=$(openssl rand -hex 32)`) and give it to "
            "your MCP clients, or listen on 127.0.0.1",
            {"host": host},
        )
