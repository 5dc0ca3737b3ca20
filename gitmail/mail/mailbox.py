"""Mail reads: pages, messages, threads and topics, each costing what its answer holds.

The snapshot readers (:func:`inbox`, :func:`outbox`, :func:`message`) take a
:class:`Snapshot` and plain filters and return typed messages; they never write.
Inbox and outbox folders are sharded by day and IDs sort by time, so listing
newest first walks the newest shards and stops as soon as it has enough (or
reaches ``since_ts``).

The operations below them (``fetch_*``, ``get_*``, ``view_*``) each open one
snapshot of the tip for the project and the agent. A read that carries bodies
holds at most ``max_bytes`` of messages (:mod:`.budget`), and reads each body
only as its page fills. Reads that would otherwise
walk every message, or that every agent makes all the time, are answered by
the project's index (:class:`gitmail.index.ProjectIndex`), which first
catches up to the tip, so it sees every commit made before the call:
:func:`fetch_inbox` and :func:`fetch_outbox` (exactly what :func:`inbox` and
:func:`outbox` give over a snapshot of that tip), :func:`get_message`,
:func:`get_thread`, :func:`thread_messages` and :func:`fetch_topic` (tests
hold each equal to a walk of the snapshot).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Generic, TypeVar, overload

from gitmail.coord.context import Context
from gitmail.coord.lookup import project_record, require_agent
from gitmail.index import IndexUnavailable, indexer_for, search_messages
from gitmail.model.clock import UTC, format_ts, parse_ts
from gitmail.model.errors import invalid, not_found
from gitmail.model.ids import is_id
from gitmail.model.limits import READ_BUDGET_DEFAULT
from gitmail.model.names import check_topic
from gitmail.model.records import (
    INBOX,
    OUTBOX,
    Message,
    Project,
    Receipt,
    agent_folder,
    escalation_path,
    inbox_path,
    message_path,
    outbox_path,
    receipt_path,
    tombstone_path,
)
from gitmail.model.results import FLATTEN, OMIT_NONE, Result, fields_of, renamed, result
from gitmail.storage.history import adding_commits
from gitmail.storage.snapshot import Snapshot

from .budget import Bodied, BodyOf, MoreMessages, Paged, check_budget, newest_first, oldest_first
from .delivery import MessageCore, MessageHeader, MessageView

URGENT = ("high", "urgent")
MAX_LIMIT = 1000


@result
class InboxMessage(MessageHeader, Bodied):
    """A message in an agent's inbox: its header, how it was addressed, and the agent's own read and ack times.

    With bodies asked for, ``body_md`` (or ``body_omitted`` and ``body_bytes``
    where the byte budget left it out, see :mod:`.budget`), and on the first
    item of a page that could not hold everything, ``more``.
    """

    kind: str
    read_at: str | None
    acknowledged_at: str | None
    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)
    more: MoreMessages | None = field(default=None, metadata=OMIT_NONE)


@result
class OutboxMessage(MessageHeader, Bodied):
    """A message in its sender's outbox: its header and blind copies, and its body as in an inbox."""

    bcc: list[str]
    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)
    more: MoreMessages | None = field(default=None, metadata=OMIT_NONE)


@result
class AddedBy(Result):
    """The commit that added a message's copy: its ID, first line, author and time."""

    commit: str
    summary: str
    author: str
    committed_ts: str


@result
class SentMessage(OutboxMessage):
    """An outbox entry with the commit that recorded it."""

    commit: AddedBy | None


@result
class ThreadMessage(MessageHeader, Bodied):
    """A message of a thread: its header and, with bodies asked for, its body as in an inbox."""

    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)


@result
class Received(InboxMessage):
    """A received message in an agent's whole mailbox: ``direction`` inbound, and the commit that delivered it."""

    direction: str
    commit: AddedBy | None


@result
class Sent(OutboxMessage):
    """A sent message in an agent's whole mailbox: ``direction`` outbound, and the commit that recorded it."""

    direction: str
    commit: AddedBy | None


