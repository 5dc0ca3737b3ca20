"""Who may talk to the HTTP server at all: the shared bearer token.

One token (``GITMAIL_TOKEN``) guards the whole HTTP endpoint. It is optional
when the server listens on a loopback address only and required anywhere
else (see :mod:`gitmail.server.binding`), so a server reachable from the
network is never open by accident. When set, every HTTP request must carry
``Authorization: Bearer <token>``; a missing or wrong token gets HTTP 401
before any tool runs. Which *agent* a caller may act as is a separate
question, answered in :mod:`gitmail.server.identity`.
"""

from __future__ import annotations

import hmac

from fastmcp.server.auth import AccessToken, TokenVerifier


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
