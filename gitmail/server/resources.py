"""Read-only resources: projects, agents, inboxes, threads, messages and views.

Every resource returns one JSON document. Views of one agent's mail (inbox,
mailbox, outbox and the urgent / ack views) need the same proof as the tools
that act as that agent: the ``agent_token`` query parameter, or a session
that registered the agent. ``project`` is optional where the agent or message
name is unique in the store.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable
from typing import Any

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError
from fastmcp.resources import ResourceSecurity

from gitmail.model.errors import INVALID_ARGUMENT, GitmailError, not_found

from .runtime import Runtime
from .tools_health import environment

JSON = "application/json"
# Project keys are absolute paths by design, but only ever name a project (the
# archive's location is derived from a hash of the key), so they are exempt
# from the framework's path screening; every other parameter stays screened.
PROJECT_KEYS_ALLOWED = ResourceSecurity(exempt_params={"project", "project_key", "slug"})


def resource(mcp: FastMCP, uri: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a resource whose GitmailErrors reach the client as JSON {code, message, data}."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> str:
            try:
                return json.dumps(fn(*args, **kwargs), ensure_ascii=False)
            except GitmailError as exc:
                raise ResourceError(json.dumps(exc.to_dict(), ensure_ascii=False), log_level=logging.DEBUG) from None

        mcp.resource(uri, mime_type=JSON, annotations={"readOnlyHint": True, "idempotentHint": True},
                     security=PROJECT_KEYS_ALLOWED)(guarded)
        return fn

    return decorate


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


def register(mcp: FastMCP, rt: Runtime) -> None:
    mail = rt.mail

    def project_of_agent(agent: str, project: str | None) -> str:
        """The project holding ``agent``: the one named, or the only one that has it."""
        if project:
            return project
        holders = []
        for slug in rt.store.slugs():
            try:
                mail.whois(project_key=slug, agent_name=agent, include_recent_commits=False)
            except GitmailError:
                continue
            holders.append(slug)
        if len(holders) == 1:
            return holders[0]
        if not holders:
            raise not_found(f"no project has an agent named {agent!r}; check the name or add ?project=<key>",
                            agent=agent)
        raise GitmailError(INVALID_ARGUMENT, f"several projects have an agent named {agent!r}; add "
                           f"?project=<key> (one of {', '.join(holders)})", {"projects": holders})

    def own_view(ctx: Context, agent: str, project: str | None, agent_token: str | None) -> str:
        project_key = project_of_agent(agent, project)
        rt.act_as(ctx, project_key, agent, agent_token)
        return project_key

    @resource(mcp, "resource://config/environment")
    def config_environment() -> dict[str, Any]:
        """The server's settings: version, transport, listen address, store (no secrets)."""
        return environment(rt)

    @resource(mcp, "resource://projects{?include_archived}")
    def projects(include_archived: str | None = None) -> list[dict[str, Any]]:
        """Every project in the store (archived ones only with include_archived=true)."""
        return mail.list_projects(include_archived=flag(include_archived))

    @resource(mcp, "resource://project/{slug}")
    def project(slug: str) -> dict[str, Any]:
        """One project, by slug or human key, with its agents."""
        return mail.get_project(slug)

    @resource(mcp, "resource://agents/{project_key}{?active_only}")
    def agents(project_key: str, active_only: str | None = None) -> dict[str, Any]:
        """The agents of a project (retired ones too with active_only=false)."""
        listed = mail.list_agents(project_key=project_key,
                                  active_only=True if active_only is None else flag(active_only))
        return {"project": project_key, "count": len(listed), "agents": listed}

    def project_of_message(message_id: str, project: str | None) -> str:
        if project:
            return project
        for slug in rt.store.slugs():
            try:
                mail.get_message(slug, message_id)
            except GitmailError:
                continue
            return slug
        raise not_found(f"no project holds message {message_id!r}; check the ID or add ?project=<key>",
                        message_id=message_id)

    def project_of_thread(thread_id: str, project: str | None) -> str:
        if project:
            return project
        for slug in rt.store.slugs():
            try:
                if mail.get_thread(slug, thread_id, include_bodies=False)["messages"]:
                    return slug
            except GitmailError:
                continue
        raise not_found(f"no project has a thread {thread_id!r}; check the ID or add ?project=<key>",
                        thread_id=thread_id)

    def since(value: str | None) -> str | float | None:
        """An ISO-8601 time, or epoch seconds as the query string may carry them."""
        if not value:
            return None
        try:
            return float(value)
        except ValueError:
            return value

    @resource(mcp, "resource://message/{message_id}{?project}")
    def message(message_id: str, project: str | None = None) -> dict[str, Any]:
        """One message with its body (never its bcc list)."""
        return mail.get_message(project_of_message(message_id, project), message_id)

    @resource(mcp, "resource://thread/{thread_id}{?project,include_bodies}")
    def thread(thread_id: str, project: str | None = None, include_bodies: str | None = None) -> dict[str, Any]:
        """A thread's messages, oldest first."""
        return mail.get_thread(project_of_thread(thread_id, project), thread_id,
                               include_bodies=True if include_bodies is None else flag(include_bodies))

    @resource(mcp, "resource://inbox/{agent}{?project,since_ts,urgent_only,include_bodies,limit,agent_token}")
    def inbox(agent: str, ctx: Context, project: str | None = None, since_ts: str | None = None,
              urgent_only: str | None = None, include_bodies: str | None = None, limit: str | None = None,
              agent_token: str | None = None) -> dict[str, Any]:
        """An agent's newest inbox messages (read state unchanged)."""
        key = own_view(ctx, agent, project, agent_token)
        listed = mail.fetch_inbox(key, agent, limit=number(limit, 20, "limit"), urgent_only=flag(urgent_only),
                                  include_bodies=flag(include_bodies), since_ts=since(since_ts))
        return {"project": key, "agent": agent, "count": len(listed), "messages": listed}

    @resource(mcp, "resource://mailbox/{agent}{?project,limit,agent_token}")
    def mailbox(agent: str, ctx: Context, project: str | None = None, limit: str | None = None,
                agent_token: str | None = None) -> dict[str, Any]:
        """An agent's inbox and outbox together, newest first, with the commit of each message."""
        key = own_view(ctx, agent, project, agent_token)
        return mail.fetch_mailbox(key, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://outbox/{agent}{?project,limit,include_bodies,since_ts,agent_token}")
    def outbox(agent: str, ctx: Context, project: str | None = None, limit: str | None = None,
               include_bodies: str | None = None, since_ts: str | None = None,
               agent_token: str | None = None) -> dict[str, Any]:
        """Messages an agent sent, newest first, with their bcc lists."""
        key = own_view(ctx, agent, project, agent_token)
        return mail.fetch_outbox(key, agent, limit=number(limit, 20, "limit"), include_bodies=flag(include_bodies),
                                 since_ts=since(since_ts))

    @resource(mcp, "resource://views/urgent-unread/{agent}{?project,limit,agent_token}")
    def urgent_unread(agent: str, ctx: Context, project: str | None = None, limit: str | None = None,
                      agent_token: str | None = None) -> dict[str, Any]:
        """High and urgent messages the agent has not read yet."""
        key = own_view(ctx, agent, project, agent_token)
        return mail.view_urgent_unread(key, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://views/ack-required/{agent}{?project,limit,agent_token}")
    def ack_required(agent: str, ctx: Context, project: str | None = None, limit: str | None = None,
                     agent_token: str | None = None) -> dict[str, Any]:
        """Messages that ask the agent for an acknowledgement it has not given."""
        key = own_view(ctx, agent, project, agent_token)
        return mail.view_ack_required(key, agent, limit=number(limit, 20, "limit"))

    @resource(mcp, "resource://views/ack-overdue/{agent}{?project,ttl_minutes,limit,agent_token}")
    def ack_overdue(agent: str, ctx: Context, project: str | None = None, ttl_minutes: str | None = None,
                    limit: str | None = None, agent_token: str | None = None) -> dict[str, Any]:
        """Acknowledgements the agent still owes on messages older than ttl_minutes (default 30)."""
        key = own_view(ctx, agent, project, agent_token)
        return mail.view_ack_overdue(key, agent, ttl_minutes=number(ttl_minutes, 30, "ttl_minutes", 0, 525_600),
                                     limit=number(limit, 20, "limit"))
