"""Hierarchy tools: spawn an agent below you, update one, publish your card, see where an agent stands.

Sleep and wake, which the hierarchy also governs, are with the other
coordination tools (:mod:`.tools_coordination`).
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastmcp import Context
from pydantic import Field

from gitmail.mail.facade import AgentUpdated, MemoryWritten, OrgContextView, Position, Spawned
from gitmail.model.errors import invalid
from gitmail.model.records import MAX_LOAD_FOLDERS, MAX_SCOPES

from .params import (
    AgentName,
    AgentToken,
    IdentityKey,
    ProjectKey,
    Reason,
    Seat,
)
from .registry import ANYONE, ITSELF, Toolbox
from .results import IDEMPOTENT, READ, WRITE
from .runtime import Runtime
from .wake import CardPublished

Scopes = Annotated[list[str], Field(min_length=1, max_length=MAX_SCOPES, description=(
    "What the agent may do, as role@location: role is viewer (read and send mail), editor (also reserve files, "
    "write its journal, publish its card) or manager (also spawn agents below it); location is * (the whole "
    "project) or a path or glob of the code repository, e.g. editor@src/api or viewer@*. Each must lie within "
    "your own scopes."))]
ExpiresAt = Annotated[str | None, Field(description=(
    "ISO 8601 time at which the agent stops being able to act; never later than yours (default: yours, or "
    "24 hours from now for an ephemeral agent)."))]
Lifecycle = Annotated[Literal["persistent", "intermittent", "ephemeral"], Field(description=(
    "How the agent is run: persistent (always on), intermittent (default: sessions come and go) or ephemeral "
    "(one task, then it ends: it expires within 24 hours unless you give an earlier expires_at)."))]
Capabilities = Annotated[list[str] | None, Field(max_length=64, description=(
    "What it can do, for role:<capability> addressing, e.g. ['review']."))]
Vendor = Annotated[str | None, Field(max_length=128, description="Who makes the agent, e.g. 'anthropic'.")]
Purpose = Annotated[str | None, Field(max_length=4096, description="What the agent is for.")]
RiskTier = Annotated[Literal["low", "standard", "high"] | None, Field(description=(
    "How much care its actions need: low, standard (default) or high."))]
Environment = Annotated[str | None, Field(max_length=128, description="Where it runs, e.g. 'ci' or 'laptop'.")]
Folders = Annotated[list[str] | None, Field(max_length=MAX_LOAD_FOLDERS, description=(
    "Folders (absolute paths in a code repository under the server's GITMAIL_GUARD_ROOTS, or archive:<name> for a "
    "memory folder of the project's archive) whose memory files "
    "(AGENTS.md, CLAUDE.md) and skill names (skills/<name>/SKILL.md) the agent is handed when it takes its seat; "
    "each one you can read. [] for none."))]

tools = Toolbox("hierarchy")


@tools.tool(WRITE, access=ITSELF)
def spawn_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    scope: Scopes,
    name: Annotated[str | None, Field(description=(
        "The new agent's name (must be free); omit it for a generated one."))] = None,
    program: Annotated[str | None, Field(description="Its program (default: yours).")] = None,
    model: Annotated[str | None, Field(description="Its model (default: yours).")] = None,
    task_description: Annotated[str, Field(max_length=4096, description="What it will work on.")] = "",
    expires_at: ExpiresAt = None,
    lifecycle: Lifecycle = "intermittent",
    capabilities: Capabilities = None,
    vendor: Vendor = None,
    purpose: Purpose = None,
    risk_tier: RiskTier = None,
    environment: Environment = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
    bootstrap_key: Annotated[bool, Field(description=(
        "Also mint a long-lived key (gmk_…) for a headless agent: it proves the child as agent_token does, until "
        "the child's end (at most 365 days; 90 without one), and dies when the child is retired."))] = False,
    refresh_window_s: Annotated[int | None, Field(description=(
        "With bootstrap_key: the key proves the child only while it acted within this many seconds."))] = None,
    load_memory_and_skills: Folders = None,
) -> Spawned:
    """Create an agent below you with a subset of your scopes; you may then act as it (acting_as)."""
    return rt.mail.spawn_agent(project_key, agent_name, scope, name=name, program=program, model=model,
                               task_description=task_description, expires_at=expires_at, lifecycle=lifecycle,
                               capabilities=capabilities, vendor=vendor or "", purpose=purpose or "",
                               risk_tier=risk_tier or "standard", environment=environment or "", seat=seat,
                               idempotency_key=idempotency_key, reason=reason, bootstrap_key=bootstrap_key,
                               refresh_window_s=refresh_window_s, load_memory_and_skills=load_memory_and_skills)


@tools.tool(IDEMPOTENT, access=ITSELF)
def update_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    target: Annotated[str | None, Field(description=(
        "The agent to update: you (the default) or an agent below you."))] = None,
    scope: Annotated[list[str] | None, Field(max_length=MAX_SCOPES, description=(
        "Replace its scopes (role@location), within its parent's; only an agent above it may."))] = None,
    expires_at: Annotated[str | None, Field(description=(
        "Its new expiry, never after its parent's; only an agent above it may."))] = None,
    lifecycle: Annotated[Literal["persistent", "intermittent", "ephemeral"] | None, Field(description=(
        "Its new lifecycle; only an agent above it may."))] = None,
    capabilities: Capabilities = None,
    vendor: Vendor = None,
    purpose: Purpose = None,
    risk_tier: RiskTier = None,
    environment: Environment = None,
    task_description: Annotated[str | None, Field(max_length=4096, description="What it works on.")] = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
    load_memory_and_skills: Folders = None,
) -> AgentUpdated:
    """Update your capability card, or the card, scopes, expiry, lifecycle or loaded folders of an agent below you."""
    return rt.mail.update_agent(project_key, agent_name, target=target, scope=scope, expires_at=expires_at,
                                lifecycle=lifecycle, capabilities=capabilities, vendor=vendor, purpose=purpose,
                                risk_tier=risk_tier, environment=environment, task_description=task_description,
                                seat=seat, idempotency_key=idempotency_key, reason=reason,
                                load_memory_and_skills=load_memory_and_skills)


@tools.tool(IDEMPOTENT, access=ITSELF)
def org_context(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    load_memory_and_skills: Annotated[list[str] | None, Field(max_length=MAX_LOAD_FOLDERS, description=(
        "The folders a new agent loads when its spawn names none (absolute paths under GITMAIL_GUARD_ROOTS, each "
        "one you can read, or archive:<name>); [] for none. Needs manager@*."))] = None,
    folder_hints: Annotated[bool | None, Field(description=(
        "Whether answers name the memory and skills of the folders they touch (default true). Needs "
        "manager@*."))] = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
    reason: Reason = None,
) -> OrgContextView:
    """The project's defaults for new agents; with arguments, set them (managers of the whole project)."""
    if load_memory_and_skills is None and folder_hints is None:
        return rt.mail.org_context(project_key, agent_name)
    return rt.mail.set_org_context(project_key, agent_name, load_memory_and_skills=load_memory_and_skills,
                                   folder_hints=folder_hints, seat=seat, reason=reason)


