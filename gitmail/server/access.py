"""The access model (docs/security.md) as code: what a caller must prove before a tool or resource runs.

Every tool and resource declares one :class:`Rule`, and the decorators that
register them (:func:`gitmail.server.registry.install`,
:func:`gitmail.server.resources.resource`) check it before the body runs, so
no path can forget it. There are four kinds:

* ``open`` - anyone who reached the server: server status, creating a
  project, registering a new agent, and the project directory (projects,
  agents and their profiles, reservations, capability cards, windows);
* ``agent`` - proof of the one agent the call acts as (named by an argument
  such as ``agent_name`` or ``sender_name``);
* ``member`` - proof of *some* agent of the named project: reading message
  bodies outside one's own mailbox (search, topics, threads, summaries,
  attachments), and project-wide or project-destroying operations;
* ``product`` - a read across the projects of a product: it reads only the
  linked projects the caller proved an agent in (the one ``agent_name``
  names, when given), says which it left out, and is refused when that
  leaves none.

The HTTP routes beside MCP apply the same rules through :class:`Access`:
``POST /files/<slug>`` is ``agent`` (the uploader), ``GET /files/<slug>/<id>``
is ``member``, and the wake stream ``GET /wake/<slug>/<agent>`` is ``agent``
(the agent whose wake-ups it carries; :mod:`.wake`), each with the token in
the ``X-Agent-Token`` header.

A proof is either the agent's registration token in the call (``agent_token``,
``sender_token``, or their alias ``registration_token``), or an MCP session
that registered the agent or already proved it with its token. A call under
the ``agent`` rule may add ``acting_as``: once the caller has proved the
agent named, the call runs as the agent below it that ``acting_as`` names
(:meth:`Rule.act_as`), with that agent's narrower scopes. Every check is
a memory lookup and a profile read per agent it relies on (a session's
binding is compared with the profile it was made under): no archive walk
decides access.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from fastmcp import Context
from fastmcp.server.dependencies import get_context

from gitmail.coord.loads import GUARD_ROOTS_ENV
from gitmail.mail.facade import Mail, guard_roots
from gitmail.model.errors import NOT_FOUND, PATH_NOT_ALLOWED, UNAUTHORIZED, GitmailError, invalid
from gitmail.storage.store import Store

from .identity import Identities

TOKEN_ALIAS = "registration_token"
ACTING_AS = "acting_as"
AGENT_ID = "agent_id"

OPEN, AGENT, MEMBER, PRODUCT = "open", "agent", "member", "product"


@dataclass(frozen=True)
class Rule:
    """What a caller must prove, and which arguments name the project, the agent and the token."""

    access: Access
    kind: str
    agent: str | None = None  # the argument naming the agent acted as (agent) or the prover (member)
    token: str | None = None  # the argument carrying that agent's token
    project: str = "project_key"
    derive: Callable[[Mapping[str, Any]], str | None] | None = None  # finds the project when the call names none

    def check(self, arguments: dict[str, Any], ctx: Context | None = None) -> str | None:
        """Raise unless the caller meets the rule for these arguments; the agent proved, if any."""
        return self.access.check(self, arguments, ctx)

    def act_as(self, arguments: dict[str, Any], below: object) -> None:
        """Turn a call the caller proved (as the agent ``arguments`` names) into one made as ``below``.

        ``below`` must be an agent below the proved one in the hierarchy
        (NOT_ABOVE otherwise); the caller's own token is dropped, so nothing
        downstream mistakes it for the other agent's.
        """
        assert self.kind == AGENT and self.agent is not None
        if not isinstance(below, str) or not below.strip():
            raise invalid("acting_as must name an agent below you", field=ACTING_AS)
        arguments[self.agent] = self.access.mail.is_below(arguments[self.project], arguments[self.agent], below)
        if self.token is not None and self.token in arguments:
            arguments[self.token] = None

    def act_as_named(self, arguments: dict[str, Any], agent_id: object) -> None:
        """Turn a call the caller proved into one made as its acting identity ``agent_id`` (made on first use).

        ``agent_id`` is a readable name chosen per task: an agent of that
        name below the proved one, spawned below it the first time
        (AGENT_ID_TAKEN when another agent holds the name). As with
        :meth:`act_as`, the caller's own token is dropped.
        """
        assert self.kind == AGENT and self.agent is not None
        if not isinstance(agent_id, str) or not agent_id.strip():
            raise invalid("agent_id must be a readable name for this task's identity, e.g. fix-login-bug",
                          field=AGENT_ID)
        arguments[self.agent] = self.access.mail.acting_identity(arguments[self.project], arguments[self.agent],
                                                                 agent_id.strip())
        if self.token is not None and self.token in arguments:
            arguments[self.token] = None

    def describe(self) -> str:
        """How tools/list states the rule (``_meta``) and docs/security.md names it."""
        return self.kind if self.kind != AGENT else f"agent:{self.agent}"


def current_context(ctx: Context | None = None) -> Context | None:
    if ctx is not None:
        return ctx
    try:
        return get_context()
    except RuntimeError:
        return None


class Access:
    """The proofs behind every rule, over one store."""

    def __init__(self, store: Store, mail: Mail, identities: Identities):
        self.store = store
        self.mail = mail
        self.identities = identities

    # -- the rules -----------------------------------------------------------
    def open(self) -> Rule:
        """Anyone who reached the server."""
        return Rule(self, OPEN)

    def agent(self, agent: str = "agent_name", token: str = "agent_token", *, project: str = "project_key") -> Rule:
        """Proof of the agent the argument ``agent`` names."""
        return Rule(self, AGENT, agent, token, project)

    def member(self, agent: str = "agent_name", token: str = "agent_token", *, project: str = "project_key",
               derive: Callable[[Mapping[str, Any]], str | None] | None = None) -> Rule:
        """Proof of some agent of the project (the one ``agent`` names, or one this session proved).

        ``derive`` finds the project from the other arguments when the call
        does not name it (the commit guard's repository records its project).
        """
        return Rule(self, MEMBER, agent, token, project, derive)

    def product(self, agent: str = "agent_name", token: str = "agent_token") -> Rule:
        """Proof of an agent in at least one project of the product ``product_key`` names (see :meth:`reach`)."""
        return Rule(self, PRODUCT, agent, token, "product_key")

    def check(self, rule: Rule, arguments: dict[str, Any], ctx: Context | None = None) -> str | None:
        """Raise unless the caller meets ``rule`` for these arguments; the agent proved, if any.

        A project that ``rule.derive`` finds is filled into ``arguments``.
        """
        if rule.kind == OPEN:
            return None
        try:
            return self._check(rule, arguments, current_context(ctx))
        except GitmailError as exc:
            if exc.code == UNAUTHORIZED:
                exc.data.setdefault("rule", rule.describe())  # says the access model refused, before the tool ran
            raise

    def _check(self, rule: Rule, arguments: dict[str, Any], ctx: Context | None) -> str | None:
        if rule.derive is not None and not arguments.get(rule.project):
            arguments[rule.project] = rule.derive(arguments)
            if not arguments[rule.project]:
                raise invalid(f"{rule.project} is missing and the other arguments do not lead to a project: pass "
                              f"{rule.project} (the project's absolute path, or its slug)", field=rule.project)
        project = arguments.get(rule.project)
        name = arguments.get(rule.agent) if rule.agent else None
        token = arguments.get(rule.token) if rule.token else None
        if rule.kind == PRODUCT:
            self.reach(ctx, project, name, token, argument=rule.token or "agent_token")
            return name if isinstance(name, str) else None
        if rule.kind == AGENT:
            self.require_agent(ctx, project, name, token, argument=rule.token or "agent_token")
            return name if isinstance(name, str) else None
        return self.require_member(ctx, project, name, token, name_argument=rule.agent or "agent_name",
                                   argument=rule.token or "agent_token")

    def require_project(self, project: object) -> str:
        """The slug of an existing project, or NOT_FOUND naming the known keys closest to ``project``."""
        if not isinstance(project, str) or not project.strip():
            raise invalid("project_key must be the project's absolute path (or its slug)", field="project_key")
        slug = self.store.resolve(project)
        if not self.store.exists(slug):
            raise self.unknown_project(project)
        return slug

    def unknown_project(self, project: str) -> GitmailError:
        keys = [p["human_key"] for p in self.mail.list_projects(include_archived=True)]
        near = difflib.get_close_matches(project, keys, n=5, cutoff=0.6)
        shown = near or keys[:10]
        if shown:
            hint = (f"did you mean {', '.join(repr(k) for k in near)}?" if near
                    else f"known projects: {', '.join(repr(k) for k in shown)}")
        else:
            hint = "the store has no project yet"
        return GitmailError(NOT_FOUND, f"no project {project!r} on this server; {hint} (project_key is the "
                            "absolute path given to ensure_project; ensure_project creates a new one)",
                            {"project": project, "nearby": shown})

    def require_agent(self, ctx: Context | None, project: object, name: object, token: object, *,
                      argument: str = "agent_token") -> None:
        """Raise unless the caller proved it is agent ``name`` of ``project``."""
        self.require_project(project)
        if not isinstance(name, str) or not name:
            raise invalid("name the agent this call acts as", field="agent_name")
        assert isinstance(project, str)
        self.identities.require(ctx, project, name, token if isinstance(token, str) else None, argument=argument)

    def require_member(self, ctx: Context | None, project: object, name: object, token: object, *,
                       name_argument: str = "agent_name", argument: str = "agent_token") -> str:
        """Raise unless the caller proved it is some agent of ``project``; return that agent's name."""
        slug = self.require_project(project)
        assert isinstance(project, str)
        if isinstance(name, str) and name:
            self.identities.require(ctx, project, name, token if isinstance(token, str) else None,
                                    argument=argument)
            return name
        if token:
            raise invalid(f"{argument} needs {name_argument}: name the agent whose token it is", field=name_argument)
        bound = self.identities.agents_in(ctx, slug)
        if bound:
            return bound[0]
        raise GitmailError(
            UNAUTHORIZED,
            "this call reads or changes the whole project, so it needs proof that you are one of its agents: pass "
            f"{name_argument} with {argument} (your registration_token), or make the call in an MCP session that "
            "registered an agent of this project or proved one with its token",
            {"project": project, "argument": argument},
        )

    def reach(self, ctx: Context | None, product_key: object, name: object, token: object, *,
              argument: str = "agent_token") -> tuple[list[str], list[dict[str, str]]]:
        """The product's projects a read may cover, and those it leaves out with why.

        A project is read when the caller proved an agent there: ``name``
        (by ``token``, or by this session), or, without ``name``, any agent
        this session proved. UNAUTHORIZED when no project is left;
        NOT_FOUND when no project is linked to the product.
        """
        ctx = current_context(ctx)
        if not isinstance(product_key, str):
            raise invalid("product_key must name a product", field="product_key")
        slugs = self.mail.product_projects(product_key)
        if not slugs:
            raise GitmailError(NOT_FOUND, f"no project is linked to product {product_key!r}; link one with "
                               "products_link", {"product_key": product_key})
        readable, left_out = [], []
        for slug in slugs:
            if self._proved_in(ctx, slug, name, token):
                readable.append(slug)
            else:
                who = f"agent {name}" if isinstance(name, str) and name else "an agent"
                left_out.append({"project": self.mail.human_key(slug), "project_slug": slug,
                                 "reason": f"this call did not prove {who} of this project"})
        if not readable:
            raise GitmailError(
                UNAUTHORIZED,
                f"a read across product {product_key!r} covers only the linked projects in which you proved an agent, "
                f"and you proved none: pass agent_name with {argument} (its registration_token), or make the call in "
                "an MCP session that registered or proved an agent of a linked project",
                {"product_key": product_key, "argument": argument, "not_read": left_out},
            )
        return readable, left_out

    def _proved_in(self, ctx: Context | None, slug: str, name: object, token: object) -> bool:
        if isinstance(name, str) and name:
            return self.identities.proved(ctx, slug, name, token if isinstance(token, str) else None)
        return bool(self.identities.agents_in(ctx, slug))

    def viewer(self, ctx: Context | None, project: str, name: str | None, *, argument: str = "agent_name") -> str:
        """The agent a read is for: ``name`` if given, else the one agent this session proved in the project."""
        if name:
            return name
        bound = self.identities.agents_in(current_context(ctx), self.store.resolve(project))
        if len(bound) == 1:
            return bound[0]
        if not bound:
            raise invalid(f"name the agent reading ({argument}): this MCP session has not registered or proved "
                          "an agent of this project", field=argument)
        raise invalid(f"this MCP session acts as several agents of this project ({', '.join(bound)}); name the "
                      f"one reading with {argument}", field=argument, agents=bound)

    def session_project(self, ctx: Context | None) -> str | None:
        """The one project this session has proved agents in, if exactly one."""
        slugs = self.identities.projects(current_context(ctx))
        return slugs[0] if len(slugs) == 1 else None

    # -- the commit guard ------------------------------------------------------
    def require_guard_path(self, project: str, code_repo_path: object, *, removing: bool = False) -> None:
        """Agents touch hooks only in repositories under the folders the operator lists in GITMAIL_GUARD_ROOTS.

        None by default: a repository's hooks run as whoever commits there,
        so which repositories agents may change them in is the operator's
        decision, not the caller's (not even the project's own key path).
        """
        if not isinstance(code_repo_path, str) or not code_repo_path.strip():
            raise invalid("code_repo_path must be the path of a git repository", field="code_repo_path")
        target = os.path.realpath(os.path.expanduser(code_repo_path))
        roots = guard_roots()
        if any(target == r or target.startswith(r.rstrip(os.sep) + os.sep) for r in roots):
            return
        where = ("lists no folder on this server" if not roots
                 else f"lists no folder that holds {code_repo_path}")
        command = (f"gitmail guard uninstall {code_repo_path}" if removing
                   else f"gitmail guard install {self.mail.human_key(project)} {code_repo_path}")
        raise GitmailError(
            PATH_NOT_ALLOWED,
            f"agents install and remove the commit guard only in repositories under the folders the operator "
            f"lists in {GUARD_ROOTS_ENV} (separated by ':'), and it {where}. Ask the operator to run "
            f"`{command}` on this machine, or to add a folder holding the repository to {GUARD_ROOTS_ENV} "
            "and restart the server",
            {"code_repo_path": code_repo_path, "setting": GUARD_ROOTS_ENV, "command": command},
        )