@result
class OverdueMessage(InboxMessage):
    """An acknowledgement the agent owes, and whether it was escalated."""

    escalated: bool


M = TypeVar("M", bound=Result)


@result
class Listing(Result, Generic[M]):
    """Messages of one agent's mailbox: the project, the agent, how many, and the messages."""

    project: str
    agent: str
    count: int
    messages: list[M]


@result
class OverdueListing(Listing[OverdueMessage]):
    """The acknowledgements an agent owes on messages older than ``ttl_minutes``."""

    ttl_minutes: float


@result
class StoredMessage(Result):
    """One message of a project with its body, naming the project."""

    project: str
    message: MessageView = field(metadata=FLATTEN)


@result
class ThreadPage(Result):
    """A page of a thread, oldest first; ``next_after`` (while ``has_more``) reads on."""

    project: str
    thread_id: str
    count: int
    messages: list[ThreadMessage]
    has_more: bool
    next_after: str | None


@result
class TopicMessage(MessageCore, Bodied):
    """A message with a topic tag: its header (without attachments) and, with bodies asked for, as in an inbox."""

    body_md: str | None = field(default=None, metadata=OMIT_NONE)
    body_omitted: bool | None = field(default=None, metadata=OMIT_NONE)
    body_bytes: int | None = field(default=None, metadata=OMIT_NONE)
    more: MoreMessages | None = field(default=None, metadata=OMIT_NONE)


@result
class SearchHit(Result):
    """A message a search found: its header, its score, a snippet, and whether older matches went unranked."""

    id: str
    subject: str
    importance: str
    ack_required: bool
    created_ts: str
    thread_id: str
    sender: str = field(metadata=renamed("from"))
    topic: str | None
    score: float
    snippet: str
    bounded: bool

    @classmethod
    def of(cls, hit: Mapping[str, Any]) -> SearchHit:
        """The hit as the project's search index gives it."""
        return cls(id=hit["id"], subject=hit["subject"], importance=hit["importance"],
                   ack_required=hit["ack_required"], created_ts=hit["created_ts"], thread_id=hit["thread_id"],
                   sender=hit["from"], topic=hit["topic"], score=hit["score"], snippet=hit["snippet"],
                   bounded=hit["bounded"])


def search(ctx: Context, project_key: str, query: str, *, limit: int = 20, agent_name: str | None = None,
           exhaustive: bool = False) -> list[SearchHit]:
    """Full-text search of the project's index, best first (see :meth:`gitmail.mail.facade.Mail.search_messages`)."""
    return [SearchHit.of(hit) for hit in search_messages(ctx.store, project_key, query, limit, agent_name,
                                                           exhaustive=exhaustive)]


def parse_since(value: object, field: str = "since_ts") -> str | None:
    """A ``since`` filter as a canonical timestamp: ISO-8601 text or epoch seconds."""
    if value is None or value == "":
        return None
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return format_ts(dt.datetime.fromtimestamp(value, tz=UTC))
        except (OverflowError, OSError, ValueError):
            raise invalid(f"{field} is not a usable number of epoch seconds: {value!r}", field=field) from None
    if isinstance(value, str):
        try:
            return format_ts(parse_ts(value))
        except ValueError:
            pass
        try:
            seconds = float(value)
        except ValueError:
            pass
        else:
            return parse_since(seconds, field)  # epoch seconds, as a query string carries them
        try:
            moment = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:  # no zone means UTC
            return format_ts(moment if moment.tzinfo else moment.replace(tzinfo=UTC))
    raise invalid(f"{field} must be an ISO-8601 timestamp (such as '2026-01-31T09:00:00Z'; without a zone it is "
                  "UTC) or epoch seconds", field=field)


def check_limit(limit: object, field: str = "limit") -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= MAX_LIMIT:
        raise invalid(f"{field} must be a whole number from 1 to {MAX_LIMIT}", field=field)
    return limit


def check_message_id(message_id: object, field: str = "message_id") -> str:
    if not is_id(message_id):
        raise invalid(f"{field} {message_id!r} is not a message ID (23 lowercase letters and digits, "
                      "as returned by send_message or fetch_inbox)", field=field)
    return message_id


