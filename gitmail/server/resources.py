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
from typing import Any, Callable

from fastmcp import Context, FastMCP
from fastmcp.exceptions import ResourceError

from ..errors import INVALID_ARGUMENT, GitmailError, not_found
from .runtime import Runtime
from .tools_health import environment

JSON = "application/json"


def resource(mcp: FastMCP, uri: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register a resource whose GitmailErrors reach the client as JSON {code, message, data}."""

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def guarded(*args: Any, **kwargs: Any) -> str:
            try:
                return json.dumps(fn(*args, **kwargs), ensure_ascii=False)
            except GitmailError as exc:
                raise ResourceError(json.dumps(exc.to_dict(), ensure_ascii=False), log_level=logging.DEBUG) from None

        mcp.resource(uri, mime_type=JSON, annotations={"readOnlyHint": True, "idempotentHint": True})(guarded)
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
