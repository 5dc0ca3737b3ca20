"""What needs a person's attention in a project: the overseer's dashboard, as typed values.

Acknowledgements owed (oldest first, so the most overdue lead), urgent mail
nobody has read, contact requests waiting for an answer, file reservations
about to run out, build slots held, and the overseer's own unread mail.
Each list is bounded (``limit``) and says when more were left out. Every
read is answered by the index or a small folder of the archive, and none
counts as an agent's activity, so looking does not change what is seen.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

from gitmail.coord import buildslots, reservations
from gitmail.coord.context import Context
from gitmail.coord.globs import covers
from gitmail.coord.lookup import find_agent, project_record
from gitmail.index import indexer_for
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import invalid
from gitmail.model.names import OVERSEER
from gitmail.model.records import CONTACTS

from .acksettings import AckSettings
from .contacts import contact_view, link_between

DEFAULT_LIMIT = 50
EXPIRING_WITHIN_SECONDS = 30 * 60
MAX_PATH = 1024
EVER = "9999-12-31T23:59:59.999Z"  # a bound past every message's time: the read is the same whatever the time


@dataclasses.dataclass(frozen=True)
class OwedAck:
    """``agent`` has not acknowledged ``message_id``, which asked for it; due ``due_ts`` (past when overdue)."""

    message_id: str
    subject: str
    sender: str
    agent: str
    sent_ts: str
    due_ts: str
    overdue_seconds: int  # negative while it is not due yet


@dataclasses.dataclass(frozen=True)
class UrgentUnread:
    message_id: str
    thread_id: str
    subject: str
    sender: str
    agent: str  # the recipient who has not read it
    sent_ts: str


@dataclasses.dataclass(frozen=True)
class PendingContact:
    requester: str  # ``Name``, or ``Name@slug`` for an agent of another project
    target: str
    reason: str
    requested_at: str
    expires_ts: str | None


@dataclasses.dataclass(frozen=True)
class ExpiringReservation:
    reservation_id: str
    agent: str
    path_pattern: str
    exclusive: bool
    expires_ts: str
    seconds_left: int


@dataclasses.dataclass(frozen=True)
class HeldSlot:
    slot: str
    agent: str
    epoch: int
    expires_ts: str
    stale: bool  # the lease ran out; the next acquire drops it


@dataclasses.dataclass(frozen=True)
class Bounded:
    """Up to ``limit`` items of a list and whether more were left out."""

    items: list[Any]
    more: bool


@dataclasses.dataclass(frozen=True)
class Attention:
    """Everything :func:`attention` gathers for one project."""

    slug: str
    human_key: str
    owed: Bounded
    urgent: Bounded
    contacts: Bounded
    expiring: Bounded
    slots: Bounded
    inbox: Bounded  # the overseer's unread mail (dicts as fetch_inbox gives them)

    @property
    def quiet(self) -> bool:
        """Nothing here needs anyone."""
        return not any(part.items for part in (self.owed, self.urgent, self.contacts, self.expiring, self.slots,
                                               self.inbox))


@dataclasses.dataclass(frozen=True)
class Delivery:
    """One recipient of a message: how it was addressed, and when it read and acknowledged the message."""

    agent: str
    kind: str  # "to", "cc" or "bcc"
    read_at: str | None
    acked_at: str | None
    delivered: bool  # a copy reached its inbox (not so while held for contact approval, or if it was retired)


def message_receipts(ctx: Context, project_key: str, message_ids: list[str], *,
                     viewer: str | None = None) -> dict[str, list[Delivery]]:
    """Each known message's recipients in the order addressed (to, then cc), with their receipts.

    Blind copies are listed only for the messages ``viewer`` sent, as only
    the sender's own copy shows them.
    """
    found = indexer_for(ctx.store).project(project_key).receipts(message_ids)
    out = {}
    for message_id, entry in found.items():
        delivered = entry["delivered"]
        kinds = [("to", name) for name in entry["to"]] + [("cc", name) for name in entry["cc"]]
        if viewer is not None and entry["from"] == viewer:
            kinds += [("bcc", name) for name in entry["bcc"]]
        seen: set[str] = set()
        rows = []
        for kind, name in kinds:
            if name in seen:
                continue
            seen.add(name)
            read_at, acked_at = delivered.get(name, (None, None))
            rows.append(Delivery(agent=name, kind=kind, read_at=read_at, acked_at=acked_at,
                                 delivered=name in delivered))
        out[message_id] = rows
    return out


def _bounded(items: list[Any], limit: int) -> Bounded:
    return Bounded(items[:limit], len(items) > limit)


def owed_acknowledgements(ctx: Context, project_key: str, settings: AckSettings, *,
                          limit: int = DEFAULT_LIMIT) -> Bounded:
    """Acknowledgements not given yet, oldest message first: the most overdue lead."""
    at = ctx.clock.now()
    rows = indexer_for(ctx.store).project(project_key).unacked(older_than=EVER, limit=limit + 1)  # kept per commit
    due = dt.timedelta(seconds=settings.ttl_seconds)
    return _bounded([OwedAck(message_id=r["id"], subject=r["subject"], sender=r["sender"], agent=r["agent"],
                             sent_ts=r["created_ts"], due_ts=format_ts(parse_ts(r["created_ts"]) + due),
                             overdue_seconds=int((at - parse_ts(r["created_ts"]) - due).total_seconds()))
                     for r in rows], limit)


def urgent_unread(ctx: Context, project_key: str, *, limit: int = DEFAULT_LIMIT) -> Bounded:
    """Urgent messages a recipient has not read, newest first, one entry per recipient."""
    rows = indexer_for(ctx.store).project(project_key).urgent_unread(limit=limit + 1)
    return _bounded([UrgentUnread(message_id=r["id"], thread_id=r["thread_id"], subject=r["subject"],
                                  sender=r["sender"], agent=r["agent"], sent_ts=r["created_ts"]) for r in rows], limit)


def pending_contacts(ctx: Context, project_key: str, *, limit: int = DEFAULT_LIMIT) -> Bounded:
    """Contact requests to agents of this project that nobody has answered and that have not lapsed, oldest first."""
    snap = ctx.archive(project_key).snapshot()
    at = ctx.clock.now_ts()
    found = []
    for requester in snap.listdir(CONTACTS):
        for name in snap.listdir(f"{CONTACTS}/{requester}"):
            link = link_between(snap, requester, name[: -len(".yaml")]) if name.endswith(".yaml") else None
            if link is None or link.status != "pending" or contact_view(link, at)["expired"]:
                continue
            found.append(PendingContact(requester=link.requester, target=link.target, reason=link.reason,
                                        requested_at=link.requested_at, expires_ts=link.expires_at))
    found.sort(key=lambda c: (c.requested_at, c.requester, c.target))
    return _bounded(found, limit)


def expiring_reservations(ctx: Context, project_key: str, *, within_seconds: int = EXPIRING_WITHIN_SECONDS,
                          limit: int = DEFAULT_LIMIT) -> Bounded:
    """Reservations in force that run out within ``within_seconds``, soonest first."""
    at = ctx.clock.now()
    snap = ctx.archive(project_key).snapshot()
    found = []
    for record in reservations.active(ctx, project_key, snap, at):
        left = int((parse_ts(record.expires_ts) - at).total_seconds())
        if left <= within_seconds:
            found.append(ExpiringReservation(reservation_id=record.id, agent=record.agent,
                                             path_pattern=record.path_pattern, exclusive=record.exclusive,
                                             expires_ts=record.expires_ts, seconds_left=left))
    found.sort(key=lambda r: (r.expires_ts, r.reservation_id))
    return _bounded(found, limit)


@dataclasses.dataclass(frozen=True)
class Holding:
    """A reservation in force that covers a file: who holds it, how, and until when."""

    reservation_id: str
    agent: str
    path_pattern: str
    exclusive: bool
    reason: str
    expires_ts: str


def holders_of(ctx: Context, project_key: str, path: str) -> list[Holding]:
    """Every reservation in force covering the file ``path``, by the glob rules the commit guard applies.

    Exclusive ones (which the guard would refuse a commit over) come first.
    """
    if not isinstance(path, str) or not path.strip() or len(path) > MAX_PATH or not path.isprintable():
        raise invalid(f"name a file by its path in the repository (at most {MAX_PATH} characters), "
                      "like src/db/schema.py", field="path")
    at = ctx.clock.now()
    found = [Holding(reservation_id=r.id, agent=r.agent, path_pattern=r.path_pattern, exclusive=r.exclusive,
                     reason=r.reason, expires_ts=r.expires_ts)
             for r in reservations.active(ctx, project_key, ctx.archive(project_key).snapshot(), at)
             if covers(r.path_pattern, path.strip())]
    return sorted(found, key=lambda h: (not h.exclusive, h.expires_ts, h.reservation_id))


def held_slots(ctx: Context, project_key: str, *, limit: int = DEFAULT_LIMIT) -> Bounded:
    """Every holding of a build slot, stale ones included (they still block until someone acquires)."""
    found = [HeldSlot(slot=slot.slot, agent=holder.agent, epoch=holder.epoch, expires_ts=holder.expires_ts,
                      stale=holder.stale)
             for slot in buildslots.list_slots(ctx, project_key, active_only=True).build_slots
             for holder in slot.holders]
    return _bounded(found, limit)


def overseer_unread(ctx: Context, project_key: str, *, limit: int = DEFAULT_LIMIT) -> Bounded:
    """The overseer's unread mail, newest first (nothing before the overseer first wrote)."""
    if find_agent(ctx.archive(project_key).snapshot(), OVERSEER) is None:
        return Bounded([], False)
    rows = indexer_for(ctx.store).project(project_key).inbox(OVERSEER, unread_only=True, limit=limit + 1)
    return _bounded(rows, limit)


