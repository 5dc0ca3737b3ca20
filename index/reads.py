"""Reads answered from the metadata store, each one indexed SQLite query.

Inbox and outbox pages, threads, topics, single messages, the messages of a
time window, the agent directory, the reservation history and cursor reads.
Each costs what its answer holds, however large the archive:
:class:`.project.ProjectIndex` keeps their answers per commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from gitmail.model.clock import format_ts, parse_ts
from gitmail.model.errors import invalid
from gitmail.model.ids import first_id_at

from .meta import MESSAGE_COLUMNS, N_MESSAGE_COLUMNS, Meta, message_row

URGENT = ("high", "urgent")
MAX_LIMIT = 1000


def check_limit(limit: int, name: str = "limit") -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1 or limit > MAX_LIMIT:
        raise invalid(f"{name} must be a whole number from 1 to {MAX_LIMIT}; got {limit!r}", field=name)
    return limit


def normalize_ts(value: str | None, name: str) -> str | None:
    if value is None or value == "":
        return None
    try:
        return format_ts(parse_ts(value))
    except ValueError:
        raise invalid(f"{name} must be an ISO-8601 timestamp with a time zone, like 2026-12-01T08:00:00Z; "
                      f"got {value!r}", field=name) from None


def _kind(entry: dict[str, Any], agent: str) -> str:
    if agent in entry["to"]:
        return "to"
    if agent in entry["cc"]:
        return "cc"
    return "bcc"


BodyReader = Callable[[str], str]


def _view(entry: dict[str, Any], body_of: BodyReader | None) -> dict[str, Any]:
    """The domain's message view: drop what is ours (seq, blob), add the body if asked."""
    blob = entry.pop("blob")
    entry.pop("seq")
    if body_of is not None:
        entry["body_md"] = body_of(blob)
    return entry


