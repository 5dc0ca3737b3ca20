"""Build slots: named, leased slots for scarce shared resources, fenced by epoch.

A build folder, a test database or a port range can serve one agent at a
time (an *exclusive* slot) or a few at once (a *shared* slot with at most
``max_holders``). An agent acquires the slot for a while and renews or
releases it; the terms are set by whoever acquires the slot while nobody
holds it. Like a file reservation, a holding is a lease that ends by itself;
like a seat, it is fenced: every grant takes the slot's next epoch, the
holder names its holding by that number, and once the holding is over
(released, or taken over after it went stale) renewing or releasing it is
refused with ``STALE_EPOCH``, so a replaced holder learns it before it
touches the resource again.

A stale holding is one whose lease ran out; the next acquire that finds it
drops it. ``force_release`` also takes a holding whose holder shows no
activity for a while (the signals file reservations use), and tells the
holder. Each slot is one record, ``build_slots/<slot>.yaml``; the merge rule
(:mod:`gitmail.sync.merge`) settles two machines granting one slot apart.
The commit guard knows nothing of slots: they guard resources, not files.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from dataclasses import field
from typing import Any, NotRequired, TypedDict, cast

from gitmail.model.clock import HLC, format_ts, parse_ts
from gitmail.model.errors import NOT_FOUND, SLOT_NOT_STALE, STALE_EPOCH, GitmailError, invalid
from gitmail.model.limits import (
    DEFAULT_INACTIVITY,
    DEFAULT_SLOT_EXTEND,
    DEFAULT_SLOT_TTL,
    MAX_TTL,
    MIN_INACTIVITY,
    MIN_TTL,
)
from gitmail.model.names import check_agent_name
from gitmail.model.records import (
    BUILD_SLOT_RE,
    BUILD_SLOTS,
    MAX_SLOT_HOLDERS,
    BuildSlot,
    Message,
    build_slot_path,
    inbox_path,
    message_path,
    outbox_path,
)
from gitmail.model.results import FLATTEN, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .acting import require_actor
from .context import Context
from .lookup import find_agent
from .reservations import archive_activity


def check_slot(slot: object) -> str:
    """The slot's name in its one spelling (lowercase), or INVALID_ARGUMENT saying what a name may hold."""
    name = slot.strip().lower() if isinstance(slot, str) else slot
    if not isinstance(name, str) or not BUILD_SLOT_RE.match(name):
        raise invalid(f"slot must name the resource in at most 64 lowercase letters, digits, '.', '_' or '-', "
                      f"starting with a letter or digit (for example 'build-dir' or 'test-db'); got {slot!r}",
                      field="slot")
    return name