LISTS = ("inbox", "owed", "urgent", "contacts", "expiring", "slots")  # the lists of :class:`Attention`


def one_list(ctx: Context, project_key: str, settings: AckSettings, which: str, *,
             limit: int = DEFAULT_LIMIT) -> Bounded:
    """One of the lists of :func:`attention` (named as its field, one of :data:`LISTS`), up to ``limit`` items."""
    if which == "owed":
        return owed_acknowledgements(ctx, project_key, settings, limit=limit)
    readers = {"inbox": overseer_unread, "urgent": urgent_unread, "contacts": pending_contacts,
               "expiring": expiring_reservations, "slots": held_slots}
    if which not in readers:
        raise invalid(f"the lists are {', '.join(LISTS)}, not {which[:40]!r}", field="which")
    return readers[which](ctx, project_key, limit=limit)


def attention(ctx: Context, project_key: str, settings: AckSettings, *, limit: int = DEFAULT_LIMIT) -> Attention:
    """Everything in one project that waits for someone, each list bounded by ``limit``."""
    key = project_record(ctx.archive(project_key).snapshot()).human_key
    return Attention(slug=ctx.slug(project_key), human_key=key,
                     owed=owed_acknowledgements(ctx, project_key, settings, limit=limit),
                     urgent=urgent_unread(ctx, project_key, limit=limit),
                     contacts=pending_contacts(ctx, project_key, limit=limit),
                     expiring=expiring_reservations(ctx, project_key, limit=limit),
                     slots=held_slots(ctx, project_key, limit=limit),
                     inbox=overseer_unread(ctx, project_key, limit=limit))
