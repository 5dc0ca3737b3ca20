"""The second half of a cross-project send: the copy in the other project's archive.

A message to an agent of another project takes two commits in two
repositories, each its own compare-and-swap, in this order:

1. **The sender's archive** (one transaction, by :mod:`gitmail.mail.sending`):
   the message, its outbox and local inbox copies, and one
   :class:`~gitmail.model.records.Relay` record per other project
   (``relays/<slug>/YYYY/MM/DD/<id>.yaml``), which says that copy is owed.
   Once this commit is in, the send has happened.
2. **Each other project's archive** (:func:`deliver`): the message under the
   *same id*, as that archive names its parties
   (:func:`gitmail.mail.addresses.view_in`), with the inbox copies of its
   recipients and the attachments it names; then ``delivered_at`` is set on
   the relay record in the sender's archive.

A process that dies between the two leaves a relay without
``delivered_at``: :func:`recover` completes it at the next start of the
server and after every sync. The copy is a pure function of the sender's
message, and step 2 writes it only when the message's path is empty, so a
copy is never lost (the relay stays until the copy is there) and never
doubled (a second completion, on this machine or on another one that
synced the relay, finds it or writes the same bytes at the same path).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import field

from gitmail.coord.context import Context
from gitmail.coord.lookup import project_record
from gitmail.model.errors import GitmailError
from gitmail.model.records import RELAYS, Message, Relay, message_path, relay_path
from gitmail.model.results import OMIT_NONE, Result, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot

from .addresses import view_in
from .delivery import commit_line, put_message

# Called between the two commits with (sender's slug, message id): a test's way to stop a process exactly there.
FAULT_HOOK: Callable[[str, str], None] | None = None


@result
class RelayOutcome(Result):
    """How one copy owed to another project went: ``written`` now (or before), or ``reason`` it is still owed.

    ``from_slug`` names the sending project when a recovery across the store completed it.
    """

    project_slug: str
    message_id: str
    delivered: bool
    written: bool | None = field(default=None, metadata=OMIT_NONE)
    reason: str | None = field(default=None, metadata=OMIT_NONE)
    from_slug: str | None = field(default=None, metadata=OMIT_NONE)


def owed(snap: Snapshot, message_id: str) -> list[Relay]:
    """The relay records of one message in the sender's archive."""
    out = []
    for slug in snap.listdir(RELAYS):
        relay = snap.load(relay_path(slug, message_id), Relay)
        if relay is not None:
            out.append(relay)
    return out


def deliver(ctx: Context, source: str, message_id: str) -> list[RelayOutcome]:
    """Complete the copies one message still owes to other projects; one outcome per project."""
    if FAULT_HOOK is not None:
        FAULT_HOOK(source, message_id)
    snap = ctx.archive(source).snapshot()
    outcomes = []
    for relay in owed(snap, message_id):
        try:
            outcomes.append(_complete(ctx, source, snap, relay))
        except GitmailError as exc:  # the send stands; the relay stays owed and the next start or sync retries it
            outcomes.append(RelayOutcome(project_slug=relay.project, message_id=message_id, delivered=False,
                                         reason=exc.message))
    return outcomes


def _complete(ctx: Context, source: str, snap: Snapshot, relay: Relay) -> RelayOutcome:
    def outcome(*, delivered: bool, written: bool | None = None, reason: str | None = None) -> RelayOutcome:
        return RelayOutcome(project_slug=relay.project, message_id=relay.message_id, delivered=delivered,
                            written=written, reason=reason)

    if relay.delivered_at is not None:
        return outcome(delivered=True, written=False)
    if not ctx.store.exists(relay.project):
        return outcome(delivered=False, reason="the project is not in this store")
    message = snap.load(message_path(relay.message_id), Message)
    if message is None:  # purged before its copy was made: nothing is left to copy
        return outcome(delivered=False, reason="the message is no longer in the sender's archive")
    copy = view_in(message, origin=source, here=relay.project)
    files = {item["path"]: data for item in message.attachments
             if isinstance(item.get("path"), str) and (data := snap.read(item["path"])) is not None}
    origin_key = project_record(snap).human_key

    def write_copy(there: Snapshot) -> Change:
        if there.exists(message_path(copy.id)):
            return Change("", result=False)  # delivered before (here, or by another machine and synced)
        change = Change(f"{commit_line(copy, 'relayed')} (from {origin_key})"[:200], author=message.sender,
                        author_email=copy.sender)
        for path, data in files.items():
            if not there.exists(path):
                change.put(path, data)
        put_message(change, copy)
        change.result = True
        return change

    written = bool(ctx.archive(relay.project).transact(write_copy).result)
    stamp, hlc = ctx.clock.now_ts(), ctx.tick()

    def mark(here: Snapshot) -> Change:
        current = here.load(relay.path(), Relay)
        if current is None or current.delivered_at is not None:
            return Change("", result=None)
        current.delivered_at, current.hlc = stamp, hlc
        return Change(f"Relayed {relay.message_id} to {relay.project}").put_record(current)

    ctx.archive(source).transact(mark)
    return outcome(delivered=True, written=written)


def recover(ctx: Context, projects: list[str] | None = None) -> list[RelayOutcome]:
    """Complete every relay still owed by ``projects`` (default: every project in the store)."""
    done = []
    for slug in projects if projects is not None else ctx.store.slugs():
        snap = ctx.archive(slug).snapshot()
        for target in snap.listdir(RELAYS):
            for _, path in snap.day_files(f"{RELAYS}/{target}"):
                relay = snap.load(path, Relay)
                if relay is not None and relay.delivered_at is None:
                    outcome = _complete(ctx, slug, snap, relay)
                    if outcome.written or outcome.delivered:
                        done.append(dataclasses.replace(outcome, from_slug=slug))
    return done
