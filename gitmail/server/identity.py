"""Which agent a caller may act as.

A tool that acts as an agent (sends as it, reads its inbox, acknowledges for
it) needs proof that the caller *is* that agent. There are two proofs:

* the agent's token, returned once by ``register_agent`` /
  ``create_agent_identity`` (only its hash is stored), passed in the tool's
  token argument (``sender_token`` for sending, ``agent_token`` elsewhere);
* having registered the agent in the same MCP session, or proved it there
  with its token once. Over stdio the whole process is one session; over
  HTTP the session is the one named by the ``mcp-session-id`` header (clients
  that keep a session, as most do today). Session-less HTTP requests carry
  no session, so they always pass the token.

A session is bound to the registration it made or proved (the profile's
id), not to the name alone: if a sync later hands the name to an earlier
registration made on another machine, the session no longer acts as that
agent.

A token, when given, is always checked, even inside a bound session, so a
wrong token never passes silently. A token or binding of a registration that
lost a clash over its name gets IDENTITY_CLASH, which says how to go on. The
full access model is in docs/security.md and :mod:`gitmail.server.access`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from fastmcp import Context
from fastmcp.server.dependencies import get_http_request

from gitmail.mail.facade import Mail
from gitmail.model.errors import UNAUTHORIZED, GitmailError
from gitmail.model.records import Agent
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
        # session -> {(slug, lower-cased agent name): (the agent's name as registered, its registration's id)}
        self._bound: OrderedDict[str, dict[tuple[str, str], tuple[str, str]]] = OrderedDict()

    def register(self, ctx: Context | None, project_key: str, *, program: str | None, model: str | None,
                 name: str | None, task_description: str | None, token: str | None,
                 idempotency_key: str | None = None, reason: str | None = None) -> dict[str, Any]:
        """Register an agent (or update one the caller proves to be) and bind it to this session.

        The check that ``name`` is free (or the caller's), the commit that
        takes it, and so the choice of the one caller that gets the token and
        the binding, are one step: of any number of sessions registering the
        same new name at once, exactly one wins; every other gets
        UNAUTHORIZED saying the name is taken, and no binding.
        """
        key = session_key(ctx)  # now: the transaction may run on another request's thread
        slug = self.store.resolve(project_key)

        def claim(existing: Agent) -> None:
            if token and self.mail.token_matches(token, existing.token_hash):
                return
            bound = self._bound_id(key, slug, existing.name)
            if bound is not None and bound == existing.id:
                return
            if bound is not None:  # this session's registration lost the name to another made elsewhere
                clash = self.mail.identity_clash(project_key, existing.name, registration=bound)
                if clash is not None:
                    raise clash
            raise self._taken(project_key, existing.name, wrong_token=bool(token))

        profile = self.mail.register_agent(project_key, program, model, name=name, task_description=task_description,
                                           claim=claim, idempotency_key=idempotency_key, reason=reason)
        self._bind(key, slug, profile["name"], profile["id"])
        return profile

    @staticmethod
    def _taken(project_key: str, name: str, *, wrong_token: bool) -> GitmailError:
        what = "agent_token is not its registration_token" if wrong_token else "this call did not prove to be it"
        return GitmailError(
            UNAUTHORIZED,
            f"the name {name} is already taken in this project (names are compared without regard to case) and "
            f"{what}. To register a new agent, pick another name or omit name to get a generated one. If you are "
            f"{name}: " + ways_out(project_key, name, "agent_token"),
            {"agent": name, "reason": "name_taken", "argument": "agent_token"},
        )

    def bind(self, ctx: Context | None, project_key: str, agent_name: str, agent_id: str) -> bool:
        """Remember that this session registered (or proved) registration ``agent_id`` of the agent.

        False if the call has no session.
        Agent names are unique without regard to case, and so are bindings.
        """
        return self._bind(session_key(ctx), self.store.resolve(project_key), agent_name, agent_id)

    def _bind(self, key: str | None, slug: str, agent_name: str, agent_id: str) -> bool:
        if key is None:
            return False
        with self._lock:
            agents = self._bound.pop(key, {})
            agents[(slug, agent_name.lower())] = (agent_name, agent_id)
            self._bound[key] = agents
            while len(self._bound) > MAX_SESSIONS:
                self._bound.popitem(last=False)
        return True

    def agents_in(self, ctx: Context | None, slug: str) -> list[str]:
        """The agents of project ``slug`` this session registered or proved, sorted."""
        key = session_key(ctx)
        if key is None:
            return []
        with self._lock:
            return sorted(name for (s, _), (name, _id) in self._bound.get(key, {}).items() if s == slug)

    def projects(self, ctx: Context | None) -> list[str]:
        """The slugs of the projects this session proved agents in, sorted."""
        key = session_key(ctx)
        if key is None:
            return []
        with self._lock:
            return sorted({s for s, _ in self._bound.get(key, {})})

    def forget(self, slug: str, agent_name: str | None = None) -> None:
        """Drop every session's binding to an agent (or to every agent of a project) that was deleted."""
        with self._lock:
            for agents in self._bound.values():
                for pair in [p for p in agents if p[0] == slug and (agent_name is None or p[1] == agent_name.lower())]:
                    del agents[pair]

    def bound_id(self, ctx: Context | None, project_key: str, agent_name: str) -> str | None:
        """The registration of ``agent_name`` this session made or proved, if any."""
        key = session_key(ctx)
        if key is None:
            return None
        return self._bound_id(key, self.store.resolve(project_key), agent_name)

    def _bound_id(self, key: str | None, slug: str, agent_name: str) -> str | None:
        if key is None:
            return None
        with self._lock:
            bound = self._bound.get(key, {}).get((slug, agent_name.lower()))
        return bound[1] if bound is not None else None

    def require(self, ctx: Context | None, project_key: str, agent_name: str, token: str | None,
                *, argument: str = "agent_token") -> None:
        """Raise UNAUTHORIZED unless the caller has proven it is ``agent_name``.

        A token that proves the agent also binds it to this session, as
        registering there would have.
        """
        if token:
            if not self.mail.verify_agent_token(project_key, agent_name, token):
                clash = self.mail.identity_clash(project_key, agent_name, token=token)
                if clash is not None:
                    raise clash
                self._require_exists(project_key, agent_name)
                raise GitmailError(UNAUTHORIZED, f"{argument} is not {agent_name}'s token. " + ways_out(
                    project_key, agent_name, argument), {"agent": agent_name, "argument": argument})
            agent_id = self.mail.agent_id(project_key, agent_name)
            if agent_id is not None:
                self.bind(ctx, project_key, agent_name, agent_id)
            return
        bound = self.bound_id(ctx, project_key, agent_name)
        if bound is not None:
            if self.mail.agent_id(project_key, agent_name) == bound:
                return
            clash = self.mail.identity_clash(project_key, agent_name, registration=bound)
            if clash is not None:
                raise clash
        self._require_exists(project_key, agent_name)
        raise GitmailError(UNAUTHORIZED, f"this call acts as {agent_name}, so it needs {agent_name}'s proof. "
                           + ways_out(project_key, agent_name, argument), {"agent": agent_name, "argument": argument})

    def _require_exists(self, project_key: str, agent_name: str) -> None:
        """NOT_FOUND for an agent that is not registered (a typo is not a failed proof)."""
        self.mail.whois(project_key, agent_name, include_recent_commits=False)


def ways_out(project_key: str, agent_name: str, argument: str) -> str:
    """The two ways to prove an agent, as every refusal states them."""
    return (f"Pass {argument} (or registration_token) with the registration_token that registering {agent_name} "
            f"returned: it works from any session, and that session needs no token afterwards. If the token is "
            f"lost, the operator of the server's machine issues a new one with "
            f"`gitmail agents reset-token {project_key} {agent_name}`.")
