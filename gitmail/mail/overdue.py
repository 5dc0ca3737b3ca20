"""Overdue acknowledgements: finding them, and escalating each one once.

A message that asks for an acknowledgement is *overdue* for a recipient who
has not acknowledged it ``ttl_seconds`` after it was sent. A scan finds every
such pair in a project (candidates from the index, each confirmed in the
archive) and, when escalation is on, writes one :class:`Escalation` record
per pair. In ``log`` mode the record (and a line in the server's log) is the
whole report; in ``claim`` mode the same commit files a reservation for the
operations agent named in the settings and puts a notice in its inbox.

Nothing is remembered between scans but the records themselves: a pair is
escalated when no record sits at its path (keyed on the message and the
recipient), checked inside the transaction, so a restart, a second process
or a second machine never escalates it twice. The reservation's and the
notice's IDs are derived from the message, the recipient and the due time,
and the notice's bytes from the same facts, so two machines that escalate
the same pair apart write the same files: after a sync there is one of each
(the reservation merges by its clock, the escalation record by its rule).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import re
from typing import Any

import pygit2

from gitmail.coord.context import Context
from gitmail.coord.lookup import find_agent
from gitmail.index import indexer_for
from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import GitmailError
from gitmail.model.ids import derived_id
from gitmail.model.records import (
    Escalation,
    Message,
    Receipt,
    Record,
    Reservation,
    escalation_path,
    inbox_path,
    message_path,
    outbox_path,
    placed,
    receipt_path,
    reservation_path,
)
from gitmail.model.results import Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot, blob_in, tree_layout

from .acksettings import AckSettings

_log = logging.getLogger("gitmail.acks")
SCAN_BATCH = 500
MAX_ESCALATIONS = 100  # per project and scan; the rest wait for the next scan


@result
class OverduePair(Result):
    """A message and a recipient that owes its acknowledgement: who sent what, when, and when it was due."""

    message_id: str
    agent: str
    sender: str
    subject: str
    sent_ts: str
    due_ts: str


@result
class OverdueAck(OverduePair):
    """One recipient that has not acknowledged a message past the TTL, and whether that was escalated."""

    overdue_seconds: int
    escalated: bool


@result
class EscalationView(OverduePair):
    """An escalation as the scan reports it: the overdue pair, and how (log or claim) and where it was raised."""

    escalated_ts: str
    mode: str
    holder: str | None
    claim_id: str | None
    notice_id: str | None
    node: str | None


@result
class OverdueScan(Result):
    """One scan of a project: what is overdue, what this scan escalated, and whether the claim holder was missing."""

    project: str
    checked_at: str
    ttl_seconds: int
    escalation: str
    overdue: list[OverdueAck]
    escalated: list[EscalationView]
    holder_missing: bool


def _due(created_ts: str, settings: AckSettings) -> dt.datetime:
    return parse_ts(created_ts) + dt.timedelta(seconds=settings.ttl_seconds)


def find_overdue(ctx: Context, project_key: str, settings: AckSettings, *, at: dt.datetime) -> list[OverdueAck]:
    """Every (message, recipient) pair overdue at ``at``, oldest first, each saying whether it was escalated."""
    cutoff = format_ts(at - dt.timedelta(seconds=settings.ttl_seconds))
    index = indexer_for(ctx.store).project(project_key)
    snap = ctx.archive(project_key).snapshot()
    found: list[OverdueAck] = []
    after: tuple[str, str, str] | None = None
    while True:
        rows = index.unacked(older_than=cutoff, after=after, limit=SCAN_BATCH)
        for row in rows:
            due = _due(row["created_ts"], settings)
            found.append(OverdueAck(message_id=row["id"], agent=row["agent"], sender=row["sender"],
                                    subject=row["subject"], sent_ts=row["created_ts"], due_ts=format_ts(due),
                                    overdue_seconds=int((at - due).total_seconds()),
                                    escalated=snap.exists(escalation_path(row["id"], row["agent"]))))
        if len(rows) < SCAN_BATCH:
            return found
        last = rows[-1]
        after = (last["created_ts"], last["id"], last["agent"])


def scan(ctx: Context, project_key: str, settings: AckSettings) -> OverdueScan:
    """Find the project's overdue acknowledgements and, when escalation is on, escalate the new ones."""
    at = ctx.clock.now()
    found = find_overdue(ctx, project_key, settings, at=at)
    written: list[EscalationView] = []
    holder_missing = False
    pending = [item for item in found if not item.escalated][:MAX_ESCALATIONS]
    if settings.escalation_enabled and pending:
        written, holder_missing = escalate(ctx, project_key, settings, pending, at=at)
        done = {(e.message_id, e.agent) for e in written}
        found = [dataclasses.replace(item, escalated=True) if (item.message_id, item.agent) in done else item
                 for item in found]
    return OverdueScan(project=project_key, checked_at=format_ts(at), ttl_seconds=settings.ttl_seconds,
                       escalation=settings.escalation_mode if settings.escalation_enabled else "off",
                       overdue=found, escalated=written, holder_missing=holder_missing)