def inbox(meta: Meta, agent: str, *, since_ts: str | None = None, urgent_only: bool = False,
          unread_only: bool = False, topic: str | None = None, unacked_only: bool = False,
          older_than: str | None = None, limit: int = 20,
          body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """An agent's received messages, newest first (by ID, as the folders list them).

    Each entry is the mail domain's inbox view: the message fields, ``kind``
    (to, cc or bcc), this agent's ``read_at`` and ``acknowledged_at``, and
    ``body_md`` when ``body_of`` is given. ``unread_only`` keeps messages
    without a read time; ``topic`` compares without case; ``unacked_only``
    keeps messages that ask for an acknowledgement not yet given, and
    ``older_than`` those created before that time.
    """
    sql = [f"SELECT {MESSAGE_COLUMNS}, r.read_at, r.acked_at FROM copies c "
           "JOIN messages m ON m.id = c.message_id "
           "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
           "WHERE c.agent = ? AND c.box = 'inbox'"]
    args: list[Any] = [agent]
    if since_ts:
        sql.append("AND c.created_ts > ?")
        args.append(since_ts)
    if urgent_only:
        sql.append("AND m.importance IN ('high', 'urgent')")
    if topic:
        sql.append("AND lower(m.topic) = lower(?)")
        args.append(topic)
    if unread_only:
        sql.append("AND r.read_at IS NULL")
    if unacked_only:
        sql.append("AND m.ack_required = 1 AND r.acked_at IS NULL")
    if older_than:
        sql.append("AND m.created_ts < ?")
        args.append(older_than)
    sql.append("ORDER BY c.message_id DESC LIMIT ?")
    args.append(limit)
    out = []
    for row in meta.read(" ".join(sql), args):
        entry = _view(message_row(row), body_of)
        entry.update(kind=_kind(entry, agent), read_at=row[N_MESSAGE_COLUMNS],
                     acknowledged_at=row[N_MESSAGE_COLUMNS + 1])
        out.append(entry)
    return out


def unacked(meta: Meta, *, older_than: str, after: tuple[str, str, str] | None = None,
            limit: int = 500) -> list[dict[str, Any]]:
    """Every recipient's acknowledgements still owed on messages created before ``older_than``, oldest first.

    One entry per message and recipient (``id``, ``agent``, ``sender``,
    ``subject``, ``created_ts``), in the order (created_ts, id, agent);
    ``after`` continues after such a triple.
    """
    sql = ["SELECT m.id, c.agent, m.sender, m.subject, m.created_ts FROM copies c "
           "JOIN messages m ON m.id = c.message_id "
           "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
           "WHERE c.box = 'inbox' AND m.ack_required = 1 AND r.acked_at IS NULL AND m.created_ts < ?"]
    args: list[Any] = [older_than]
    if after is not None:
        sql.append("AND (m.created_ts, m.id, c.agent) > (?, ?, ?)")
        args.extend(after)
    sql.append("ORDER BY m.created_ts, m.id, c.agent LIMIT ?")
    args.append(limit)
    return [{"id": row[0], "agent": row[1], "sender": row[2], "subject": row[3], "created_ts": row[4]}
            for row in meta.read(" ".join(sql), args)]


def outbox(meta: Meta, agent: str, *, since_ts: str | None = None, limit: int = 20,
           body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """What an agent sent, newest first, with ``bcc`` (the sender's own copy shows it)."""
    sql = (f"SELECT {MESSAGE_COLUMNS}, c.bcc FROM copies c JOIN messages m ON m.id = c.message_id "
           "WHERE c.agent = ? AND c.box = 'outbox'" + (" AND c.created_ts > ?" if since_ts else "")
           + " ORDER BY c.message_id DESC LIMIT ?")
    args = [agent, since_ts, limit] if since_ts else [agent, limit]
    out = []
    for row in meta.read(sql, args):
        entry = _view(message_row(row), body_of)
        entry["bcc"] = json.loads(row[N_MESSAGE_COLUMNS]) if row[N_MESSAGE_COLUMNS] else []
        out.append(entry)
    return out


def thread(meta: Meta, thread_id: str, *, limit: int, body_of: BodyReader | None = None,
           after: tuple[str, str] | None = None) -> list[dict[str, Any]]:
    """The messages of one thread (its first message included), oldest first; with ``after``, those past that
    (created_ts, id)."""
    sql = f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE (m.thread_id = ? OR m.id = ?)"
    args: list[Any] = [thread_id, thread_id]
    if after is not None:
        sql += " AND (m.created_ts, m.id) > (?, ?)"
        args += list(after)
    rows = meta.read(sql + " ORDER BY m.created_ts, m.id LIMIT ?", [*args, limit])
    return [_view(message_row(row), body_of) for row in rows]


def place(meta: Meta, message_id: str) -> tuple[str, str, str, str] | None:
    """(created_ts, id, thread_id, blob) of one message, or None: where it sorts, and where its body is."""
    rows = meta.read("SELECT created_ts, id, thread_id, blob FROM messages WHERE id = ?", (message_id,))
    return (rows[0][0], rows[0][1], rows[0][2], rows[0][3]) if rows else None


def recent_threads(meta: Meta, *, limit: int, offset: int = 0) -> list[dict[str, Any]]:
    """Threads by their latest message, newest first: ``thread_id``, ``subject`` (of the first), counts, times."""
    rows = meta.read(
        "SELECT t.thread_id, t.n, t.last_ts, t.first_ts, "
        "(SELECT subject FROM messages f WHERE f.thread_id = t.thread_id ORDER BY f.created_ts, f.id LIMIT 1), "
        "(SELECT sender FROM messages l WHERE l.thread_id = t.thread_id ORDER BY l.created_ts DESC, l.id DESC LIMIT 1) "
        "FROM (SELECT thread_id, count(*) AS n, max(created_ts) AS last_ts, min(created_ts) AS first_ts "
        "      FROM messages GROUP BY thread_id ORDER BY last_ts DESC LIMIT ? OFFSET ?) t ORDER BY t.last_ts DESC",
        (limit, offset))
    return [{"thread_id": r[0], "count": r[1], "last_ts": r[2], "first_ts": r[3], "subject": r[4] or "",
             "last_from": r[5]} for r in rows]


def stats(meta: Meta) -> dict[str, Any]:
    """Counts and the latest message time of a project."""
    count, last = meta.read("SELECT count(*), max(created_ts) FROM messages")[0]
    threads = meta.read("SELECT count(DISTINCT thread_id) FROM messages")[0][0]
    return {"messages": int(count), "threads": int(threads), "last_message_ts": last}


def agent_counts(meta: Meta, agent: str) -> dict[str, int]:
    """How many messages an agent received and sent, and how many of those received are unread or unacknowledged."""
    inbox_n, unread, unacked = meta.read(
        "SELECT count(*), sum(r.read_at IS NULL), sum(m.ack_required = 1 AND r.acked_at IS NULL) FROM copies c "
        "JOIN messages m ON m.id = c.message_id "
        "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = c.message_id "
        "WHERE c.agent = ? AND c.box = 'inbox'", (agent,))[0]
    sent = meta.read("SELECT count(*) FROM copies WHERE agent = ? AND box = 'outbox'", (agent,))[0][0]
    return {"inbox": int(inbox_n or 0), "unread": int(unread or 0), "unacked": int(unacked or 0), "sent": int(sent)}


def _day_floor(ts: str) -> str:
    """The first ID of ``ts``'s UTC day: a read ``since`` a time looks at that day's folder onwards."""
    return first_id_at(parse_ts(ts).replace(hour=0, minute=0, second=0, microsecond=0))


def topic(meta: Meta, topic: str, *, viewer: str | None = None, since_ts: str | None = None,
          unread_only: bool = False, limit: int = 50, body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """Messages tagged ``topic`` (compared without case), newest first by ID.

    With ``since_ts``, those created after it (looking no further back than
    its day, as the day folders do); with ``unread_only`` and a ``viewer``,
    those in the viewer's inbox without a read time.
    """
    sql = [f"SELECT {MESSAGE_COLUMNS} FROM messages m"]
    args: list[Any] = []
    if unread_only and viewer is not None:
        sql.append("JOIN copies c ON c.message_id = m.id AND c.agent = ? AND c.box = 'inbox' "
                   "LEFT JOIN receipts r ON r.agent = c.agent AND r.message_id = m.id")
        args.append(viewer)
    sql.append("WHERE lower(m.topic) = lower(?)")
    args.append(topic)
    if since_ts:
        sql.append("AND m.id >= ? AND m.created_ts > ?")
        args += [_day_floor(since_ts), since_ts]
    if unread_only and viewer is not None:
        sql.append("AND r.read_at IS NULL")
    sql.append("ORDER BY m.id DESC LIMIT ?")
    args.append(limit)
    return [_view(message_row(row), body_of) for row in meta.read(" ".join(sql), args)]


def referencing(meta: Meta, sha256: str, limit: int) -> tuple[list[dict[str, Any]], bool]:
    """The messages whose attachments include the bytes hashing to ``sha256``, newest first; and whether more do.

    The hash is 64 hex digits, so a match in the stored attachments list is
    that file and no other: the list is read in SQLite, without parsing a
    message.
    """
    rows = meta.read(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.attachments LIKE ? ORDER BY m.id DESC LIMIT ?",
                     (f'%"{sha256}"%', limit + 1))
    return [_view(message_row(row), None) for row in rows[:limit]], len(rows) > limit


def imported(meta: Meta, imported_id: str) -> list[str]:
    """The IDs of the messages imported from a message whose id in its source was ``imported_id``."""
    return [row[0] for row in meta.read("SELECT message_id FROM imported WHERE imported_id = ? ORDER BY message_id",
                                        (imported_id,))]


def message(meta: Meta, message_id: str, body_of: BodyReader, viewer: str | None = None) -> dict[str, Any] | None:
    """One message with its body, or None; its sender (as ``viewer``) also sees ``bcc`` from its outbox copy."""
    rows = meta.read(f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE m.id = ?", (message_id,))
    if not rows:
        return None
    entry = message_row(rows[0])
    if viewer is not None and viewer == entry["from"]:
        own = meta.read("SELECT blob, bcc FROM copies WHERE agent = ? AND box = 'outbox' AND message_id = ?",
                        (viewer, message_id))
        if own:
            entry["blob"] = own[0][0]
            entry["bcc"] = json.loads(own[0][1]) if own[0][1] else []
    body = body_of(entry["blob"])
    entry = _view(entry, None)
    entry["body_md"] = body
    return entry


def window(meta: Meta, start_ts: str, end_ts: str, limit: int,
           body_of: BodyReader | None = None) -> list[dict[str, Any]]:
    """Up to ``limit`` messages created in (start_ts, end_ts], newest first by ID."""
    rows = meta.read(f"SELECT {MESSAGE_COLUMNS} FROM messages m INDEXED BY messages_time "
                     "WHERE m.created_ts > ? AND m.created_ts <= ? ORDER BY m.id DESC LIMIT ?",
                     (start_ts, end_ts, limit))
    return [_view(message_row(row), body_of) for row in rows]


def agents(meta: Meta) -> list[dict[str, Any]]:
    """Every agent profile (without secrets), by name."""
    return [json.loads(row[0]) for row in meta.read("SELECT data FROM agents ORDER BY name")]


def reservations(meta: Meta) -> list[dict[str, Any]]:
    """Every reservation record, oldest first."""
    return [json.loads(row[0]) for row in meta.read("SELECT data FROM reservations ORDER BY id")]


def messages_after(meta: Meta, agent: str, after_seq: int, limit: int, include_sent: bool) -> list[dict[str, Any]]:
    """Messages that reached an agent after a cursor, in the order this machine saw them."""
    boxes = "('inbox', 'outbox')" if include_sent else "('inbox')"
    rows = meta.read(f"SELECT c.seq, c.box, {MESSAGE_COLUMNS} FROM copies c JOIN messages m ON m.id = c.message_id "
                     f"WHERE c.agent = ? AND c.box IN {boxes} AND c.seq > ? ORDER BY c.seq LIMIT ?",
                     (agent, after_seq, limit))
    out, seen = [], set()
    for row in rows:
        entry = message_row(row[2:])
        if entry["id"] in seen:
            continue
        seen.add(entry["id"])
        entry["seq"], entry["box"] = row[0], row[1]
        out.append(entry)
    return out


def newest_arrivals(meta: Meta, agent: str, count: int) -> tuple[list[dict[str, Any]], bool]:
    """The last ``count`` messages to reach an agent's inbox (oldest first), and whether earlier ones exist."""
    rows = meta.read(f"SELECT c.seq, c.box, {MESSAGE_COLUMNS} FROM copies c JOIN messages m ON m.id = c.message_id "
                     "WHERE c.agent = ? AND c.box = 'inbox' ORDER BY c.seq DESC LIMIT ?", (agent, count + 1))
    out = []
    for row in rows[:count]:
        entry = message_row(row[2:])
        entry["seq"], entry["box"] = row[0], row[1]
        out.append(entry)
    return out[::-1], len(rows) > count


def known_agent(meta: Meta, name: str) -> bool:
    return bool(meta.read("SELECT 1 FROM agents WHERE name = ?", (name,)))


POST_COLUMNS = "position, id, sender, created_ts"


def _post(row: tuple[Any, ...]) -> dict[str, Any]:
    return {"seq": row[0], "id": row[1], "from": row[2], "created_ts": row[3]}


def channels(meta: Meta) -> list[dict[str, Any]]:
    """Every channel's definition with its post count (its last sequence number), by name."""
    rows = meta.read("SELECT c.name, c.data, (SELECT count(*) FROM posts p WHERE p.channel = c.name) "
                     "FROM channels c ORDER BY c.name")
    return [{**json.loads(data), "posts": count} for _, data, count in rows]


def channel_posts(meta: Meta, channel: str, after: int, limit: int) -> list[dict[str, Any]]:
    """The posts of a channel numbered after ``after``, in order."""
    rows = meta.read(f"SELECT {POST_COLUMNS} FROM posts WHERE channel = ? AND position > ? ORDER BY position LIMIT ?",
                     (channel, after, limit))
    return [_post(row) for row in rows]


def newest_posts(meta: Meta, channel: str, count: int) -> tuple[list[dict[str, Any]], bool]:
    """The last ``count`` posts of a channel (oldest first), and whether earlier ones exist."""
    rows = meta.read(f"SELECT {POST_COLUMNS} FROM posts WHERE channel = ? ORDER BY position DESC LIMIT ?",
                     (channel, count + 1))
    return [_post(row) for row in rows[:count]][::-1], len(rows) > count


def channel_high(meta: Meta, channel: str) -> int:
    """The number of the newest post of a channel (0: none yet)."""
    return int(meta.read("SELECT count(*) FROM posts WHERE channel = ?", (channel,))[0][0])


def post_number(meta: Meta, channel: str, post_id: str) -> int:
    """A post's number in its channel (0: not here)."""
    rows = meta.read("SELECT position FROM posts WHERE channel = ? AND id = ?", (channel, post_id))
    return int(rows[0][0]) if rows else 0