def resolve_message_id(ctx: Context, project_key: str, message_id: object, field: str = "message_id") -> str:
    """A message ID as given, or the gitmail ID of the message imported from one whose id in its source was that.

    An agent moved from mcp_agent_mail may still name a message by the
    number it had there: the index knows each imported message by it
    (``x-agent-mail-id``). INVALID_ARGUMENT for anything else, NOT_FOUND for
    a number no message here was imported with.
    """
    if is_id(message_id):
        return message_id
    old = str(message_id).strip() if isinstance(message_id, (int, str)) and not isinstance(message_id, bool) else ""
    if not old.isdigit() or len(old) > 20:
        raise invalid(f"{field} {message_id!r} is not a message ID (23 lowercase letters and digits, as returned "
                      "by send_message or fetch_inbox; or the number a message imported from mcp_agent_mail had "
                      "there)", field=field)
    found = indexer_for(ctx.store).project(project_key).imported(old)
    if len(found) == 1:
        return found[0]
    if not found:
        raise not_found(f"no message in this project was imported from mcp_agent_mail with the id {old}; give the "
                        "message's ID (23 characters, as fetch_inbox lists them)", field=field, message_id=old)
    raise invalid(f"{field} {old} names {len(found)} messages imported here from different stores "
                  f"({', '.join(found[:5])}); give the gitmail ID of the one you mean", field=field)


def load_message(snap: Snapshot, message_id: str) -> Message:
    message = snap.load(message_path(message_id), Message)
    if message is None:
        gone = snap.exists(tombstone_path(message_id))
        raise not_found(f"message {message_id} was removed from the archive (git history still has it)" if gone
                        else f"no message {message_id} in this project; check the ID (fetch_inbox lists them)",
                        message_id=message_id)
    return message


def receipt(snap: Snapshot, agent: str, message_id: str) -> Receipt | None:
    return snap.load(receipt_path(agent, message_id), Receipt)


def _kind(message: Message, agent: str) -> str:
    return "to" if agent in message.to else "cc" if agent in message.cc else "bcc"


def inbox(snap: Snapshot, agent: str, *, since_ts: str | None = None, urgent_only: bool = False,
          unread_only: bool = False, topic: str | None = None, ack_required_only: bool = False,
          unacked_only: bool = False, older_than: str | None = None, limit: int = 20,
          include_bodies: bool = False) -> list[InboxMessage]:
    """An agent's received messages, newest first, with its own read and ack times."""
    out: list[InboxMessage] = []
    wanted_topic = topic.lower() if topic else None
    for message_id, path in snap.day_files(agent_folder(agent, INBOX), since_ts):
        message = snap.load(path, Message)
        if message is None or (since_ts and message.created_ts <= since_ts):
            continue
        if older_than and message.created_ts >= older_than:
            continue
        if urgent_only and message.importance not in URGENT:
            continue
        if wanted_topic and (message.topic or "").lower() != wanted_topic:
            continue
        if (ack_required_only or unacked_only) and not message.ack_required:
            continue
        got = receipt(snap, agent, message_id)
        read_at = got.read_at if got else None
        acked_at = got.acked_at if got else None
        if unread_only and read_at:
            continue
        if unacked_only and acked_at:
            continue
        out.append(InboxMessage.from_wire(MessageView.of(message, include_body=False), kind=_kind(message, agent),
                                          read_at=read_at, acknowledged_at=acked_at,
                                          body_md=message.body if include_bodies else None))
        if len(out) >= limit:
            break
    return out


def outbox(snap: Snapshot, agent: str, *, since_ts: str | None = None, limit: int = 20,
           include_bodies: bool = False) -> list[OutboxMessage]:
    """What an agent sent, newest first (bcc included: it is the sender's own copy)."""
    out = []
    for _, path in snap.day_files(agent_folder(agent, OUTBOX), since_ts):
        message = snap.load(path, Message)
        if message is None or (since_ts and message.created_ts <= since_ts):
            continue
        out.append(OutboxMessage.from_wire(MessageView.of(message, include_body=include_bodies, show_bcc=True)))
        if len(out) >= limit:
            break
    return out


