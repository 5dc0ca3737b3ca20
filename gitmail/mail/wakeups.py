"""Wake-ups: what an agent was waiting for, resolved by the records a new tip brought.

An agent that stops working until something happens (it sleeps until a
reply, it sent a message asking for an acknowledgement, it asked to write to
someone) is woken when that thing arrives. This module answers which wake-ups
the records between two commits of a project make, whoever wrote them: this
machine, or another one whose records a sync brought in. Each wake-up is:

- ``reply``: a message replying to one the agent sent, written by someone else;
- ``ack``: an acknowledgement of a message the agent sent with
  ``ack_required``, by one of its recipients;
- ``contact_approved``: the agent's contact request, approved by its target.

A reservation is granted or refused at once (nothing queues for one), so
there is no granted reservation to wait for.

A wake-up never carries a message's subject or body: only what it is, for
whom, the record that resolved it, its thread and who wrote it; the agent
reads the rest with its tools, under the usual checks. Its ``id`` is the same
wherever and however often the same record is seen, so whoever delivers it
can deliver it at most once.
"""

from __future__ import annotations

import hashlib

import pygit2

from gitmail.coord.context import Context
from gitmail.model.errors import GitmailError
from gitmail.model.records import Contact, Message, Receipt, classify, message_path
from gitmail.model.results import Result, result
from gitmail.storage.layout import changed_records
from gitmail.storage.snapshot import Snapshot


@result
class WakeEvent(Result):
    """One thing an agent waited for, resolved; never with a body (the agent reads it with its tools)."""

    id: str
    kind: str  # reply, ack or contact_approved
    project: str
    agent: str
    record_id: str
    thread_id: str | None
    by: str


def event_id(slug: str, agent: str, kind: str, record_id: str, by: str) -> str:
    """The stable ID of one wake-up: the same on every machine and each time its record is seen."""
    digest = hashlib.sha256("\0".join((slug, agent.lower(), kind, record_id, by.lower())).encode()).hexdigest()
    return "evt_" + digest[:32]


def _tree(repo: pygit2.Repository, commit: str | None) -> pygit2.Tree | None:
    if commit is None:
        return None
    try:
        obj = repo[commit]
    except (KeyError, ValueError):
        return None
    return obj.peel(pygit2.Tree)


def wake_events(ctx: Context, project_key: str, since: str | None, until: str) -> list[WakeEvent]:
    """The wake-ups made by the records that changed from commit ``since`` to commit ``until``.

    ``since`` None (or a commit this archive does not hold) finds none: a
    first look only learns where the project stands, so a server that starts
    never wakes anyone for what happened long ago.
    """
    archive = ctx.archive(project_key)
    base, new = _tree(archive.repo, since), _tree(archive.repo, until)
    if base is None or new is None:
        return []
    before, after = archive.snapshot(since), archive.snapshot(until)
    slug = ctx.slug(project_key)
    found: list[WakeEvent] = []
    for path, blob in changed_records(base, new).items():
        kind = classify(path)
        if blob is None or kind is None or kind[0] not in ("message", "receipt", "contact"):
            continue
        try:
            record = kind[1].from_bytes(archive.repo[blob].peel(pygit2.Blob).data, path) if kind[1] else None
            event = _resolved(slug, record, before, after)
        except GitmailError:
            continue  # a record that does not parse wakes nobody; fsck and the checker report it
        if event is not None and all(e.id != event.id for e in found):
            found.append(event)
    return found


def _resolved(slug: str, record: object, before: Snapshot, after: Snapshot) -> WakeEvent | None:
    """The wake-up ``record`` (new or changed at ``after``) makes, if any."""
    if isinstance(record, Message) and record.reply_to:
        original = after.peek(message_path(record.reply_to), Message)
        if original is None or _remote(original.sender) or original.sender.lower() == record.sender.lower():
            return None
        return _event(slug, "reply", original.sender, record.id, record.thread_id, record.sender)
    if isinstance(record, Receipt) and record.acked_at:
        old = before.peek(record.path(), Receipt)
        asked = after.peek(message_path(record.message_id), Message)
        if (old is not None and old.acked_at) or asked is None or not asked.ack_required or _remote(asked.sender):
            return None
        return _event(slug, "ack", asked.sender, record.message_id, asked.thread_id, record.agent)
    if isinstance(record, Contact) and record.status == "approved" and not _remote(record.requester):
        old_link = before.peek(record.path(), Contact)
        if old_link is not None and old_link.status == "approved":
            return None
        return _event(slug, "contact_approved", record.requester, f"{record.requester}->{record.target}", None,
                      record.target)
    return None


def _remote(address: str) -> bool:
    """Whether ``address`` names an agent of another project (``Name@<slug>``), woken by its own server."""
    return "@" in address


def _event(slug: str, kind: str, agent: str, record_id: str, thread_id: str | None, by: str) -> WakeEvent:
    return WakeEvent(id=event_id(slug, agent, kind, record_id, by), kind=kind, project=slug, agent=agent,
                     record_id=record_id, thread_id=thread_id, by=by)
