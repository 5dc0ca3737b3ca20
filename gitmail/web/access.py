"""Who may use the web view, and proof that a form came from it.

The rules are in ``docs/security.md``. On a server without ``GITMAIL_TOKEN``
(loopback only) every visitor may read and write, as every MCP caller may
reach the server. With the token set, the first visit asks for it once; the
answer is a session cookie (``HttpOnly``, ``SameSite=Strict``, random,
kept only in this process's memory). Either way each session has a CSRF
token that every form that writes carries back, compared in constant time.
"""

from __future__ import annotations

import hmac
import secrets
import threading
from dataclasses import dataclass

COOKIE = "gitmail_ui"
MAX_SESSIONS = 10_000


@dataclass(frozen=True)
class Session:
    id: str
    csrf: str
    signed_in: bool  # proved the server's token (always True where none is set)


class Sessions:
    """The web view's sessions, in memory: a restart signs everyone out."""

    def __init__(self, token: str | None):
        self._token = token.encode("utf-8") if token else None
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    @property
    def needs_login(self) -> bool:
        return self._token is not None

    def get(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        with self._lock:
            return self._sessions.get(cookie)

    def open(self, *, signed_in: bool) -> Session:
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), signed_in)
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                self._sessions.pop(next(iter(self._sessions)))  # the oldest goes
            self._sessions[session.id] = session
        return session

    def check_token(self, offered: str) -> bool:
        return self._token is not None and hmac.compare_digest(offered.encode("utf-8"), self._token)

    def close(self, session: Session) -> None:
        with self._lock:
            self._sessions.pop(session.id, None)


def csrf_ok(session: Session | None, offered: object) -> bool:
    """Whether a submitted form carries its session's CSRF token."""
    return (session is not None and isinstance(offered, str)
            and hmac.compare_digest(offered.encode("utf-8"), session.csrf.encode("utf-8")))