def escalate(ctx: Context, project_key: str, settings: AckSettings, pending: list[OverdueAck], *,
             at: dt.datetime) -> tuple[list[EscalationView], bool]:
    """Write an escalation for each pair of ``pending`` that still needs one; returns them and whether the
    operations agent was missing (its claims then fall back to ``log``)."""
    archive = ctx.archive(project_key)
    hlc = ctx.tick()
    node = ctx.store.node

    def fn(snap: Snapshot) -> Change:
        change = Change("")
        holder = find_agent(snap, settings.claim_holder) if settings.claims and settings.claim_holder else None
        if holder is not None and holder.status != "active":
            holder = None
        records = []
        for item in pending:
            record = _escalation(snap, settings, item, at=at, node=node, holder=holder.name if holder else None)
            if record is None:
                continue
            change.put_record(record)
            if record.mode == "claim":
                _claim(change, snap, settings, record, at=at, hlc=hlc)
            records.append(record)
        mode = "claim" if holder is not None else "log"
        change.message = (f"escalated {len(records)} overdue acknowledgement(s) ({mode}) on {node}" if records
                          else "")
        change.result = (records, settings.claims and holder is None)
        return change

    records, holder_missing = archive.transact(fn).result
    for record in records:
        _log.warning("overdue acknowledgement in %s: %s has not acknowledged %s (%r from %s, due %s); escalated (%s%s)",
                     project_key, record.agent, record.message_id, record.subject, record.sender, record.due_ts,
                     record.mode, f" to {record.holder}" if record.holder else "")
    if holder_missing and records:
        _log.warning("overdue acknowledgements in %s were only logged: the operations agent %s is not an active "
                     "agent of the project; register it there", project_key, settings.claim_holder)
    return [escalation_view(record) for record in records], holder_missing


def _escalation(snap: Snapshot, settings: AckSettings, item: OverdueAck, *, at: dt.datetime, node: str,
                holder: str | None) -> Escalation | None:
    """The record for one pending pair, or None when it needs none (already escalated, acknowledged, gone)."""
    message_id, agent = item.message_id, item.agent
    if snap.exists(escalation_path(message_id, agent)) or not snap.exists(inbox_path(agent, message_id)):
        return None
    message = snap.load(message_path(message_id), Message)
    if message is None or not message.ack_required:
        return None
    receipt = snap.load(receipt_path(agent, message_id), Receipt)
    if receipt is not None and receipt.acked_at:
        return None
    due = _due(message.created_ts, settings)
    if due > at:
        return None
    record = Escalation(message_id=message_id, agent=agent, sender=message.sender, subject=message.subject,
                        sent_ts=message.created_ts, due_ts=format_ts(due), escalated_ts=format_ts(at),
                        mode="claim" if holder else "log", node=node)
    if holder:
        due_ms = int(due.timestamp() * 1000)
        record.holder = holder
        record.claim_id = derived_id(due_ms, f"ack-escalation-claim {message_id} {agent}".encode())
        record.notice_id = derived_id(due_ms, f"ack-escalation-notice {message_id} {agent}".encode())
    return record


