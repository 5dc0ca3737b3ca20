"""Administration tools: archive and delete projects, retire and delete agents, purge old messages."""

from __future__ import annotations

from typing import Annotated, Any

from fastmcp import Context
from pydantic import Field

from .params import AgentName, AgentToken, Confirmation, ProjectKey, ProverName
from .registry import ITSELF, MEMBER, Toolbox
from .results import DESTRUCTIVE, IDEMPOTENT, WRITE
from .runtime import Runtime

tools = Toolbox("admin")


@tools.tool(IDEMPOTENT, access=MEMBER)
def archive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                    agent_token: AgentToken = None) -> dict[str, Any]:
    """Hide a project from the active project list, keeping every message.

    Reversible with unarchive_project; the archive's history is untouched.
    Needs proof of an agent of the project.
    """
    return rt.mail.archive_project(project_key=project_key)


@tools.tool(IDEMPOTENT, access=MEMBER)
def unarchive_project(rt: Runtime, project_key: ProjectKey, agent_name: ProverName = None,
                      agent_token: AgentToken = None) -> dict[str, Any]:
    """Return an archived project to the active project list. Needs proof of an agent of the project."""
    return rt.mail.unarchive_project(project_key=project_key)


@tools.tool(DESTRUCTIVE, access=MEMBER)
def hard_delete_project(rt: Runtime, project_key: ProjectKey, confirmation: Confirmation, agent_name: ProverName = None,
                        agent_token: AgentToken = None) -> dict[str, Any]:
    """Delete a project's whole archive, its checkout and derived state. Irreversible.

    Every agent, message, receipt, contact and reservation of the project is
    removed from this machine. Copies already pushed to other machines are not
    affected. Requires confirmation='I UNDERSTAND' and proof of an agent of the project.
    """
    slug = rt.store.resolve(project_key)
    result = rt.mail.hard_delete_project(project_key=project_key, confirmation=confirmation)
    rt.identities.forget(slug)
    return result


@tools.tool(IDEMPOTENT, access=ITSELF)
def retire_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                 agent_token: AgentToken = None) -> dict[str, Any]:
    """Retire an agent: it stops receiving new messages; its history stays.

    Reversible with unretire_agent.
    """
    return rt.mail.retire_agent(project_key=project_key, agent_name=agent_name)


@tools.tool(IDEMPOTENT, access=ITSELF)
def unretire_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                   agent_token: AgentToken = None) -> dict[str, Any]:
    """Bring a retired agent back: it receives messages again."""
    return rt.mail.unretire_agent(project_key=project_key, agent_name=agent_name)


@tools.tool(IDEMPOTENT, access=ITSELF)
def deregister_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                     agent_token: AgentToken = None) -> dict[str, Any]:
    """Take an agent off the project's roster; its messages stay in the archive."""
    return rt.mail.deregister_agent(project_key=project_key, agent_name=agent_name)


@tools.tool(DESTRUCTIVE, access=ITSELF)
def hard_delete_agent(rt: Runtime, ctx: Context, project_key: ProjectKey, agent_name: AgentName,
                      confirmation: Confirmation, agent_token: AgentToken = None) -> dict[str, Any]:
    """Delete an agent and everything it owns from the tip of the archive. Irreversible.

    Removes its profile, inbox, outbox, receipts, contacts, reservations and
    the messages it sent. Requires confirmation='I UNDERSTAND'.
    """
    result = rt.mail.hard_delete_agent(project_key=project_key, agent_name=agent_name, confirmation=confirmation)
    rt.identities.forget(rt.store.resolve(project_key), agent_name)
    return result


@tools.tool(WRITE, access=ITSELF)
def retire_inactive_agents(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: Annotated[str, Field(description="You: the agent asking (never retired itself).")],
    agent_token: AgentToken = None,
    inactive_seconds: Annotated[int, Field(ge=60, description=(
        "Retire agents with no activity for at least this long (minimum 60)."))] = 86400,
    dry_run: Annotated[bool, Field(description="Only list who would be retired.")] = False,
) -> dict[str, Any]:
    """Retire agents of your project that have been inactive for a long time.

    Conservative: you are never retired, and agents holding active file
    reservations are skipped. Returns who was retired and who was skipped, and why.
    """
    return rt.mail.retire_inactive_agents(project_key=project_key, agent_name=agent_name,
                                          inactive_seconds=inactive_seconds, dry_run=dry_run)


@tools.tool(DESTRUCTIVE, access=MEMBER)
def purge_old_messages(
    rt: Runtime,
    project_key: ProjectKey,
    max_age_days: Annotated[int, Field(ge=1, description="Remove messages older than this many days.")] = 180,
    dry_run: Annotated[bool, Field(description="Only count what would be removed.")] = False,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Remove messages older than a retention age from the tip of the archive.

    The message files, their inbox/outbox copies and receipts leave the
    current tree in one commit; git history still holds them. Returns the
    count. Needs proof of an agent of the project.
    """
    return rt.mail.purge_old_messages(project_key=project_key, max_age_days=max_age_days, dry_run=dry_run)