@tools.tool(IDEMPOTENT, access=ITSELF)
def write_memory(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    folder: Annotated[str, Field(max_length=80, description=(
        "The archive folder, archive:<name> (lower case letters, digits, '-', '_'); made by its first file."))],
    file: Annotated[str, Field(max_length=100, description="AGENTS.md, CLAUDE.md or skills/<name>/SKILL.md.")],
    text: Annotated[str | None, Field(description=(
        "The file's whole text (at most 256 KiB); identities that load the folder are handed it as data."))] = None,
    remove: Annotated[bool, Field(description="Remove the file instead (give no text).")] = False,
    agent_token: AgentToken = None,
    seat: Seat = None,
    reason: Reason = None,
) -> MemoryWritten:
    """Write or remove a memory file or skill of a memory folder of the project's archive (needs manager@*); it
    syncs."""
    return rt.mail.write_memory(project_key, agent_name, folder=folder, file=file, text=text, remove=remove,
                                seat=seat, reason=reason)


@tools.tool(WRITE, access=ITSELF)
def set_card(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    wake_channel: Annotated[Literal["brief", "sse", "webhook"], Field(description=(
        "How you are woken when something you wait for resolves (a reply, an acknowledgement you asked for, an "
        "approved contact request): brief (default: you see it at your next read), sse (your host keeps GET "
        "/wake/<project slug>/<agent> open) or webhook (a signed POST to webhook_url). A wake-up never carries a "
        "body: read the record it names with your tools."))] = "brief",
    webhook_url: Annotated[str | None, Field(max_length=2048, description=(
        "With wake_channel=webhook: the http(s) URL to POST to, on a loopback host or one the operator allows "
        "(GITMAIL_WAKE_HOSTS). Kept in this server's local state, never in the archive."))] = None,
    capabilities: Capabilities = None,
    vendor: Vendor = None,
    purpose: Purpose = None,
    risk_tier: RiskTier = None,
    environment: Environment = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> CardPublished:
    """Publish the next version of your capability card and how you are woken; a webhook's secret is shown once."""
    channel = rt.mail.check_wake_channel(wake_channel)
    wakes = rt.wake_channels()
    if channel == "webhook":
        url: str | None = wakes.check_target(webhook_url)
    elif webhook_url is not None:
        raise invalid("webhook_url goes with wake_channel='webhook'; leave it out for brief or sse",
                      field="webhook_url")
    else:
        url = None
    card = rt.mail.set_card(project_key, agent_name, wake_channel=channel, capabilities=capabilities, vendor=vendor,
                            purpose=purpose, risk_tier=risk_tier, environment=environment, seat=seat)
    return wakes.publish(project_key, card, url)


@tools.tool(READ, access=ANYONE)
def agent_position(
    rt: Runtime,
    project_key: ProjectKey,
    agent_name: Annotated[str, Field(description="The agent to place in the hierarchy.")],
) -> Position:
    """Where an agent stands: the agents above it, its siblings and its children, with their scopes."""
    return rt.mail.agent_position(project_key, agent_name)