def _claim(change: Change, snap: Snapshot, settings: AckSettings, record: Escalation, *, at: dt.datetime,
           hlc: Any) -> None:
    """The reservation and the notice a ``claim`` escalation files for its holder."""
    assert record.holder and record.claim_id and record.notice_id
    pattern = inbox_path(record.agent, record.message_id)
    if not snap.exists(reservation_path(record.claim_id)):
        change.put_record(Reservation(
            id=record.claim_id, agent=record.holder, path_pattern=pattern, created_ts=format_ts(at),
            expires_ts=format_ts(at + dt.timedelta(seconds=settings.claim_ttl_seconds)), hlc=hlc,
            exclusive=settings.claim_exclusive,
            reason=f"overdue acknowledgement: {record.agent} has not acknowledged {record.message_id}"))
    notice = notice_of(record)
    data = notice.to_bytes()
    change.put(message_path(notice.id), data).put(inbox_path(record.holder, notice.id), data)
    change.put(outbox_path(record.holder, notice.id), data)


def notice_of(record: Escalation) -> Message:
    """The notice a ``claim`` escalation files for its holder: built from the record alone, the same everywhere."""
    assert record.holder and record.claim_id and record.notice_id
    pattern = inbox_path(record.agent, record.message_id)
    body = (f"{record.agent} has not acknowledged message `{record.message_id}` from {record.sender}, "
            f"\"{record.subject}\", sent {record.sent_ts} and due {record.due_ts}.\n\n"
            f"This escalation filed reservation `{record.claim_id}` on `{pattern}` for you. Follow it up with "
            f"{record.agent}, then release the reservation.\n")
    return Message(id=record.notice_id, thread_id=record.notice_id, sender=record.holder, to=[record.holder],
                   subject=f"Overdue acknowledgement: {record.agent} on {record.subject}"[:200],
                   created_ts=record.due_ts, importance="high", body=body)


_ESCALATED = re.compile(r"^(\S+) has not acknowledged message `([0-9a-z]{23})`")


def is_escalation_filing(repo: pygit2.Repository, tree: pygit2.Tree, record: Record) -> bool:
    """Whether ``record`` is the notice or the claim a ``claim`` escalation in ``tree`` filed (any node may)."""
    if isinstance(record, Message):
        found = _ESCALATED.match(record.body)
        escalation = _escalation_in(tree, found.group(2), found.group(1)) if found else None
        return (escalation is not None and escalation.notice_id == record.id
                and notice_of(escalation).to_bytes() in (record.to_bytes(), record.public_copy().to_bytes()))
    if isinstance(record, Reservation) and record.reason.startswith("overdue acknowledgement: "):
        words = record.reason.split()
        escalation = _escalation_in(tree, words[-1], words[2]) if len(words) >= 6 else None
        return (escalation is not None and escalation.claim_id == record.id and escalation.holder == record.agent
                and record.path_pattern == inbox_path(escalation.agent, escalation.message_id)
                and record.created_ts == escalation.escalated_ts)
    return False


def _escalation_in(tree: pygit2.Tree, message_id: str, agent: str) -> Escalation | None:
    try:
        path = placed(escalation_path(message_id, agent), tree_layout(tree))
        blob = blob_in(tree, path)
        return Escalation.from_bytes(blob.data, path) if blob is not None else None
    except GitmailError:
        return None


def escalation_view(record: Escalation) -> EscalationView:
    """An escalation as the scan and the tools report it."""
    return EscalationView(message_id=record.message_id, agent=record.agent, sender=record.sender,
                          subject=record.subject, sent_ts=record.sent_ts, due_ts=record.due_ts,
                          escalated_ts=record.escalated_ts, mode=record.mode, holder=record.holder,
                          claim_id=record.claim_id, notice_id=record.notice_id, node=record.node)
