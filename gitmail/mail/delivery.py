"""Writing one message into the archive, and rendering it for callers.

A message is one canonical file under ``messages/`` plus a copy in each
recipient's inbox and one in the sender's outbox. Every inbox copy is the same
bytes as the canonical file, so git stores one blob however many recipients
there are. Blind-copy recipients get that same public copy; only the sender's
outbox copy names them.
"""

from __future__ import annotations

from dataclasses import field
from typing import Any

from gitmail.model.clock import HLC, HybridClock, format_ts
from gitmail.model.ids import id_time
from gitmail.model.records import Message, Tombstone, inbox_path, message_files, message_path, outbox_path
from gitmail.model.results import OMIT_NONE, Result, renamed, result
from gitmail.storage.engine import Change
from gitmail.storage.snapshot import Snapshot


def compose(clock: HybridClock, *, sender: str, to: list[str], cc: list[str], bcc: list[str], subject: str, body: str,
            importance: str, ack_required: bool, thread_id: str | None, topic: str | None,
            reply_to: str | None = None, attachments: list[dict[str, Any]] | None = None) -> Message:
    """A new, validated message; its creation time is the time in its ID (minted by ``clock``)."""
    message_id = clock.new_id()
    message = Message(
        id=message_id, thread_id=thread_id or message_id, sender=sender, subject=subject,
        created_ts=format_ts(id_time(message_id)), to=list(to), cc=list(cc), bcc=list(bcc),
        importance=importance, ack_required=ack_required, topic=topic, reply_to=reply_to,
        attachments=list(attachments or []), body=body,
    )
    message.validate()
    return message


def recipients(message: Message) -> list[str]:
    """Everyone who gets an inbox copy, in order, without repeats."""
    return list(dict.fromkeys(message.to + message.cc + message.bcc))


def put_message(change: Change, message: Message) -> None:
    """Queue the canonical file, one inbox copy per recipient and the sender's outbox copy.

    Agents of other projects (``Name@slug``) get no copy here: their copies
    are in their own project's archive (see :mod:`gitmail.mail.relay`).
    """
    public = message.public_copy().to_bytes()
    change.put(message_path(message.id), public)
    for name in recipients(message):
        if "@" not in name:
            change.put(inbox_path(name, message.id), public)
    if "@" not in message.sender:
        change.put(outbox_path(message.sender, message.id), message.to_bytes() if message.bcc else public)


def commit_line(message: Message, verb: str = "sent") -> str:
    """The first line of the commit that delivers a message, for ``git log``."""
    names = ", ".join(message.to + message.cc) or "blind-copy recipients"
    return f"{message.sender} {verb} {message.id} to {names}: {message.subject}"[:200]


@result
class MessageCore(Result):
    """The fields every view of a message starts with (a topic read stops here; the others add attachments)."""

    id: str
    thread_id: str
    subject: str
    sender: str = field(metadata=renamed("from"))
    to: list[str]
    cc: list[str]
    created_ts: str
    importance: str
    ack_required: bool
    topic: str | None
    reply_to: str | None


@result
class MessageHeader(MessageCore):
    """A message's header as every read shows it (the fields each kind of view starts with)."""

    attachments: list[dict[str, Any]]


@result
class MessageView(MessageHeader):
    """A message as callers see it: its header, and its body and blind copies when they are shown."""

    bcc: list[str] | None = field(default=None, metadata=OMIT_NONE)
    body_md: str | None = field(default=None, metadata=OMIT_NONE)

    @classmethod
    def of(cls, message: Message, *, include_body: bool = True, show_bcc: bool = False) -> MessageView:
        """``message`` as callers see it (``bcc`` only for the sender's own copy)."""
        return cls(id=message.id, thread_id=message.thread_id, subject=message.subject, sender=message.sender,
                   to=list(message.to), cc=list(message.cc), created_ts=message.created_ts,
                   importance=message.importance, ack_required=message.ack_required, topic=message.topic,
                   reply_to=message.reply_to, attachments=list(message.attachments),
                   bcc=list(message.bcc) if show_bcc else None, body_md=message.body if include_body else None)


def remove_message(snap: Snapshot, change: Change, message: Message, *, reason: str, stamp: str, hlc: HLC) -> None:
    """Queue the deletion of a message, all its copies and receipts, plus its tombstone."""
    outbox = snap.load(outbox_path(message.sender, message.id), Message)
    everyone = set(message.to + message.cc + (outbox.bcc if outbox is not None else message.bcc))
    for path in message_files(message.id, everyone | {message.sender}):
        if snap.exists(path):
            change.delete(path)
    change.put_record(Tombstone(message_id=message.id, deleted_at=stamp, reason=reason, hlc=hlc))
