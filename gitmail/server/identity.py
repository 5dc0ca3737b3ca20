"""Which agent a caller may act as.

A tool that acts as an agent (sends as it, reads its inbox, acknowledges for
it) needs proof that the caller *is* that agent. There are two proofs:

* the agent's token, returned once by ``register_agent`` /
  ``create_agent_identity`` (only its hash is stored), passed in the tool's
  token argument (``sender_token`` for sending, ``agent_token`` elsewhere);
* having registered the agent in the same MCP session. Over stdio the whole
  process is one session; over HTTP the session is the one named by the
  ``mcp-session-id`` header (clients that keep a session, as most do today).
  Stateless HTTP requests carry no session, so they always pass the token.

A token, when given, is always checked, even inside a bound session, so a
wrong token never passes silently.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fastmcp import Context
from fastmcp.server.dependencies import get_http_request

from gitmail.mail.facade import Mail
from gitmail.model.errors import UNAUTHORIZED, GitmailError
from gitmail.storage.store import Store

MAX_SESSIONS = 10_000


def session_key(ctx: Context | None) -> str | None:
    """A stable name for the caller's MCP session, or None if it has none."""
    if ctx is None:
        return None
    if ctx.transport == "stdio":
        return "stdio"
    try:
        request = get_http_request()
    except RuntimeError:
        return None
    return request.headers.get("mcp-session-id") or None


class Identities:
    """Session bindings plus the proof check used by every acting tool."""

    def __init__(self, store: Store, mail: Mail):
        self.store = store
        self.mail = mail
        self._lock = threading.Lock()
        self._bound: OrderedDict[str, set[tuple[str, str]]] = OrderedDict()

    def bind(self, ctx: Context | None, project_key: str, agent_name: str) -> bool:
        """Remember that this session registered the agent; False if it has no session.

        Agent names are unique without regard to case, and so are bindings.
        """
        key = session_key(ctx)
        if key is None:
            return False
        slug = self.store.resolve(project_key)
        with self._lock:
            agents = self._bound.pop(key, set())
            agents.add((slug, agent_name.lower()))
            self._bound[key] = agents
            while len(self._bound) > MAX_SESSIONS:
                self._bound.popitem(last=False)
        return True

    def is_bound(self, ctx: Context | None, project_key: str, agent_name: str) -> bool:
        key = session_key(ctx)
        if key is None:
            return False
        slug = self.store.resolve(project_key)
        with self._lock:
            return (slug, agent_name.lower()) in self._bound.get(key, ())

    def require(self, ctx: Context | None, project_key: str, agent_name: str, token: str | None,
                *, argument: str = "agent_token") -> None:
        """Raise UNAUTHORIZED unless the caller has proven it is ``agent_name``."""
        if token:
            if not self.mail.verify_agent_token(project_key, agent_name, token):
                raise GitmailError(
                    UNAUTHORIZED,
                    f"{argument} is not {agent_name}'s token; pass the registration_token that "
                    f"registering {agent_name} returned",
                    {"agent": agent_name, "argument": argument},
                )
            return
        if self.is_bound(ctx, project_key, agent_name):
            return
        raise GitmailError(
            UNAUTHORIZED,
            f"this call acts as {agent_name}, so it needs {agent_name}'s proof: pass {argument} "
            f"(the registration_token returned when {agent_name} registered), or make the call in "
            f"the MCP session that registered {agent_name}",
            {"agent": agent_name, "argument": argument},
        )
