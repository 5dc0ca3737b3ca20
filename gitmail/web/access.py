"""Who may use the web view, for how long, and proof that a form came from it.

The rules are in ``docs/security.md``. On a server without ``GITMAIL_TOKEN``
(loopback only) every visitor may read and write, as every MCP caller may
reach the server. With the token set, the first visit asks for it once; the
answer is a session cookie (``HttpOnly``, ``SameSite=Strict``, random,
kept only in this process's memory). Either way each session has a CSRF
token that every form that writes carries back, compared in constant time.

A session ends after :data:`IDLE_SECONDS` without a request, after
:data:`LIFETIME_SECONDS` whatever happens, or when its holder signs out.
Wrong tokens are limited per client address: after :data:`LOGIN_FAILURES`
within :data:`LOGIN_WINDOW_SECONDS`, sign-in from that address is refused
until the oldest of them is that old. Times come from the ``clock`` given
(the store's wall clock on a server), so tests move them by hand.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

COOKIE = "gitmail_ui"
MAX_SESSIONS = 10_000
IDLE_SECONDS = 60 * 60
LIFETIME_SECONDS = 12 * 60 * 60
LOGIN_FAILURES = 5
LOGIN_WINDOW_SECONDS = 15 * 60
MAX_ADDRESSES = 10_000

Clock = Callable[[], float]


@dataclass
class Session:
    id: str
    csrf: str
    signed_in: bool  # proved the server's token (always True where none is set)
    opened: float = 0.0
    seen: float = 0.0  # the time of its latest request


class Sessions:
    """The web view's sessions, in memory: a restart signs everyone out."""

    def __init__(self, token: str | None, *, clock: Clock = time.time):
        self._token = token.encode("utf-8") if token else None
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()
        self.clock = clock

    @property
    def needs_login(self) -> bool:
        return self._token is not None

    def get(self, cookie: str | None) -> Session | None:
        """The live session a cookie names (its last use now); an expired one is dropped."""
        if not cookie:
            return None
        now = self.clock()
        with self._lock:
            session = self._sessions.get(cookie)
            if session is None:
                return None
            if now - session.seen >= IDLE_SECONDS or now - session.opened >= LIFETIME_SECONDS:
                del self._sessions[cookie]
                return None
            session.seen = now
            return session

    def open(self, *, signed_in: bool) -> Session:
        now = self.clock()
        session = Session(secrets.token_urlsafe(32), secrets.token_urlsafe(32), signed_in, now, now)
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


class LoginLimit:
    """Wrong tokens per client address: too many in a window and sign-in waits."""

    def __init__(self, *, clock: Clock = time.time):
        self.clock = clock
        self._failures: dict[str, deque[float]] = {}
        self._lock = threading.Lock()

    def _recent(self, address: str, now: float) -> deque[float]:
        failures = self._failures.get(address, deque())
        while failures and now - failures[0] >= LOGIN_WINDOW_SECONDS:
            failures.popleft()
        return failures

    def retry_at(self, address: str) -> float | None:
        """When ``address`` may try again, if it must wait now (else None)."""
        now = self.clock()
        with self._lock:
            failures = self._recent(address, now)
            if len(failures) < LOGIN_FAILURES:
                return None
            return failures[0] + LOGIN_WINDOW_SECONDS

    def failed(self, address: str) -> None:
        now = self.clock()
        with self._lock:
            failures = self._recent(address, now)
            failures.append(now)
            self._failures.pop(address, None)
            if len(self._failures) >= MAX_ADDRESSES:
                self._failures.pop(next(iter(self._failures)))  # the address seen longest ago goes
            self._failures[address] = failures


def csrf_ok(session: Session | None, offered: object) -> bool:
    """Whether a submitted form carries its session's CSRF token."""
    return (session is not None and isinstance(offered, str)
            and hmac.compare_digest(offered.encode("utf-8"), session.csrf.encode("utf-8")))


def within_view(target: str) -> str:
    """Where to go after signing in or acting: a path of the view itself, never another site (``/ui/`` otherwise)."""
    if (target == "/ui" or target.startswith("/ui/")) and "//" not in target and "\\" not in target \
            and target.isprintable():
        return target
    return "/ui/"
