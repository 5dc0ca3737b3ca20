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

Every write as an agent checks the seat token it carries through
:func:`gitmail.coord.acting.require_actor`.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import secrets
from collections.abc import Callable
from typing import Any

from gitmail.model.clock import HLC, format_ts, parse_ts
from gitmail.model.errors import AGENT_ASLEEP, AGENT_INACTIVE, SEAT_HELD, GitmailError, invalid
from gitmail.model.limits import DEFAULT_LEASE_S, MAX_LEASE_S, MIN_LEASE_S
from gitmail.model.names import check_agent_name
from gitmail.model.records import Seat, agent_dir, seat_path
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .acting import SeatView, check_seat, is_held, seat_data, seat_view, token_hash
from .context import Context
from .journal import JournalView, tail
from .loads import Loaded, handed
from .lookup import require_agent


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


@result
class SeatTaken(Result):
    """A seat taken: the token and lease, the agent's home folder, the end of its journal, and what it loads.

    ``loads`` holds the memory files and skill names of the folders the
    agent loads (:mod:`.loads`): read them, with the journal, before carrying on.
    """

    agent: str
    seat: SeatView
    home: str
    journal: list[JournalView]
    taken_over: bool
    loads: Loaded


@result
class SeatRenewal(Result):
    """A lease renewed (``renewed`` false: it already ran as long)."""

    agent: str
    renewed: bool
    seat: SeatView


@result
class SeatRelease(Result):
    """A seat given up before its lease ended."""

    agent: str
    released: bool
    seat: SeatView


@result
class SeatStatus(Result):
    """Who holds an agent's seat (``seat`` None: it was never taken)."""

    agent: str
    held: bool
    seat: SeatView | None


def take_seat(ctx: Context, project_key: str, agent: str, *, holder: str = "session",
              lease_s: int = DEFAULT_LEASE_S, take_over: bool = False, journal_entries: int = 5) -> SeatTaken:
    """Become the session driving ``agent``; returns the token, the lease and the journal's end."""
    check_agent_name(agent, "agent_name")
    lease = _lease(lease_s)
    holder = _holder(holder)
    archive = ctx.archive(project_key)
    secret = secrets.token_urlsafe(24)
    hlc = ctx.clock.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        profile = require_agent(snap, agent)
        agent_name = profile.name
        if profile.status != "active":
            raise GitmailError(AGENT_INACTIVE, f"agent {agent_name!r} is {profile.status}; its seat cannot be taken",
                               {"agent": agent_name})
        if profile.asleep:
            raise GitmailError(AGENT_ASLEEP,
                               f"agent {agent_name!r} is asleep; wake it (wake_agent) before taking its seat",
                               {"agent": agent_name})
        current = snap.load(seat_path(agent_name), Seat)
        if is_held(current, at) and not take_over:
            assert current is not None
            raise GitmailError(SEAT_HELD, f"{agent_name}'s seat is held by {current.holder!r} until "
                               f"{current.lease_expires_at}; wait for the lease to end, or pass take_over=true "
                               "to replace that session (its next write will be refused)", seat_data(current))
        epoch = (current.epoch if current else 0) + 1
        token = f"seat-{epoch}-{secret}"
        record = Seat(agent=agent_name, epoch=epoch, holder=holder,
                      lease_expires_at=format_ts(at + dt.timedelta(seconds=lease)), hlc=hlc,
                      taken_at=format_ts(at), token_hash=token_hash(token))
        verb = "taken over" if is_held(current, at) else "taken"
        taken = functools.partial(SeatTaken, agent=agent_name, seat=seat_view(record, token),
                                  home=agent_dir(agent_name) + "/", journal=tail(snap, agent_name, journal_entries),
                                  taken_over=verb == "taken over")
        return Change(f"{agent_name}'s seat {verb} by {holder} (epoch {epoch})", author=agent_name,
                      result=(taken, profile)).put_record(record)

    taken, profile = archive.transact(fn).result
    ctx.touch(project_key, profile.name)
    return taken(loads=handed(archive.snapshot(), profile))  # the folders are read outside the archive's lock


def _with_held_seat(ctx: Context, project_key: str, agent: str, seat: str | None,
                    step: Callable[[str, Seat, dt.datetime, Any], Change]) -> Any:
    """Commit ``step(agent_name, seat_record, now, hlc)`` once the seat token is checked."""
    check_agent_name(agent, "agent_name")
    if seat is None:
        raise invalid("seat is required: pass the token take_seat returned", field="seat")
    archive = ctx.archive(project_key)
    hlc = ctx.clock.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        agent_name = require_agent(snap, agent).name
        record = check_seat(snap, agent_name, seat, at=at)
        assert record is not None
        return step(agent_name, record, at, hlc)

    result = archive.transact(fn).result
    ctx.touch(project_key, result.agent)
    return result


def renew_seat(ctx: Context, project_key: str, agent: str, seat: str, *,
               lease_s: int = DEFAULT_LEASE_S) -> SeatRenewal:
    """Extend the lease of the seat held with token ``seat``; never shortens it."""
    lease = _lease(lease_s)

    def step(agent_name: str, record: Seat, at: dt.datetime, hlc: HLC) -> Change:
        wanted = at + dt.timedelta(seconds=lease)
        if wanted <= parse_ts(record.lease_expires_at):
            return Change("seat lease already long enough",
                          result=SeatRenewal(agent=agent_name, renewed=False, seat=seat_view(record)))
        renewed = dataclasses.replace(record, lease_expires_at=format_ts(wanted), hlc=hlc)
        return Change(f"{agent_name} renewed its seat until {renewed.lease_expires_at}", author=agent_name,
                      result=SeatRenewal(agent=agent_name, renewed=True, seat=seat_view(renewed))).put_record(renewed)

    renewal: SeatRenewal = _with_held_seat(ctx, project_key, agent, seat, step)
    return renewal


def release_seat(ctx: Context, project_key: str, agent: str, seat: str) -> SeatRelease:
    """Give up the seat held with token ``seat`` so the next session need not wait for the lease."""

    def step(agent_name: str, record: Seat, at: dt.datetime, hlc: HLC) -> Change:
        released = dataclasses.replace(record, released_at=format_ts(at), hlc=hlc)
        return Change(f"{agent_name} released its seat (epoch {record.epoch})", author=agent_name,
                      result=SeatRelease(agent=agent_name, released=True,
                                         seat=seat_view(released))).put_record(released)

    release: SeatRelease = _with_held_seat(ctx, project_key, agent, seat, step)
    return release


def seat_status(ctx: Context, project_key: str, agent: str) -> SeatStatus:
    """Who holds ``agent``'s seat now (read only)."""
    check_agent_name(agent, "agent_name")
    snap = ctx.archive(project_key).snapshot()
    agent = require_agent(snap, agent).name
    record = snap.load(seat_path(agent), Seat)
    if record is None:
        return SeatStatus(agent=agent, held=False, seat=None)
    return SeatStatus(agent=agent, held=is_held(record, ctx.clock.now()), seat=seat_view(record))
