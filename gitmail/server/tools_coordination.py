"""Coordination tools: file reservations, the commit guard, seats, journals, sleep/wake, capabilities, attachments.

Also the read-only resources ``resource://file_reservations/{slug}`` and
``resource://capabilities/{slug}``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastmcp import Context, FastMCP
from pydantic import Field

from gitmail.coord.reservations import MAX_PATHS
from gitmail.model.limits import (
    DEFAULT_INACTIVITY,
    DEFAULT_LEASE_S,
    MAX_LEASE_S,
    MAX_TTL,
    MIN_INACTIVITY,
    MIN_LEASE_S,
    MIN_TTL,
)

from .access import Access, Rule
from .params import AgentName, AgentToken, IdentityKey, ProjectKey, ProverName, Reason
from .registry import ANYONE, ITSELF, MEMBER, Toolbox
from .resources import flag, resource
from .results import IDEMPOTENT, READ, WRITE, OutputFormat, formatted
from .runtime import Runtime

# What forcing another agent's holding (a reservation, a build slot) takes.
ForceNote = Annotated[str, Field(max_length=4096, description="Added to the message sent to the holder.")]
NotifyPrevious = Annotated[bool, Field(description="Send the holder a message saying why.")]
InactivitySeconds = Annotated[int, Field(ge=MIN_INACTIVITY, le=MAX_TTL, description=(
    "The holder counts as gone after this long without activity."))]
Seat = Annotated[str | None, Field(max_length=128, description=(
    "Your seat token from take_seat, when a session holds this agent's seat; writes without it are refused "
    "while the seat is held, and writes under a replaced seat fail with STALE_EPOCH."))]
Paths = Annotated[list[str], Field(min_length=1, max_length=MAX_PATHS, description=(
    "Paths or globs relative to the repository root: 'src/api/' (a folder and everything below it), "
    "'src/*.py' (names directly in src), 'src/**/*.py' (at any depth), '?' and '[a-z]' also work."))]
OptionalPaths = Annotated[list[str] | None, Field(max_length=MAX_PATHS, description=(
    "Only reservations with exactly these patterns."))]
ReservationIds = Annotated[list[str] | None, Field(max_length=MAX_PATHS, description=(
    "Only reservations with these IDs."))]
Lease = Annotated[int, Field(ge=MIN_LEASE_S, le=MAX_LEASE_S, description=(
    "How long the seat is yours before you must renew it, in seconds."))]

tools = Toolbox("coordination")


@tools.tool(WRITE, access=ITSELF)
def file_reservation_paths(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    paths: Paths,
    ttl_seconds: Annotated[int, Field(ge=MIN_TTL, le=MAX_TTL, description=(
        "How long the reservation lasts, in seconds (at least 60); renew it if you need longer."))] = 3600,
    exclusive: Annotated[bool, Field(description=(
        "true: others should not edit these files (the commit guard enforces it); false: shared, "
        "only signals that you are working there."))] = True,
    reason: Annotated[str, Field(max_length=4096, description="Why, for the agents and humans reading it.")] = "",
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> dict[str, Any]:
    """Reserve files before editing them, so other agents know and the commit guard can protect them.

    A path conflicts when an active exclusive reservation of another agent
    overlaps it (patterns are compared exactly: 'src/**/*.py' and 'src/api/*'
    overlap). Conflicting paths are not granted; the others are. Returns
    {granted: [{id, path_pattern, exclusive, reason, expires_ts}], conflicts: [{path, holders}]}.
    Reservations are records in the project's git archive.
    """
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
) -> dict[str, Any]:
    """Release your active reservations: those matching paths or IDs, or all of them when neither is given.

    Released records stay in the archive for audit; a release is final.
    Releasing something already released is a no-op. Returns {released, released_at, file_reservation_ids}.
    """
    return rt.mail.release_file_reservations(project_key, agent_name, paths=paths,
                                             file_reservation_ids=file_reservation_ids, seat=seat)


@tools.tool(WRITE, access=ITSELF)
def renew_file_reservations(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    extend_seconds: Annotated[int, Field(le=MAX_TTL, description=(
        f"Seconds to add to the later of now and each reservation's expiry (at least {MIN_TTL}: less is "
        f"raised to {MIN_TTL}, and the result says so)."))] = 1800,
    paths: OptionalPaths = None,
    file_reservation_ids: ReservationIds = None,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> dict[str, Any]:
    """Extend your active reservations without reissuing them; never shortens one.

    Returns {renewed, file_reservations: [{id, path_pattern, old_expires_ts, new_expires_ts}],
    extend_seconds} where extend_seconds is the extension granted.
    """
    granted = max(extend_seconds, MIN_TTL)
    result = rt.mail.renew_file_reservations(project_key, agent_name, extend_seconds=granted, paths=paths,
                                             file_reservation_ids=file_reservation_ids, seat=seat)
    result["extend_seconds"] = granted
    if granted != extend_seconds:
        result["note"] = f"extend_seconds {extend_seconds} was raised to the minimum of {MIN_TTL}"
    return result


@tools.tool(WRITE, access=ITSELF)
def force_release_file_reservation(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    file_reservation_id: Annotated[str, Field(description="The reservation to release (another agent's).")],
    note: ForceNote = "",
    notify_previous: NotifyPrevious = True,
    inactivity_seconds: InactivitySeconds = DEFAULT_INACTIVITY,
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> dict[str, Any]:
    """Release another agent's reservation that looks abandoned, and tell the holder.

    Allowed when it has expired, or when its holder shows no activity for
    inactivity_seconds: no message sent, journal entry, seat or reservation
    renewal, and (when the project folder is on this machine) no file under
    the pattern modified and no git commit touching it. Otherwise fails with
    RESERVATION_NOT_STALE naming the latest activity.
    """
    return rt.mail.force_release_file_reservation(project_key, agent_name, file_reservation_id, note=note,
                                                  notify_previous=notify_previous,
                                                  inactivity_seconds=inactivity_seconds, seat=seat)


@tools.tool(READ, access=ANYONE)
def list_file_reservations(
    rt: Runtime,
    project_key: ProjectKey,
    agent_name: Annotated[str | None, Field(description="Only this agent's reservations.")] = None,
    active_only: Annotated[bool, Field(description="false: include released and expired ones.")] = True,
) -> dict[str, Any]:
    """List the project's file reservations (active ones by default)."""
    return rt.mail.list_file_reservations(project_key, agent_name=agent_name, active_only=active_only)


