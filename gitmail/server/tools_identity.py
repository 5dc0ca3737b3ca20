"""Identity tools: create a project, register an agent or a new identity, look agents up, window identities."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import Credential

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

ReturnToken = Annotated[bool, Field(
    description="Include registration_token in the result (default). With false the token is not shown; "
                "this MCP session still acts as the agent without it.")]

tools = Toolbox("identity")


def shown(profile: dict[str, Any], show_token: bool) -> dict[str, Any]:
    if not show_token:
        profile = {k: v for k, v in profile.items() if k != "registration_token"}
    return profile


@tools.tool(IDEMPOTENT, access=ANYONE)
def register_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    program: Program,
    model: Model,
    name: Annotated[str | None, Field(description=(
        "The agent's name: 1-128 letters, digits, '.', '_' or '-', e.g. 'BlueLake' or 'worker-3'. "
        "Omit it to get a generated adjective+noun name."))] = None,
    task_description: TaskUpdate = None,
    agent_token: Annotated[str | None, Field(description=(
        "When updating an existing agent's profile: its registration_token (not needed in the "
        "session that registered it)."))] = None,
    return_registration_token: ReturnToken = True,
    window_uuid: WindowUuid = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
) -> dict[str, Any]:
    """Register an agent in a project, or update the profile of one you registered.

    A new agent gets a fresh registration_token, shown only in this result:
    keep it and pass it as sender_token / agent_token to act as the agent
    later (this MCP session needs no token). Updating an existing agent
    changes only the fields given and needs its token, from any session. The
    profile is committed to the archive under agents/<Name>/profile.yaml.
    An agent registered this way is top-level: it holds manager@* (all of
    its project) and may spawn agents below it (spawn_agent). With
    idempotency_key (which needs name), a retry returns the first answer
    without the token.
    """
    if window_uuid and not name and rt.store.exists(project_key):
        name = rt.mail.window_agent(project_key, window_uuid)
    profile = rt.identities.register(ctx, project_key, program=program, model=model, name=name,
                                     task_description=task_description, token=agent_token,
                                     idempotency_key=idempotency_key, reason=reason)
    if window_uuid:
        rt.mail.use_window(project_key, window_uuid, profile["name"])
    return shown(profile, return_registration_token)


@tools.tool(WRITE, access=ANYONE)
def create_agent_identity(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    program: Program,
    model: Model,
    name_hint: Annotated[str | None, Field(description=(
        "A name to use if it is free; the call fails if it is taken. Omit it for a generated name."))] = None,
    task_description: TaskDescription = "",
    return_registration_token: ReturnToken = True,
) -> dict[str, Any]:
    """Create a brand-new agent identity; never reuses or updates an existing one.

    Use it to spawn a separate worker. Returns the profile with a fresh
    registration_token (see register_agent).
    """
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
    include_recent_commits: Annotated[bool, Field(description=(
        "Also list the latest archive commits this agent authored (their summaries name subjects, so only "
        "a session that registered or proved an agent of the project sees them; a journal entry's text "
        "only a session that proved the journal's agent or one above it)."))] = True,
    commit_limit: Annotated[int, Field(ge=1, le=100, description="How many recent commits to list.")] = 5,
) -> dict[str, Any]:
    """Show an agent's profile: program, model, task, status, contact policy, recent commits."""
    slug = rt.access.require_project(project_key)
    proved = rt.identities.agents_in(ctx, slug)
    member = bool(proved)
    found = rt.mail.whois(project_key=project_key, agent_name=agent_name,
                          include_recent_commits=include_recent_commits and member, commit_limit=commit_limit,
                          readers=proved)
    if include_recent_commits and not member:
        found["recent_commits_note"] = ("recent_commits name message subjects: they are shown to an MCP "
                                        "session that registered or proved an agent of this project")
    return found


@tools.tool(READ, access=ANYONE)
def list_agents(
    rt: Runtime,
    project_key: ProjectKey,
    active_only: Annotated[bool, Field(description="false: include retired and deregistered agents.")] = True,
) -> dict[str, Any]:
    """List the project's agents: name, program, model, task, status and last activity, by name.

    The names to write to (send_message's to, cc, bcc) are these. Returns
    {project, count, agents}; resource://agents/{project_key} is the same list.
    """
    slug = rt.access.require_project(project_key)
    listed = rt.mail.list_agents(slug, active_only=active_only)
    return {"project": rt.mail.human_key(slug), "count": len(listed), "agents": listed}


@tools.tool(READ, access=ANYONE)
def list_window_identities(rt: Runtime, project_key: ProjectKey) -> dict[str, Any]:
    """List the project's live window identities: each window's UUID, the agent name it goes by, its activity.

    Returns {identities: [{id, window_uuid, display_name, created_ts,
    last_active_ts, expires_ts}]}, most recently used first.
    """
    rt.access.require_project(project_key)
    return rt.mail.list_window_identities(project_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def rename_window(
    rt: Runtime,
    project_key: ProjectKey,
    window_uuid: Annotated[str, Field(description="The window to rename (see list_window_identities).")],
    new_display_name: Annotated[str, Field(description=(
        "The agent name the window goes by from its next registration on (a valid agent name)."))],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Have a window go by another agent name. Needs proof of an agent of the project. Returns the window."""
    return rt.mail.rename_window(project_key, window_uuid, new_display_name)


@tools.tool(IDEMPOTENT, access=MEMBER)
def expire_window(
    rt: Runtime,
    project_key: ProjectKey,
    window_uuid: Annotated[str, Field(description="The window to expire (see list_window_identities).")],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """End a window identity now; its next registration picks a name afresh.

    Needs proof of an agent of the project. Returns {window_uuid, expired, expired_at}.
    """
    return rt.mail.expire_window(project_key, window_uuid)


@tools.tool(IDEMPOTENT, access=ANYONE)
def ensure_project(
    rt: Runtime,
    human_key: Annotated[str, Field(description=(
        "The absolute path of the working directory that names the project, e.g. "
        "'/data/projects/backend'. It need not exist on this machine; agents using the same "
        "path share the project."))],
) -> dict[str, Any]:
    """Create the project named by an absolute path, or return it if it exists.

    Call this first in a new working directory. The project gets its own git
    archive; its slug is derived from the path, so every machine computes the
    same one. Safe to repeat: nothing changes when the project exists.
    Returns {id, slug, human_key, created_at}.
    """
    return rt.mail.ensure_project(human_key=human_key)