def message(snap: Snapshot, message_id: str, viewer: str | None = None) -> MessageView:
    """One message with its body; the sender viewing it also sees ``bcc``."""
    found = load_message(snap, check_message_id(message_id))
    if viewer is not None and viewer == found.sender:
        own = snap.load(outbox_path(found.sender, found.id), Message)
        if own is not None:
            return MessageView.of(own, show_bcc=True)
    return MessageView.of(found)


def message_of(view: dict[str, Any]) -> Message:
    """The message an index read describes (its view with ``body_md``), for code that works on records."""
    return Message(id=view["id"], thread_id=view["thread_id"], sender=view["from"], subject=view["subject"],
                   created_ts=view["created_ts"], to=list(view["to"]), cc=list(view["cc"]),
                   bcc=list(view.get("bcc", [])), importance=view["importance"],
                   ack_required=view["ack_required"], topic=view["topic"], reply_to=view["reply_to"],
                   attachments=list(view["attachments"]), body=view.get("body_md", ""))


def thread_messages(ctx: Context, project_key: str, thread_id: str) -> list[Message]:
    """The messages of one thread, oldest first (the thread's first message included), from the index."""
    return [message_of(view) for view in indexer_for(ctx.store).project(project_key).thread(thread_id)]


def overdue_cutoff(ttl_minutes: object, at: dt.datetime) -> str:
    if not isinstance(ttl_minutes, (int, float)) or isinstance(ttl_minutes, bool) or ttl_minutes < 0:
        raise invalid("ttl_minutes must be a non-negative number of minutes", field="ttl_minutes")
    return format_ts(at - dt.timedelta(minutes=ttl_minutes))


# -- the read operations, as the facade calls them ------------------------------
# Each opens one snapshot of the tip, so a read is consistent and never writes.

@overload
def _open(ctx: Context, project_key: str) -> tuple[Snapshot, Project, None]: ...
@overload
def _open(ctx: Context, project_key: str, agent_name: str) -> tuple[Snapshot, Project, str]: ...
@overload
def _open(ctx: Context, project_key: str, agent_name: str | None) -> tuple[Snapshot, Project, str | None]: ...


def _open(ctx: Context, project_key: str, agent_name: str | None = None) -> tuple[Snapshot, Project, str | None]:
    """The project's snapshot and record, and the agent's canonical name after recording its activity."""
    snap = ctx.archive(project_key).snapshot()
    project = project_record(snap)
    name = None
    if agent_name is not None:
        name = require_agent(snap, agent_name).name
        ctx.touch(project_key, name)
    return snap, project, name


def body_reader(ctx: Context, project_key: str, snap: Snapshot | None = None) -> BodyOf:
    """Reads the body of a listed message, one at a time: from the index, else from the snapshot (of the tip)."""
    index = indexer_for(ctx.store).project(project_key)
    snap = snap if snap is not None else ctx.archive(project_key).snapshot()

    def body_of(head: Paged) -> str | None:
        try:
            found = index.body(head.id)
        except IndexUnavailable:
            found = None
        if found is None:
            message = snap.load(message_path(head.id), Message)
            return None if message is None else message.body
        return found

    return body_of


def fetch_inbox(ctx: Context, project_key: str, agent_name: str, *, limit: int = 20, urgent_only: bool = False,
                include_bodies: bool = False, since_ts: object = None, topic: str | None = None,
                unread_only: bool = False, max_bytes: int = READ_BUDGET_DEFAULT) -> list[InboxMessage]:
    """The agent's received messages, newest first; reading marks nothing. Bodies fit in ``max_bytes``."""
    check_limit(limit)
    check_budget(max_bytes)
    since = parse_since(since_ts)
    if topic is not None and topic != "":
        check_topic(topic)
    snap, _, name = _open(ctx, project_key, agent_name)
    filters: dict[str, Any] = dict(since_ts=since, urgent_only=urgent_only, unread_only=unread_only,
                                   topic=topic or None, limit=limit)
    # The hot read: answered by the index, caught up to the tip (the same answer as inbox() over it),
    # or from the repository itself while the cache cannot answer.
    try:
        heads = [InboxMessage.from_wire(view)
                 for view in indexer_for(ctx.store).project(project_key).inbox(name, **filters)]
    except IndexUnavailable:
        heads = inbox(snap, name, **filters)
    return newest_first(heads, body_reader(ctx, project_key, snap), max_bytes) if include_bodies else heads