def _seconds(value: object, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise invalid(f"{field} must be a whole number of seconds from {low} to {high}; got {value!r}", field=field)
    return value


class Stored(TypedDict):
    """One holding as the slot's record keeps it (the record's ``holders`` are these maps)."""

    agent: str
    epoch: int
    acquired_ts: str
    expires_ts: str
    reason: NotRequired[str]


def _holdings(record: BuildSlot | None) -> list[Stored]:
    """The record's holdings, typed as the record checker has already checked them."""
    return cast(list[Stored], record.holders) if record is not None else []

_RECORDED = list[dict[str, Any]]  # the type of the record's holders field, which these holdings are kept in

@result
class SlotHolding(Result):
    """A holding of a slot as answers show it: ``stale`` once its lease ran out."""

    agent: str
    epoch: int
    acquired_ts: str
    expires_ts: str
    reason: str
    stale: bool


@result
class SlotView(Result):
    """A slot as tools, resources and the web view show it."""

    slot: str
    exclusive: bool
    max_holders: int
    epoch: int
    holders: list[SlotHolding]
    in_use: bool


@result
class TakenOver(Result):
    """A stale holding an acquire dropped."""

    agent: str
    epoch: int


@result
class NewHolding(Result):
    """A holding an acquire granted: its epoch and lease, and the stale holdings it took over."""

    epoch: int
    expires_ts: str
    already_held: bool
    taken_over: list[TakenOver]


@result
class KeptHolding(Result):
    """A holding the agent had already: its epoch, and its lease (extended when the new one reached further)."""

    epoch: int
    already_held: bool
    expires_ts: str


@result
class Refusal(Result):
    """Why a slot took no holder now, who holds it, and when the first of them ends."""

    reason: str
    retry_after_ts: str
    holders: list[SlotHolding]


@result
class SlotAcquired(Result):
    """What an acquire got: ``granted`` with a new or kept holding, or a refusal; and the slot as it is now."""

    granted: bool
    slot: str
    new: NewHolding | None = field(default=None, metadata=FLATTEN)
    kept: KeptHolding | None = field(default=None, metadata=FLATTEN)
    refusal: Refusal | None = field(default=None, metadata=FLATTEN)
    build_slot: SlotView


@result
class SlotRenewed(Result):
    """A holding's lease extended."""

    slot: str
    epoch: int
    old_expires_ts: str
    expires_ts: str
    build_slot: SlotView


@result
class SlotReleased(Result):
    """A holding its holder ended."""

    slot: str
    epoch: int
    released: bool
    released_ts: str
    build_slot: SlotView


@result
class SlotForceReleased(Result):
    """A stale holding another agent ended, why, and the message that told the holder (None: not told)."""

    released: bool
    slot: str
    holder: str
    epoch: int
    reason: str
    notified: str | None
    build_slot: SlotView


@result
class SlotList(Result):
    """The build slots of a project."""

    build_slots: list[SlotView]


def _live(holding: Stored, at: dt.datetime) -> bool:
    return parse_ts(holding["expires_ts"]) > at


def holding_view(holding: Stored, at: dt.datetime) -> SlotHolding:
    return SlotHolding(agent=holding["agent"], epoch=holding["epoch"], acquired_ts=holding["acquired_ts"],
                       expires_ts=holding["expires_ts"], reason=holding.get("reason", ""),
                       stale=not _live(holding, at))


def view(record: BuildSlot, at: dt.datetime) -> SlotView:
    """A slot as tools, resources and the web view show it."""
    holders = [holding_view(h, at) for h in _holdings(record)]
    return SlotView(slot=record.slot, exclusive=record.exclusive, max_holders=record.max_holders, epoch=record.epoch,
                    holders=holders, in_use=any(not h.stale for h in holders))


def _find(record: BuildSlot | None, agent: str) -> Stored | None:
    return next((h for h in _holdings(record) if h["agent"] == agent), None)


def acquire(ctx: Context, project_key: str, agent: str, slot: str, *, ttl_seconds: int = DEFAULT_SLOT_TTL,
            exclusive: bool = True, max_holders: int | None = None, reason: str = "",
            seat: str | None = None) -> SlotAcquired:
    """Hold ``slot`` for ``ttl_seconds``; returns ``granted`` with the holding's ``epoch``, or who holds it.

    An agent that already holds the slot keeps its holding (its lease is
    extended to the new TTL when that reaches further). Holdings whose lease
    ran out are dropped, making room. A refusal (the slot is exclusive, or
    shared and full, or the terms differ) commits nothing.
    """
    check_agent_name(agent, "agent_name")
    name = check_slot(slot)
    ttl = _seconds(ttl_seconds, "ttl_seconds", MIN_TTL, MAX_TTL)
    if not isinstance(exclusive, bool):
        raise invalid("exclusive must be true or false", field="exclusive")
    if max_holders is not None and (not isinstance(max_holders, int) or isinstance(max_holders, bool)
                                    or not 1 <= max_holders <= MAX_SLOT_HOLDERS):
        raise invalid(f"max_holders must be from 1 to {MAX_SLOT_HOLDERS}; got {max_holders!r}", field="max_holders")
    if exclusive and max_holders not in (None, 1):
        raise invalid("an exclusive slot has one holder: leave max_holders out, or pass exclusive=false to share "
                      "the slot", field="max_holders")
    if not isinstance(reason, str) or len(reason) > 4096:
        raise invalid("reason must be text of at most 4096 characters", field="reason")
    limit = 1 if exclusive else (max_holders or MAX_SLOT_HOLDERS)
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()
    expires = format_ts(at + dt.timedelta(seconds=ttl))

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        record = snap.load(build_slot_path(name), BuildSlot)
        mine = _find(record, me)
        if record is not None and mine is not None and _live(mine, at):
            return _keep(record, mine, expires, hlc, at)
        holders = [h for h in _holdings(record) if _live(h, at)]
        dropped = [h for h in _holdings(record) if not _live(h, at)]
        if holders:
            assert record is not None
            refusal = _refusal(record, holders, exclusive, at)
            if refusal is not None:
                return Change("", result=refusal)
            terms = (record.exclusive, record.max_holders)
        else:
            terms = (exclusive, limit)
        epoch = (record.epoch if record else 0) + 1
        holding: Stored = {"agent": me, "epoch": epoch, "acquired_ts": format_ts(at), "expires_ts": expires}
        if reason:
            holding["reason"] = reason
        updated = BuildSlot(slot=name, epoch=epoch, hlc=hlc, exclusive=terms[0], max_holders=terms[1],
                            holders=cast(_RECORDED, [*holders, holding]))
        kind = "exclusive" if terms[0] else f"shared, at most {terms[1]}"
        text = f"{me} acquired build slot {name} ({kind}, epoch {epoch}, {ttl}s)"
        if dropped:
            text += "; stale holding(s) of " + ", ".join(h["agent"] for h in dropped) + " taken over"
        result = SlotAcquired(granted=True, slot=name, new=NewHolding(
            epoch=epoch, expires_ts=expires, already_held=False,
            taken_over=[TakenOver(agent=h["agent"], epoch=h["epoch"]) for h in dropped]), build_slot=view(updated, at))
        return Change(text, author=me, result=result).put_record(updated)

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def _keep(record: BuildSlot, mine: Stored, expires: str, hlc: HLC, at: dt.datetime) -> Change:
    """An agent acquiring a slot it holds: the same holding, its lease extended if the new one reaches further."""
    if parse_ts(expires) <= parse_ts(mine["expires_ts"]):
        kept = KeptHolding(epoch=mine["epoch"], already_held=True, expires_ts=mine["expires_ts"])
        return Change("", result=SlotAcquired(granted=True, slot=record.slot, kept=kept, build_slot=view(record, at)))
    updated = _with_holding(record, {**mine, "expires_ts": expires}, hlc)
    kept = KeptHolding(epoch=mine["epoch"], already_held=True, expires_ts=expires)
    return Change(f"{mine['agent']} extended its hold on build slot {record.slot} to {expires}", author=mine["agent"],
                  result=SlotAcquired(granted=True, slot=record.slot, kept=kept, build_slot=view(updated, at))
                  ).put_record(updated)


def _refusal(record: BuildSlot, holders: list[Stored], exclusive: bool, at: dt.datetime) -> SlotAcquired | None:
    """Why the slot cannot take one more holder now (as the result to return), or None when it can."""
    if record.exclusive:
        why = "held exclusively"
    elif exclusive:
        why = "shared by others, so it cannot be held exclusively until they release it"
    elif len(holders) >= record.max_holders:
        why = f"full: shared by at most {record.max_holders}"
    else:
        return None
    retry = min(h["expires_ts"] for h in holders)
    refusal = Refusal(reason=f"build slot {record.slot} is {why}", retry_after_ts=retry,
                      holders=[holding_view(h, at) for h in holders])
    return SlotAcquired(granted=False, slot=record.slot, refusal=refusal, build_slot=view(record, at))


def _with_holding(record: BuildSlot, holding: Stored | None, hlc: HLC, *,
                  without: str | None = None) -> BuildSlot:
    """``record`` with one holding replaced (or the one of agent ``without`` taken out)."""
    holders = []
    for h in _holdings(record):
        if holding is not None and h["agent"] == holding["agent"]:
            holders.append(holding)
        elif h["agent"] != without:
            holders.append(h)
    return dataclasses.replace(record, holders=cast(_RECORDED, holders), hlc=hlc)


def _held(snap: Snapshot, name: str, me: str, epoch: int) -> tuple[BuildSlot, Stored]:
    """The slot and ``me``'s holding at ``epoch``; STALE_EPOCH when that holding is over."""
    record = snap.load(build_slot_path(name), BuildSlot)
    if record is None:
        raise GitmailError(NOT_FOUND, f"no build slot {name!r} in this project; acquire_build_slot creates it",
                           {"slot": name})
    if epoch > record.epoch:
        raise invalid(f"epoch {epoch} was never granted for build slot {name} (its latest is {record.epoch}); "
                      "pass the epoch acquire_build_slot returned", field="epoch")
    mine = _find(record, me)
    if mine is None or mine["epoch"] != epoch:
        current = ", ".join(f"{h['agent']} (epoch {h['epoch']})" for h in record.holders) or "nobody"
        raise GitmailError(STALE_EPOCH, f"{me}'s hold on build slot {name} at epoch {epoch} is over: it was released, "
                           f"or taken over once its lease went stale; the slot is now held by {current}. Stop using "
                           "the resource, and acquire_build_slot again if you still need it; nothing was written",
                           {"slot": name, "epoch": epoch, "current_epoch": record.epoch,
                            "holders": [h["agent"] for h in record.holders]})
    return record, mine


def renew(ctx: Context, project_key: str, agent: str, slot: str, epoch: int, *,
          extend_seconds: int = DEFAULT_SLOT_EXTEND, seat: str | None = None) -> SlotRenewed:
    """Extend the holding ``epoch`` of ``slot`` from the later of now and its expiry; never shortens."""
    check_agent_name(agent, "agent_name")
    name = check_slot(slot)
    fence = _seconds(epoch, "epoch", 1, 2**62)
    extend = _seconds(extend_seconds, "extend_seconds", MIN_TTL, MAX_TTL)
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        record, mine = _held(snap, name, me, fence)
        start = max(at, parse_ts(mine["expires_ts"]))
        expires = format_ts(start + dt.timedelta(seconds=extend))
        updated = _with_holding(record, {**mine, "expires_ts": expires}, hlc)
        return Change(f"{me} renewed its hold on build slot {name} (epoch {fence}) until {expires}", author=me,
                      result=SlotRenewed(slot=name, epoch=fence, old_expires_ts=mine["expires_ts"], expires_ts=expires,
                                         build_slot=view(updated, at))).put_record(updated)

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def release(ctx: Context, project_key: str, agent: str, slot: str, epoch: int, *,
            seat: str | None = None) -> SlotReleased:
    """End the holding ``epoch`` of ``slot`` now, making room for the next holder."""
    check_agent_name(agent, "agent_name")
    name = check_slot(slot)
    fence = _seconds(epoch, "epoch", 1, 2**62)
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        record, _ = _held(snap, name, me, fence)
        updated = _with_holding(record, None, hlc, without=me)
        return Change(f"{me} released build slot {name} (epoch {fence})", author=me,
                      result=SlotReleased(slot=name, epoch=fence, released=True, released_ts=format_ts(at),
                                          build_slot=view(updated, at))).put_record(updated)

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def force_release(ctx: Context, project_key: str, agent: str, slot: str, holder: str, *, note: str = "",
                  notify_previous: bool = True, inactivity_seconds: int = DEFAULT_INACTIVITY,
                  seat: str | None = None) -> SlotForceReleased:
    """Take ``holder``'s stale holding out of ``slot`` and tell the holder.

    Stale means its lease ran out, or its holder shows no activity (mail,
    journal, seat, reservations, profile) for ``inactivity_seconds``;
    otherwise the call is refused with SLOT_NOT_STALE naming the latest
    activity. The holder's next renew or release fails with STALE_EPOCH.
    """
    check_agent_name(agent, "agent_name")
    check_agent_name(holder, "holder")
    name = check_slot(slot)
    threshold = _seconds(inactivity_seconds, "inactivity_seconds", MIN_INACTIVITY, MAX_TTL)
    if not isinstance(note, str) or len(note) > 4096:
        raise invalid("note must be text of at most 4096 characters", field="note")
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    at = ctx.clock.now()
    message_id = ctx.clock.new_id()

    def fn(snap: Snapshot) -> Change:
        me = require_actor(snap, agent, seat, at=at).name
        record = snap.load(build_slot_path(name), BuildSlot)
        theirs = next((h for h in _holdings(record) if h["agent"].lower() == holder.lower()), None)
        if record is None or theirs is None:
            raise GitmailError(NOT_FOUND, f"{holder} holds no build slot {name!r}; list the slots with the "
                               f"resource resource://build_slots/{{project_key}}", {"slot": name, "holder": holder})
        if theirs["agent"] == me:
            raise invalid("this holding is yours: release it with release_build_slot", field="holder")
        expired = not _live(theirs, at)
        gone = find_agent(snap, theirs["agent"]) is None  # a deleted holder shows no activity
        signals = [] if expired or gone else archive_activity(ctx, project_key, snap, theirs["agent"], at)
        latest = max(signals, key=lambda s: s[1]) if signals else None
        idle = (at - latest[1]).total_seconds() if latest else None
        if latest is not None and idle is not None and idle < threshold:
            raise GitmailError(SLOT_NOT_STALE, f"{theirs['agent']} is still active ({latest[0]} {int(idle)}s ago, "
                               f"threshold {threshold}s) and holds build slot {name} until {theirs['expires_ts']}; "
                               "ask it to release the slot instead",
                               {"slot": name, "holder": theirs["agent"], "signal": latest[0],
                                "last_activity": format_ts(latest[1]), "inactivity_seconds": threshold})
        why = "its lease had run out" if expired else (
            f"no activity for {int(idle)}s (last: {latest[0]})" if latest and idle is not None
            else "no recorded activity")
        updated = _with_holding(record, None, hlc, without=theirs["agent"])
        change = Change(f"{me} force-released {theirs['agent']}'s hold on build slot {name} "
                        f"(epoch {theirs['epoch']}): {why}", author=me).put_record(updated)
        notified = None
        if notify_previous:
            body = (f"{me} released your hold on build slot `{name}` (epoch {theirs['epoch']}) because {why}.\n")
            if note:
                body += f"\n{note}\n"
            body += "\nStop using the resource; acquire the slot again if you still need it.\n"
            message = Message(id=message_id, thread_id=message_id, sender=me, to=[theirs["agent"]],
                              subject=f"Build slot released: {name}", created_ts=format_ts(at), body=body)
            data = message.to_bytes()
            change.put(message_path(message_id), data).put(inbox_path(theirs["agent"], message_id), data)
            change.put(outbox_path(me, message_id), data)
            notified = message_id
        change.result = SlotForceReleased(released=True, slot=name, holder=theirs["agent"], epoch=theirs["epoch"],
                                          reason=why, notified=notified, build_slot=view(updated, at))
        return change

    result = archive.transact(fn).result
    ctx.touch(project_key, agent)
    return result


def list_slots(ctx: Context, project_key: str, *, active_only: bool = False) -> SlotList:
    """Every build slot of the project with its holders (``active_only``: those someone holds now)."""
    snap = ctx.archive(project_key).snapshot()
    at = ctx.clock.now()
    slots = []
    for entry in sorted(snap.listdir(BUILD_SLOTS)):
        if not entry.endswith(".yaml"):
            continue
        record = snap.load(f"{BUILD_SLOTS}/{entry}", BuildSlot)
        if record is None:
            continue
        shown = view(record, at)
        if active_only and not shown.in_use:
            continue
        slots.append(shown)
    return SlotList(build_slots=slots)