@tools.tool(IDEMPOTENT, access=MEMBER)
def install_precommit_guard(
    rt: Runtime,
    project_key: ProjectKey,
    code_repo_path: Annotated[str, Field(description=(
        "Absolute path of the git repository to guard; it must be under a folder the operator lists in "
        "GITMAIL_GUARD_ROOTS (none by default)."))],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
    format: OutputFormat = None,
) -> Any:
    """Install the reservation guard (pre-commit and pre-push hooks) into a git repository on this machine.

    Commits and pushes touching files another agent holds exclusively are
    refused; set AGENT_NAME when committing, GITMAIL_GUARD_MODE=warn to only
    warn, GITMAIL_GUARD_BYPASS=1 to skip once. An existing hook is kept and
    runs first. Needs proof of an agent of the project. Returns {hook, hooks,
    chained, hooks_dir, project}. Only in repositories under the folders the
    operator lists in GITMAIL_GUARD_ROOTS (none by default): elsewhere
    PATH_NOT_ALLOWED, and the operator installs it with `gitmail guard
    install PROJECT REPO`.
    """
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
        "The project whose guard it is (default: the one the repository's guard records)."))] = None,
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
    format: OutputFormat = None,
) -> Any:
    """Remove the reservation guard's hooks (and only those) from a git repository. Returns {removed, restored}.

    Needs proof of an agent of the project the guard serves, and the same
    repository rule as install_precommit_guard.
    """
    assert project_key is not None  # the access rule found it
    rt.access.require_guard_path(project_key, code_repo_path, removing=True)
    return formatted(rt.mail.uninstall_precommit_guard(code_repo_path), format)


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
) -> dict[str, Any]:
    """Become the one session driving this agent.

    Returns the seat {token, epoch, expires_at, holder}, the agent's home
    folder and the end of its journal (newest last): read it before you carry
    on. Pass the token as 'seat' on every write while you drive the agent.
    Fails with SEAT_HELD while another session holds an unexpired seat.
    """
    return rt.mail.take_seat(project_key, agent_name, holder=holder, lease_s=lease_s, take_over=take_over)


