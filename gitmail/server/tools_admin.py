"""Administration tools: archive and delete projects, retire and delete agents, purge old messages."""

from __future__ import annotations

from typing import Annotated

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import (
    AgentDeleted,
    InactiveRetired,
    ProjectDeleted,
    ProjectView,
    PurgeReport,
    StatusChange,
)

from .params import AgentName, AgentToken, Confirmation, ProjectKey, ProverName
from .registry import ITSELF, MEMBER, Toolbox
from .results import DESTRUCTIVE, IDEMPOTENT, WRITE
from .runtime import Runtime

tools = Toolbox("admin")


@tools.tool(IDEMPOTENT, access=MEMBER)
def archive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                    agent_token: AgentToken = None) -> ProjectView:
    """Hide a project from the active list, keeping everything."""
    return rt.mail.archive_project(project_key=project_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def unarchive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                      agent_token: AgentToken = None) -> ProjectView:
    """Return an archived project to the active list."""
    return rt.mail.unarchive_project(project_key=project_key)


@tools.tool(DESTRUCTIVE, access=MEMBER)
def hard_delete_project(rt: Runtime, project_key: ProjectKey, confirmation: Confirmation, agent_name: ProverName = None,
                        agent_token: AgentToken = None) -> ProjectDeleted:
    """Delete a project's whole archive from this machine. Irreversible."""
    slug = rt.store.resolve(project_key)
    result = rt.mail.hard_delete_project(project_key=project_key, confirmation=confirmation)
    rt.identities.forget(slug)
    return result


@tools.tool(IDEMPOTENT, access=ITSELF)
def retire_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                 agent_token: AgentToken = None) -> StatusChange:
    """Retire an agent: it stops receiving messages; its history stays."""
    return StatusChange.of(rt.mail.retire_agent(project_key=project_key, agent_name=agent_name), project_key)


@tools.tool(IDEMPOTENT, access=ITSELF)
def unretire_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                   agent_token: AgentToken = None) -> StatusChange:
    """Bring a retired agent back: it receives messages again."""
    return StatusChange.of(rt.mail.unretire_agent(project_key=project_key, agent_name=agent_name), project_key)


@tools.tool(IDEMPOTENT, access=ITSELF)
def deregister_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                     agent_token: AgentToken = None) -> StatusChange:
    """Take an agent off the project's roster; its messages stay."""
    return StatusChange.of(rt.mail.deregister_agent(project_key=project_key, agent_name=agent_name), project_key)


@tools.tool(DESTRUCTIVE, access=ITSELF)
def hard_delete_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                      confirmation: Confirmation, agent_token: AgentToken = None) -> AgentDeleted:
    """Delete an agent, what it owns and the messages it sent. Irreversible."""
    result = rt.mail.hard_delete_agent(project_key=project_key, agent_name=agent_name, confirmation=confirmation)
    rt.identities.forget(rt.store.resolve(project_key), agent_name)
    return result


@tools.tool(WRITE, access=ITSELF)
def retire_inactive_agents(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: Annotated[str, Field(description="You (never retired yourself).")],
    agent_token: AgentToken = None,
    inactive_seconds: Annotated[int, Field(ge=60)] = 86400,
    dry_run: Annotated[bool, Field(description="Only list them.")] = False,
) -> InactiveRetired:
    """Retire the project's long-inactive agents (never you, nor agents holding reservations)."""
    return rt.mail.retire_inactive_agents(project_key=project_key, agent_name=agent_name,
                                          inactive_seconds=inactive_seconds, dry_run=dry_run)


@tools.tool(DESTRUCTIVE, access=MEMBER)
def purge_old_messages(
    rt: Runtime,
    project_key: ProjectKey,
    max_age_days: Annotated[int, Field(ge=1)] = 180,
    dry_run: Annotated[bool, Field(description="Only count them.")] = False,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> PurgeReport:
    """Remove messages older than an age from the archive's tip (git history keeps them)."""
    return rt.mail.purge_old_messages(project_key=project_key, max_age_days=max_age_days, dry_run=dry_run)
