"""Seats: which session drives an agent, fenced by a rising epoch.

An agent may be driven by one session at a time. ``take_seat`` hands that
session a seat token and a lease; every later write as the agent passes the
token. Taking the seat again (after a release, after the lease ran out, or by
``take_over``) raises the epoch, and a write carrying a token of an older epoch
is refused with ``STALE_EPOCH``, so a session that was replaced cannot
interleave its writes with its successor's. The seat is a record in the
archive (``agents/<Name>/seat.yaml``); the token itself is never stored, only
its hash. Taking a seat is a transaction like any other, so two processes
taking one free seat at once cannot both win.

:func:`require_actor` is the single check every write as an agent goes
through: the agent exists and is active, it is not asleep, and the seat token
(if the seat is held) is the current one.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
import secrets
from collections.abc import Callable
from typing import Any

from gitmail.model.clock import HLC, format_ts, parse_ts
from gitmail.model.errors import (
    AGENT_ASLEEP,
    AGENT_INACTIVE,
    NOT_FOUND,
    SEAT_HELD,
    STALE_EPOCH,
    UNAUTHORIZED,
    GitmailError,
    invalid,
)
from gitmail.model.limits import DEFAULT_LEASE_S, MAX_LEASE_S, MIN_LEASE_S
from gitmail.model.names import check_agent_name
from gitmail.model.records import Agent, Seat, agent_dir
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot
from gitmail.storage.store import Store

from .lookup import find_agent

_TOKEN_RE = re.compile(r"^seat-(\d{1,18})-[A-Za-z0-9_-]{16,64}$")


def seat_path(agent: str) -> str:
    return f"{agent_dir(agent)}/seat.yaml"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def load_agent(snapshot: Snapshot, name: str, field: str = "agent_name") -> Agent:
    """The profile of a registered agent, or NOT_FOUND saying how to register it."""
    check_agent_name(name, field)
    profile = find_agent(snapshot, name)
    if profile is None:
        raise GitmailError(NOT_FOUND, f"agent {name!r} is not registered in this project; "
                           "register it first (register_agent) or check the spelling", {"agent": name})
    return profile


def require_actor(snapshot: Snapshot, name: str, seat: str | None = None, *,
                  at: dt.datetime, field: str = "agent_name") -> Agent:
    """Check that ``name`` may write at ``at`` (now, by the store's clock); return its profile.

    Call this inside a transaction, so the check sees the state the write
    commits onto. Refuses an unknown or retired agent, an asleep agent
    (``AGENT_ASLEEP``), a write without the token while a session holds the
    seat (``SEAT_HELD``), and a token of an older epoch (``STALE_EPOCH``).
    """
    profile = load_agent(snapshot, name, field)
    if profile.status != "active":
        raise GitmailError(AGENT_INACTIVE, f"agent {name!r} is {profile.status} and cannot act; restore it with "
                           "unretire_agent or register a new agent", {"agent": name, "status": profile.status})
    return check_acting(snapshot, profile, seat, at=at)


def check_acting(snapshot: Snapshot, profile: Agent, seat: str | None = None, *,
                 at: dt.datetime) -> Agent:
    """The part of :func:`require_actor` that applies to any write as an agent: awake, and holding the seat."""
    if profile.asleep:
        raise GitmailError(AGENT_ASLEEP, f"agent {profile.name!r} is asleep: it keeps receiving mail but cannot act "
                           "until another agent or a human wakes it (wake_agent)", {"agent": profile.name})
    check_seat(snapshot, profile.name, seat, at=at)
    return profile


def _is_held(record: Seat | None, at: dt.datetime) -> bool:
    return record is not None and record.released_at is None and parse_ts(record.lease_expires_at) > at


def check_seat(snapshot: Snapshot, agent: str, seat: str | None, *, at: dt.datetime) -> Seat | None:
    """Validate a seat token (or its absence) for a write as ``agent`` at ``at``; return the seat record."""
    record = snapshot.load(seat_path(agent), Seat)
    if seat is None:
        if _is_held(record, at):
            assert record is not None
            raise GitmailError(SEAT_HELD, f"{agent}'s seat is held by {record.holder!r} (epoch {record.epoch}) "
                               f"until {record.lease_expires_at}; pass that session's seat token as 'seat', "
                               "or take the seat with take_over=true", _seat_data(record))
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
                           "take_seat again if this session should carry on", _seat_data(record, epoch=epoch))
    if token_hash(seat) != record.token_hash:
        raise GitmailError(UNAUTHORIZED, f"this seat token was not issued for {agent}; take_seat to get one",
                           {"agent": agent})
    if record.released_at is not None:
        raise GitmailError(STALE_EPOCH, f"seat epoch {epoch} for {agent} was given up at {record.released_at}; "
                           "take_seat again to act as this agent", _seat_data(record, epoch=epoch))
    return record


def _seat_data(record: Seat, **extra: Any) -> dict[str, Any]:
    return {"agent": record.agent, "current_epoch": record.epoch, "holder": record.holder,
            "expires_at": record.lease_expires_at, **extra}


def seat_view(record: Seat, token: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"agent": record.agent, "epoch": record.epoch, "holder": record.holder,
                           "expires_at": record.lease_expires_at, "taken_at": record.taken_at,
                           "released_at": record.released_at}
    if token is not None:
        out["token"] = token
    return out


def _lease(lease_s: object) -> int:
    if not isinstance(lease_s, int) or isinstance(lease_s, bool) or not MIN_LEASE_S <= lease_s <= MAX_LEASE_S:
        raise invalid(f"lease_s must be a whole number of seconds from {MIN_LEASE_S} to {MAX_LEASE_S}; got {lease_s!r}",
                      field="lease_s")
    return lease_s


def _holder(holder: object) -> str:
    if not isinstance(holder, str) or not holder.strip() or len(holder) > 200 or "\n" in holder:
        raise invalid("holder must name the session taking the seat in one line of at most 200 characters "
                      "(for example 'claude-code on laptop')", field="holder")
    return holder.strip()


def take_seat(store: Store, project: str, agent: str, *, holder: str = "session", lease_s: int = DEFAULT_LEASE_S,
              take_over: bool = False, journal_entries: int = 5) -> dict[str, Any]:
    """Become the session driving ``agent``; returns the token, the lease and the journal's end."""
    from .journal import tail

    check_agent_name(agent, "agent_name")
    lease = _lease(lease_s)
    holder = _holder(holder)
    archive = store.archive(project)
    secret = secrets.token_urlsafe(24)
    hlc = store.clock.tick()
    at = store.clock.now()

    def fn(snap: Snapshot) -> Change:
        profile = load_agent(snap, agent)
        agent_name = profile.name
        if profile.status != "active":
            raise GitmailError(AGENT_INACTIVE, f"agent {agent_name!r} is {profile.status}; its seat cannot be taken",
                               {"agent": agent_name})
        if profile.asleep:
            raise GitmailError(AGENT_ASLEEP,
                               f"agent {agent_name!r} is asleep; wake it (wake_agent) before taking its seat",
                               {"agent": agent_name})
        current = snap.load(seat_path(agent_name), Seat)
        if _is_held(current, at) and not take_over:
            assert current is not None
            raise GitmailError(SEAT_HELD, f"{agent_name}'s seat is held by {current.holder!r} until "
                               f"{current.lease_expires_at}; wait for the lease to end, or pass take_over=true "
                               "to replace that session (its next write will be refused)", _seat_data(current))
        epoch = (current.epoch if current else 0) + 1
        token = f"seat-{epoch}-{secret}"
        record = Seat(agent=agent_name, epoch=epoch, holder=holder,
                      lease_expires_at=format_ts(at + dt.timedelta(seconds=lease)), hlc=hlc,
                      taken_at=format_ts(at), token_hash=token_hash(token))
        verb = "taken over" if _is_held(current, at) else "taken"
        result = {"agent": agent_name, "seat": seat_view(record, token), "home": agent_dir(agent_name) + "/",
                  "journal": tail(snap, agent_name, journal_entries), "taken_over": verb == "taken over"}
        return Change(f"{agent_name}'s seat {verb} by {holder} (epoch {epoch})", author=agent_name,
                      result=result).put_record(record)

    return archive.transact(fn).result


def _with_held_seat(store: Store, project: str, agent: str, seat: str | None,
                    step: Callable[[str, Seat, dt.datetime, Any], Change]) -> dict[str, Any]:
    """Commit ``step(agent_name, seat_record, now, hlc)`` once the seat token is checked."""
    check_agent_name(agent, "agent_name")
    if seat is None:
        raise invalid("seat is required: pass the token take_seat returned", field="seat")
    archive = store.archive(project)
    hlc = store.clock.tick()
    at = store.clock.now()

    def fn(snap: Snapshot) -> Change:
        agent_name = load_agent(snap, agent).name
        record = check_seat(snap, agent_name, seat, at=at)
        assert record is not None
        return step(agent_name, record, at, hlc)

    return archive.transact(fn).result


def renew_seat(store: Store, project: str, agent: str, seat: str, *, lease_s: int = DEFAULT_LEASE_S) -> dict[str, Any]:
    """Extend the lease of the seat held with token ``seat``; never shortens it."""
    lease = _lease(lease_s)

    def step(agent_name: str, record: Seat, at: dt.datetime, hlc: HLC) -> Change:
        wanted = at + dt.timedelta(seconds=lease)
        if wanted <= parse_ts(record.lease_expires_at):
            return Change("seat lease already long enough", result={"agent": agent_name, "renewed": False,
                                                                      "seat": seat_view(record)})
        renewed = dataclasses.replace(record, lease_expires_at=format_ts(wanted), hlc=hlc)
        return Change(f"{agent_name} renewed its seat until {renewed.lease_expires_at}", author=agent_name,
                      result={"agent": agent_name, "renewed": True, "seat": seat_view(renewed)}).put_record(renewed)

    return _with_held_seat(store, project, agent, seat, step)


def release_seat(store: Store, project: str, agent: str, seat: str) -> dict[str, Any]:
    """Give up the seat held with token ``seat`` so the next session need not wait for the lease."""

    def step(agent_name: str, record: Seat, at: dt.datetime, hlc: HLC) -> Change:
        released = dataclasses.replace(record, released_at=format_ts(at), hlc=hlc)
        return Change(f"{agent_name} released its seat (epoch {record.epoch})", author=agent_name,
                      result={"agent": agent_name, "released": True, "seat": seat_view(released)}).put_record(released)

    return _with_held_seat(store, project, agent, seat, step)


def update_own_profile(store: Store, project: str, agent: str, seat: str | None,
                       describe: Callable[[str], str], **fields: Any) -> dict[str, Any]:
    """Set ``fields`` on the acting agent's own profile; nothing is committed if they already hold.

    The agent is checked like any writer (awake, seat not stale). Returns
    ``{"agent": name, **fields}``; ``describe(name)`` is the commit line.
    """
    archive = store.archive(project)
    hlc = store.clock.tick()

    def fn(snap: Snapshot) -> Change:
        profile = require_actor(snap, agent, seat, at=store.clock.now())
        result = {"agent": profile.name, **fields}
        if all(getattr(profile, key) == value for key, value in fields.items()):
            return Change("no change", result=result)
        updated = dataclasses.replace(profile, hlc=hlc, **fields)
        return Change(describe(profile.name), author=profile.name, result=result).put_record(updated)

    return archive.transact(fn).result


def seat_status(store: Store, project: str, agent: str) -> dict[str, Any]:
    """Who holds ``agent``'s seat now (read only)."""
    check_agent_name(agent, "agent_name")
    snap = store.archive(project).snapshot()
    agent = load_agent(snap, agent).name
    record = snap.load(seat_path(agent), Seat)
    if record is None:
        return {"agent": agent, "held": False, "seat": None}
    return {"agent": agent, "held": _is_held(record, store.clock.now()), "seat": seat_view(record)}


def set_asleep(store: Store, project: str, target: str, asleep: bool, *, actor: str | None = None,
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
    archive = store.archive(project)
    hlc = store.clock.tick()

    def fn(snap: Snapshot) -> Change:
        if actor is not None:
            require_actor(snap, actor, seat, at=store.clock.now())
        profile = load_agent(snap, target, "target")
        result = {"agent": profile.name, "asleep": asleep, "changed": profile.asleep != asleep}
        if profile.asleep == asleep:
            return Change("no change", result=result)
        updated = dataclasses.replace(profile, asleep=asleep, hlc=hlc)
        who = actor or "a human"
        text = f"{who} put {profile.name} to sleep" if asleep else f"{who} woke {profile.name}"
        return Change(text, author=actor, result=result).put_record(updated)

    return archive.transact(fn).result
