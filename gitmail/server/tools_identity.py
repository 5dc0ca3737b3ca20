"""Identity tools: create a project, register an agent or a new identity, look agents up, window identities."""

from __future__ import annotations

import dataclasses
from dataclasses import field
from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import (
    AgentProfile,
    Credential,
    ProjectView,
    Registration,
    Whois,
    WindowExpired,
    WindowList,
    WindowView,
)
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, result

from .params import (
    AgentName,
    AgentToken,
    IdentityKey,
    Model,
    Program,
    ProjectKey,
    ProverName,
    Reason,
    TaskDescription,
    TaskUpdate,
    WindowUuid,
)
from .registry import ANYONE, MEMBER, Toolbox
from .results import IDEMPOTENT, READ, WRITE
from .runtime import Runtime
from .schemas import Brief

tools = Toolbox("identity")

# whois lists an agent's profile key by key; the tools that register one list its name and token and leave the
# rest to that listing (the same 23 keys listed three times were 1.5 KB of the default listing).
Registered = Annotated[Registration, Brief("profile", "name")]


@result
class WhoisAnswer(Result):
    """A profile as whois answers it; to a caller proving no agent of the project, a note on the missing commits."""

    found: Whois = field(metadata=FLATTEN)
    recent_commits_note: str | None = field(default=None, metadata=OMIT_NONE)


@result
class AgentDirectory(Result):
    """A project's agents, under the project's human key."""

    project: str
    count: int
    agents: list[AgentProfile]


def shown(profile: Registration, show_token: bool) -> Registration:
    return profile if show_token else dataclasses.replace(profile, registration_token=None)


@tools.tool(IDEMPOTENT, access=ANYONE)
def register_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    program: Program,
    model: Model,
    name: Annotated[str | None, Field(description="Its name (left out: a generated one).")] = None,
    task_description: TaskUpdate = None,
    agent_token: Annotated[str | None, Field(description="Its registration_token, to update it.")] = None,
    return_registration_token: bool = True,
    window_uuid: WindowUuid = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
) -> Registered:
    """Register an agent in a project, or update one you registered; answers its profile (as whois lists it).
    A new agent's registration_token is shown only here: keep it, and pass it as agent_token from other sessions.
    """
    if window_uuid and not name and rt.store.exists(project_key):
        name = rt.mail.window_agent(project_key, window_uuid)
    profile = rt.identities.register(ctx, project_key, program=program, model=model, name=name,
                                     task_description=task_description, token=agent_token,
                                     idempotency_key=idempotency_key, reason=reason)
    if window_uuid:
        rt.mail.use_window(project_key, window_uuid, profile.profile.name)
    return shown(profile, return_registration_token)


@tools.tool(WRITE, access=ANYONE)
def create_agent_identity(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    program: Program,
    model: Model,
    name_hint: Annotated[str | None, Field(description="A name to use (taken: the call fails).")] = None,
    task_description: TaskDescription = "",
    return_registration_token: bool = True,
) -> Registered:
    """Create a new agent identity (never reuses a name), e.g. for a separate worker; answers it as register_agent."""
    profile = rt.mail.create_agent_identity(project_key=project_key, program=program, model=model,
                                            name_hint=name_hint, task_description=task_description)
    # A taken name failed above: only a new agent binds.
    rt.identities.bind(ctx, project_key, Credential.issued(profile))
    return shown(profile, return_registration_token)


@tools.tool(READ, access=ANYONE)
def whois(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    include_recent_commits: bool = True,
    commit_limit: Annotated[int, Field(ge=1, le=100)] = 5,
) -> WhoisAnswer:
    """Show an agent's profile: program, model, task, status, contact policy, recent commits."""
    slug = rt.access.require_project(project_key)
    proved = rt.identities.agents_in(ctx, slug)
    member = bool(proved)
    found = rt.mail.whois(project_key=project_key, agent_name=agent_name,
                          include_recent_commits=include_recent_commits and member, commit_limit=commit_limit,
                          readers=proved)
    note = None
    if include_recent_commits and not member:
        note = ("recent_commits name message subjects: they are shown to an MCP session that registered or proved "
                "an agent of this project")
    return WhoisAnswer(found=found, recent_commits_note=note)


@tools.tool(READ, access=ANYONE)
def list_agents(
    rt: Runtime,
    project_key: ProjectKey,
    active_only: Annotated[bool, Field(description="false: include retired and deregistered agents.")] = True,
) -> AgentDirectory:
    """List the project's agents: the names to write to."""
    slug = rt.access.require_project(project_key)
    listed = rt.mail.list_agents(slug, active_only=active_only)
    return AgentDirectory(project=rt.mail.human_key(slug), count=len(listed), agents=listed)


@tools.tool(READ, access=ANYONE)
def list_window_identities(rt: Runtime, project_key: ProjectKey) -> WindowList:
    """List the project's live window identities and the agent name each goes by."""
    rt.access.require_project(project_key)
    return rt.mail.list_window_identities(project_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def rename_window(
    rt: Runtime,
    project_key: ProjectKey,
    window_uuid: str,
    new_display_name: Annotated[str, Field(description="The agent name it goes by next.")],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> WindowView:
    """Have a window go by another agent name from its next registration."""
    return rt.mail.rename_window(project_key, window_uuid, new_display_name)


@tools.tool(IDEMPOTENT, access=MEMBER)
def expire_window(
    rt: Runtime,
    project_key: ProjectKey,
    window_uuid: str,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> WindowExpired:
    """End a window identity now; its next registration picks a name."""
    return rt.mail.expire_window(project_key, window_uuid)


@tools.tool(IDEMPOTENT, access=ANYONE)
def ensure_project(
    rt: Runtime,
    human_key: Annotated[str, Field(description="Absolute path of the working directory.")],
) -> ProjectView:
    """Create or return the project for an absolute path; call it first in a new working directory."""
    return rt.mail.ensure_project(human_key=human_key)
