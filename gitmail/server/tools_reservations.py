"""Reservation tools: reserve, renew and release files, and the commit guard that enforces them.

Also the read-only resource ``resource://file_reservations/{slug}``.
"""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any

from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.coord.reservations import MAX_PATHS
from gitmail.mail.facade import (
    ForceRelease,
    GuardInstalled,
    GuardRemoved,
    NothingReleased,
    Released,
    Renewal,
    ReservationCycle,
    ReservationList,
    Reserved,
)
from gitmail.model.limits import (
    DEFAULT_INACTIVITY,
    MAX_TTL,
    MIN_TTL,
)

from .access import Access, Rule
from .params import AgentName, AgentToken, ForceNote, InactivitySeconds, NotifyPrevious, ProjectKey, ProverName, Seat
from .registry import ANYONE, ITSELF, MEMBER, Toolbox
from .resources import flag, resource
from .results import IDEMPOTENT, READ, WRITE, OutputFormat, formatted
from .runtime import Runtime

Paths = Annotated[list[str], Field(min_length=1, max_length=MAX_PATHS, description=(
    "Globs from the repository root."))]
OptionalPaths = Annotated[list[str] | None, Field(max_length=MAX_PATHS, description="Only these patterns.")]
ReservationIds = Annotated[list[str] | None, Field(max_length=MAX_PATHS)]

tools = Toolbox("reservations")


@tools.tool(WRITE, access=ITSELF)
def file_reservation_paths(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    paths: Paths,
    ttl_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL)] = 3600,
    exclusive: Annotated[bool, Field(description="false: shared, only a signal.")] = True,
    reason: Annotated[str, Field(max_length=4096)] = "",
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> Reserved:
    """Reserve files before editing them; conflicting paths are not granted."""
    return rt.mail.file_reservation_paths(project_key, agent_name, paths, ttl_seconds=ttl_seconds,
                                          exclusive=exclusive, reason=reason, seat=seat)


@tools.tool(IDEMPOTENT, access=ITSELF)
def release_file_reservations(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    paths: OptionalPaths = None,
    file_reservation_ids: ReservationIds = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> Released:
    """Release your reservations matching paths or IDs, else all of them."""
    return rt.mail.release_file_reservations(project_key, agent_name, paths=paths,
                                             file_reservation_ids=file_reservation_ids, seat=seat)


@tools.tool(WRITE, access=ITSELF)
def renew_file_reservations(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    extend_seconds: Annotated[int, Field(le=MAX_TTL, description="Seconds to add (at least 60).")] = 1800,
    paths: OptionalPaths = None,
    file_reservation_ids: ReservationIds = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> Renewal:
    """Extend your active reservations."""
    granted = max(extend_seconds, MIN_TTL)
    renewal = rt.mail.renew_file_reservations(project_key, agent_name, extend_seconds=granted, paths=paths,
                                              file_reservation_ids=file_reservation_ids, seat=seat)
    raised = f"extend_seconds {extend_seconds} was raised to the minimum of {MIN_TTL}"
    return dataclasses.replace(renewal, extend_seconds=granted, note=raised if granted != extend_seconds else None)


@tools.tool(WRITE, access=ITSELF)
def force_release_file_reservation(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    file_reservation_id: str,
    note: ForceNote = "",
    notify_previous: NotifyPrevious = True,
    inactivity_seconds: InactivitySeconds = DEFAULT_INACTIVITY,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> ForceRelease:
    """Release another agent's expired or abandoned reservation, and tell the holder."""
    return rt.mail.force_release_file_reservation(project_key, agent_name, file_reservation_id, note=note,
                                                  notify_previous=notify_previous,
                                                  inactivity_seconds=inactivity_seconds, seat=seat)


@tools.tool(READ, access=ANYONE)
def list_file_reservations(
    rt: Runtime,
    project_key: ProjectKey,
    agent_name: Annotated[str | None, Field(description="Only this agent's reservations.")] = None,
    active_only: Annotated[bool, Field(description="false: include released and expired ones.")] = True,
) -> ReservationList:
    """List the project's file reservations (active ones by default)."""
    return rt.mail.list_file_reservations(project_key, agent_name=agent_name, active_only=active_only)


@tools.tool(IDEMPOTENT, access=MEMBER)
def install_precommit_guard(
    rt: Runtime,
    project_key: ProjectKey,
    code_repo_path: Annotated[str, Field(description="The git repository to guard.")],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
    format: OutputFormat = None,
) -> GuardInstalled:
    """Install the reservation guard's git hooks into a repository under GITMAIL_GUARD_ROOTS."""
    rt.access.require_guard_path(project_key, code_repo_path)
    return formatted(rt.mail.install_precommit_guard(project_key, code_repo_path), format)


def guarded(access: Access) -> Rule:
    """Proof of an agent of the project whose guard the repository holds (which the call need not name)."""
    return access.member(derive=lambda arguments: access.mail.guard_project(arguments.get("code_repo_path")))


@tools.tool(IDEMPOTENT, access=guarded)
def uninstall_precommit_guard(
    rt: Runtime,
    code_repo_path: Annotated[str, Field(description="Absolute path of the guarded git repository.")],
    project_key: Annotated[str | None, Field(description=(
        "Default: the project the repository's guard records."))] = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
    format: OutputFormat = None,
) -> GuardRemoved:
    """Remove the reservation guard's hooks from a git repository."""
    assert project_key is not None  # the access rule found it
    rt.access.require_guard_path(project_key, code_repo_path, removing=True)
    return formatted(rt.mail.uninstall_precommit_guard(code_repo_path), format)


@tools.tool(WRITE, access=ITSELF)
def macro_file_reservation_cycle(
    rt: Runtime,
    project_key: ProjectKey,
    agent_name: AgentName,
    paths: Annotated[list[str], Field(min_length=1, max_length=MAX_PATHS, description=(
        "Globs from the repository root."))],
    ttl_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL)] = 3600,
    exclusive: bool = True,
    reason: Annotated[str, Field(max_length=4096)] = "macro-cycle",
    auto_release: Annotated[bool, Field(description=(
        "Release them before returning: a check that the paths are free."))] = False,
    agent_token: AgentToken = None,
) -> ReservationCycle:
    """Reserve paths and, with auto_release, release them again in one call."""
    reserved = rt.mail.file_reservation_paths(project_key, agent_name, paths, ttl_seconds=ttl_seconds,
                                              exclusive=exclusive, reason=reason)
    released: Released | NothingReleased | None = None
    if auto_release:
        ids = [g.id for g in reserved.granted]
        released = rt.mail.release_file_reservations(project_key, agent_name, file_reservation_ids=ids) if ids else (
            NothingReleased())
    return ReservationCycle(file_reservations=reserved, released=released)


def register_resources(mcp: FastMCP, rt: Runtime) -> None:
    """The read-only resource of file reservations."""
    @resource(mcp, "resource://file_reservations/{slug}{?active_only}", access=rt.access.open())
    def file_reservations(slug: str, active_only: str | None = None) -> dict[str, Any]:
        """A project's file reservations (by slug or human key); active_only=false adds released and expired ones."""
        listed = rt.mail.list_file_reservations(slug, active_only=True if active_only is None else flag(active_only))
        return {"project": slug, **listed}
