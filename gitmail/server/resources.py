"""Read-only resources: projects, agents, inboxes, threads, messages and views.

Every resource returns one JSON document and declares its access rule
(docs/security.md): the directory (projects, agents, environment) is open;
views of one agent's mail (inbox, mailbox, outbox and the urgent / ack views)
need that agent's proof, the ``agent_token`` query parameter or a session that
registered or proved the agent; a message or thread needs proof of an agent of
its project (``agent_name`` and ``agent_token``, or the session). ``project``
may be left out only by a session that proved agents of exactly one project:
no read looks across projects.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Mapping
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError
from fastmcp.resources import ResourceSecurity
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from gitmail.mail.facade import (
    InboxMessage,
    Listing,
    OverdueListing,
    ProjectView,
    Received,
    Sent,
    SentMessage,
    StoredMessage,
    ThreadPage,
)
from gitmail.model.controls import first_nul, nul_message
from gitmail.model.errors import INTERNAL, INVALID_ARGUMENT, RESOURCE_EXHAUSTED, GitmailError
from gitmail.model.limits import READ_BUDGET_DEFAULT, READ_BUDGET_MAX, READ_BUDGET_MIN
from gitmail.sync.status import remote_states

from .access import OPEN, Rule
from .results import log_failure
from .runtime import Runtime
from .tools_health import Environment, environment
from .tools_identity import AgentDirectory

JSON = "application/json"
# Project keys are absolute paths by design, but only ever name a project (the
# archive's location is derived from a hash of the key), so they are exempt
# from the framework's path screening; every other parameter stays screened.
PROJECT_KEYS_ALLOWED = ResourceSecurity(exempt_params={"project", "project_key", "slug"})


class ResourceFailure(ResourceError, MCPError):
    """A failed read as the client sees it: JSON-RPC error whose ``data`` is the body a failed tool returns.

    Resources have no error result as tools do, so the failure is a JSON-RPC
    error: ``-32602`` (invalid params) when the caller can fix it,
    ``-32603`` when the server failed (INTERNAL, RESOURCE_EXHAUSTED); either
    way ``data`` is ``{code, message, data}`` and the error's message is its
    JSON text, as a tool error's content is.
    """

    def __init__(self, failure: GitmailError):
        body = failure.to_dict()
        server_side = failure.code in (INTERNAL, RESOURCE_EXHAUSTED)
        MCPError.__init__(self, INTERNAL_ERROR if server_side else INVALID_PARAMS,
                          json.dumps(body, ensure_ascii=False), body)
        self.log_level = logging.DEBUG  # the framework logs the read at this level; ours logged what matters


def resource(mcp: FastMCP, uri: str, *, access: Rule) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a resource that checks ``access`` first; failures reach the client coded (:class:`ResourceFailure`).

    A resource whose rule names a project parameter that the URI leaves out
    reads the one project this MCP session has proved agents in; nothing is
    looked up across projects.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> str:
            try:
                where = first_nul(kwargs, "parameters")
                if where:
                    parameter = where.removeprefix("parameters.")
                    raise GitmailError(INVALID_ARGUMENT, nul_message(f"parameter {parameter}"),
                                       {"parameter": parameter})
                ctx = next((v for v in kwargs.values() if isinstance(v, Context)), None)
                if access.kind != OPEN and not kwargs.get(access.project):
                    kwargs[access.project] = session_project(access, ctx)
                access.check(kwargs, ctx)
                return json.dumps(fn(*args, **kwargs), ensure_ascii=False)
            except GitmailError as exc:
                raise ResourceFailure(exc) from None
            except Exception as exc:  # noqa: BLE001 - every failure reaches the caller with a code
                raise ResourceFailure(log_failure(uri, exc)) from None

        mcp.resource(uri, mime_type=JSON, annotations={"readOnlyHint": True, "idempotentHint": True},
                     security=PROJECT_KEYS_ALLOWED, meta={"gitmail/access": access.describe()})(guarded)
        return fn

    return decorate


def session_project(access: Rule, ctx: Context | None) -> str:
    """The project a resource read without ``?project=`` means: the one this session proved agents in."""
    slug = access.access.session_project(ctx)
    if slug is None:
        raise GitmailError(INVALID_ARGUMENT, f"add ?{access.project}=<project key> to the URI: it names the project "
                           "to read (only a session that registered or proved agents of exactly one project may "
                           "leave it out)", {"parameter": access.project})
    return slug


def flag(value: str | bool | None) -> bool:
    """A query-string boolean: true/1/yes/on."""
    if isinstance(value, bool):
        return value
    return str(value or "").strip().lower() in ("1", "true", "yes", "on")


def number(value: str | int | None, default: int, name: str, low: int = 1, high: int = 1000) -> int:
    if value is None or value == "":
        return default
    try:
        parsed = int(value)
    except (TypeError, ValueError):
        raise GitmailError(INVALID_ARGUMENT, f"query parameter {name} must be a whole number, got {value!r}",
                           {"parameter": name}) from None
    if not low <= parsed <= high:
        raise GitmailError(INVALID_ARGUMENT, f"query parameter {name} must be between {low} and {high}",
                           {"parameter": name})
    return parsed


def budget(value: str | None) -> int:
    """The ``max_bytes`` query parameter (see :mod:`gitmail.mail.budget`)."""
    return number(value, READ_BUDGET_DEFAULT, "max_bytes", READ_BUDGET_MIN, READ_BUDGET_MAX)


def since(value: str | None) -> str | float | None:
    """An ISO-8601 time, or epoch seconds as the query string may carry them."""
    if not value:
        return None
    try:
        return float(value)
    except ValueError:
        return value


def register(mcp: FastMCP, rt: Runtime, *, tool_rules: Mapping[str, str]) -> None:
    """Add the resources, ``tool_rules`` (each served tool's access rule) among them.

    They come in three groups by who may read them: the open directory, a
    project's shared reads (its members) and one agent's own views.
    """
    _register_directory(mcp, rt, tool_rules=tool_rules)
    _register_project_reads(mcp, rt)
    _register_agent_views(mcp, rt)


def _register_directory(mcp: FastMCP, rt: Runtime, *, tool_rules: Mapping[str, str]) -> None:
    """The resources open to anyone: the server's settings, the tools' access rules, projects and their agents."""
    mail = rt.mail
    anyone = rt.access.open()

    @resource(mcp, "resource://config/environment", access=anyone)
    def config_environment() -> Environment:
        """The server's settings: version, transport, listen address, store (no secrets)."""
        return environment(rt)

    @resource(mcp, "resource://tooling/access", access=anyone)
    def tooling_access() -> dict[str, str]:
        """Each served tool's access rule (docs/security.md says what each rule asks of a caller)."""
        return dict(tool_rules)

    @resource(mcp, "resource://projects{?include_archived}", access=anyone)
    def projects(include_archived: str | None = None) -> list[ProjectView]:
        """Every project in the store (archived ones only with include_archived=true)."""
        return mail.list_projects(include_archived=flag(include_archived))

    @resource(mcp, "resource://project/{slug}", access=anyone)
    def project(slug: str) -> dict[str, Any]:
        """One project, by slug or human key, with its agents."""
        return mail.get_project(slug)

    @resource(mcp, "resource://agents/{project_key*}{?active_only}", access=anyone)
    def agents(project_key: str, active_only: str | None = None) -> AgentDirectory:
        """The agents of a project, named by slug or by its absolute key as written (retired ones too with
        active_only=false)."""
        slug = rt.access.require_project(project_key)
        listed = mail.list_agents(slug, active_only=True if active_only is None else flag(active_only))
        return AgentDirectory(project=mail.human_key(slug), count=len(listed), agents=listed)


def _register_project_reads(mcp: FastMCP, rt: Runtime) -> None:
    """The resources any agent of a project may read: its sync state, its messages and threads."""
    mail = rt.mail
    member = rt.access.member("agent_name", "agent_token", project="project")

    @resource(mcp, "resource://sync{?project,agent_name,agent_token}", access=member)
    def sync(project: str = "", agent_name: str | None = None, agent_token: str | None = None) -> dict[str, Any]:
        """How each git remote of the project is syncing: state, URL, last attempt, last success, last error,
        ahead/behind, refused changes kept aside."""
        states = [state.to_dict() for state in remote_states(rt.store, project)]
        return {"project": rt.store.resolve(project), "remotes": states}

    @resource(mcp, "resource://message/{message_id}{?project,agent_name,agent_token}", access=member)
    def message(message_id: str, project: str = "", agent_name: str | None = None,
                agent_token: str | None = None) -> StoredMessage:
        """One message of the project with its body, never its bcc list (the sender's own view aside)."""
        return mail.get_message(project, message_id, agent_name=agent_name)

    @resource(mcp, "resource://thread/{thread_id}{?project,include_bodies,after,max_bytes,agent_name,agent_token}",
              access=member)
    def thread(thread_id: str, project: str = "", include_bodies: str | None = None, after: str | None = None,
               max_bytes: str | None = None, agent_name: str | None = None,
               agent_token: str | None = None) -> ThreadPage:
        """A thread's messages, oldest first, at most max_bytes of them (default 2 MiB) per page: while has_more
        is true, read on with after=next_after."""
        bodies = True if include_bodies is None else flag(include_bodies)
        return mail.get_thread(project, thread_id, include_bodies=bodies, after=after or None,
                               max_bytes=budget(max_bytes))


def _register_agent_views(mcp: FastMCP, rt: Runtime) -> None:
    """The views of one agent's mail, for that agent alone: inbox, mailbox, outbox, urgent and acknowledgements."""
    mail = rt.mail
    own = rt.access.agent("agent", "agent_token", project="project")

    @resource(mcp, "resource://inbox/{agent}{?project,since_ts,urgent_only,include_bodies,limit,max_bytes,"
                   "agent_token}", access=own)
    def inbox(agent: str, project: str = "", since_ts: str | None = None, urgent_only: str | None = None,
              include_bodies: str | None = None, limit: str | None = None, max_bytes: str | None = None,
              agent_token: str | None = None) -> Listing[InboxMessage]:
        """An agent's newest inbox messages (read state unchanged); bodies fit in max_bytes as for fetch_inbox."""
        listed = mail.fetch_inbox(project, agent, limit=number(limit, 20, "limit"), urgent_only=flag(urgent_only),
                                  include_bodies=flag(include_bodies), since_ts=since(since_ts),
                                  max_bytes=budget(max_bytes))
        return Listing(project=mail.human_key(project), agent=agent, count=len(listed), messages=listed)

    @resource(mcp, "resource://mailbox/{agent}{?project,limit,agent_token}", access=own)
    def mailbox(agent: str, project: str = "", limit: str | None = None,
                agent_token: str | None = None) -> Listing[Received | Sent]:
        """An agent's inbox and outbox together, newest first, with the commit of each message."""
        return mail.fetch_mailbox(project, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://outbox/{agent}{?project,limit,include_bodies,since_ts,max_bytes,agent_token}",
              access=own)
    def outbox(agent: str, project: str = "", limit: str | None = None, include_bodies: str | None = None,
               since_ts: str | None = None, max_bytes: str | None = None,
               agent_token: str | None = None) -> Listing[SentMessage]:
        """Messages an agent sent, newest first, with their bcc lists; bodies fit in max_bytes as for fetch_inbox."""
        return mail.fetch_outbox(project, agent, limit=number(limit, 20, "limit"), include_bodies=flag(include_bodies),
                                 since_ts=since(since_ts), max_bytes=budget(max_bytes))

    @resource(mcp, "resource://views/urgent-unread/{agent}{?project,limit,agent_token}", access=own)
    def urgent_unread(agent: str, project: str = "", limit: str | None = None,
                      agent_token: str | None = None) -> Listing[InboxMessage]:
        """High and urgent messages the agent has not read yet."""
        return mail.view_urgent_unread(project, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://views/ack-required/{agent}{?project,limit,agent_token}", access=own)
    def ack_required(agent: str, project: str = "", limit: str | None = None,
                     agent_token: str | None = None) -> Listing[InboxMessage]:
        """Messages that ask the agent for an acknowledgement it has not given."""
        return mail.view_ack_required(project, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://views/ack-overdue/{agent}{?project,ttl_minutes,limit,agent_token}", access=own)
    def ack_overdue(agent: str, project: str = "", ttl_minutes: str | None = None, limit: str | None = None,
                    agent_token: str | None = None) -> OverdueListing:
        """Acknowledgements the agent still owes on messages older than ttl_minutes (default: the server's
        acknowledgement TTL, GITMAIL_ACK_TTL_SECONDS, 30 minutes unless set)."""
        ttl = None if ttl_minutes in (None, "") else number(ttl_minutes, 30, "ttl_minutes", 0, 525_600)
        return mail.view_ack_overdue(project, agent, ttl_minutes=ttl, limit=number(limit, 20, "limit"))
