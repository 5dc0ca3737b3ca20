"""Build slot tools: acquire, renew, release and force-release a named slot, and the slots resource.

The rules are in :mod:`gitmail.coord.buildslots`; these are thin layers
over the facade that name and describe the arguments.
"""

from __future__ import annotations

from dataclasses import field
from typing import Annotated

from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.mail.facade import SlotAcquired, SlotForceReleased, SlotList, SlotReleased, SlotRenewed
from gitmail.model.limits import (
    DEFAULT_INACTIVITY,
    DEFAULT_SLOT_EXTEND,
    DEFAULT_SLOT_TTL,
    MAX_TTL,
    MIN_TTL,
)
from gitmail.model.records import MAX_SLOT_HOLDERS
from gitmail.model.results import FLATTEN, Result, result

from .params import AgentName, AgentToken, ForceNote, InactivitySeconds, NotifyPrevious, ProjectKey, Seat
from .registry import ITSELF, Toolbox
from .resources import flag, resource
from .results import WRITE
from .runtime import Runtime

Slot = Annotated[str, Field(max_length=64, description=(
    "The slot's name: the scarce resource it stands for, e.g. 'build-dir', 'test-db' or 'ports-9000'. "
    "Lowercase letters, digits, '.', '_' and '-'; other capitals are lowered."))]
Epoch = Annotated[int, Field(ge=1, description=(
    "The epoch acquire_build_slot returned for your holding. A holding that is over (released, or taken over "
    "once it went stale) is refused with STALE_EPOCH."))]

tools = Toolbox("coordination")


@result
class ProjectSlots(Result):
    """A project's build slots, under the project's human key."""

    project: str
    slots: SlotList = field(metadata=FLATTEN)


@tools.tool(WRITE, access=ITSELF)
def acquire_build_slot(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    slot: Slot,
    ttl_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL, description=(
        "How long the holding lasts unless renewed, in seconds (at least 60)."))] = DEFAULT_SLOT_TTL,
    exclusive: Annotated[bool, Field(description=(
        "true: nobody else may hold the slot meanwhile; false: share it with at most max_holders."))] = True,
    max_holders: Annotated[int | None, Field(ge=1, le=MAX_SLOT_HOLDERS, description=(
        "For a shared slot: how many may hold it at once (default: no limit below 64). Set by whoever "
        "acquires the slot while nobody holds it; later holders join under those terms."))] = None,
    reason: Annotated[str, Field(max_length=4096, description="What you use it for, for the others.")] = "",
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> SlotAcquired:
    """Hold a named slot for a scarce shared resource (a build folder, a test database); keep the epoch."""
    return rt.mail.acquire_build_slot(project_key, agent_name, slot, ttl_seconds=ttl_seconds, exclusive=exclusive,
                                      max_holders=max_holders, reason=reason, seat=seat)


@tools.tool(WRITE, access=ITSELF)
def renew_build_slot(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    slot: Slot,
    epoch: Epoch,
    extend_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL, description=(
        "Added to the later of now and the current expiry, in seconds."))] = DEFAULT_SLOT_EXTEND,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> SlotRenewed:
    """Extend your holding of a build slot; STALE_EPOCH when it is over."""
    return rt.mail.renew_build_slot(project_key, agent_name, slot, epoch, extend_seconds=extend_seconds, seat=seat)


@tools.tool(WRITE, access=ITSELF)
def release_build_slot(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    slot: Slot,
    epoch: Epoch,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> SlotReleased:
    """Give up your holding of a build slot now."""
    return rt.mail.release_build_slot(project_key, agent_name, slot, epoch, seat=seat)


@tools.tool(WRITE, access=ITSELF)
def force_release_build_slot(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    slot: Slot,
    holder: Annotated[str, Field(description="The agent whose stale holding to end.")],
    note: ForceNote = "",
    notify_previous: NotifyPrevious = True,
    inactivity_seconds: InactivitySeconds = DEFAULT_INACTIVITY,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> SlotForceReleased:
    """End another agent's stale holding of a build slot, and tell it."""
    return rt.mail.force_release_build_slot(project_key, agent_name, slot, holder, note=note,
                                            notify_previous=notify_previous,
                                            inactivity_seconds=inactivity_seconds, seat=seat)


def register_resources(mcp: FastMCP, rt: Runtime) -> None:
    """The read-only resource of build slots."""
    @resource(mcp, "resource://build_slots/{project_key*}{?active_only}", access=rt.access.open())
    def build_slots(project_key: str, active_only: str | None = None) -> ProjectSlots:
        """A project's build slots with their holders and epochs (by slug or human key); active_only=true: only
        the slots someone holds now."""
        slug = rt.access.require_project(project_key)
        return ProjectSlots(project=rt.mail.human_key(slug),
                            slots=rt.mail.list_build_slots(slug, active_only=flag(active_only)))