def fetch_outbox(ctx: Context, project_key: str, agent_name: str, *, limit: int = 20, include_bodies: bool = False,
                 since_ts: object = None, max_bytes: int = READ_BUDGET_DEFAULT) -> Listing[SentMessage]:
    """What the agent sent, newest first, each with the commit that recorded it. Bodies fit in ``max_bytes``."""
    check_limit(limit)
    check_budget(max_bytes)
    since = parse_since(since_ts)
    snap, project, name = _open(ctx, project_key, agent_name)
    # Answered by the index like fetch_inbox (the same answer as outbox() over a snapshot of the tip).
    try:
        heads = [OutboxMessage.from_wire(view)
                 for view in indexer_for(ctx.store).project(project_key).outbox(name, since_ts=since, limit=limit)]
    except IndexUnavailable:
        heads = outbox(snap, name, since_ts=since, limit=limit)
    if include_bodies:
        heads = newest_first(heads, body_reader(ctx, project_key, snap), max_bytes)
    commits = _commits(ctx, project_key, {m.id: outbox_path(name, m.id) for m in heads})
    messages = [SentMessage(**fields_of(m), commit=commits[m.id]) for m in heads]
    return Listing(project=project.human_key, agent=name, count=len(messages), messages=messages)


def fetch_mailbox(ctx: Context, project_key: str, agent_name: str, *,
                  limit: int = 20) -> Listing[Received | Sent]:
    """Received and sent messages together (without bodies), newest first, with commit details."""
    check_limit(limit)
    snap, project, name = _open(ctx, project_key, agent_name)
    received = inbox(snap, name, limit=limit)
    sent = outbox(snap, name, limit=limit)
    merged = sorted([*received, *sent], key=lambda m: (m.created_ts, m.id), reverse=True)[:limit]
    commits = _commits(ctx, project_key, {m.id: (inbox_path if isinstance(m, InboxMessage) else outbox_path)(name, m.id)
                                          for m in merged})
    messages: list[Received | Sent] = [
        Received(**fields_of(m), direction="inbound", commit=commits[m.id]) if isinstance(m, InboxMessage)
        else Sent(**fields_of(m), direction="outbound", commit=commits[m.id]) for m in merged]
    return Listing(project=project.human_key, agent=name, count=len(messages), messages=messages)


def _commits(ctx: Context, project_key: str, paths: dict[str, str]) -> dict[str, AddedBy | None]:
    """The commit that added each message's copy (by message ID: its path), None where history lacks it."""
    commits = adding_commits(ctx.archive(project_key), list(paths.values()))
    return {message_id: AddedBy(**commits[path]) if path in commits else None for message_id, path in paths.items()}


def get_message(ctx: Context, project_key: str, message_id: str | int, *,
                agent_name: str | None = None) -> StoredMessage:
    """One message with its body (the sender also sees its blind copies).

    Answered by the index (one row and one blob); a message it does not hold
    is looked up in the snapshot, which says whether it was purged.
    """
    snap, project, name = _open(ctx, project_key, agent_name)
    message_id = resolve_message_id(ctx, project_key, message_id)
    found = indexer_for(ctx.store).project(project_key).message(message_id, viewer=name)
    view = MessageView.from_wire(found) if found is not None else message(snap, message_id, name)
    return StoredMessage(project=project.human_key, message=view)


