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
id) and to the token that proved it (its hash), not to the name alone: if a
sync later hands the name to an earlier registration made on another
machine, if the agent is deleted and its name registered again, or if the
operator issues the agent a new token (``gitmail agents reset-token``, in
another process), the session no longer acts as that agent. Every use of a
binding compares it with the profile in the archive.

A token, when given, is always checked, even inside a bound session, so a
wrong token never passes silently. A token or binding of a registration that
lost a clash over its name gets IDENTITY_CLASH, which says how to go on. The
full access model is in docs/security.md and :mod:`gitmail.server.access`.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from fastmcp import Context
from fastmcp.server.dependencies import get_http_request

from gitmail.mail.facade import Credential, Mail, Registration
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
        # session -> {(slug, lower-cased agent name): the credential it was bound under}
        self._bound: OrderedDict[str, dict[tuple[str, str], Credential]] = OrderedDict()

    def register(self, ctx: Context | None, project_key: str, *, program: str | None, model: str | None,
                 name: str | None, task_description: str | None, token: str | None,
                 idempotency_key: str | None = None, reason: str | None = None) -> Registration:
        """Register an agent (or update one the caller proves to be) and bind it to this session.

        The check that ``name`` is free (or the caller's), the commit that
        takes it, and so the choice of the one caller that gets the token and
        the binding, are one step: of any number of sessions registering the
        same new name at once, exactly one wins; every other gets
        UNAUTHORIZED saying the name is taken, and no binding.
        """
        key = session_key(ctx)  # now: the transaction may run on another request's thread
        slug = self.store.resolve(project_key)
        claimed: list[Credential] = []

        def claim(existing: Agent) -> None:
            held = Credential.of(existing)
            bound = self._binding(key, slug, existing.name)
            if (token and held.proved_by(token)) or bound == held:
                claimed.append(held)
                return
            if bound is not None:
                self._stale(project_key, bound, held)
            raise self._taken(project_key, existing.name, wrong_token=bool(token))

        profile = self.mail.register_agent(project_key, program, model, name=name, task_description=task_description,
                                           claim=claim, idempotency_key=idempotency_key, reason=reason)
        if profile.registration_token is not None:
            self._bind(key, slug, Credential.issued(profile))
        elif claimed:
            self._bind(key, slug, claimed[-1])
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

    def bind(self, ctx: Context | None, project_key: str, held: Credential) -> bool:
        """Remember that this session registered (or proved) the agent under credential ``held``.

        False if the call has no session.
        Agent names are unique without regard to case, and so are bindings.
        """
        return self._bind(session_key(ctx), self.store.resolve(project_key), held)

    def _bind(self, key: str | None, slug: str, held: Credential) -> bool:
        if key is None:
            return False
        with self._lock:
            agents = self._bound.pop(key, {})
            agents[(slug, held.name.lower())] = held
            self._bound[key] = agents
            while len(self._bound) > MAX_SESSIONS:
                self._bound.popitem(last=False)
        return True

    def agents_in(self, ctx: Context | None, slug: str) -> list[str]:
        """The agents of project ``slug`` this session registered or proved and still acts as, sorted.

        A binding whose registration no longer holds the name, or whose token
        was replaced since, is left out (one profile read per binding).
        """
        key = session_key(ctx)
        if key is None:
            return []
        with self._lock:
            bound = [held for (s, _), held in self._bound.get(key, {}).items() if s == slug]
        return sorted(held.name for held in bound if self.mail.credential(slug, held.name) == held)

    def projects(self, ctx: Context | None) -> list[str]:
        """The slugs of the projects this session proved agents in and still acts as, sorted."""
        key = session_key(ctx)
        if key is None:
            return []
        with self._lock:
            slugs = sorted({s for s, _ in self._bound.get(key, {})})
        return [slug for slug in slugs if self.agents_in(ctx, slug)]

    def end_session(self, ctx: Context | None) -> list[tuple[str, str]]:
        """Forget every agent this session registered or proved (``new_session``): (slug, name) of each, sorted.

        Nothing the session proved before carries into its next call, which
        proves its agent again with its token. A call without a session has
        nothing to forget.
        """
        key = session_key(ctx)
        if key is None:
            return []
        with self._lock:
            agents = self._bound.pop(key, {})
        return sorted((slug, held.name) for (slug, _), held in agents.items())

    def forget(self, slug: str, agent_name: str | None = None) -> None:
        """Drop every session's binding to an agent (or to every agent of a project) that was deleted."""
        with self._lock:
            for agents in self._bound.values():
                for pair in [p for p in agents if p[0] == slug and (agent_name is None or p[1] == agent_name.lower())]:
                    del agents[pair]

    def proved(self, ctx: Context | None, project_key: str, agent_name: str, token: str | None) -> bool:
        """Whether the caller proves ``agent_name`` now: by ``token`` (then bound), or by a binding still current."""
        held = self.mail.credential(project_key, agent_name)
        if held is None:
            return False
        if token:
            if not held.proved_by(token):
                return False
            self.bind(ctx, project_key, held)
            return True
        return self._binding(session_key(ctx), self.store.resolve(project_key), agent_name) == held

    def _binding(self, key: str | None, slug: str, agent_name: str) -> Credential | None:
        if key is None:
            return None
        with self._lock:
            return self._bound.get(key, {}).get((slug, agent_name.lower()))

    def require(self, ctx: Context | None, project_key: str, agent_name: str, token: str | None,
                *, argument: str = "agent_token") -> None:
        """Raise UNAUTHORIZED unless the caller has proven it is ``agent_name``.

        A token that proves the agent also binds it to this session, as
        registering there would have.
        """
        if self.proved(ctx, project_key, agent_name, token):
            return
        if token:
            clash = self.mail.identity_clash(project_key, agent_name, token=token)
            if clash is not None:
                raise clash
            self._require_exists(project_key, agent_name)
            raise GitmailError(UNAUTHORIZED, f"{argument} is not {agent_name}'s token. " + ways_out(
                project_key, agent_name, argument), {"agent": agent_name, "argument": argument})
        bound = self._binding(session_key(ctx), self.store.resolve(project_key), agent_name)
        held = self.mail.credential(project_key, agent_name)
        if bound is not None:
            self._stale(project_key, bound, held, argument=argument)
        self._require_exists(project_key, agent_name)
        raise GitmailError(UNAUTHORIZED, f"this call acts as {agent_name}, so it needs {agent_name}'s proof. "
                           + ways_out(project_key, agent_name, argument), {"agent": agent_name, "argument": argument})

    def _stale(self, project_key: str, bound: Credential, held: Credential | None, *,
               argument: str = "agent_token") -> None:
        """Raise the error that says why this session's binding to ``bound`` no longer proves the agent (if known).

        The registration lost a clash over its name (IDENTITY_CLASH), or the
        operator issued the agent a new token since (UNAUTHORIZED, saying so).
        """
        clash = self.mail.identity_clash(project_key, bound.name, registration=bound.id)
        if clash is not None:
            raise clash
        if held is not None and held.id == bound.id and held.token_hash != bound.token_hash:
            raise GitmailError(
                UNAUTHORIZED, f"this session proved {held.name} with a token that has since been replaced (the "
                f"operator issued a new token with gitmail agents reset-token), so it no longer acts as {held.name}. "
                f"Pass the new token as {argument} (or registration_token): this session then acts as it again",
                {"agent": held.name, "argument": argument, "reason": "token_replaced"})

    def _require_exists(self, project_key: str, agent_name: str) -> None:
        """NOT_FOUND for an agent that is not registered (a typo is not a failed proof)."""
        self.mail.whois(project_key, agent_name, include_recent_commits=False)


def ways_out(project_key: str, agent_name: str, argument: str) -> str:
    """The two ways to prove an agent, as every refusal states them."""
    return (f"Pass {argument} (or registration_token) with the registration_token that registering {agent_name} "
            f"returned: it works from any session, and that session needs no token afterwards. If the token is "
            f"lost, the operator of the server's machine issues a new one with "
            f"`gitmail agents reset-token {project_key} {agent_name}`.")
