"""Coordination tools: seats, journals, sleep and wake, capability cards.

Also the read-only resource ``resource://capabilities/{slug}``.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated, Any, Literal

from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.mail.facade import (
    CapabilitiesSet,
    CapabilityCards,
    JournalPage,
    JournalView,
    SeatRelease,
    SeatRenewal,
    SeatTaken,
    SleepState,
)
from gitmail.model.limits import (
    DEFAULT_LEASE_S,
    MAX_LEASE_S,
    MIN_LEASE_S,
)
from gitmail.model.results import Result, result

from .params import (
    AgentName,
    AgentToken,
    IdentityKey,
    ProjectKey,
    Reason,
    Seat,
)
from .registry import ANYONE, ITSELF, Toolbox
from .resources import resource
from .results import IDEMPOTENT, READ, WRITE
from .runtime import Runtime

Lease = Annotated[int, Field(ge=MIN_LEASE_S, le=MAX_LEASE_S, description=(
    "How long the seat is yours before you must renew it, in seconds."))]

tools = Toolbox("coordination")


@tools.tool(WRITE, access=ITSELF)
def take_seat(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    holder: Annotated[str, Field(max_length=200, description=(
        "Names your session, e.g. 'claude-code on ci-7'."))] = "session",
    lease_s: Lease = DEFAULT_LEASE_S,
    take_over: Annotated[bool, Field(description=(
        "Take it even though another session holds it; "
        "that session's next write fails with STALE_EPOCH."))] = False,
    agent_token: AgentToken = None,
) -> SeatTaken:
    """Become the one session driving an agent; pass the returned token as seat on every write."""
    return rt.mail.take_seat(project_key, agent_name, holder=holder, lease_s=lease_s, take_over=take_over)


@result
class ProofForgotten(Result):
    """An agent a session had proved, which it now must prove again."""

    project: str
    agent: str


@result
class SessionStarted(Result):
    """A fresh session: what the old one had proved is forgotten; the seat and the archive are as they were."""

    forgotten: list[ProofForgotten]
    note: str
    paused_subscriptions: list[str] = field(default_factory=list)


@tools.tool(IDEMPOTENT, access=ITSELF)
def new_session(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    agent_token: AgentToken = None,
) -> SessionStarted:
    """Start a fresh session: this connection forgets every agent it proved, so what you read before carries
    nothing into what you write next; prove your agent again (agent_token) on the next call."""
    ended = rt.identities.end_session(ctx)
    paused = rt.pause_subscriptions(ctx)
    note = ("nothing is written: a seat you hold stays yours (pass it as seat as before), and your token "
            "proves the agent again" if ended else
            "this call has no session to forget (each call proves its agent with its token)")
    if paused:
        note += ("; your resource subscriptions are paused: subscribe to each again (resources/subscribe, checked "
                 "as a read with your fresh proof) to hear of changes again")
    return SessionStarted(
        forgotten=[ProofForgotten(project=rt.mail.human_key(slug), agent=name) for slug, name in ended],
        note=note, paused_subscriptions=paused)


@tools.tool(WRITE, access=ITSELF)
def renew_seat(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    seat: Annotated[str, Field(max_length=128, description="The token take_seat returned.")],
    lease_s: Lease = DEFAULT_LEASE_S,
    agent_token: AgentToken = None,
) -> SeatRenewal:
    """Extend the lease of the seat you hold."""
    return rt.mail.renew_seat(project_key, agent_name, seat, lease_s=lease_s)


@tools.tool(IDEMPOTENT, access=ITSELF)
def release_seat(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    seat: Annotated[str, Field(max_length=128, description="The token take_seat returned.")],
    agent_token: AgentToken = None,
) -> SeatRelease:
    """Give up the seat you hold before its lease ends."""
    return rt.mail.release_seat(project_key, agent_name, seat)


@tools.tool(WRITE, access=ITSELF)
def journal(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    entry: Annotated[str, Field(min_length=1, max_length=20000, description=(
        "What you decided and why, or what the next session must know."))],
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> JournalView:
    """Append a dated entry to your journal; take_seat hands its end to the next session."""
    return rt.mail.journal(project_key, agent_name, entry, seat=seat)


@tools.tool(READ, access=ITSELF)
def read_journal(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    limit: Annotated[int, Field(ge=1, le=1000, description="How many of the latest entries.")] = 20,
    agent_token: AgentToken = None,
) -> JournalPage:
    """Read the end of your journal, newest last."""
    return rt.mail.read_journal(project_key, agent_name, limit=limit)


@tools.tool(IDEMPOTENT, access=ITSELF)
def sleep_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    target: Annotated[str | None, Field(description=(
        "The agent to put to sleep: you (the default) or an agent below you."))] = None,
    until: Annotated[Literal["reply", "woken"], Field(description=(
        "What wakes it: reply (default) - a reply to one of its messages, itself, or an agent above it; "
        "woken - only an agent above it (or the operator)."))] = "reply",
    agent_token: AgentToken = None,
    seat: Seat = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
) -> SleepState:
    """Put yourself or an agent below you to sleep: it cannot act until woken."""
    return rt.mail.sleep_agent(project_key, agent_name, target=target or agent_name, until=until, seat=seat,
                               idempotency_key=idempotency_key, reason=reason)


@tools.tool(IDEMPOTENT, access=ITSELF)
def wake_agent(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    target: Annotated[str | None, Field(description=(
        "The asleep agent to wake: one below you, or you (the default) when you slept until=reply."))] = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
    idempotency_key: IdentityKey = None,
    reason: Reason = None,
) -> SleepState:
    """Wake an agent below you, or yourself from a sleep until a reply."""
    return rt.mail.wake_agent(project_key, agent_name, target or agent_name, seat=seat,
                              idempotency_key=idempotency_key, reason=reason)


@tools.tool(IDEMPOTENT, access=ITSELF)
def publish_capabilities(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    capabilities: Annotated[list[str], Field(max_length=64, description=(
        "What you can do, e.g. ['review', 'db-migrations']; replaces the list you published before."))],
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> CapabilitiesSet:
    """Publish your capability card; mail to 'role:<capability>' then reaches you."""
    return rt.mail.publish_capabilities(project_key, agent_name, capabilities, seat=seat)


@tools.tool(READ, access=ANYONE)
def list_capabilities(
    rt: Runtime,
    project_key: ProjectKey,
    capability: Annotated[str | None, Field(description="Only agents publishing this capability.")] = None,
) -> CapabilityCards:
    """List the active agents' capability cards."""
    return rt.mail.list_capabilities(project_key, capability)


def register_resources(mcp: FastMCP, rt: Runtime) -> None:
    """The read-only resource of capability cards."""
    @resource(mcp, "resource://capabilities/{slug}", access=rt.access.open())
    def capability_cards(slug: str) -> dict[str, Any]:
        """The capability cards of a project's active agents (who each role:<capability> address reaches)."""
        return {"project": slug, **rt.mail.list_capabilities(slug)}