def get_thread(ctx: Context, project_key: str, thread_id: str, *, include_bodies: bool = True,
               after: str | None = None, max_bytes: int = READ_BUDGET_DEFAULT) -> ThreadPage:
    """A thread's messages, oldest first, from the index: bodies fit in ``max_bytes``.

    ``has_more`` says that the thread goes on past this page; ``after`` (the
    ``next_after`` of a page) reads the messages after it.
    """
    if not isinstance(thread_id, str) or not thread_id.strip():
        raise invalid("thread_id must be a non-empty thread ID", field="thread_id")
    if after is not None:
        check_message_id(after, "after")
    check_budget(max_bytes)
    snap, project, _ = _open(ctx, project_key)
    index = indexer_for(ctx.store).project(project_key)
    heads = [ThreadMessage.from_wire(view)
             for view in index.thread(thread_id, include_bodies=False, after=after)]
    messages, more = (oldest_first(heads, body_reader(ctx, project_key, snap), max_bytes) if include_bodies
                      else (heads, False))
    if not more and len(heads) == MAX_LIMIT:
        more = bool(index.thread(thread_id, include_bodies=False, after=heads[-1].id, limit=1))
    return ThreadPage(project=project.human_key, thread_id=thread_id, count=len(messages), messages=messages,
                      has_more=more, next_after=messages[-1].id if more and messages else None)


def fetch_topic(ctx: Context, project_key: str, topic_name: str, *, limit: int = 50, include_bodies: bool = True,
                since_ts: object = None, agent_name: str | None = None, unread_only: bool = False,
                max_bytes: int = READ_BUDGET_DEFAULT) -> list[TopicMessage]:
    """Messages of the project tagged with a topic, newest first. Bodies fit in ``max_bytes``."""
    check_topic(topic_name, "topic_name")
    check_limit(limit)
    check_budget(max_bytes)
    since = parse_since(since_ts)
    if unread_only and agent_name is None:
        raise invalid("unread_only needs agent_name: whose unread messages?", field="unread_only")
    snap, _, name = _open(ctx, project_key, agent_name)
    found = indexer_for(ctx.store).project(project_key).topic(topic_name, viewer=name, since_ts=since,
                                                              unread_only=unread_only, limit=limit,
                                                              include_bodies=False)
    heads = [TopicMessage.from_wire(view) for view in found]
    return newest_first(heads, body_reader(ctx, project_key, snap), max_bytes) if include_bodies else heads


def _inbox_view(ctx: Context, project_key: str, agent_name: str, **filters: Any) -> Listing[InboxMessage]:
    """A listing of the agent's inbox from the index, filtered."""
    check_limit(filters["limit"])
    _, project, name = _open(ctx, project_key, agent_name)
    found = [InboxMessage.from_wire(view)
             for view in indexer_for(ctx.store).project(project_key).inbox(name, **filters)]
    return Listing(project=project.human_key, agent=name, count=len(found), messages=found)


def view_urgent_unread(ctx: Context, project_key: str, agent_name: str, *,
                       limit: int = 20) -> Listing[InboxMessage]:
    """High and urgent messages the agent has not read."""
    return _inbox_view(ctx, project_key, agent_name, urgent_only=True, unread_only=True, limit=limit)


def view_ack_required(ctx: Context, project_key: str, agent_name: str, *, limit: int = 20) -> Listing[InboxMessage]:
    """Messages asking for an acknowledgement the agent has not given."""
    return _inbox_view(ctx, project_key, agent_name, unacked_only=True, limit=limit)


def view_ack_overdue(ctx: Context, project_key: str, agent_name: str, *, ttl_minutes: float = 30,
                     limit: int = 20) -> OverdueListing:
    """Unacknowledged ack-required messages older than ``ttl_minutes``; ``escalated`` says which were escalated."""
    check_limit(limit)
    cutoff = overdue_cutoff(ttl_minutes, ctx.clock.now())
    snap, project, name = _open(ctx, project_key, agent_name)
    found = indexer_for(ctx.store).project(project_key).inbox(name, unacked_only=True, older_than=cutoff, limit=limit)
    owed = [OverdueMessage.from_wire(item, escalated=snap.exists(escalation_path(item["id"], name))) for item in found]
    return OverdueListing(project=project.human_key, agent=name, count=len(owed), messages=owed,
                          ttl_minutes=ttl_minutes)
