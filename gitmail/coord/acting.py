"""Who may act as an agent right now: the check every write as an agent passes.

:func:`require_actor` is that check: the agent exists and is active, it is not
asleep, and when a session holds its seat the write carries that session's
current seat token (see :mod:`gitmail.coord.seats` for how seats are taken).
Call it inside the transaction, so it judges the state the write commits onto.

An agent also sets fields of its own profile through here
(:func:`update_own_profile`, for capabilities and the attachments policy).
Sleep and wake are decided here (:func:`sleep_decision`, :func:`wake_decision`,
:func:`woken_by_reply`) and written by :mod:`gitmail.mail.identities`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import field
from typing import Any

from gitmail.model.clock import parse_ts
from gitmail.model.errors import (
    AGENT_ASLEEP,
    SEAT_HELD,
    SEAT_REQUIRED,
    STALE_EPOCH,
    UNAUTHORIZED,
    WAKE_REFUSED,
    GitmailError,
    invalid,
)
from gitmail.model.names import check_agent_name
from gitmail.model.records import SLEEP_UNTIL, Agent, Message, Seat, message_path, seat_path
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from . import hierarchy
from .context import Context
from .lookup import find_agent, require_agent

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
    """The part of :func:`require_actor` that applies to any write as an agent: awake, unexpired, holding the seat."""
    check_able(snapshot, profile, at=at)
    check_seat(snapshot, profile.name, seat, at=at, lifecycle=profile.lifecycle)
    return profile


def check_able(snapshot: Snapshot, profile: Agent, *, at: dt.datetime) -> None:
    """AGENT_ASLEEP or AGENT_EXPIRED unless ``profile`` may act at ``at`` (its seat aside)."""
    if profile.asleep:
        how = ("an agent above it or the operator wakes it, or a reply to one of its messages arrives"
               if profile.sleep_until == "reply" else "an agent above it or the operator wakes it (wake_agent)")
        raise GitmailError(AGENT_ASLEEP, f"agent {profile.name!r} is asleep: it keeps receiving mail but cannot act "
                           f"until {how}", {"agent": profile.name, "until": profile.sleep_until or "woken"})
    hierarchy.check_expiry(snapshot, profile, at)


def is_held(record: Seat | None, at: dt.datetime) -> bool:
    return record is not None and record.released_at is None and parse_ts(record.lease_expires_at) > at


def seat_driven(record: Seat | None, lifecycle: str) -> bool:
    """Whether an agent's writes need its current seat even while no session holds it.

    A persistent agent always does. An intermittent one does once a session
    has taken its seat: from then on it is driven from seats, and a write
    without one (after ``release_seat``, or once the lease ran out) could
    come from a session that gave it up. Agents registered without seats
    (the agent-mail way) never took one and write as before; ephemeral
    agents have no seats.
    """
    return lifecycle == "persistent" or (lifecycle == "intermittent" and record is not None)


def check_seat(snapshot: Snapshot, agent: str, seat: str | None, *, at: dt.datetime,
               lifecycle: str = "ephemeral") -> Seat | None:
    """Validate a seat token (or its absence) for a write as ``agent`` at ``at``; return the seat record.

    ``lifecycle`` is the agent's (see :func:`seat_driven`); the default asks
    only that no other session holds the seat.
    """
    record = snapshot.load(seat_path(agent), Seat)
    if seat is None:
        if is_held(record, at):
            assert record is not None
            raise GitmailError(SEAT_HELD, f"{agent}'s seat is held by {record.holder!r} (epoch {record.epoch}) "
                               f"until {record.lease_expires_at}; pass that session's seat token as 'seat', "
                               "or take the seat with take_over=true", seat_data(record))
        if seat_driven(record, lifecycle):
            raise GitmailError(SEAT_REQUIRED, f"{agent} is driven from its seat ({lifecycle}) and no session holds "
                               "it now: take_seat, then pass the token it returns as 'seat' on every write",
                               {"agent": agent, **(seat_data(record) if record is not None else {})})
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


def seat_data(record: Seat, **extra: object) -> dict[str, object]:
    """The data of an error about a seat (who holds it, until when)."""
    return {"agent": record.agent, "current_epoch": record.epoch, "holder": record.holder,
            "expires_at": record.lease_expires_at, **extra}


@result
class SeatView(Result):
    """A seat as callers see it; ``token`` only in the answer to the session that took it."""

    agent: str
    epoch: int
    holder: str
    expires_at: str
    taken_at: str | None
    released_at: str | None
    token: str | None = field(default=None, metadata=OMIT_NONE)


def seat_view(record: Seat, token: str | None = None) -> SeatView:
    return SeatView(agent=record.agent, epoch=record.epoch, holder=record.holder, expires_at=record.lease_expires_at,
                    taken_at=record.taken_at, released_at=record.released_at, token=token)


def update_own_profile(ctx: Context, project_key: str, agent: str, seat: str | None,
                       describe: Callable[[str], str], *, card: bool = False, **fields: Any) -> str:
    """Set ``fields`` on the acting agent's own profile; nothing is committed if they already hold.

    The agent is checked like any writer (awake, seat not stale); a ``card``
    write (what it publishes about itself) also needs the editor role.
    Returns the agent's registered name; ``describe(name)`` is the commit line.
    """
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()

    def fn(snap: Snapshot) -> Change:
        profile = require_actor(snap, agent, seat, at=ctx.clock.now())
        if card:
            hierarchy.require_role(snap, profile, "editor", "publish its capability card")
        if all(getattr(profile, key) == value for key, value in fields.items()):
            return Change("no change", result=profile.name)
        updated = dataclasses.replace(profile, hlc=hlc, **fields)
        if card:
            updated.card_version = profile.card_version + 1  # the card changed: its next version
        return Change(describe(profile.name), author=profile.name, result=profile.name).put_record(updated)

    name: str = archive.transact(fn).result
    ctx.touch(project_key, name)
    return name


def check_until(until: object) -> str:
    if until not in SLEEP_UNTIL:
        raise invalid(f"until must be one of {', '.join(SLEEP_UNTIL)}: reply (a reply to one of its messages, or an "
                      "agent above it, wakes it) or woken (only an agent above it or the operator)", field="until")
    assert isinstance(until, str)
    return until


def sleep_decision(snap: Snapshot, actor: str | None, target: str, until: str, *, seat: str | None,
                   at: dt.datetime) -> tuple[Agent, Agent | None]:
    """Check that ``actor`` (None: the operator) may put ``target`` to sleep; return (target, actor) profiles.

    An agent may put itself or an agent below it to sleep.
    """
    check_until(until)
    profile = require_agent(snap, target, "target")
    if actor is None:
        return profile, None
    me = require_actor(snap, actor, seat, at=at)
    hierarchy.require_self_or_above(snap, me, profile, "put to sleep")
    return profile, me


def wake_decision(snap: Snapshot, actor: str | None, target: str, *, seat: str | None,
                  at: dt.datetime) -> tuple[Agent, Agent | None]:
    """Check that ``actor`` (None: the operator) may wake ``target``; return (target, actor) profiles.

    An agent above the target may wake it. The target may wake itself only
    from a sleep ``until=reply`` (it ends its own wait); one asleep
    ``until=woken`` waits for someone above it (WAKE_REFUSED).
    """
    profile = require_agent(snap, target, "target")
    if actor is None:
        return profile, None
    if check_agent_name(actor, "agent_name").lower() == profile.name.lower():
        require_agent(snap, actor, "agent_name", active=True)
        if profile.asleep and profile.sleep_until != "reply":
            raise GitmailError(WAKE_REFUSED, f"{profile.name} is asleep until woken: it cannot wake itself; an agent "
                               "above it, or the operator (gitmail wake), must wake it",
                               {"agent": profile.name, "until": profile.sleep_until or "woken"})
        check_seat(snap, profile.name, seat, at=at, lifecycle=profile.lifecycle)
        return profile, profile
    me = require_actor(snap, actor, seat, at=at)
    hierarchy.require_above(snap, me, profile, "wake")
    return profile, me


def woken_by_reply(snap: Snapshot, message: Message, recipients: list[str]) -> list[Agent]:
    """The recipients asleep ``until=reply`` whom ``message`` answers (it replies to a message they sent)."""
    if message.reply_to is None:
        return []
    original = snap.load(message_path(message.reply_to), Message)
    if original is None:
        return []
    out = []
    for name in recipients:
        if name.lower() != original.sender.lower():
            continue
        profile = find_agent(snap, name)
        if profile is not None and profile.asleep and profile.sleep_until == "reply":
            out.append(profile)
    return out