@tools.tool(WRITE, access=ITSELF)
def renew_seat(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    seat: Annotated[str, Field(max_length=128, description="The token take_seat returned.")],
    lease_s: Lease = DEFAULT_LEASE_S,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Extend the lease of the seat you hold to at least lease_s from now; never shortens it."""
    return rt.mail.renew_seat(project_key, agent_name, seat, lease_s=lease_s)


@tools.tool(IDEMPOTENT, access=ITSELF)
def release_seat(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    seat: Annotated[str, Field(max_length=128, description="The token take_seat returned.")],
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Give up the seat you hold, so the next session need not wait out the lease."""
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
) -> dict[str, Any]:
    """Append a dated entry to your journal (agents/<Name>/journal/YYYY/MM/DD/); take_seat hands its end on."""
    return rt.mail.journal(project_key, agent_name, entry, seat=seat)


@tools.tool(READ, access=ITSELF)
def read_journal(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    limit: Annotated[int, Field(ge=1, le=1000, description="How many of the latest entries.")] = 20,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
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
) -> dict[str, Any]:
    """Put yourself or an agent below you to sleep: its mail keeps arriving, but it cannot act until it wakes.

    Refused with NOT_ABOVE for any other agent. Returns {agent, asleep, until, changed}.
    The operator wakes any agent with `gitmail wake PROJECT NAME`.
    """
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
) -> dict[str, Any]:
    """Wake an asleep agent below you, or yourself from a sleep until=reply.

    An agent asleep until=woken cannot wake itself (WAKE_REFUSED); any other
    agent not above the target gets NOT_ABOVE. The operator wakes any agent
    with `gitmail wake PROJECT NAME`. Returns {agent, asleep, until, changed}.
    """
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
) -> dict[str, Any]:
    """Publish your capability card; mail sent to 'role:<capability>' then reaches you."""
    return rt.mail.publish_capabilities(project_key, agent_name, capabilities, seat=seat)


@tools.tool(READ, access=ANYONE)
def list_capabilities(
    rt: Runtime,
    project_key: ProjectKey,
    capability: Annotated[str | None, Field(description="Only agents publishing this capability.")] = None,
) -> dict[str, Any]:
    """List the active agents' capability cards (who a 'role:<capability>' address reaches)."""
    return rt.mail.list_capabilities(project_key, capability)


@tools.tool(IDEMPOTENT, access=ITSELF)
def set_attachments_policy(
    rt: Runtime,
    ctx: Context,
    project_key: ProjectKey,
    agent_name: AgentName,
    policy: Annotated[Literal["auto", "inline", "file"], Field(description=(
        "How images in your message bodies are stored when a send names no policy: auto inlines small "
        "ones as data URIs, inline always inlines, file always stores them as attachment files."))],
    agent_token: AgentToken = None,
    seat: Seat = None,
) -> dict[str, Any]:
    """Choose your default handling of images in outgoing messages."""
    return rt.mail.set_attachments_policy(project_key, agent_name, policy, seat=seat)


@tools.tool(READ, access=MEMBER)
def get_attachment(
    rt: Runtime,
    project_key: ProjectKey,
    path: Annotated[str, Field(description=(
        "The stored path from a message's attachments (attachments/xx/<sha256>.<ext>)."))],
    agent_name: ProverName = None,
    agent_token: AgentToken = None,
) -> dict[str, Any]:
    """Fetch a stored attachment, base64 encoded, after checking it against its SHA-256.

    Needs proof of an agent of the project, as the message bodies do.
    """
    return rt.mail.get_attachment(project_key, path)


def register_resources(mcp: FastMCP, rt: Runtime) -> None:
    """The read-only resources of reservations and capability cards."""
    @resource(mcp, "resource://file_reservations/{slug}{?active_only}", access=rt.access.open())
    def file_reservations(slug: str, active_only: str | None = None) -> dict[str, Any]:
        """A project's file reservations (by slug or human key); active_only=false adds released and expired ones."""
        listed = rt.mail.list_file_reservations(slug, active_only=True if active_only is None else flag(active_only))
        return {"project": slug, **listed}

    @resource(mcp, "resource://capabilities/{slug}", access=rt.access.open())
    def capability_cards(slug: str) -> dict[str, Any]:
        """The capability cards of a project's active agents (who each role:<capability> address reaches)."""
        return {"project": slug, **rt.mail.list_capabilities(slug)}
