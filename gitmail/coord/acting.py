"""Who may act as an agent right now: the check every write as an agent passes.

:func:`require_actor` is that check: the agent exists and is active, it is not
asleep, and when a session holds its seat the write carries that session's
current seat token (see :mod:`gitmail.coord.seats` for how seats are taken).
Call it inside the transaction, so it judges the state the write commits onto.

Two writes change whether an agent may act or what it says about itself, and
are checked the same way: putting an agent to sleep or waking it
(:func:`set_asleep`), and an agent setting fields of its own profile
(:func:`update_own_profile`, for capabilities and the attachments policy).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Callable
from typing import Any

from gitmail.model.clock import parse_ts
from gitmail.model.errors import (
    AGENT_ASLEEP,
    SEAT_HELD,
    STALE_EPOCH,
    UNAUTHORIZED,
    GitmailError,
    invalid,
)
from gitmail.model.names import check_agent_name
from gitmail.model.records import Agent, Seat, seat_path
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .context import Context
from .lookup import require_agent

_TOKEN_RE = re.compile(r"^seat-(\d{1,18})-[A-Za-z0-9_-]{16,64}$")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def require_actor(snapshot: Snapshot, name: str, seat: str | None = None, *,
                  at: dt.datetime, field: str = "agent_name") -> Agent:
    """Check that ``name`` may write at ``at`` (now, by the store's clock); return its profile.

    Call this inside a transaction, so the check sees the state the write
    commits onto. Refuses an unknown or retired agent, an asleep agent
    (``AGENT_ASLEEP``), a write without the token while a session holds the
    seat (``SEAT_HELD``), and a token of an older epoch (``STALE_EPOCH``).
    """
    return check_acting(snapshot, require_agent(snapshot, name, field, active=True), seat, at=at)


def check_acting(snapshot: Snapshot, profile: Agent, seat: str | None = None, *,
                 at: dt.datetime) -> Agent:
    """The part of :func:`require_actor` that applies to any write as an agent: awake, and holding the seat."""
    if profile.asleep:
        raise GitmailError(AGENT_ASLEEP, f"agent {profile.name!r} is asleep: it keeps receiving mail but cannot act "
                           "until another agent or a human wakes it (wake_agent)", {"agent": profile.name})
    check_seat(snapshot, profile.name, seat, at=at)
    return profile


def is_held(record: Seat | None, at: dt.datetime) -> bool:
    return record is not None and record.released_at is None and parse_ts(record.lease_expires_at) > at


def check_seat(snapshot: Snapshot, agent: str, seat: str | None, *, at: dt.datetime) -> Seat | None:
    """Validate a seat token (or its absence) for a write as ``agent`` at ``at``; return the seat record."""
    record = snapshot.load(seat_path(agent), Seat)
    if seat is None:
        if is_held(record, at):
            assert record is not None
            raise GitmailError(SEAT_HELD, f"{agent}'s seat is held by {record.holder!r} (epoch {record.epoch}) "
                               f"until {record.lease_expires_at}; pass that session's seat token as 'seat', "
                               "or take the seat with take_over=true", seat_data(record))
        return record
    match = _TOKEN_RE.match(seat) if isinstance(seat, str) else None
    if match is None:
        raise invalid("seat must be the token take_seat returned (it looks like 'seat-<epoch>-<secret>')", field="seat")
    epoch = int(match.group(1))
    if record is None or epoch > record.epoch:
        raise GitmailError(UNAUTHORIZED, f"this seat token was not issued for {agent}; take_seat to get one",
                           {"agent": agent})
    if epoch < record.epoch:
        raise GitmailError(STALE_EPOCH, f"seat epoch {epoch} for {agent} is stale: {record.holder!r} took the seat "
                           f"at epoch {record.epoch}; nothing was written. Read the agent's latest state, then "
                           "take_seat again if this session should carry on", seat_data(record, epoch=epoch))
    if token_hash(seat) != record.token_hash:
        raise GitmailError(UNAUTHORIZED, f"this seat token was not issued for {agent}; take_seat to get one",
                           {"agent": agent})
    if record.released_at is not None:
        raise GitmailError(STALE_EPOCH, f"seat epoch {epoch} for {agent} was given up at {record.released_at}; "
                           "take_seat again to act as this agent", seat_data(record, epoch=epoch))
    return record


def seat_data(record: Seat, **extra: Any) -> dict[str, Any]:
    return {"agent": record.agent, "current_epoch": record.epoch, "holder": record.holder,
            "expires_at": record.lease_expires_at, **extra}


def seat_view(record: Seat, token: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": record.agent, "epoch": record.epoch, "holder": record.holder,
                           "expires_at": record.lease_expires_at, "taken_at": record.taken_at,
                           "released_at": record.released_at}
    if token is not None:
        out["token"] = token
    return out


def update_own_profile(ctx: Context, project_key: str, agent: str, seat: str | None,
                       describe: Callable[[str], str], **fields: Any) -> dict[str, Any]:
    """Set ``fields`` on the acting agent's own profile; nothing is committed if they already hold.

    The agent is checked like any writer (awake, seat not stale). Returns
    ``{"agent": name, **fields}``; ``describe(name)`` is the commit line.
    """
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()

    def fn(snap: Snapshot) -> Change:
        profile = require_actor(snap, agent, seat, at=ctx.clock.now())
        result = {"agent": profile.name, **fields}
        if all(getattr(profile, key) == value for key, value in fields.items()):
            return Change("no change", result=result)
        updated = dataclasses.replace(profile, hlc=hlc, **fields)
        return Change(describe(profile.name), author=profile.name, result=result).put_record(updated)

    result = archive.transact(fn).result
    ctx.touch(project_key, result["agent"])
    return result


def set_asleep(ctx: Context, project_key: str, target: str, asleep: bool, *, actor: str | None = None,
               seat: str | None = None) -> dict[str, Any]:
    """Put ``target`` to sleep or wake it.

    An asleep agent keeps receiving mail, but every write as it is refused
    (``AGENT_ASLEEP``) and its seat cannot be taken until it is woken. ``actor``
    is the agent doing it (checked like any writer; it may be ``target`` itself
    when going to sleep); None means a human at the command line.
    """
    check_agent_name(target, "target")
    if actor is not None:
        check_agent_name(actor, "agent_name")
        if not asleep and actor == target:
            raise invalid(f"{target} cannot wake itself; another agent or a human must wake it", field="target")
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()

    def fn(snap: Snapshot) -> Change:
        if actor is not None:
            require_actor(snap, actor, seat, at=ctx.clock.now())
        profile = require_agent(snap, target, "target")
        result = {"agent": profile.name, "asleep": asleep, "changed": profile.asleep != asleep}
        if profile.asleep == asleep:
            return Change("no change", result=result)
        updated = dataclasses.replace(profile, asleep=asleep, hlc=hlc)
        who = actor or "a human"
        text = f"{who} put {profile.name} to sleep" if asleep else f"{who} woke {profile.name}"
        return Change(text, author=actor, result=result).put_record(updated)

    result = archive.transact(fn).result
    if actor is not None:
        ctx.touch(project_key, actor)
    return result
